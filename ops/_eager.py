"""PYNATIVE on the CPU: the kernel called on the calling thread, on the tensors' own memory.

MindSpore's PYNATIVE launch hands an aot kernel to its backend thread while the Python
thread spin-waits, and it gives the kernel a contiguous *copy* of a view (so an in-place
update of ``t[2:6]`` or ``p.view(...)`` was lost, by MindSpore's own in-place ops too). Here
the in-place entry points run directly:

1. ``_pynative_executor.sync()`` drains MindSpore's queue, so every op launched before the
   call (those that produce the inputs and those that read input_x) has finished;
2. the kernel runs on ``data_ptr()`` of each tensor: a view is updated where it lives, in
   its base's memory; a non-contiguous input_x (a transpose, a strided slice) goes through
   a contiguous host copy that is written back element by element;
3. ops launched after the call are queued after it returns, so they see the result.

The out-of-place family writes into a numpy-backed output tensor (a launched Custom op grew
resident memory by ~44 KB per distinct shape in MindSpore's per-shape cache; the first
``data_ptr()`` of a ``mint.empty_like`` tensor cost ~1 ms on 4 MB). Only the CPU library is called this way (``data_ptr`` is host memory there);
everything else (GPU, graphs, vmap, a TensorScatter while a gradient is recorded) keeps
MindSpore's launch.
"""
import ctypes

import numpy as np
from ._compat import _pynative_executor

from ._lib import BAD_ARGUMENTS, raise_code
from ._memo import Memo

_INT_P = ctypes.POINTER(ctypes.c_int64)


def _byte_view(tensor):
    """A numpy array of unsigned integers of the tensor's item size over the tensor's own
    memory, with its shape and strides (a copy of the bits is all that is done with it)."""
    item = tensor.itemsize
    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    if any(d == 0 for d in shape):
        return np.zeros(shape, f"u{item}")
    span = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) * item
    buf = (ctypes.c_char * span).from_address(tensor.data_ptr())
    return np.ndarray(shape, f"u{item}", buffer=buf, strides=tuple(s * item for s in strides))


def numpy_dtype(name):
    """numpy dtype of a kernel dtype name ('bfloat16': MindSpore's numpy bfloat16)."""
    if name == "bfloat16":
        from mindspore.common.np_dtype import bfloat16  # pylint: disable=import-outside-toplevel
        return np.dtype(bfloat16)
    return np.dtype(name)


def _address(tensor):
    return tensor.data_ptr() if tensor.size else 0


class DirectCall:
    """One entry point of the CPU library, callable on Tensors: in place (``<Op>_token``) or
    out of place (``TensorScatter<Op>``, with `out` given)."""

    _MEMO_SIZE = 64

    def __init__(self, library, op_name, entry, token=True):
        self.op_name = op_name
        self.library = library
        self.token_entry = token
        lib = ctypes.CDLL(library)
        # without argtypes (0.56 instead of 1.3 us a call): for the prepared ctypes arrays of signature()
        self.raw_fn = lib[entry]
        self.raw_fn.restype = ctypes.c_int
        self.fn = lib[entry]
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                            ctypes.POINTER(_INT_P), ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p,
                            ctypes.c_void_p]
        self.token = np.zeros(1, np.int32)
        self._memo = Memo(self._MEMO_SIZE)

    def signature(self, shapes, dtypes):
        """(params, ndims, shapes, dtypes) ctypes arrays for these shapes and dtypes, kept."""
        key = (shapes, dtypes)
        hit = self._memo.get(key)
        if hit is None:
            dims = shapes + (((1,),) if self.token_entry else (shapes[0],))
            shape_bufs = [(ctypes.c_int64 * max(len(s), 1))(*s) for s in dims]
            shape_ptrs = (_INT_P * 4)(*[ctypes.cast(b, _INT_P) for b in shape_bufs])
            ndims = (ctypes.c_int * 4)(*[len(s) for s in dims])
            names = (ctypes.c_char_p * 4)(*[d.encode() for d in dtypes + (("int32",) if self.token_entry
                                                                           else dtypes[:1])])
            params = (ctypes.c_void_p * 4)(0, 0, 0, self.token.ctypes.data)
            hit = self._memo.put(key, (params, ndims, shape_ptrs, names, shape_bufs))
        return hit

    def __call__(self, x, indices, updates, dtype_names, out=None):
        """Runs the kernel on the three tensors (input_x updated in place, or the result
        written to `out`, a contiguous tensor of x's shape and dtype) or raises the kernel's
        error; dtype_names are the kernel's names of their dtypes."""
        _pynative_executor.sync()
        keep = []  # contiguous host copies live until the kernel has returned
        write_back = None
        if not x.is_contiguous():
            write_back = _byte_view(x)
            x_copy = np.ascontiguousarray(write_back)
            keep.append(x_copy)
            x_ptr = x_copy.ctypes.data
        else:
            x_ptr = _address(x)
        ptrs = [x_ptr]
        for t in (indices, updates):
            if t.is_contiguous():
                ptrs.append(_address(t))
            else:
                copy = np.ascontiguousarray(_byte_view(t))
                keep.append(copy)
                ptrs.append(copy.ctypes.data)
        params, ndims, shapes, names, _ = self.signature(
            (tuple(x.shape), tuple(indices.shape), tuple(updates.shape)), dtype_names)
        params[0], params[1], params[2] = ptrs
        if out is not None:
            params[3] = _address(out)
        rc = self.fn(4, params, ndims, shapes, names, None, None)
        if rc:
            raise_code(self.library, rc)
        if write_back is not None:
            write_back[...] = keep[0]
        return rc


__all__ = ["DirectCall", "BAD_ARGUMENTS"]
