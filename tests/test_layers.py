"""The package's layers point one way (read from the sources' import statements).

ops/primitives.py (the public objects) is built on the kernel layer, the gradients, the
graph rule and the backends; none of those, nor the extensions (row shards and scale-out),
import it back. ms_scatter's __init__ is the one place that wires them together. What an operator is comes
from its record (infer.OPERATORS), never from its name or a test of its family's name.
"""
import ast
import os
import pathlib
import re

import pytest

OPS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops")

LOWER = ("_kernel.py", "_grad.py", "_graph.py", "_eager.py", "_lib.py", "_ascend.py", "distributed.py",
         "testing.py", "_docs.py")


def _imports(path, top_level=False):
    """The ms_scatter modules a source file imports (relative imports, by module name);
    top_level: only those its module body imports (not those inside its functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = set()
    for node in (tree.body if top_level else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", LOWER)
def test_lower_layers_never_import_the_primitives(module):
    assert "primitives" not in _imports(os.path.join(OPS, module)), module


def _relative_modules(tree):
    """The names a module binds to ms_scatter modules by ``from . import x`` / ``from .x import y``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _hooks(path):
    """What would let a module fill another one's names at run time: a `global` statement in a
    lower layer, a ``register_*`` / ``install*`` entry point, a call of one on another
    ms_scatter module (``_grad.install(...)``)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []
    lower = os.path.basename(path) in LOWER
    ours = _relative_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and lower:
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, ast.FunctionDef) and node.name.startswith(("register_", "install")) \
                and node.col_offset == 0:
            found.append(f"line {node.lineno}: def {node.name}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ours \
                and node.func.attr.startswith(("register_", "install")):
            found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}(...)")
    return found


# ms_scatter's __init__ is the one place that wires layers together: distributed.py's Replicated
# gets the 21 functions there (primitives.py imports distributed.py for primitive.shard()).
_WIRING = {"distributed.py": ["def install"], "__init__.py": ["distributed.install(...)"]}


@pytest.mark.parametrize("module", sorted(n for n in os.listdir(OPS) if n.endswith(".py")))
def test_no_module_fills_another_at_run_time(module):
    """Dependencies point one way: a module gets what it needs by importing a lower one, never
    through a callback or a global that a higher one sets at import."""
    allowed = _WIRING.get(module, [])
    bad = [h for h in _hooks(os.path.join(OPS, module)) if not any(a in h for a in allowed)]
    assert not bad, f"{module}: {bad}"


def test_the_hook_check_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "_grad.py"
    sample.write_text("from . import primitives\n_X = None\n\ndef install(table):\n    global _X\n"
                      "    _X = table\n\nprimitives.register_rule(install)\n")
    assert len(_hooks(str(sample))) == 3


def test_production_code_never_imports_test_helpers():
    """ms_scatter.testing (the oracle, the direct kernel caller) is for tests and benchmarks."""
    for name in sorted(os.listdir(OPS)):
        if name.endswith(".py") and name != "testing.py":
            assert "testing" not in _imports(os.path.join(OPS, name)), name


def test_the_rule_sees_a_real_import():
    """The reader finds the imports that exist (so an empty set above means something)."""
    assert {"_kernel", "_grad", "_graph", "infer"} <= _imports(os.path.join(OPS, "primitives.py"))
    assert "_kernel" in _imports(os.path.join(OPS, "distributed.py"))


def test_test_helpers_import_no_mindspore():
    """ms_scatter.testing runs without MindSpore (the sanitizer driver loads it so): it and
    what it imports from the package import numpy and infer only."""
    allowed = {"infer", "reference", "_memory"}
    assert _imports(os.path.join(OPS, "testing.py"), top_level=True) <= allowed
    for name in ("reference.py", "_memory.py", "testing.py"):
        source = open(os.path.join(OPS, name), encoding="utf-8").read()
        tops = [node for node in ast.parse(source).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        modules = {alias.name.split(".")[0] for node in tops if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module.split(".")[0] for node in tops if isinstance(node, ast.ImportFrom) and node.module
                    and node.level == 0}
        assert "mindspore" not in modules, name


ROOT = pathlib.Path(OPS).parent
SOURCES = sorted((ROOT / "ops").glob("*.py")) + sorted((ROOT / "infer").glob("*.py"))

# A test of a family's name, or a name taken apart to find the family or reduction.
_FORBIDDEN = [
    (re.compile(r"(?<!for )\bfamily\s*(==|!=|\bin\b)"), "a test of a family name"),
    (re.compile(r"""(==|!=)\s*["'](Scatter|ScatterNd|TensorScatter)["']"""), "a comparison with a family name"),
    (re.compile(r"""startswith\(\s*["'](Scatter|Tensor|scatter_|tensor_)"""),
     "a name taken apart"),
    (re.compile(r"\[len\([^)]*family[^)]*\):\]"), "a name taken apart"),
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_operators_are_asked_not_parsed(path):
    bad = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("#", 1)[0]
        for pattern, what in _FORBIDDEN:
            if pattern.search(code):
                bad.append(f"{path.name}:{number}: {what}: {line.strip()}")
    assert not bad, "ask infer.operator(op) instead:\n" + "\n".join(bad)


def test_the_check_finds_what_it_looks_for():
    samples = ['if family == "Scatter":', 'x = op[len(prim.family):]', 'depth_one = fam != "TensorScatter"',
               'if name.startswith("tensor_"):']
    for sample in samples:
        assert any(p.search(sample) for p, _ in _FORBIDDEN), sample
