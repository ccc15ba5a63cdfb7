"""Sphinx configuration of the tpustrategy documentation (``make docs``; see about.md)."""

from __future__ import annotations

import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's tpustrategy, not an installed copy
sys.path.insert(0, str(HERE / "_ext"))
# Importing the public modules must not start 8 fake devices' worth of work; one CPU device is enough.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

project = "tpustrategy"
author = "the tpustrategy authors"
copyright = "2026, the tpustrategy authors"  # noqa: A001 - Sphinx's name
release = version = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "tps_apigen",      # docs/api/*.md from tpustrategy._SUBMODULES / _LAZY, at every build
    "tps_autolink",    # `tps.X` / `tf.X` code spans link to the API entry
    "tps_benchmarks",  # {benchmark-family} tables with a matplotlib plot each
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "pending", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # `Attributes:` as fields: the members themselves are documented by autodoc

html_theme = "furo"
html_title = "tpustrategy"
html_static_path = ["_static"]
html_css_files = ["tps.css"]
pygments_style = "friendly"
pygments_dark_style = "monokai"
