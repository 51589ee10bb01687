"""Sphinx configuration of the dcfa documentation site.

Build (offline, warnings as errors)::

    python -m sphinx -W -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

import dcfa

# docs/_ext: the evidence pages' tables, read from the benchmarks' results files, and the job
# file's reference, read from its schema
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "dcfa"
author = "the dcfa developers"
copyright = "the dcfa developers"
version = release = dcfa.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    # MathJax served from the built site, not a CDN: the pages render offline
    "sphinx-mathjax-offline",
    "results",
    # the job file's reference, rendered from dcfa.batch.config's schema
    "config_reference",
    "numpydoc",
    "myst_parser",
    "sphinx_copybutton",
    # the gallery: examples/plot_*.py run at every build, their figures on the pages
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# the API pages: one per public name, generated into docs/generated/ at every build
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc sections say the types
autodoc_member_order = "bysource"

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# the build runs offline: no inventories are fetched, so no mapping is configured
intersphinx_mapping: dict = {}

# The examples (examples/): light scripts on synthetic data, executed at each build (offline,
# a few seconds each, Dask's threads in this process) into docs/auto_examples/ (not in git).
# Every build runs them all, changed or not, so a figure is always the current code's; an
# example that fails fails the build.
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "run_stale_examples": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "show_signature": False,
    "show_memory": False,
    "reference_url": {},  # no inventories fetched: the build stays offline
    "min_reported_time": 0,
}

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

nitpicky = False

html_theme = "pydata_sphinx_theme"
html_title = f"dcfa {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}


def _skip_foreign_members(app, what, name, obj, skip, options):
    """A class page documents the members dcfa defines, its own or inherited from dcfa's
    bases, not those of scikit-learn's bases (``get_params``, the ``set_*_request`` methods of
    its metadata routing, whose docstrings cite sklearn's glossary) or of builtins."""
    if what != "class":
        return None
    func = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    module = getattr(func, "__module__", None)
    if module is None and not callable(func):
        return None  # an attribute: a dataclass field, a constant
    if module is None or not module.startswith("dcfa"):
        return True
    return None


def _constant_comments(app, what, name, obj, options, lines):
    """A constant re-exported by a package (``dcfa.memory.CONFIG_KEY``) has no docstring of its
    own: autodoc would show its type's (``str``'s). Use its ``#:`` comment in the package's
    module that assigns it instead."""
    if what != "data" or not lines or "\n".join(lines).strip() != (type(obj).__doc__ or "").strip():
        return
    package, _, attr = name.rpartition(".")
    for modname in sorted(m for m in sys.modules if m == package or m.startswith(package + ".")):
        try:
            comment = ModuleAnalyzer.for_module(modname).find_attr_docs().get(("", attr))
        except PycodeError:
            continue
        if comment:
            lines[:] = list(comment)
            return
    lines[:] = []


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
    # before numpydoc reformats the docstring (priority 500)
    app.connect("autodoc-process-docstring", _constant_comments, priority=400)
