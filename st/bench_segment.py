"""Benchmark of the segment operators (the segment contract's workloads) against MindSpore's
built-ins and, where they are installed, JAX and PyTorch.

    python -m st.bench_segment                  # N = 20,000 nodes, E = 200,000 edges, F = 64
    python -m st.bench_segment --large          # also N = 100,000, E = 1,000,000, F = 128
    python -m st.bench_segment --reps 5         # fewer repetitions

Speed is shown as ratios against anchors measured in the same run, repetition by repetition
interleaved, each figure a median; never asserted. Edges: power-law in-degree (a Zipf draw of
destinations), random sources. Columns (ms per call; a ratio > 1: ours faster):

  ours-py   ms_scatter's function in PYNATIVE (the result read back: what a user's call costs)
  ours-g    the same in a GRAPH_MODE Cell
  ms-py     MindSpore's built-in in PYNATIVE (unsorted_segment_*; softmax: a composite of
            unsorted_segment_max / gather / exp / unsorted_segment_sum / gather / div)
  ms-g      the same in a GRAPH_MODE Cell
  jax       jax.ops.segment_sum / segment_max, jitted (indices_are_sorted=True on sorted ids);
            softmax: the same composite
  torch     index_add_ / scatter_reduce_("amax"); softmax: the composite of the contract
            (amax scatter, exp, index_add, gather)

Rows: segment_reduce sum and max on unsorted and sorted ids, segment_csr sum (sorted, from an
indptr), segment_argmax against segment_reduce max (the contract's 1.2x), segment_softmax on
E x 8, gspmm sum (the fused kernel) against MindSpore's Gather + unsorted_segment_sum, JAX's
BCSR @ x and torch.sparse.mm, and its forward + backward (ms.grad) against MindSpore's Gather +
TensorScatterAdd (what MindSpore Graph Learning runs); tensor_scatter_max / add forward +
backward (the gradients of input_x and the messages) against the built-ins and torch's
scatter_reduce.
"""
import argparse
import os
import time

import numpy as np


def _workload(n, e, f, seed=0):
    rng = np.random.default_rng(seed)
    dst = (rng.zipf(1.5, e) - 1) % n  # power-law in-degree
    x = rng.standard_normal((e, f)).astype(np.float32)
    return x, dst.astype(np.int32)


def _read(out):
    """Wait for a result: the first element back on the host."""
    if isinstance(out, tuple):
        out = out[0]
    if hasattr(out, "asnumpy"):
        return out.asnumpy().reshape(-1)[:1]
    if hasattr(out, "block_until_ready"):
        return out.block_until_ready()
    return out


def _time(fn, reps):
    times = []
    _read(fn())
    for _ in range(reps):
        t = time.perf_counter()
        _read(fn())
        times.append(time.perf_counter() - t)
    return times


def _peers():
    peers = {}
    try:
        import jax  # pylint: disable=import-outside-toplevel
        jax.config.update("jax_platforms", "cpu")
        peers["jax"] = jax
    except Exception:  # pylint: disable=broad-except
        pass
    try:
        import torch  # pylint: disable=import-outside-toplevel
        peers["torch"] = torch
    except Exception:  # pylint: disable=broad-except
        pass
    return peers


