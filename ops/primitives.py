"""The 21 primitives and 21 functions, generated from one table (infer.FAMILIES x
infer.REDUCTIONS) over three base classes. No primitive body is written per operator.

How a call runs, and what it costs (x = input_x, u = updates):

* ``scatter_add(x, i, u)`` and the other in-place functions, in any mode: the kernel
  writes the Parameter's own buffer and returns a 1-element token; the function returns
  ``Depend(x, token)``, i.e. the updated Parameter itself (in PYNATIVE a Tensor sharing
  its memory). Cost O(u).
* ``ScatterAdd()(x, i, u)``, in any mode: the same path. In PYNATIVE through the class's
  ``__call__``; in a graph (GRAPH mode, ``jit``) the primitive compiles as its functional
  form wherever the graph holds it: called, bound by ``F.partial``, passed through
  ``HyperMap`` into a ``MultitypeFuncGraph``, chosen by a condition (ops/_graph.py). Cost
  O(u). float64 and bfloat16 in a graph: the ``<Op>_return`` entry, in place plus a copy
  of x as the result, O(x) + O(u) (MindSpore cannot read such a Parameter as a value:
  ops/_grad.py).
* ``TensorScatterMax()(x, i, u)`` / ``tensor_scatter_max``: out of place, O(x) + O(u).

The kernels, their graph nodes (static and dynamic shapes) and the call paths beneath are
ops/_kernel.py.

On the device target Ascend every primitive and function runs on ms_scatter's Ascend C
kernels instead (a CANN custom-op package, ops.Custom("MsScatterNd<R>", func_type="aot")):
ops/_ascend.py (out of place, then ops.assign for the in-place families: O(x) + O(u)).
"""
import functools

from . import _ascend, _docs, _grad, _kernel, distributed, infer
from ._graph import FunctionPath, mark_function, run_in_graphs_as
from ._kernel import IN_PLACE_SIGNATURE, ScatterKernel, bind_arguments, check_eager_inputs, in_place_updates


class _InPlaceKernel(ScatterKernel):
    """In place on a Parameter. Output a 1-element token (the O(updates) path) or, with
    ``copies``, a copy of the updated input_x (the ``<Op>_return`` entry): the graph result of
    float64 and bfloat16 calls, which MindSpore cannot read from the Parameter (ops/_grad.py)."""
    __mindspore_signature__ = IN_PLACE_SIGNATURE

    def __init__(self, op_name, family, graph="dispatch", copies=False):
        self._setup(op_name, family, f"{op_name}_return" if copies else f"{op_name}_token", token=not copies,
                    side_effect=True, graph=graph)

    @property
    def copies(self):
        return not self._token  # kept by the graph nodes made of this kernel

    def __deepcopy__(self, memo):
        return type(self)(self.op_name, self.family, graph=self._graph, copies=self.copies)


class _InPlaceScatter(ScatterKernel):
    """Base of Scatter* and ScatterNd*: in place on a Parameter, returns the updated input_x."""
    __mindspore_signature__ = IN_PLACE_SIGNATURE
    _op = _family = _reduction = None
    _function = None  # the functional form's aot path (Python and graphs), set when the class is made
    _token_kernel = None  # its in-place kernel (the PYNATIVE fast path: ScatterKernel.eager_call)

    def __init__(self, use_locking=False):
        infer.check_use_locking(self._op, use_locking)
        self._setup(self._op, self._family, f"{self._op}_return", side_effect=True)
        self.add_prim_attr('use_locking', use_locking)
        self.use_locking = use_locking
        if self._hybrid is None:
            # In a graph a primitive would be its own kernel node; this one compiles as its
            # functional form in every graph position (ops/_graph.py): O(updates) instead of
            # a copy of input_x, with the exact gradients. (The Ascend path: _ascend.attach.)
            run_in_graphs_as(self, type(self)._function)

    def __call__(self, *args, **kwargs):
        if self._hybrid is None and not kwargs and len(args) == 3:
            out = self._token_kernel.eager_call(*args)  # the common CPU call, its signature seen before
            if out is not None:
                return out
        args = bind_arguments(self._op, args, kwargs)
        check_eager_inputs(self._op, *args)
        if self._hybrid is not None:
            return self._hybrid(*args)
        # PYNATIVE: the O(updates) path; the result is the updated Parameter itself.
        return type(self)._function(*args)

    def __deepcopy__(self, memo):
        return type(self)(use_locking=self.use_locking)

    def shard(self, in_strategy=None, out_strategy=None):
        """Semi-auto parallel: a row split of input_x (ms_scatter.distributed.shard_primitive)."""
        return distributed.shard_primitive(self, in_strategy, out_strategy)


class _TensorScatter(ScatterKernel):
    """Base of TensorScatter*: out of place, input_x unchanged."""
    _op = _family = _reduction = None
    _function = None  # the functional form's aot path in a graph, set when the class is made

    def __init__(self):
        self._init_kernel()
        if self._hybrid is None and type(self)._function is not None:
            # A user's instance compiles as the functional form in a graph too (as the
            # in-place primitives do), with keyword arguments bound as Python binds them.
            run_in_graphs_as(self, type(self)._function)

    def _init_kernel(self, graph=None):
        self._setup(self._op, self._family, self._op, bprop=_grad.out_of_place_bprop(self._reduction, False),
                    graph=graph)

    @classmethod
    def _bare(cls):
        """The kernel the functional form launches (in a graph: one of its two nodes)."""
        kernel = cls.__new__(cls)
        kernel._init_kernel("dispatch")  # pylint: disable=protected-access
        return kernel

    shard = _InPlaceScatter.shard

    def __deepcopy__(self, memo):
        return type(self)() if self._graph is None else self._graph_node(self._graph)


def _make(record):
    op, family, reduction = record.name, record.family, record.reduction
    doc = _docs.primitive_doc(op)
    attrs = {"_op": op, "_family": family, "_reduction": reduction, "__doc__": doc, "__module__": "ms_scatter"}
    if not record.in_place:
        cls = type(op, (_TensorScatter,), attrs)
        kernel = cls._bare()
        aot = kernel
    else:
        cls = type(op, (_InPlaceScatter,), attrs)
        kernel = _InPlaceKernel(op, family)
        aot = _grad.in_place_function(kernel, _kernel.result, _kernel.result_view, reduction, record.depth_one,
                                      in_place_updates, copying=_InPlaceKernel(op, family, copies=True))
        cls._token_kernel = kernel
    cls._function = staticmethod(aot)  # what an instance compiles as in a graph (ops/_graph.py)
    # the function's path, chosen per Python call and per compile: ops/_graph.py
    path = FunctionPath(aot, _ascend.AscendOp(op, kernel.convert, kernel.get_bprop()), _ascend.use_ascend_path,
                        functools.partial(check_eager_inputs, op) if record.in_place else None,
                        eager=kernel.eager_call if kernel._direct is not None else None)

    def function(input_x, indices, updates):
        return path(input_x, indices, updates)
    function.__name__ = function.__qualname__ = record.function
    function.__doc__ = _docs.function_doc(op)
    mark_function(function)
    return cls, function


PRIMITIVES = {}
FUNCTIONS = {}
for _record in infer.OPERATORS.values():
    _cls, _fn = _make(_record)
    PRIMITIVES[_cls.__name__] = _cls
    FUNCTIONS[_fn.__name__] = _fn
