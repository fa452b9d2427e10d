"""The pool of large PYNATIVE outputs (ops/_memory.py), without MindSpore: a block is reused
only once nothing references it, and the pool keeps within its limits."""
import numpy as np

from ms_scatter._memory import OutputPool, aligned_empty


def test_aligned_empty_is_aligned():
    for shape in [(3, 5), (1000, 64)]:
        a = aligned_empty(shape, np.float16)
        assert a.shape == shape and a.dtype == np.float16 and a.ctypes.data % 64 == 0


def test_block_is_reused_once_the_array_is_gone():
    pool = OutputPool(min_bytes=0, idle_bytes=1 << 20)
    a = pool.empty((100, 64), np.float32)
    address = a.ctypes.data
    assert address % 64 == 0 and a.shape == (100, 64) and a.dtype == np.float32
    assert pool.idle_bytes() == 0
    del a
    assert pool.idle_bytes() == 100 * 64 * 4
    b = pool.empty((100, 64), np.float32)
    assert b.ctypes.data == address and pool.idle_bytes() == 0
    c = pool.empty((64, 100), np.float32)  # same size, while b is held: a block of its own
    assert c.ctypes.data != address


def test_a_view_of_the_block_keeps_it():
    pool = OutputPool(min_bytes=0, idle_bytes=1 << 20)
    a = pool.empty((100, 64), np.float32)
    a[:] = 7.0
    address = a.ctypes.data
    view = a[10:20]  # numpy's base is the block itself, not `a`
    del a
    assert pool.idle_bytes() == 0
    b = pool.empty((100, 64), np.float32)
    b[:] = -1.0
    assert b.ctypes.data != address
    assert np.all(view == 7.0)


def test_limits():
    pool = OutputPool(min_bytes=1000, idle_bytes=3000)
    assert not pool.holds(999) and pool.holds(1000) and pool.holds(3000) and not pool.holds(3001)
    arrays = [pool.empty((250,), np.float32) for _ in range(3)]  # 1000 bytes each
    del arrays
    assert pool.idle_bytes() == 1000  # one idle block of a size
    big = [pool.empty((500,), np.float32), pool.empty((750,), np.float32)]  # 2000 and 3000 bytes
    del big
    assert pool.idle_bytes() <= 3000
    pool.clear()
    assert pool.idle_bytes() == 0


def test_give_back_never_waits_for_the_lock():
    """An array collected while the pool's lock is held (inside empty(), or in another thread)
    is freed, not pooled, and nothing blocks."""
    pool = OutputPool(min_bytes=0, idle_bytes=1 << 20)
    a = pool.empty((100, 64), np.float32)
    with pool._lock:  # pylint: disable=protected-access
        del a
    assert pool.idle_bytes() == 0
    b = pool.empty((100, 64), np.float32)
    del b
    assert pool.idle_bytes() == 100 * 64 * 4
