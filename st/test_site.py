"""The documentation site (docs/): it builds with warnings as errors, every public name has its
place in the API reference (each of the 42 callables a page of its own, generated from the one
table), the guide's and the README's runnable examples print what the pages show, and the
committed figures are what their sources give.

Runnable examples are the ```python blocks right after a line ``<!-- runnable -->``; the
```text block after ``<!-- output -->`` that follows one is its exact standard output. Each
runs as a file in a fresh interpreter (MindSpore compiles GRAPH_MODE graphs from source files).
"""
import glob
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import ms_scatter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO, "docs")
CALLABLES = sorted(ms_scatter.primitives.PRIMITIVES) + sorted(ms_scatter.primitives.FUNCTIONS)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ the build

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once, as the documented command builds it, warnings as errors."""
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_parser") is None:
        if os.environ.get("CI"):
            pytest.fail("sphinx and myst-parser are missing: the test extra (pip install \".[test]\") installs them")
        pytest.skip("the docs extra is not installed: pip install \".[docs]\" (or \".[test]\")")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
                           "-d", str(out / "doctrees"), DOCS, str(out / "html")],
                          capture_output=True, text=True, timeout=600, cwd=str(out))
    return proc, out / "html"


def test_site_builds_without_warnings(site):
    proc, html_dir = site
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert "WARNING" not in log and "ERROR" not in log, log[-6000:]
    assert (html_dir / "index.html").exists()


def test_every_callable_has_its_page(site):
    """One page per primitive and function, made from infer's table, with MindSpore's sections
    rendered as headings and the docstring's examples with their printed outputs."""
    _, html_dir = site
    api = _load("ms_scatter_api", os.path.join(DOCS, "_ext", "ms_scatter_api.py"))
    assert sorted(api.callables()) == CALLABLES and len(CALLABLES) == 42
    pages = sorted(os.path.basename(p)[:-5] for p in glob.glob(str(html_dir / "api" / "ops" / "*.html")))
    assert pages == sorted(CALLABLES + ["index"])
    for name in CALLABLES:
        text = (html_dir / "api" / "ops" / f"{name}.html").read_text()
        assert f'id="ms_scatter.{name}"' in text, name  # autodoc's entry for the object itself
        headings = ["Inputs", "Outputs"] if name[0].isupper() else ["Parameters", "Returns"]
        for heading in headings + ["Raises", "Supported Platforms", "Examples"]:
            assert re.search(rf">{heading}(:)?<", text), (name, heading)
        assert "admonition note" in text, name
        first_printed = getattr(ms_scatter, name).__doc__.split(">>> print(output)\n", 1)[1].split("\n")[0].strip()
        assert first_printed in html.unescape(re.sub(r"<[^>]+>", "", text)), (name, first_printed)
    index = (html_dir / "api" / "ops" / "index.html").read_text()
    for name in CALLABLES:
        assert f'href="{name}.html#ms_scatter.{name}"' in index, name  # the family table links every page


def test_formulas_render_offline(site):
    """MathJax is part of the site (no CDN): an operator page with a formula loads it locally."""
    _, html_dir = site
    text = (html_dir / "api" / "ops" / "ScatterAdd.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', text, re.I)
    assert scripts and all(not s.startswith(("http:", "https:", "//")) for s in scripts), scripts
    assert all((html_dir / "api" / "ops" / s.split("?")[0]).resolve().is_file() for s in scripts), scripts
    assert "\\(" in text or "math" in text


def test_every_public_name_is_documented(site):
    """Each name of ms_scatter.__all__, and ms_scatter.distributed's classes and row-shard functions, has an
    entry."""
    _, html_dir = site
    ids = set()
    for page in glob.glob(str(html_dir / "**" / "*.html"), recursive=True):
        ids.update(re.findall(r'<dt class="sig sig-object py" id="([\w.]+)"', open(page).read()))
    expected = {f"ms_scatter.{name}" for name in ms_scatter.__all__}
    expected |= {"ms_scatter.__version__", "ms_scatter.distributed.Replicated", "ms_scatter.distributed.ShardedTable"}
    expected |= {f"ms_scatter.distributed.shard_{name}" for name in ms_scatter.primitives.FUNCTIONS}  # the 21 row-shard kernels
    assert expected - ids == set()


def test_a_broken_reference_fails_the_build(tmp_path):
    """-W really turns a warning into a failure: the site with one link to a missing page."""
    if importlib.util.find_spec("sphinx") is None:
        pytest.skip("the docs extra is not installed")
    repo = tmp_path / "repo"  # what the site reads: docs/, the changelog, the benchmark chart
    shutil.copytree(DOCS, repo / "docs", ignore=shutil.ignore_patterns("_build", "ops"))
    shutil.copy(os.path.join(REPO, "CHANGELOG.md"), repo)
    (repo / "st").mkdir()
    shutil.copy(os.path.join(REPO, "st", "bench_chart.png"), repo / "st")
    faq = repo / "docs" / "guide" / "faq.md"
    faq.write_text(faq.read_text() + "\nSee [a page that is not there](nowhere.md).\n")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(repo / "docs"), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "nowhere" in log, log[-3000:]
    assert log.count("WARNING") == 1, log[-3000:]  # the broken link is the only warning


# ------------------------------------------------------------------ runnable examples

def runnable_blocks(path):
    """[(name, code, expected stdout or None)] of a Markdown page, in page order."""
    text = open(path, encoding="utf-8").read()
    rel = os.path.relpath(path, REPO)
    blocks = []
    for n, marker in enumerate(re.finditer(r"^<!-- runnable -->\n", text, re.M)):
        fence = FENCE.match(text, marker.end())
        assert fence and fence.group(1) == "python", f"{rel}: <!-- runnable --> must stand right above a ```python block"
        expected = None
        rest = text[fence.end():]
        nxt = re.search(r"^(<!-- runnable -->|<!-- output -->)\n", rest, re.M)
        if nxt and nxt.group(1) == "<!-- output -->":
            between = rest[:nxt.start()]
            assert "```" not in between, f"{rel}: an output block belongs to the block right above it"
            out = FENCE.match(rest, nxt.end())
            assert out and out.group(1) == "text", f"{rel}: <!-- output --> must stand right above a ```text block"
            expected = out.group(2)
        blocks.append((f"{rel}#{n + 1}", fence.group(2), expected))
    assert text.count("<!-- output -->") <= len(blocks), f"{rel}: an output block without its runnable block"
    return blocks


PAGES = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))
BLOCKS = [b for page in PAGES for b in runnable_blocks(page)]


