"""``ms_scatter.patch``: call it to run MindSpore's scatter entry points on ms_scatter;
``python -m ms_scatter.patch SCRIPT|-m MODULE [ARGS...]`` runs a program that way::

    import ms_scatter
    ms_scatter.patch()            # from here on, MindSpore's scatter ops are ms_scatter's
    ms_scatter.unpatch()          # everything back as it was
    with ms_scatter.patched():    # for a block only
        ...

This module is itself the callable (``ms_scatter.patch(...)`` calls ``patch``), so that
the name is both the function and the runnable module. See ``ms_scatter._patch``.
"""
import sys
import types

_NAMES = ("Handle", "current", "discover", "is_patched", "patch", "patched", "unpatch")


def _patch_module():
    from .. import _load, _patch  # pylint: disable=import-outside-toplevel  (imports MindSpore)
    _load()
    return _patch


class _CallableModule(types.ModuleType):
    def __call__(self):
        return _patch_module().patch()

    def __getattr__(self, name):
        # ms_scatter._patch (and MindSpore with it) is imported at first use: see ms_scatter._DEFERRED
        if name in _NAMES:
            return getattr(_patch_module(), name)
        raise AttributeError(f"module 'ms_scatter.patch' has no attribute '{name}'")


sys.modules[__name__].__class__ = _CallableModule
