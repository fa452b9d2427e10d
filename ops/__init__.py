"""ms_scatter: MindSpore's scatter family (21 primitives, 21 functions) on our own kernels.

    import ms_scatter
    out = ms_scatter.ScatterAdd()(param, indices, updates)
    out = ms_scatter.scatter_add(param, indices, updates)
    y = ms_scatter.tensor_scatter_max(x, indices, updates)

See README.md for the policies and what each call path costs.
"""
from . import infer
from ._lib import (ScatterIndexError, ScatterKernelError, ScatterZeroDivisionError, last_error,
                   get_num_threads, set_num_threads, thread_choices, cpu_variant, CPU_LIBRARY, GPU_LIBRARY)
from .primitives import FUNCTIONS, PRIMITIVES
from . import _vmap  # noqa: F401  (registers the vmap rule of every primitive)
from . import patch  # noqa: F401  (a callable module: ms_scatter.patch() and python -m ms_scatter.patch)
from ._lib import call_counts
from ._patch import patched, unpatch
from . import distributed  # noqa: F401  (scale-out: replicated and row-sharded tables, ms_scatter.distributed)

__version__ = "0.1.0"

globals().update(PRIMITIVES)
globals().update(FUNCTIONS)

__all__ = sorted(PRIMITIVES) + sorted(FUNCTIONS) + [
    "ScatterIndexError", "ScatterZeroDivisionError", "ScatterKernelError", "last_error",
    "set_num_threads", "get_num_threads", "thread_choices", "cpu_variant", "call_counts", "patch", "unpatch", "patched"]