def _rows(x_np, ids_np, n, peers):
    """{row: {column: callable}} for one workload."""
    import mindspore as ms  # pylint: disable=import-outside-toplevel
    from mindspore import Tensor, nn, ops  # pylint: disable=import-outside-toplevel

    import ms_scatter  # pylint: disable=import-outside-toplevel

    order = np.argsort(ids_np, kind="stable")
    sorted_ids = ids_np[order]
    sorted_x = x_np[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(sorted_ids, minlength=n))]).astype(np.int64)
    scores_np = np.ascontiguousarray(x_np[:, :8])

    class _Cell(nn.Cell):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def construct(self, a, b):
            return self.fn(a, b)

    def ours_sum(a, b):
        return ms_scatter.segment_reduce(a, b, n, "sum")

    def ours_max(a, b):
        return ms_scatter.segment_reduce(a, b, n, "max")

    def ours_softmax(a, b):
        return ms_scatter.segment_softmax(a, b, n)

    def ms_sum(a, b):
        return ops.unsorted_segment_sum(a, b, n)

    def ms_max(a, b):
        return ops.unsorted_segment_max(a, b, n)

    def ms_softmax(s, ids):
        shift = ops.gather(ops.unsorted_segment_max(s, ids, n), ids, 0)
        e = ops.exp(s - shift)
        return e / ops.gather(ops.unsorted_segment_sum(e, ids, n), ids, 0)

    cases = {
        "sum unsorted": (x_np, ids_np, ours_sum, ms_sum, "sum", False),
        "max unsorted": (x_np, ids_np, ours_max, ms_max, "max", False),
        "sum sorted": (sorted_x, sorted_ids, ours_sum, ms_sum, "sum", True),
        "max sorted": (sorted_x, sorted_ids, ours_max, ms_max, "max", True),
        "softmax E x 8": (scores_np, ids_np, ours_softmax, ms_softmax, "softmax", False),
    }
    rows = {}
    for row, (xv, iv, ours, theirs, kind, is_sorted) in cases.items():
        xt, it = Tensor(xv), Tensor(iv)
        cols = {"ours-py": lambda o=ours, a=xt, b=it: o(a, b),
                "ms-py": lambda t=theirs, a=xt, b=it: t(a, b)}
        ms.set_context(mode=ms.GRAPH_MODE)
        ours_cell, ms_cell = _Cell(ours), _Cell(theirs)
        ms.set_context(mode=ms.PYNATIVE_MODE)
        cols["ours-g"] = ("graph", ours_cell, xt, it)
        cols["ms-g"] = ("graph", ms_cell, xt, it)
        if "jax" in peers:
            cols["jax"] = _jax_case(peers["jax"], xv, iv, n, kind, is_sorted)
        if "torch" in peers:
            cols["torch"] = _torch_case(peers["torch"], xv, iv, n, kind)
        rows[row] = cols
    st, pt = Tensor(sorted_x), Tensor(indptr)
    rows["csr sum (vs sum sorted)"] = {"ours-py": lambda: ms_scatter.segment_csr(st, pt, "sum"),
                                       "ours-py sum sorted": lambda: ms_scatter.segment_reduce(
                                           st, Tensor(sorted_ids), n, "sum")}
    rng = np.random.default_rng(1)
    h = Tensor(rng.standard_normal((n, x_np.shape[1])).astype(np.float32))
    src = Tensor(rng.integers(0, n, len(ids_np)).astype(np.int32))
    dst = Tensor(ids_np)
    def ours_spmm(a, b):
        return ms_scatter.gspmm(a, src, b, n)

    row = {"ours-py": lambda: ms_scatter.gspmm(h, src, dst, n),
           "ours-g": ("graph", _Cell(ours_spmm), h, dst),
           "ms-py gather+uss": lambda: ops.unsorted_segment_sum(ops.gather(h, src, 0), dst, n)}
    row.update(_spmm_peers(peers, h.asnumpy(), src.asnumpy(), ids_np, n))
    rows["gspmm sum (fused)"] = row
    dout = Tensor(rng.standard_normal((n, x_np.shape[1])).astype(np.float32))
    ours_grad = ms.grad(lambda a: (ms_scatter.gspmm(a, src, dst, n) * dout).sum())
    ms_grad = ms.grad(lambda a: (ops.tensor_scatter_add(ops.zeros_like(dout), ops.reshape(dst, (-1, 1)),
                                                         ops.gather(a, src, 0)) * dout).sum())
    rows["gspmm sum fwd+bwd"] = {"ours-py": lambda: ours_grad(h),
                                 "ms-py gather+tsa": lambda: ms_grad(h)}
    max_grad = ms.grad(lambda a: (ms_scatter.gspmm(a, src, dst, n, reduce="max") * dout).sum())
    ms_max_grad = ms.grad(lambda a: (ops.tensor_scatter_max(ops.full_like(dout, -np.inf), ops.reshape(dst, (-1, 1)),
                                                             ops.gather(a, src, 0)) * dout).sum())
    rows["gspmm max fwd+bwd"] = {"ours-py": lambda: max_grad(h),
                                 "ms-py gather+tsmax": lambda: ms_max_grad(h)}
    xt, it = Tensor(x_np), Tensor(ids_np)
    _scatter_grad_rows(rows, peers, x_np, ids_np, n, _Cell)
    rows["argmax (vs max)"] = {"ours-py": lambda: ms_scatter.segment_argmax(xt, it, n),
                               "ours-py max": lambda: ms_scatter.segment_reduce(xt, it, n, "max")}
    return rows


