"""Sphinx extension: the API pages of the 42 callables (and the list of the 21 row-shard functions of
ms_scatter.distributed), generated at each build from the one table (ms_scatter.infer.FAMILIES x
ms_scatter.infer.REDUCTIONS) into docs/api/ops/.

Each page renders the callable's generated docstring (ops/_docs.py) with autodoc; the index
page is the family's table, as MindSpore's operator list is: primitive, function, the
one-line summary, in place or not, supported platforms. Nothing here is written per operator.
"""
import os

from ms_scatter import infer

SHARD_INCLUDE = "shard_functions.inc"  # included by api/distributed.md (not a page: no .rst suffix)
OUT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api", "ops")

# What each family indexes and whether it writes its input (the headings of the table page).
FAMILY_TITLES = {
    "Scatter": "Scatter*: in place on a Parameter, indices index the first axis",
    "ScatterNd": "ScatterNd*: in place on a Parameter, N-d index vectors",
    "TensorScatter": "TensorScatter*: out of place, N-d index vectors",
}


def operators():
    """[(family, reduction, primitive name, function name)] in the table's order."""
    return [(f, r, f + r, infer.function_name(f + r)) for f in infer.FAMILIES for r in infer.REDUCTIONS]


def callables():
    """The 42 public names that have a page of their own."""
    return [name for _, _, op, fn in operators() for name in (op, fn)]


def _summary(name):
    import ms_scatter
    return (getattr(ms_scatter, name).__doc__ or "").strip().split("\n")[0].strip()


def _platforms(name):
    """The platforms line of the docstring's Supported Platforms section (``CPU`` ``GPU`` ...)."""
    import ms_scatter
    doc = getattr(ms_scatter, name).__doc__ or ""
    after = doc.split("Supported Platforms:", 1)[1].strip().split("\n")[0].strip()
    return after


def _title(text, char="="):
    return [text, char * len(text), ""]


def callable_page(name, kind, partner):
    lines = [f".. _api-{name}:", ""] + _title(f"ms_scatter.{name}")
    lines += [".. currentmodule:: ms_scatter", "",
              f".. auto{kind}:: {name}", ""]
    role = "func" if kind == "class" else "class"
    lines += [".. rubric:: See also", "",
              f"- :{role}:`{partner}`, the {'functional form' if kind == 'class' else 'primitive'};",
              "- :doc:`the family's table <index>`; :doc:`/guide/policies`; :doc:`/guide/gradients`.", ""]
    return "\n".join(lines)


def index_page():
    lines = _title("Operators")
    lines += ["The 21 primitives and their 21 functional forms, generated from one table of families "
              "and reductions (``ms_scatter.infer.FAMILIES`` x ``ms_scatter.infer.REDUCTIONS``); "
              "each page is the callable's docstring, in MindSpore's layout. A primitive is "
              "constructed, then called: ``ms_scatter.ScatterAdd()(input_x, indices, updates)``; "
              "a function is called with the same inputs: ``ms_scatter.scatter_add(input_x, indices, "
              "updates)``.", ""]
    for family in infer.FAMILIES:
        lines += _title(FAMILY_TITLES[family], "-")
        lines += [".. list-table::", "   :header-rows: 1", "   :widths: 18 20 50 12", "",
                  "   * - Primitive", "     - Function", "     - Description", "     - Supported Platforms"]
        for fam, _, op, fn in operators():
            if fam != family:
                continue
            lines += [f"   * - :class:`~ms_scatter.{op}`", f"     - :func:`~ms_scatter.{fn}`",
                      f"     - {_summary(op)}", f"     - {_platforms(op)}"]
        lines.append("")
    lines += [".. toctree::", "   :hidden:", ""] + [f"   {name}" for name in callables()] + [""]
    return "\n".join(lines)


def shard_functions_include():
    """The 21 row-shard functions of ms_scatter.distributed (one per operator), for api/distributed.md."""
    lines = [".. currentmodule:: ms_scatter.distributed", ""]
    for _, _, op, fn in operators():
        lines += [f".. autofunction:: shard_{fn}", ""]
    return "\n".join(lines)


def _write(path, text):
    """Writes only what changed, so that an unchanged page is not rebuilt."""
    if os.path.exists(path) and open(path, encoding="utf-8").read() == text:
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def generate(out_dir=OUT_DIR):
    os.makedirs(out_dir, exist_ok=True)
    pages = {"index": index_page()}
    for _, _, op, fn in operators():
        pages[op] = callable_page(op, "class", fn)
        pages[fn] = callable_page(fn, "function", op)
    for name, text in pages.items():
        _write(os.path.join(out_dir, name + ".rst"), text)
    _write(os.path.join(out_dir, SHARD_INCLUDE), shard_functions_include())
    for stale in set(os.listdir(out_dir)) - {name + ".rst" for name in pages} - {SHARD_INCLUDE}:
        os.remove(os.path.join(out_dir, stale))  # a page of a callable no longer in the table
    return sorted(pages)


def _on_builder_inited(app):
    generate()


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
