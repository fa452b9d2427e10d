"""Scatter kernels in MindSpore's hybrid DSL (``@kernel`` + ``ops.Custom(func_type="hybrid")``),
generated from one table: (index mode x reduction), no kernel body written per operator.

Index modes (every kernel is out of place: ``out = copy of x``, then the updates):

* ``first_axis`` (Scatter*): x viewed as (N, S), indices (K,), updates (K, S);
  ``out[indices[k], s] = combine(out[indices[k], s], updates[k, s])``.
* ``nd`` (ScatterNd* and TensorScatter*), one source per index depth d:
  x viewed as x.shape[:d] + (S,), indices (K, d), updates (K, S);
  ``out[indices[k, 0], ..., indices[k, d-1], s] = combine(...)``.

S is the product of the remaining axes of x, K the number of index vectors. The views are
plain reshapes (``HybridScatter`` / ``hybrid_scatter`` do them); a hybrid kernel has a fixed
rank, so the N-d source is generated per depth d (1 <= d <= 7; depth 0 runs as depth 1 on
x viewed as (1, size) with zero indices).

Entry points: ``hybrid_custom(op, depth, dtype)`` (the bare ``ops.Custom`` on the views),
``HybridScatter(op)`` (an ``nn.Cell`` doing views + compute dtype + Custom, PYNATIVE and
GRAPH) and ``hybrid_scatter(op, x, indices, updates)`` (PYNATIVE, cached Cell).

Why generated source text: the DSL is compiled from the function's *source text*
(``inspect.getsource``, sent to AKG as the attribute ``func_source_str`` and re-parsed
there without the Python globals or closure), so a kernel cannot take the reduction as a
closure variable or call a helper. Each kernel's text is produced from the table below,
compiled with ``exec`` and registered in ``linecache`` so that ``inspect.getsource`` (what
``ops.Custom`` calls) returns it. ``kernel_source(op, depth, dtype)`` shows the text.

Semantics (those of the CPU engine, ms_scatter.testing.oracle):

* index vectors are applied in index order by sequential ``range`` loops: duplicates
  accumulate in order, Update: the last occurrence wins;
* Max/Min propagate a NaN from either side without ``isnan`` (refused on Ascend by
  MindSpore's DSL checker): ``(b if a < b else a) if (a < b or b < a or a == b) else a + b``;
  an unordered pair (a NaN on either side) gives ``a + b``, a NaN; ties keep a. Only ``<``
  and ``==`` are used because, measured on CPU, AKG's simplification does not keep IEEE
  semantics for the others: ``a if (a >= b or a != a) else b`` lost a NaN in x,
  ``a if a >= b else (b if a < b else a + b)`` and guards like ``b <= 1e309`` lost a NaN in
  updates (``>=``/``<=`` are rewritten as ``!(x < y)``, true for a NaN);
* integer Div truncates toward zero and ``MIN / -1`` wraps to MIN, built from the DSL's
  floor division (``//``, ``%``) with a safe divisor (the DSL has no truncating division,
  and ``/`` on integers is refused at parse time), hence its own source (``*_div_int``);
* integer Add/Sub/Mul wrap as the dtype does (two's complement, as the generated code does);
* float16: ``HybridScatter`` runs the float32 kernel on float16 data converted to float32
  and rounds once at the end -- exactly the project's "float16 accumulates in float32"
  policy. The Custom itself, given float16 directly, would round after every update.

What a hybrid kernel cannot do (the primitive layer, ms_scatter/_ascend.py, does it around
the kernel on the Ascend path):

* raise: an out-of-range or negative index vector is SKIPPED (nothing written for it,
  never an out-of-bounds write); the primitive layer validates the indices first
  to keep the project's policy (error, nothing written);
* integer division by zero: the destination is left unchanged (no trap); the primitive
  layer raises ScatterZeroDivisionError before calling (PYNATIVE) or fails/gates the
  step (GRAPH);
* uint8: ``output_tensor``/``allocate`` accept only dtypes named int*/float* (AKG
  ``_allocate_tensor``), so ``HybridScatter`` computes uint8 in int32 and converts back:
  exact, since Add/Sub/Mul are ring operations modulo 2**8 (int32 wraps modulo 2**32) and
  Div/Max/Min/Update keep values in [0, 255];
* empty inputs: zero-extent kernels are not launched; ``HybridScatter`` returns x;
* dynamic shapes: not supported by hybrid kernels (each new shape/dtype compiles: measured
  on the 2-core CPU machine about 2.5 s for the first, with the build server's start, then
  0.15-0.4 s each);
* float literals are float32 constants and comparisons do not convert them (``b < 1e309``
  fails to compile for float64: "Cannot match type float64 vs float32"): no literal is
  compared with a value here.

Ascend status (MindSpore 2.10): the ``ops.Custom`` docstring lists only "aot" (GPU, CPU,
Ascend) and "pyfunc" (CPU); ``@kernel`` says "Supported Platforms: GPU CPU", and the
CPU wheel ships ``libakg.so`` for CPU only. The Ascend AKG path still exists in the code
(``_compile_akg_task_ascend``, ``AkgAscendKernelBuilder``), so these kernels avoid every
intrinsic the DSL checker refuses on Ascend (``isnan``, ``int64()``, ``trunc`` ...), but
they have only been compiled and run on CPU (directly, and through the primitives with
MS_SCATTER_KERNELS=hybrid). See ``ascend_reg_info``.
"""
import linecache
import sys

