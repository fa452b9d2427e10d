"""What a tiny PYNATIVE call costs, step by step (python -m st.bench_call).

Times a tiny in-place call (ScatterAdd on a 64 x 8 float32 Parameter, 16 indices) in a loop,
next to MindSpore's built-in, and each step of ms_scatter's one-step path
(ScatterKernel.eager_call) on its own: the signature lookup, the per-call checks, the
sync, the data pointers, the ctypes call, the kept result. Figures are the best of several
loops of thread CPU time (time.thread_time: unlike wall time, a loop that another process
interrupts is not charged for it), per call; `--wall` for wall time (the built-in's
backend thread is not charged to thread time).
"""
import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("GLOG_v", "3")


def best(fn, clock, number=2000, repeat=15):
    for _ in range(200):
        fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        times.append((clock() - t0) / number)
    return min(times) * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m st.bench_call", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wall", action="store_true", help="wall time instead of the thread's CPU time")
    args = p.parse_args(argv)
    clock = time.perf_counter if args.wall else time.thread_time

    import mindspore as ms
    from mindspore import Parameter, Tensor, ops
    from ms_scatter._compat import _pynative_executor
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    import ms_scatter
    from ms_scatter import _ascend, _kernel
    from ms_scatter._graph import trace_context

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    p_ours = Parameter(Tensor(x), name="ours")
    p_builtin = Parameter(Tensor(x), name="builtin")
    i = Tensor(rng.integers(0, 64, 16).astype(np.int32))
    u = Tensor(rng.standard_normal((16, 8)).astype(np.float32))
    ours, builtin = ms_scatter.ScatterAdd(), ops.ScatterAdd()
    sync = _pynative_executor.sync
    kernel = ms_scatter.ScatterAdd._token_kernel
    ours(p_ours, i, u)  # the first call of the signature takes the full path and keeps its plan
    key = (type(p_ours), type(i), type(u), p_ours.shape, i.shape, u.shape)
    plan = kernel._fast[key]
    (params, ndims, shapes, names, _), fn = plan[3], kernel._direct.raw_fn
    params[0], params[1], params[2] = p_ours.data_ptr(), i.data_ptr(), u.data_ptr()

    rows = [
        ("ScatterAdd()(p, i, u); sync()", lambda: (ours(p_ours, i, u), sync())),
        ("scatter_add(p, i, u); sync()", lambda: (ms_scatter.scatter_add(p_ours, i, u), sync())),
        ("built-in ops.ScatterAdd()(p, i, u); sync()", lambda: (builtin(p_builtin, i, u), sync())),
        ("  sync() (an empty queue)", sync),
        ("  signature lookup (types, shapes; dtypes by identity)",
         lambda: kernel._fast.get((type(p_ours), type(i), type(u), p_ours.shape, i.shape, u.shape))[0]
         is p_ours.dtype),
        ("  has_init x 3", lambda: (p_ours.has_init, i.has_init, u.has_init)),
        ("  requires_grad()", _kernel._requires_grad),
        ("  trace_context()", trace_context),
        ("  host_direct() (device target, emulation switch)", _ascend.host_direct),
        ("  is_contiguous() x 3", lambda: (p_ours.is_contiguous(), i.is_contiguous(), u.is_contiguous())),
        ("  the lock", lambda: _kernel._PYNATIVE_LOCK.__enter__() or _kernel._PYNATIVE_LOCK.__exit__(None, None, None)),
        ("  data pointers x 3", lambda: (_kernel._data_ptr(p_ours), _kernel._data_ptr(i), _kernel._data_ptr(u))),
        ("  the ctypes call (with the kernel's own work)", lambda: fn(4, params, ndims, shapes, names, None, None)),
        ("  the kept result (_shared_result)", lambda: _kernel._shared_result(p_ours, params[0])),
    ]
    print(f"tiny PYNATIVE call, {'wall' if args.wall else 'thread CPU'} time, best of 15 loops of 2000 calls:")
    for name, f in rows:
        print(f"  {name:<56} {best(f, clock):6.2f} us")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
