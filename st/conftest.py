"""Fixtures of the system tests: the MindSpore execution mode.

The context is global, so every test that runs MindSpore asks for ``mode``: by default
parametrized over PYNATIVE and GRAPH; a test can narrow it with
``@pytest.mark.parametrize("mode", [...], indirect=True)``. "JIT" runs in PYNATIVE
context (where @mindspore.jit is meant to be used) and the test compiles its own
function. The previous mode is restored afterwards.

A test that runs longer than MS_SCATTER_ST_TIMEOUT seconds (default 300) ends the run
with every thread's Python traceback (faulthandler), instead of hanging.

The session runs in a temporary directory: MindSpore writes rank_0/ (analyze_fail.ir)
into the working directory when a graph fails to compile, which some tests do on purpose.
"""
import faulthandler
import os
import sys

import mindspore as ms
import pytest

MODES = {"PYNATIVE": ms.PYNATIVE_MODE, "GRAPH": ms.GRAPH_MODE, "JIT": ms.PYNATIVE_MODE}

ms.set_context(device_target="CPU")


@pytest.fixture(params=["PYNATIVE", "GRAPH"])
def mode(request):
    name = request.param
    previous = ms.get_context("mode")
    ms.set_context(mode=MODES[name], device_target="CPU")
    try:
        yield name
    finally:
        ms.set_context(mode=previous)


@pytest.fixture(scope="session", autouse=True)
def _work_in_temporary_directory(tmp_path_factory):
    previous = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("mindspore_cwd"))
    try:
        yield
    finally:
        os.chdir(previous)


def _original_stderr(config):
    """A file on the terminal's stderr, past pytest's output capture (else sys.__stderr__)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    err = getattr(getattr(capman, "_global_capturing", None), "err", None)
    fd = getattr(err, "targetfd_save", None)
    return os.fdopen(os.dup(fd), "w") if isinstance(fd, int) else sys.__stderr__


@pytest.fixture(scope="session")
def _watchdog_file(request):
    f = _original_stderr(request.config)
    yield f
    if f is not sys.__stderr__:
        f.close()


@pytest.fixture(autouse=True)
def _hang_watchdog(request, _watchdog_file):
    timeout = float(os.environ.get("MS_SCATTER_ST_TIMEOUT", "300"))
    faulthandler.dump_traceback_later(timeout, exit=True, file=_watchdog_file)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