def _scatter_grad_rows(rows, peers, x_np, ids_np, n, cell_class):
    """The scatter family's forward + backward on the workload (issue #35: what GraphSAGE's
    max pooling runs): the d input_x and d updates of sum(tensor_scatter_<r>(x, ids, messages)
    * w), ours against the built-in (and torch's scatter_reduce), PYNATIVE and GRAPH."""
    import mindspore as ms  # pylint: disable=import-outside-toplevel
    import ms_scatter  # pylint: disable=import-outside-toplevel
    from mindspore import Tensor, ops  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(2)
    base_np = rng.standard_normal((n, x_np.shape[1])).astype(np.float32)
    w_np = rng.standard_normal(base_np.shape).astype(np.float32)
    base, w, xt, idx = Tensor(base_np), Tensor(w_np), Tensor(x_np), Tensor(ids_np.reshape(-1, 1))
    for reduction, ours, theirs, torch_reduce in (("max", ms_scatter.tensor_scatter_max, ops.tensor_scatter_max, "amax"),
                                                   ("add", ms_scatter.tensor_scatter_add, ops.tensor_scatter_add, "sum")):
        def grads_of(fn):
            def loss(a, b):
                return (fn(a, idx, b) * w).sum()
            return ms.grad(loss, grad_position=(0, 1))
        ours_grad, ms_grad = grads_of(ours), grads_of(theirs)
        row = {"ours-py": lambda g=ours_grad: g(base, xt)[1],
               "ours-g": ("graph", cell_class(ours_grad), base, xt),
               "ms-py": lambda g=ms_grad: g(base, xt)[1],
               "ms-g": ("graph", cell_class(ms_grad), base, xt)}
        if "torch" in peers:
            torch = peers["torch"]
            rows_t = torch.from_numpy(ids_np.astype(np.int64)).reshape(-1, 1).expand(-1, x_np.shape[1])
            w_t = torch.from_numpy(w_np)

            def torch_grad(reduce=torch_reduce, rows_t=rows_t, w_t=w_t):
                a = torch.from_numpy(base_np).requires_grad_()
                b = torch.from_numpy(x_np).requires_grad_()
                (a.scatter_reduce(0, rows_t, b, reduce, include_self=True) * w_t).sum().backward()
                return b.grad
            row["torch"] = torch_grad
        rows[f"tensor_scatter_{reduction} fwd+bwd"] = row


def _spmm_peers(peers, hv, sv, dv, n):
    """The fused sparse-dense products of the peers on the same graph: JAX's BCSR @ x (jitted)
    and torch.sparse.mm of a CSR adjacency (rows: destinations, columns: sources)."""
    cols = {}
    order = np.lexsort((sv, dv))
    rows_, cols_ = dv[order].astype(np.int64), sv[order].astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows_, minlength=n))])
    if "jax" in peers:
        jax = peers["jax"]
        from jax.experimental import sparse  # pylint: disable=import-outside-toplevel
        adj_j = sparse.BCSR((jax.numpy.ones(len(rows_), np.float32), jax.numpy.asarray(cols_.astype(np.int32)),
                         jax.numpy.asarray(indptr.astype(np.int32))), shape=(n, hv.shape[0]))
        hj = jax.numpy.asarray(hv)
        f = jax.jit(lambda m, x: m @ x)
        cols["jax BCSR@x"] = lambda: f(adj_j, hj)
    if "torch" in peers:
        torch = peers["torch"]
        adj_t = torch.sparse_csr_tensor(torch.from_numpy(indptr), torch.from_numpy(cols_),
                                    torch.ones(len(rows_)), size=(n, hv.shape[0]))
        ht = torch.from_numpy(hv)
        cols["torch sparse.mm"] = lambda: torch.sparse.mm(adj_t, ht)
    return cols