def test_the_pages_have_runnable_examples():
    names = [name for name, _, _ in BLOCKS]
    for page in ("README.md", "docs/guide/modes.md", "docs/guide/faq.md", "docs/guide/dropin.md",
                 "docs/guide/gradients.md", "docs/guide/vmap.md"):
        assert any(name.startswith(page + "#") for name in names), page
    assert all(expected is not None for _, _, expected in BLOCKS)


@pytest.mark.parametrize("name,code,expected", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_example_prints_what_the_page_shows(name, code, expected, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, MS_SCATTER_QUIET="1")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, f"{name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    if expected is not None:
        assert proc.stdout == expected, f"{name}: printed\n{proc.stdout}\nthe page shows\n{expected}"


def test_an_example_that_prints_otherwise_is_caught(tmp_path):
    """The extractor pairs a block with its output: a page whose output is altered fails the check."""
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable -->\n```python\nprint(1 + 1)\n```\n\ntext\n\n<!-- output -->\n```text\n3\n```\n")
    ((_, code, expected),) = runnable_blocks(str(page))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "2\n" and expected == "3\n" and proc.stdout != expected


# ------------------------------------------------------------------ figures

def test_thread_rows_figure_is_what_its_script_draws():
    figures = _load("make_figures", os.path.join(DOCS, "figures", "make_figures.py"))
    committed = open(os.path.join(DOCS, "figures", "thread-rows.svg"), encoding="utf-8").read()
    assert committed == figures.thread_rows_svg(), "run python docs/figures/make_figures.py"
    owner = figures.owners(list(figures.INDICES), figures.ROWS, figures.THREADS)
    assert owner == sorted(owner) and set(owner) == set(range(figures.THREADS))  # contiguous runs, every thread


def test_call_paths_figure_is_rendered_from_its_source():
    """Every label line of call-paths.dot is a text of call-paths.svg (graphviz's rendering)."""
    dot = open(os.path.join(DOCS, "figures", "call-paths.dot"), encoding="utf-8").read()
    svg = open(os.path.join(DOCS, "figures", "call-paths.svg"), encoding="utf-8").read()
    texts = {" ".join(html.unescape(t).split()) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)}
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
    lines = {" ".join(line.replace('\\"', '"').split()) for label in labels for line in label.split("\\n")}
    lines.discard("")
    assert len(lines) > 30 and lines - texts == set(), "run python docs/figures/make_figures.py"


# ------------------------------------------------------------------ release identity

def test_version_has_one_source():
    """ms_scatter.__version__ is ops/_version.py's, and the installed metadata says the same."""
    from importlib import metadata
    text = open(os.path.join(REPO, "ops", "_version.py"), encoding="utf-8").read()
    (source,) = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    assert ms_scatter.__version__ == source == metadata.version("ms-scatter")
    setup = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    assert "version=version()" in setup and source not in setup  # no second copy of the number
    changelog = open(os.path.join(REPO, "CHANGELOG.md"), encoding="utf-8").read()
    assert re.search(rf"^## {re.escape(source)}\b", changelog, re.M), "CHANGELOG.md has no entry for " + source


def test_license_is_apache_2():
    from importlib import metadata
    text = open(os.path.join(REPO, "LICENSE"), encoding="utf-8").read()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"] and "END OF TERMS AND CONDITIONS" in text
    meta = metadata.metadata("ms-scatter")
    assert (meta.get("License-Expression") or meta.get("License")) == "Apache-2.0"
    classifiers = meta.get_all("Classifier")
    for c in ("License :: OSI Approved :: Apache Software License", "Operating System :: POSIX :: Linux",
              "Programming Language :: Python :: 3.9", "Programming Language :: Python :: 3.11"):
        assert c in classifiers, c


def test_readme_links_point_at_files():
    """The front page's links into the docs (read as Markdown where the site is not built) exist."""
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)#\s]+(?:#[^)\s]*)?)\)", text) if "://" not in t]
    assert len(targets) >= 15
    for target in targets:
        assert os.path.exists(os.path.join(REPO, target)), target
