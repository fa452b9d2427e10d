"""ms_scatter: MindSpore's scatter family (21 primitives, 21 functions) on our own kernels.

    import ms_scatter
    out = ms_scatter.ScatterAdd()(param, indices, updates)
    out = ms_scatter.scatter_add(param, indices, updates)
    y = ms_scatter.tensor_scatter_max(x, indices, updates)

The documentation (docs/, built with Sphinx) tells the policies and what each call path costs.
"""
import sys as _sys

from ._version import __version__

# Python sets sys.argv[0] to "-m" while it locates the module of ``python -m``: this package
# is then being imported as the parent of ``python -m ms_scatter.patch`` (or of another of
# its runnable modules). Its contents, MindSpore among them, are then imported at their
# first use, so that the launcher imports MindSpore no earlier than the program it runs
# would (a program may set GLOG_v, or another variable MindSpore reads at import, before
# its own ``import mindspore``). Any other import loads them now.
_DEFERRED = _sys.argv[:1] == ["-m"]
_LOADED = []  # [] before _load(), ["loading"] during, ["loaded"] after
_AFTER_LOAD = []


def _after_load(callback):
    """Run `callback()` once the package's contents are imported (now, if they are)."""
    if _LOADED == ["loaded"]:
        callback()
    else:
        _AFTER_LOAD.append(callback)


def _load():
    """Import the package's contents (once)."""
    if _LOADED:
        return
    _LOADED.append("loading")
    # pylint: disable=import-outside-toplevel
    from . import _vmap  # noqa: F401  (registers the vmap rule of every primitive)
    from . import distributed, infer, patch  # noqa: F401  (patch: a callable module, python -m ms_scatter.patch)
    from ._lib import (ScatterIndexError, ScatterKernelError, ScatterZeroDivisionError, call_counts, cpu_variant,
                       get_num_threads, last_error, set_num_threads, thread_choices)
    from ._patch import patched, unpatch
    from .infer import ScatterTypeError
    from .primitives import FUNCTIONS, PRIMITIVES
    from .segment import SEGMENT_FUNCTIONS, SEGMENT_PRIMITIVES
    from .segment_reduce import CONTRACT_FUNCTIONS, CONTRACT_PRIMITIVES
    from .message_passing import MESSAGE_FUNCTIONS, MESSAGE_PRIMITIVES

    distributed.install(FUNCTIONS)  # Replicated's methods (distributed.py does not import primitives.py)
    names = {name: value for name, value in locals().items()
             if not name.endswith(("FUNCTIONS", "PRIMITIVES"))}
    tables = (PRIMITIVES, FUNCTIONS, SEGMENT_PRIMITIVES, SEGMENT_FUNCTIONS, CONTRACT_PRIMITIVES, CONTRACT_FUNCTIONS,
              MESSAGE_PRIMITIVES, MESSAGE_FUNCTIONS)
    for table in tables:
        names.update(table)
    globals().update(names)
    globals()["__all__"] = [name for table in tables for name in sorted(table)] + [
        "ScatterIndexError", "ScatterTypeError", "ScatterZeroDivisionError", "ScatterKernelError", "last_error",
        "set_num_threads", "get_num_threads", "thread_choices", "cpu_variant", "call_counts", "patch", "unpatch",
        "patched"]
    _LOADED[:] = ["loaded"]
    while _AFTER_LOAD:
        _AFTER_LOAD.pop(0)()


def __getattr__(name):
    if not _LOADED:
        _load()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module 'ms_scatter' has no attribute '{name}'")


if not _DEFERRED:
    _load()