def _jax_case(jax, xv, iv, n, kind, is_sorted):
    jnp = jax.numpy
    xj, ij = jnp.asarray(xv), jnp.asarray(iv)
    if kind == "softmax":
        def f(s, ids):
            shift = jax.ops.segment_max(s, ids, n)[ids]
            e = jnp.exp(s - shift)
            return e / jax.ops.segment_sum(e, ids, n)[ids]
    else:
        seg = jax.ops.segment_sum if kind == "sum" else jax.ops.segment_max

        def f(s, ids):
            return seg(s, ids, n, indices_are_sorted=is_sorted)
    jf = jax.jit(f)
    return lambda: jf(xj, ij)


def _torch_case(torch, xv, iv, n, kind):
    xt, it = torch.from_numpy(xv), torch.from_numpy(iv.astype(np.int64))
    rows = it.view(-1, *([1] * (xt.dim() - 1))).expand_as(xt)
    if kind == "sum":
        return lambda: torch.zeros((n,) + xt.shape[1:]).index_add_(0, it, xt)
    if kind == "max":
        return lambda: torch.full((n,) + xt.shape[1:], float("-inf")).scatter_reduce_(0, rows, xt, "amax")

    def softmax():
        shift = torch.full((n,) + xt.shape[1:], float("-inf")).scatter_reduce_(0, rows, xt, "amax")[it]
        e = torch.exp(xt - shift)
        return e / torch.zeros((n,) + xt.shape[1:]).index_add_(0, it, e)[it]
    return softmax


def _call(col):
    if isinstance(col, tuple) and col[0] == "graph":
        _, cell, a, b = col
        import mindspore as ms  # pylint: disable=import-outside-toplevel
        ms.set_context(mode=ms.GRAPH_MODE)
        try:
            return cell(a, b)
        finally:
            ms.set_context(mode=ms.PYNATIVE_MODE)
    return col()


def run(workloads, reps):
    import mindspore as ms  # pylint: disable=import-outside-toplevel
    ms.set_context(mode=ms.PYNATIVE_MODE)
    if hasattr(ms, "set_device"):
        ms.set_device("CPU")
    peers = _peers()
    print(f"load average at start {tuple(round(v, 2) for v in os.getloadavg())}; peers: "
          f"{', '.join(peers) or 'none installed (pip install jax torch for their columns)'}")
    for n, e, f in workloads:
        x, ids = _workload(n, e, f)
        print(f"\nN = {n:,}, E = {e:,}, F = {f} (float32), ms per call, median of {reps}")
        for row, cols in _rows(x, ids, n, peers).items():
            times = {name: [] for name in cols}
            for name, col in cols.items():
                _read(_call(col))  # warm (compiles a graph)
            for _ in range(reps):  # interleaved, repetition by repetition
                for name, col in cols.items():
                    times[name] += _time(lambda c=col: _call(c), 1)
            med = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
            base = med["ours-py"]
            shown = "  ".join(f"{name} {value:8.2f}" for name, value in med.items())
            ratios = "  ".join(f"{name}/ours-py {value / base:5.2f}x" for name, value in med.items()
                               if name != "ours-py")
            print(f"  {row:24s} {shown}\n  {'':24s} {ratios}")
    print(f"\nload average at end {tuple(round(v, 2) for v in os.getloadavg())}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--large", action="store_true", help="also N = 100,000, E = 1,000,000, F = 128")
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args(argv)
    workloads = [(20000, 200000, 64)] + ([(100000, 1000000, 128)] if args.large else [])
    run(workloads, args.reps)


if __name__ == "__main__":
    main()
