"""Host memory of the PYNATIVE outputs and of the benchmark's buffers (numpy only, no
MindSpore: the sanitizer driver loads ms_scatter.testing without it)."""
import math
import os
import sys
import threading
import weakref

import numpy as np


def aligned_empty(shape, dtype, align=64, block=None):
    """An uninitialised C-contiguous numpy array whose data starts on an `align`-byte
    boundary (numpy's and MindSpore's CPU memory is 16-byte aligned: rows of 256 bytes then
    straddle 5 cache lines instead of 4, and the same kernel ran 10-15% slower on them),
    in `block` (uint8, at least `align` bytes more than the array) or in a new one."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if block is None:
        block = np.empty(nbytes + align, np.uint8)
    start = (-block.ctypes.data) % align
    return block[start:start + nbytes].view(dtype).reshape(shape)


class OutputPool:
    """Reused host memory for large outputs (from `min_bytes` to `idle_bytes`): glibc gives
    each such block its own mapping, so a fresh one page-faults all of it on every call (a
    256 MB TensorScatter output took 38-167 ms against 15-50 ms on MindSpore's pooled
    memory).

    ``empty(shape, dtype)`` returns a 64-byte-aligned numpy array (``aligned_empty``) whose
    block, for a size the pool holds, comes back to the pool when that array is garbage,
    which for a PYNATIVE output is when its Tensor and every Tensor or numpy array sharing
    its memory are gone (MindSpore holds the array it was given). A block that anything else
    still references then (a numpy view of the block itself) is not taken back. One idle
    block of a size is kept, `idle_bytes` in all; the oldest go first. A loop
    ``y = f(...)`` then reuses the block its previous result frees."""

    def __init__(self, min_bytes=32 << 20, idle_bytes=1 << 30, align=64):
        self.min_bytes, self.idle_limit, self.align = min_bytes, idle_bytes, align
        self._idle = {}  # nbytes -> block, oldest first
        self._lock = threading.Lock()
        self._refcount = sys.getrefcount  # kept: the callback may run while the interpreter exits
        self._free_refs = self._calibrate()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self):
        self._lock = threading.Lock()  # another thread of the parent may have held it

    def holds(self, nbytes):
        """Whether an output of `nbytes` is this pool's."""
        return self.min_bytes <= nbytes <= self.idle_limit

    def _calibrate(self):
        """The reference count of a block that nothing but the pool's own callback holds."""
        seen = []
        block = np.empty(self.align, np.uint8)
        view = block[:8]
        weakref.finalize(view, lambda b: seen.append(self._refcount(b)), block).atexit = False
        del block, view
        return seen[0]

    def empty(self, shape, dtype):
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if not self.holds(nbytes):
            return aligned_empty(shape, dtype, self.align)
        with self._lock:
            block = self._idle.pop(nbytes, None)
        if block is None:
            block = np.empty(nbytes + self.align, np.uint8)
        out = aligned_empty(shape, dtype, self.align, block)
        weakref.finalize(out, self._give_back, nbytes, block).atexit = False
        return out

    def _give_back(self, nbytes, block):
        if self._refcount(block) != self._free_refs:
            return  # something else still references the block: not reused
        # Not waiting: this runs wherever the array is collected, possibly inside empty() or
        # in another thread holding the lock; the block is then simply freed.
        if not self._lock.acquire(blocking=False):
            return
        try:
            if nbytes in self._idle:
                return
            self._idle[nbytes] = block
            while self.idle_bytes() > self.idle_limit:
                del self._idle[next(iter(self._idle))]
        finally:
            self._lock.release()

    def idle_bytes(self):
        return sum(self._idle)

    def clear(self):
        with self._lock:
            self._idle.clear()
