"""Unmodified MindSpore programs for the drop-in tests (st/test_patch.py), run in a
subprocess: ``python st/dropin_programs.py`` (MindSpore's built-ins),
``python -m ms_scatter.patch st/dropin_programs.py`` (the same program on ms_scatter), and
``python st/dropin_programs.py --hide`` (MindSpore's scatter names made unusable before
ms_scatter is imported, then ``ms_scatter.patch()``).

None of the programs names ms_scatter: they use mindspore.ops / nn / Tensor only. The last
line printed is ``RESULT {json}``: per case, a digest of every result (or the error), and
the launches of our kernels during the case (ms_scatter.call_counts).
"""
import hashlib
import json
import sys

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops

FAMILIES = ("Scatter", "ScatterNd", "TensorScatter")
REDUCTIONS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Update")


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a.asnumpy() if hasattr(a, "asnumpy") else a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


RESULTS = {}
CALLS = {}
COUNTS = None  # ms_scatter.call_counts, once ms_scatter is imported


def case(name, fn):
    """Runs one case: its result (or error) in RESULTS, the launches of our kernels it made
    in CALLS."""
    before = COUNTS()
    try:
        RESULTS[name] = fn()
    except Exception as err:  # noqa: BLE001 - recorded, compared by the test
        RESULTS[name] = f"error: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
    after = COUNTS()
    CALLS[name] = {k: after[k] - before[k] for k in after if after[k] != before[k]}


# ----------------------------------------------------------------- a recommendation model

class Rec(nn.Cell):
    """Embedding tables with sparse gradients (nn.EmbeddingLookup, sparse=True: on CPU the
    optimizers' sparse paths call ScatterAdd / ScatterUpdate in place in the graph)."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.EmbeddingLookup(vocab, dim, target="CPU", sparse=True)
        self.dense = nn.Dense(dim, 1)

    def construct(self, ids):
        return self.dense(self.emb(ids).mean(axis=1)).squeeze(-1)


OPTIMIZERS = {
    "adam": dict(),
    "adam_nesterov": dict(use_nesterov=True),
    "adam_lazy": dict(use_lazy=True),
    "adam_lazy_nesterov": dict(use_lazy=True, use_nesterov=True),
    "lazyadam": None,
}


def train(name, steps=200, vocab=500, dim=16, batch=64, fields=4):
    ms.set_seed(0)
    net = Rec(vocab, dim)
    params = net.trainable_params()
    kwargs = OPTIMIZERS[name]
    opt = nn.LazyAdam(params, learning_rate=0.01) if kwargs is None else nn.Adam(params, learning_rate=0.01,
                                                                               **kwargs)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.BCEWithLogitsLoss()), opt)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, vocab, size=(steps, batch, fields)).astype(np.int32)
    labels = (rng.random((steps, batch)) < 0.3).astype(np.float32)
    losses = np.array([step(Tensor(ids[s]), Tensor(labels[s])).asnumpy() for s in range(steps)])
    table = net.emb.embedding_table.value().asnumpy()
    return {"losses": digest(losses), "table": digest(table), "last_loss": float(losses[-1]),
            "table_values": table.astype(np.float64).ravel()[:2000].tolist()}


# ----------------------------------------------------------------- graph-mode setitem

class SetItem(nn.Cell):
    def __init__(self):
        super().__init__()
        self.p = Parameter(Tensor(np.arange(20, dtype=np.float32).reshape(5, 4)), name="p")

    def construct(self, x, rows, value, row_value):
        x[rows] = value                  # Tensor index: TensorScatterUpdate
        x[1] = row_value                 # int index
        x[2:4, 1] = 7.0                  # slice
        x[x > 15.0] = -1.0               # bool mask
        x[(rows, rows)] = 3.0            # tuple of tensors
        self.p[rows] = value             # Parameter: ScatterNdUpdate in place
        self.p[(rows, rows)] = 9.0
        return x, self.p


def setitem():
    x = Tensor(np.arange(20, dtype=np.float32).reshape(5, 4) * 1.5)
    rows = Tensor(np.array([0, 3], np.int32))
    value = Tensor(np.full((2, 4), 2.5, np.float32))
    x_out, p_out = SetItem()(x, rows, value, Tensor(np.ones(4, np.float32)))
    return {"x": digest(x_out), "p": digest(p_out)}


# ----------------------------------------------------------------- Tensor methods

X = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0], [7.0, 8.0, 9.0]], np.float32)
IDX = np.array([[0], [2], [0]], np.int32)
UPD = np.array([[2.0, 2.0, 2.0], [0.5, 4.0, -1.0], [3.0, -3.0, 0.25]], np.float32)
METHODS = ("scatter_add", "scatter_sub", "scatter_mul", "scatter_div", "scatter_max", "scatter_min")


class Methods(nn.Cell):
    def __init__(self, method):
        super().__init__()
        self.method = method

    def construct(self, x, i, u):
        if self.method == "scatter_add":
            return x.scatter_add(i, u)
        if self.method == "scatter_sub":
            return x.scatter_sub(i, u)
        if self.method == "scatter_mul":
            return x.scatter_mul(i, u)
        if self.method == "scatter_div":
            return x.scatter_div(i, u)
        if self.method == "scatter_max":
            return x.scatter_max(i, u)
        return x.scatter_min(i, u)


def method_pynative(name):
    return digest(getattr(Tensor(X), name)(Tensor(IDX), Tensor(UPD)))


def method_graph(name):
    return digest(Methods(name)(Tensor(X), Tensor(IDX), Tensor(UPD)))


def scatter_add_dim_form():
    """Tensor.scatter_add(dim, index, src): not ours, still MindSpore's under the patch."""
    src = Tensor(np.ones((1, 3), np.float32))
    return digest(Tensor(X).scatter_add(0, Tensor(np.array([[1, 0, 2]], np.int64)), src))


