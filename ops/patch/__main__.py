"""python -m ms_scatter.patch [--report] SCRIPT [ARGS...]
python -m ms_scatter.patch [--report] -m MODULE [ARGS...]

Runs an unmodified program as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would run it
(same sys.argv, sys.path[0] and ``__main__``), with ``ms_scatter.patch()`` applied the moment
the program imports MindSpore: MindSpore is imported no earlier than the program imports it,
so the variables the program sets before (GLOG_v, ...) reach MindSpore as without the
launcher. ``--report`` prints on exit, to stderr, how many MindSpore entry points were
replaced and how often each of our kernels ran.

Maintainers: ``python -m ms_scatter.patch --write-sites PATH`` regenerates the site table
(ops/_patch_sites.py) from every module of the installed MindSpore.
"""
import atexit
import importlib.abc
import os
import runpy
import sys
import threading

USAGE = "usage: " + __doc__.split("\n\n")[0].replace("\n", "\n       ")


def _parse(argv):
    report = False
    while argv and argv[0].startswith("-") and argv[0] != "-m":
        option = argv.pop(0)
        if option == "--report":
            report = True
        elif option in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        elif option == "--":
            break
        else:
            sys.exit(f"ms_scatter.patch: unknown option {option}\n{USAGE}")
    if not argv:
        sys.exit(USAGE)
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.exit(USAGE)
        return report, "module", argv[1], argv[2:]
    return report, "script", argv[0], argv[1:]


class _AfterMindSpore(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Applies the patch right after the program's ``import mindspore`` has run MindSpore's
    __init__ (the patch then covers later imports itself)."""

    def __init__(self, on_import):
        self._on_import = on_import
        self._busy = threading.local()
        self._loader = None

    def find_spec(self, fullname, path, target=None):
        if fullname != "mindspore" or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = next((s for s in (f.find_spec(fullname, path, target) for f in sys.meta_path
                                     if f is not self and hasattr(f, "find_spec")) if s is not None), None)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        sys.meta_path.remove(self)
        self._on_import()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--write-sites":
        from .. import _load
        _load()  # the package's contents first (it is imported lazily here: ms_scatter._DEFERRED)
        from .._patch import write_sites
        sites, failed = write_sites(argv[1])
        print(f"{len(sites)} sites written to {argv[1]} ({len(failed)} optional modules did not import)")
        return 0
    report, kind, target, args = _parse(argv)

    handles = []

    def apply():
        # (MindSpore may be imported by ms_scatter's own loading, when the program imports
        # ms_scatter first: the patch then waits for the package to be complete)
        import ms_scatter  # pylint: disable=import-outside-toplevel
        ms_scatter._after_load(lambda: handles.append(ms_scatter.patch()))  # pylint: disable=protected-access
        ms_scatter._load()  # pylint: disable=protected-access

    if "mindspore" in sys.modules:  # imported already (a sitecustomize, ...): patch now
        apply()
    else:
        sys.meta_path.insert(0, _AfterMindSpore(apply))
    if report:
        atexit.register(lambda: print(handles[0].report() if handles else
                                      "ms_scatter.patch: the program never imported MindSpore; nothing was patched",
                                      file=sys.stderr, flush=True))
    sys.argv = [target] + args
    if kind == "module":  # sys.path[0] is already the working directory, as for python -m
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:  # python SCRIPT puts the script's directory first, not the working directory
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