from mindspore import nn, ops
from mindspore.common import dtype as mstype
from mindspore.ops import CustomRegOp, DataType, constexpr, kernel

REDUCTIONS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Update")
FAMILIES = ("Scatter", "ScatterNd", "TensorScatter")
MODE_OF_FAMILY = {"Scatter": "first_axis", "ScatterNd": "nd", "TensorScatter": "nd"}
MAX_DEPTH = 7  # MindSpore tensors have rank <= 8; the nd view has rank depth + 1

# dtype the kernel computes in, for each value dtype (see the module docstring).
COMPUTE_DTYPE = {
    "float16": "float32", "float32": "float32", "float64": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "int32",
}
# AKG build attributes of every kernel. Loop fusion off: the polyhedral scheduler would
# otherwise fuse the copy loop (out = x) with the scatter loop, which failed to compile
# (ScatterNdUpdate: "Failed to vectorize loop") and must never reorder a copy after an update.
COMPILE_ATTRS = {"pragma_disable_loop_fusion": True}
# value dtypes that the DSL refuses as output_tensor dtypes (asserted by the tests)
DSL_REFUSED_DTYPES = ("uint8",)

# How the destination value `a` takes one update value `b`: one DSL expression (over the
# let-bound scalars a and b) per reduction. Div has a float and an integer form.
# Max/Min use `<` and `==` only: AKG's simplifier rewrites a >= b into !(a < b) (true for a
# NaN) and a != a into False, so an ordered pair (a < b or b < a or a == b) takes the
# ordinary branch (ties keep a) and an unordered one gives a + b, a NaN.
_COMBINE = {
    "Add": "a + b",
    "Sub": "a - b",
    "Mul": "a * b",
    "Div": "a / b",
    "Max": "(b if a < b else a) if (a < b or b < a or a == b) else a + b",
    "Min": "(b if b < a else a) if (a < b or b < a or a == b) else a + b",
    "Update": "b",
}
# Integer Div: d is a divisor that never traps (b == 0 and b == -1 replaced by 1), q the
# floor quotient; the result truncates toward zero, b == -1 negates (MIN wraps to MIN),
# b == 0 leaves the destination unchanged.
_INT_DIV_LETS = (
    "d = b if (b != 0 and b != -1) else b - b + 1",
    "q = a // d",
)
_INT_DIV = "(0 - a) if b == -1 else (a if b == 0 else ((q + 1) if (a % d != 0 and (a < 0) != (d < 0)) else q))"


