"""Sphinx configuration of the ms-scatter documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` with ms_scatter installed
(``pip install ".[docs]"``): the API pages are rendered from the installed package's
docstrings, generated per callable by the extension in _ext/ms_scatter_api.py.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

import ms_scatter  # noqa: E402  (the installed package: its version and docstrings)

project = "ms-scatter"
author = "the ms-scatter authors"
copyright = "the ms-scatter authors, Apache License 2.0"
release = ms_scatter.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",  # [source] links to the module that defines each documented object
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax copied into the site: formulas render from a local copy, offline
    "myst_parser",
    "ms_scatter_api",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = []

# Markdown: anchors for "page.md#section" links, $...$ math, definition lists.
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "deflist", "substitution"]
myst_substitutions = {"version": release}

# The generated docstrings are in MindSpore's Google-like layout: Args, Returns, Raises, Note and
# Examples are napoleon's sections; Inputs, Outputs and Supported Platforms (MindSpore's) are
# rendered as headed sections whose content stays as written.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = ["Inputs", "Outputs", "Supported Platforms"]

autodoc_member_order = "bysource"
autodoc_typehints = "none"
add_module_names = True
default_role = "literal"  # `input_x` in a docstring is code, as on MindSpore's pages

html_theme = "furo"
html_title = f"ms-scatter {release}"
html_static_path = []
html_show_sourcelink = False