# ----------------------------------------------------------------- mindspore.ops names

def inputs(op):
    family = next(f for f in sorted(FAMILIES, key=len, reverse=True) if op.startswith(f))
    if family == "Scatter":
        i = np.array([[0, 2], [3, 0]], np.int32) if not op.endswith("Update") else np.array([[0, 2], [3, 1]],
                                                                                            np.int32)
        u = np.arange(1, 1 + 2 * 2 * 3, dtype=np.float32).reshape(2, 2, 3) * 0.5
    else:
        i = np.array([[0, 1], [2, 2], [0, 1]], np.int32) if not op.endswith("Update") else \
            np.array([[0, 1], [2, 2], [3, 0]], np.int32)
        u = np.array([2.0, -1.5, 4.0], np.float32)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 4.0
    return family, x, i, u


def ops_pynative(name):
    family, x, i, u = inputs(_op_of(name))
    fn = getattr(ops, name)() if name[0].isupper() else getattr(ops, name)
    if family == "TensorScatter":
        return digest(fn(Tensor(x), Tensor(i), Tensor(u)))
    p = Parameter(Tensor(x), name="x")
    return digest(fn(p, Tensor(i), Tensor(u)), p.value())


class AllOps(nn.Cell):
    """Every mindspore.ops name of the family called in one graph (one compile): the
    in-place ones on their own Parameter."""

    def __init__(self, names):
        super().__init__()
        self.fns, self.params, self.args = [], [], []
        for k, name in enumerate(names):
            family, x, i, u = inputs(_op_of(name))
            if name[0].islower():  # not the primitive's input: the compiler would merge equal calls
                x = x + 1.0
            self.fns.append(getattr(ops, name)() if name[0].isupper() else getattr(ops, name))
            self.params.append(Parameter(Tensor(x), name=f"x{k}") if family != "TensorScatter" else Tensor(x))
            self.args.append((Tensor(i), Tensor(u)))
        self.n = len(names)
        self.fns, self.params, self.args = tuple(self.fns), tuple(self.params), tuple(self.args)

    def construct(self):
        outs = ()
        for k in range(self.n):
            outs = outs + (self.fns[k](self.params[k], self.args[k][0], self.args[k][1]),)
        return outs


def ops_graph(names):
    cell = AllOps(names)
    outs = cell()
    return {name: digest(out, p.value() if isinstance(p, Parameter) else p)
            for name, out, p in zip(names, outs, cell.params)}


def _op_of(name):
    return name if name[0].isupper() else "".join(part.title() for part in name.split("_"))