def _is_int(dtype):
    name = _dtype_name(dtype) if dtype is not None else "float32"
    return name.startswith(("int", "uint"))


def _dtype_name(dtype):
    if hasattr(dtype, "element_type"):
        dtype = dtype.element_type()
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if not isinstance(name, str):
        name = str(dtype)
    name = name.lower()
    return {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)


def split_op(op_name):
    """'ScatterNdAdd' -> ('ScatterNd', 'Add')."""
    for family in sorted(FAMILIES, key=len, reverse=True):
        if op_name.startswith(family) and op_name[len(family):] in REDUCTIONS:
            return family, op_name[len(family):]
    raise ValueError(f"unknown scatter operator {op_name!r}")


def _kernel_name(mode, reduction, depth, integer):
    name = f"{mode}_{reduction.lower()}"
    if reduction == "Div":
        name += "_int" if integer else "_float"
    return name + (f"_d{depth}" if mode == "nd" else "")


def generate_source(mode, reduction, depth=1, integer=False):
    """The DSL source of one kernel (a str holding one function definition)."""
    if mode not in ("first_axis", "nd") or reduction not in REDUCTIONS:
        raise ValueError(f"unknown kernel {mode}/{reduction}")
    if mode == "first_axis":
        depth = 1
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"index depth must be in [1, {MAX_DEPTH}], got {depth}")
    if mode == "first_axis":
        dest = ["indices[k]"]
    else:
        dest = [f"indices[k, {j}]" for j in range(depth)]
    in_range = " and ".join(f"{v} >= 0 and {v} < x.shape[{j}]" for j, v in enumerate(dest))
    target = f"out[{', '.join(dest)}, s]"
    rank = depth + 1
    lines = [f"def {_kernel_name(mode, reduction, depth, integer)}(x, indices, updates):",
             "    out = output_tensor(x.shape, x.dtype)"]
    # out = x (loop variables c0..cN are not reused: AKG requires SSA loop variables)
    for j in range(rank):
        lines.append("    " * (j + 1) + f"for c{j} in range(x.shape[{j}]):")
    cs = ", ".join(f"c{j}" for j in range(rank))
    lines.append("    " * (rank + 1) + f"out[{cs}] = x[{cs}]")
    # the updates, index vector by index vector, in order
    lines += ["    for k in range(updates.shape[0]):",
              f"        for s in range(x.shape[{depth}]):",
              f"            if {in_range}:",
              f"                a = {target}",
              "                b = updates[k, s]"]
    if reduction == "Div" and integer:
        lines += [f"                {let}" for let in _INT_DIV_LETS]
        expr = _INT_DIV
    else:
        expr = _COMBINE[reduction]
    lines += [f"                {target} = {expr}",
              "    return out", ""]
    return "\n".join(lines)


_FUNCS = {}


def _make_kernel(mode, reduction, depth, integer):
    """The @kernel function of one generated source (cached)."""
    key = (mode, reduction, depth if mode == "nd" else 1, bool(integer and reduction == "Div"))
    if key not in _FUNCS:
        source = generate_source(*key)
        name = _kernel_name(*key)
        filename = f"<ms_scatter.kernels.ascend.hybrid:{name}>"
        # inspect.getsource (used by ops.Custom) reads the text back from linecache
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = {"__name__": __name__}
        exec(compile(source, filename, "exec"), namespace)  # pylint: disable=exec-used
        _FUNCS[key] = kernel(namespace[name], compile_attrs=dict(COMPILE_ATTRS))
    return _FUNCS[key]


def kernel_function(op_name, depth=1, dtype=None):
    """The @kernel-decorated DSL function of `op_name` (e.g. 'ScatterNdMax') for index depth
    `depth` (N-d families; Scatter* is always first-axis) and value dtype `dtype` (only Div
    has a separate integer kernel)."""
    family, reduction = split_op(op_name)
    return _make_kernel(MODE_OF_FAMILY[family], reduction, depth, _is_int(dtype))


