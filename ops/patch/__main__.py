"""python -m ms_scatter.patch [--report] SCRIPT [ARGS...]
python -m ms_scatter.patch [--report] -m MODULE [ARGS...]

Runs an unmodified program with ``ms_scatter.patch()`` applied before its first line, as
``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would run it (same sys.argv, sys.path[0]
and ``__main__``). ``--report`` prints on exit, to stderr, how many MindSpore entry
points were replaced and how often each of our kernels ran.

Maintainers: ``python -m ms_scatter.patch --write-sites PATH`` regenerates the site table
(ops/_patch_sites.py) from every module of the installed MindSpore.
"""
import atexit
import os
import runpy
import sys

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


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--write-sites":
        from .._patch import write_sites
        sites, failed = write_sites(argv[1])
        print(f"{len(sites)} sites written to {argv[1]} ({len(failed)} optional modules did not import)")
        return 0
    report, kind, target, args = _parse(argv)

    from .._patch import patch
    handle = patch()
    if report:
        atexit.register(lambda: print(handle.report(), file=sys.stderr, flush=True))
    sys.argv = [target] + args
    if kind == "module":  # sys.path[0] is already the working directory, as for python -m
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:  # python SCRIPT puts the script's directory first, not the working directory
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