def ops_names():
    names = []
    for family in FAMILIES:
        for reduction in REDUCTIONS:
            op = family + reduction
            fname = "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_")
            names += [op, fname]
    return names


# ----------------------------------------------------------------- hiding the built-ins

class _Hidden:
    """What a hidden MindSpore name holds: unusable (calling or instantiating raises)."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name} was removed from MindSpore (hidden by the test)")


HOMES = ("mindspore.ops", "mindspore.ops.operations", "mindspore.ops.functional", "mindspore.ops.function")


def hide_builtins():
    """Makes MindSpore's scatter family unusable, without ms_scatter: the names are deleted
    from the public namespaces, and every other attribute of a loaded mindspore module
    (the registry and Tensor methods included) that holds one of its classes, functions or
    instances becomes an object that raises. Returns how many were hidden."""
    from mindspore.common._register_for_tensor import tensor_operator_registry
    originals = {}
    for name in ops_names():
        value = getattr(ops, name, None)
        if value is not None:
            originals[id(value)] = name
    classes = tuple(v for v in (getattr(ops, n, None) for n in ops_names()) if isinstance(v, type))
    hidden = 0
    for module_name, module in sorted(sys.modules.items()):
        if not (module_name == "mindspore" or module_name.startswith("mindspore.")) or module is None:
            continue
        for key, value in list(vars(module).items()):
            if id(value) in originals or (isinstance(value, classes) and not isinstance(value, type)):
                if module_name in HOMES:
                    delattr(module, key)
                else:
                    setattr(module, key, _Hidden(f"{module_name}.{key}"))
                hidden += 1
    for key, value in list(vars(tensor_operator_registry).items()):
        if id(value) in originals or isinstance(value, classes):
            setattr(tensor_operator_registry, key, _Hidden(f"registry.{key}"))
            hidden += 1
    for name in METHODS:
        if name in vars(Tensor):
            delattr(Tensor, name)
        else:  # scatter_add: TensorPy's; a Tensor attribute shadows it
            setattr(Tensor, name, _Hidden(f"Tensor.{name}"))
        hidden += 1
    assert not hasattr(ops, "ScatterAdd") and not hasattr(ops.operations, "TensorScatterMax")
    return hidden


def main(argv):
    global COUNTS
    hide = "--hide" in argv
    ms.set_context(device_target="CPU")
    if hide:
        # MindSpore modules that register rules for its built-ins by class at import (a
        # MindSpore without the names would not have them): imported before hiding.
        import mindspore.ops._vmap  # noqa: F401
        RESULTS["hidden"] = hide_builtins()
        RESULTS["without_patch"] = {}
        for what, call in (("ops.ScatterAdd", lambda: ops.ScatterAdd()),
                           ("ops.function.array_func.scatter_add_", lambda: ops.function.array_func.scatter_add_()),
                           ("Tensor.scatter_max", lambda: Tensor(X).scatter_max(Tensor(IDX), Tensor(UPD)))):
            try:
                call()
                RESULTS["without_patch"][what] = "ran"
            except Exception as err:  # noqa: BLE001
                RESULTS["without_patch"][what] = type(err).__name__
        import ms_scatter
        RESULTS["patched_sites"] = len(ms_scatter.patch().replaced)
    import ms_scatter  # only to read the kernels' launch counters
    COUNTS = lambda: ms_scatter.call_counts(entries=True)  # noqa: E731 (entry points: _token, ...)

    ms.set_context(mode=ms.GRAPH_MODE)
    for name in OPTIMIZERS:
        case(f"train/{name}", lambda name=name: train(name))
    case("setitem", setitem)
    for name in METHODS:
        case(f"method/GRAPH/{name}", lambda name=name: method_graph(name))
    names = [name for name in ops_names() if hasattr(ops, name)]
    case("ops/GRAPH", lambda: ops_graph(names))
    ms.set_context(mode=ms.PYNATIVE_MODE)
    for name in METHODS:
        case(f"method/PYNATIVE/{name}", lambda name=name: method_pynative(name))
    case("method/PYNATIVE/scatter_add(dim, index, src)", scatter_add_dim_form)
    for name in names:
        case(f"ops/PYNATIVE/{name}", lambda name=name: ops_pynative(name))

    print("RESULT " + json.dumps({"results": RESULTS, "calls": CALLS}, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