def kernel_source(op_name, depth=1, dtype=None):
    family, reduction = split_op(op_name)
    mode = MODE_OF_FAMILY[family]
    return generate_source(mode, reduction, depth if mode == "nd" else 1, reduction == "Div" and _is_int(dtype))


def _same_as_x(x, indices, updates):
    del indices, updates
    return x


_CUSTOMS = {}


def hybrid_custom(op_name, depth=1, dtype=None, reg_info=None, ascend=False):
    """``ops.Custom(kernel, out_shape=x's, out_dtype=x's, func_type="hybrid")`` for `op_name`.

    Inputs of the returned op, all static shapes (views made by ``HybridScatter``):
    Scatter*: x (N, S), indices (K,), updates (K, S); ScatterNd*/TensorScatter*:
    x x.shape[:depth] + (S,), indices (K, depth), updates (K, S). Output: the updated x,
    out of place. `dtype` (value dtype) matters only for Div (integer vs float kernel);
    `reg_info` e.g. ``ascend_reg_info()`` to register the op for target Ascend (a new
    Custom each call); ``ascend=True`` does that with ``ascend_reg_info()``, cached.
    Customs are cached per (kernel, depth, dtype kind, registered for Ascend or not).
    MindSpore's CPU AKG path ignores a registration for Ascend (measured: an Ascend-registered
    Custom, given int8 that its Ascend formats lack, still compiles and runs on CPU)."""
    func = kernel_function(op_name, depth, dtype)
    if reg_info is not None:
        return ops.Custom(func, out_shape=_same_as_x, out_dtype=_same_as_x, func_type="hybrid", reg_info=reg_info)
    key = (func, bool(ascend))
    if key not in _CUSTOMS:
        _CUSTOMS[key] = ops.Custom(func, out_shape=_same_as_x, out_dtype=_same_as_x, func_type="hybrid",
                                   reg_info=ascend_reg_info() if ascend else None)
    return _CUSTOMS[key]


# dtype_format rows for target Ascend: AI Core computes float16/float32/int32 (float16 data
# runs in the float32 kernel, see hybrid_scatter); int8/int16/int64/float64 are omitted.
_ASCEND_FORMATS = (
    (DataType.F32_Default, DataType.I32_Default, DataType.F32_Default, DataType.F32_Default),
    (DataType.F32_Default, DataType.I64_Default, DataType.F32_Default, DataType.F32_Default),
    (DataType.I32_Default, DataType.I32_Default, DataType.I32_Default, DataType.I32_Default),
    (DataType.I32_Default, DataType.I64_Default, DataType.I32_Default, DataType.I32_Default),
)


# value dtypes that can run on Ascend under these registrations: those whose compute dtype
# (COMPUTE_DTYPE) has a row above (float16 and uint8 are computed in float32 / int32)
ASCEND_VALUE_DTYPES = tuple(d for d, c in COMPUTE_DTYPE.items() if c in {row[0][0] for row in _ASCEND_FORMATS})
ASCEND_INDEX_DTYPES = tuple(sorted({row[1][0] for row in _ASCEND_FORMATS}))


def ascend_reg_info(formats=_ASCEND_FORMATS):
    """Registration of a hybrid scatter Custom for target Ascend (AKG, AI Core):
    ``hybrid_custom(op, depth, dtype, reg_info=ascend_reg_info())``."""
    reg = CustomRegOp().input(0, "x").input(1, "indices").input(2, "updates").output(0, "y")
    for row in formats:
        reg = reg.dtype_format(*row)
    return reg.target("Ascend").get_op_info()


def _prod(dims):
    out = 1
    for d in dims:
        out *= int(d)
    return out


