"""Host memory of the PYNATIVE outputs and of the benchmark's buffers (numpy only, no
MindSpore: the sanitizer driver loads ms_scatter.testing without it)."""
import math

import numpy as np


def aligned_empty(shape, dtype, align=64):
    """An uninitialised C-contiguous numpy array whose data starts on an `align`-byte
    boundary (numpy's and MindSpore's CPU memory is 16-byte aligned: rows of 256 bytes then
    straddle 5 cache lines instead of 4, and the same kernel ran 10-15% slower on them)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)
