"""The type stub (ops/__init__.pyi, shipped with py.typed): the 42 operators are made at import
from one table, so type checkers and IDEs see their names and signatures only through it."""
import os
import subprocess
import sys
import types

import pytest

import ms_scatter
from ms_scatter import _stub

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(REPO, "ops", "__init__.pyi")


def test_committed_stub_is_generated():
    with open(COMMITTED, encoding="utf-8") as f:
        committed = f.read()
    assert committed == _stub.stub_text(), "ops/__init__.pyi is stale: run python -m ms_scatter._stub ops/__init__.pyi"


def test_stub_names_every_public_name():
    text = _stub.stub_text()
    for name in ms_scatter.__all__:
        assert f"class {name}(" in text or f"def {name}(" in text, name


def test_public_names_are_the_documented_ones():
    """dir(ms_scatter) shows __all__ and the package's modules, nothing of its wiring."""
    public = {name for name in dir(ms_scatter) if not name.startswith("_")}
    modules = {name for name in public if isinstance(getattr(ms_scatter, name), types.ModuleType)}
    assert public - (modules - set(ms_scatter.__all__)) == set(ms_scatter.__all__)
    assert modules <= {"distributed", "infer", "kernels", "patch", "primitives", "reference", "seed_examples",
                       "segment", "segment_reduce", "message_passing", "testing"}, modules


def test_installed_package_ships_the_stub():
    package = os.path.dirname(ms_scatter.__file__)
    assert os.path.isfile(os.path.join(package, "py.typed"))
    assert os.path.isfile(os.path.join(package, "__init__.pyi"))


USER_SCRIPT = '''
import ms_scatter
from mindspore import Tensor

def step(p: Tensor, i: Tensor, u: Tensor) -> Tensor:
    ms_scatter.ScatterAdd()(p, i, u)
    return ms_scatter.tensor_scatter_max(p, i, u)

reveal_type(ms_scatter.tensor_scatter_max)
reveal_type(ms_scatter.ScatterAdd)
ms_scatter.ScatterAdd(use_locking="yes")
ms_scatter.tensor_scatter_max(Tensor(1), Tensor(1))
'''


def test_mypy_sees_the_operators(tmp_path):
    pytest.importorskip("mypy")
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                           "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(script)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    out = proc.stdout
    # the function's signature (Tensor is Any: MindSpore ships no type information)
    assert 'Revealed type is "def (input_x: Any, indices: Any, updates: Any) -> Any"' in out, out
    assert 'Revealed type is "def (use_locking: bool =) -> ms_scatter.ScatterAdd"' in out or \
        'Revealed type is "def (use_locking: builtins.bool =) -> ms_scatter.ScatterAdd"' in out, out
    assert 'Argument "use_locking" to "ScatterAdd" has incompatible type "str"' in out, out
    assert 'Missing positional argument "updates" in call to "tensor_scatter_max"' in out, out
    assert 'has no attribute' not in out, out