@constexpr
def _plan(first_axis, x_shape, indices_shape, x_dtype):
    """Static plan of one call (shapes are static): (launch, x view, K, S, depth, zero
    indices, compute dtype, integer kernel). A constexpr, so that GRAPH mode folds it."""
    x_shape, indices_shape = tuple(x_shape), tuple(indices_shape)
    name = _dtype_name(x_dtype)
    compute = COMPUTE_DTYPE[name]
    if first_axis:
        depth, k = 1, _prod(indices_shape)
    else:
        depth, k = indices_shape[-1], _prod(indices_shape[:-1])
    s = _prod(x_shape[depth:])
    launch = k > 0 and s > 0 and _prod(x_shape[:depth]) > 0
    zero_indices = False
    if first_axis:
        view = (x_shape[0], s)
    elif depth == 0:  # every index vector selects the whole of x
        view, depth, zero_indices = (1, s), 1, True
    else:
        view = x_shape[:depth] + (s,)
    return (launch, view, k, s, depth, zero_indices, getattr(mstype, compute), compute != name,
            _is_int(compute))


class HybridScatter(nn.Cell):
    """``HybridScatter(op_name)(x, indices, updates)``: a new Tensor (x's shape and dtype),
    x unchanged, computed by the op's hybrid kernels; usable in PYNATIVE and GRAPH mode
    (the Customs are made here: a graph cannot create primitives). Does the views, the
    float16/uint8 compute dtype and the empty cases; does NOT validate indices or integer
    divisors (the kernel skips / leaves unchanged, see the module docstring)."""

    def __init__(self, op_name, ascend=False):
        super().__init__()
        family, _ = split_op(op_name)
        self.first_axis = family == "Scatter"
        depths = (1,) if self.first_axis else tuple(range(1, MAX_DEPTH + 1))
        # ascend=True: every Custom registered for target Ascend (ascend_reg_info)
        self.float_kernels = tuple(hybrid_custom(op_name, d, "float32", ascend=ascend) for d in depths)
        self.int_kernels = tuple(hybrid_custom(op_name, d, "int32", ascend=ascend) for d in depths)
        self.identity = ops.Identity()

    def construct(self, x, indices, updates):
        launch, view, k, s, depth, zero_indices, compute, convert, integer = _plan(
            self.first_axis, x.shape, indices.shape, x.dtype)
        if not launch:
            return self.identity(x)
        if self.first_axis:
            idx = ops.reshape(indices, (k,))
        elif zero_indices:
            idx = ops.zeros((k, 1), mstype.int32)
        else:
            idx = ops.reshape(indices, (k, depth))
        xv = ops.reshape(x, view)
        uv = ops.reshape(updates, (k, s))
        if convert:
            xv = ops.cast(xv, compute)
            uv = ops.cast(uv, compute)
        if integer:
            out = self.int_kernels[depth - 1](xv, idx, uv)
        else:
            out = self.float_kernels[depth - 1](xv, idx, uv)
        if convert:
            out = ops.cast(out, x.dtype)
        return ops.reshape(out, x.shape)


_CELLS = {}


def hybrid_scatter(op_name, x, indices, updates):
    """PYNATIVE convenience: ``HybridScatter(op_name)(x, indices, updates)`` with the Cell cached."""
    if op_name not in _CELLS:
        _CELLS[op_name] = HybridScatter(op_name)
    return _CELLS[op_name](x, indices, updates)


__all__ = ["REDUCTIONS", "FAMILIES", "COMPUTE_DTYPE", "DSL_REFUSED_DTYPES", "ASCEND_VALUE_DTYPES",
           "ASCEND_INDEX_DTYPES", "generate_source", "kernel_function", "kernel_source", "hybrid_custom",
           "HybridScatter", "hybrid_scatter", "ascend_reg_info", "split_op"]

if __name__ == "__main__":  # print a few generated sources
    for _op in ("ScatterAdd", "ScatterNdMax", "ScatterNdDiv"):
        sys.stdout.write(kernel_source(_op, 2, "int32") + "\n")
