"""What differs between the MindSpore releases ms_scatter supports (2.7 to 2.10), chosen by
what the running MindSpore has (a module that imports), never by its version string.

MindSpore 2.9 moved its graph front end to ``mindspore.graph``; 2.7 and 2.8 have it under
``mindspore.common.api`` and ``mindspore._extends.parse`` (2.10 keeps those as deprecated
aliases, so the new location is tried first).
"""
import importlib.util

try:  # 2.9 and later
    from mindspore.graph.api import _pynative_executor
except ImportError:  # 2.7, 2.8
    from mindspore.common.api import _pynative_executor


def _first_module(*names):
    """The first of these module names that the running MindSpore has (not imported)."""
    for name in names:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ImportError:  # a parent package that does not exist in this release
            continue
    raise ImportError(f"ms_scatter: this MindSpore has none of {', '.join(names)}")


# The functions MindSpore's graph compiler runs for Tensor methods (x.scatter_max in a graph).
STANDARD_METHOD = _first_module("mindspore.graph._parse.standard_method", "mindspore._extends.parse.standard_method")

__all__ = ["_pynative_executor", "STANDARD_METHOD"]
