"""How an ms_scatter object looks to MindSpore's graph compiler: as the graph of one method,
in every position a graph can hold it.

MindSpore's parser converts an object that has ``__ms_class__`` and ``__parse_method__``
into the FuncGraph of the method ``__parse_method__`` names (its data converter,
``ConvertMsClass``), wherever the object appears: called as an attribute (``self.add(p, i,
u)``), bound by ``F.partial`` / ``ops.partial``, passed into a ``MultitypeFuncGraph`` through
``HyperMap`` / ``Map`` (MindSpore's optimizers), or chosen by a condition (``op = self.add if
flag > 0 else self.mul``). A FuncGraph is a function there, so every one of those compiles,
and its side effects are seen by MindSpore's auto-monad: the Parameter is written.

The 21 functions carry the same mark, their method being the function itself
(``mark_function``): MindSpore's bytecode capture (``jit(capture_mode="bytecode")``) then puts
them into its graph whole, as it does the primitives, instead of tracing into their Python.

Without ``__parse_method__`` an ``__ms_class__`` object is a class instance (``F.partial``
refuses it: "input[0] should be Function, but got Class") and a primitive without
``__ms_class__`` is its own kernel node, whose result is a copy (O(input_x)). Python calls
(PYNATIVE) keep using the class's ``__call__``.

The method is ``_ms_graph_method``; it calls ``self._graph_function``, which MindSpore
resolves when it parses the method (once per object and compile): an attribute set by
``run_in_graphs_as``, or computed then (``FunctionPath`` chooses the Ascend or the aot
path). No condition is left in the graph: MindSpore 2.10 fails to compile a condition around
a custom-bprop Cell inside ``HyperMap`` ("The pointer[cnode_abs] is null").

The kernels beneath (ops/_kernel.py), which only our own graph code calls, as attributes,
keep the parser's jit_class rule instead: an ``__ms_class__`` object's instance attribute
``__call__`` (as a graph of their own, inside our custom-bprop Cell, they failed PYNATIVE
gradients under jit).
"""

from mindspore.ops import constexpr

GRAPH_METHOD = "_ms_graph_method"


@constexpr(check=False)
def shape_unknown(*shapes):
    """In a graph: whether a shape is not known at compile time (MindSpore passes an
    unknown dimension, or an unknown rank, as None here). Constant-folded by the compiler."""
    return any(s is None or any(d is None or d < 0 for d in s) for s in shapes)


class GraphMethod:
    """Mixin: the method MindSpore parses for the object (three inputs, by position or
    keyword, as the built-ins take them)."""

    def _ms_graph_method(self, input_x, indices, updates):
        return self._graph_function(input_x, indices, updates)


def run_in_graphs_as(obj, function):
    """Make `obj` (a GraphMethod) compile as `function(input_x, indices, updates)` in every
    graph position; Python calls are unchanged."""
    obj._graph_function = function  # pylint: disable=protected-access
    obj.__ms_class__ = True
    obj.__parse_method__ = GRAPH_METHOD


def mark_function(function):
    """Make the plain Python function `function` an object that every graph compiles whole, as
    it does the primitives, for ``jit(capture_mode="bytecode")`` above all: MindSpore's
    bytecode tracer does not trace into a function of another module ("Unsupported function"
    with ``fullgraph=True``), but it puts an ``__ms_class__`` object into its graph, compiled
    as the method ``__parse_method__`` names. That method is the function itself, so the AST
    parser compiles its body wherever it meets it (``jit(function)`` at the top included)."""
    function.__ms_class__ = True
    function.__parse_method__ = GRAPH_METHOD
    setattr(function, GRAPH_METHOD, function)


class FunctionPath(GraphMethod):
    """The path of one functional form: the aot kernels of the device target (`aot`) or the
    Ascend path (an ``_ascend.AscendOp``), chosen at each Python call and at each parse of a
    graph."""

    __ms_class__ = True
    __parse_method__ = GRAPH_METHOD

    def __init__(self, aot, ascend, ascend_selected, check=None, eager=None):
        self._aot = aot
        self._check = check  # of a Python call's inputs, before either path
        self._ascend = ascend
        self._ascend_selected = ascend_selected
        self._eager = eager  # a PYNATIVE call in one step, or None where it needs a path (ScatterKernel.eager_call)

    def __getattr__(self, name):
        # resolved by MindSpore's parser when it parses _ms_graph_method (a property would be
        # parsed as graph code itself)
        if name == "_graph_function":
            return self._ascend if self._ascend_selected() else self._aot
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __call__(self, input_x, indices, updates):
        if self._eager is not None:
            out = self._eager(input_x, indices, updates)
            if out is not None:
                return out
        if self._check is not None:
            self._check(input_x, indices, updates)
        if self._ascend_selected():
            return self._ascend(input_x, indices, updates)
        return self._aot(input_x, indices, updates)


try:  # MindSpore's context of a jit(capture_mode="trace") (mindspore.graph.jit_context, 2.9+)
    from mindspore.graph.jit_context import jit_context as _jit_context
except ImportError:  # pragma: no cover - older MindSpore
    try:
        from mindspore.common.jit_context import jit_context as _jit_context
    except ImportError:
        def _jit_context():
            return None


def trace_context():
    """The context of a ``jit(capture_mode="trace")`` function being recorded, or None.

    Such a function runs once in PYNATIVE while MindSpore records every op launched through
    its executor, then the recorded graph runs (that call, and every later one instead of the
    function). The PYNATIVE direct path launches nothing, so it is not taken then: the
    kernels are recorded (ops/_kernel.py)."""
    context = _jit_context()
    if context is None or context.compiled:
        return None
    return context
