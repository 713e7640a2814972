"""Sphinx configuration for the posenc site (English source, Simplified Chinese via gettext).

Build with ``make html`` from the repository root; see docs/dev/site-pipeline.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))

import posenc  # noqa: E402
import posenc_docs  # noqa: E402
import posenc_glossary  # noqa: E402

# The same matplotlib settings for examples, notebook kernels and this process.
os.environ["MATPLOTLIBRC"] = str(DOCS / "matplotlibrc")

project = "posenc"
author = "the posenc developers"
copyright = "2026, the posenc developers"
release = posenc.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_gallery.gen_gallery",
    "myst_nb",
    "posenc_docs",
    "posenc_figures",
    "posenc_explorers",
    "posenc_ledger",
    "posenc_conventions",
    "posenc_benchmarks",
    "posenc_glossary",
    "posenc_rerun",
]

root_doc = "index"
exclude_patterns = [
    "_build",
    "dev",
    "node_modules",
    "_intersphinx",
    "**.ipynb_checkpoints",
    # sphinx-gallery writes a notebook beside each generated page, for download only:
    # myst-nb must not read it as a second copy of the example.
    "auto_examples/*.ipynb",
    "auto_examples/**/*.ipynb",
]
templates_path = ["_templates"]

# -- Quality gates -------------------------------------------------------------------
nitpicky = True
nitpick_ignore = [("py:class", "optional")]
suppress_warnings: list[str] = []

# -- Internationalisation ------------------------------------------------------------
language = "en"
locale_dirs = ["locale/"]
gettext_compact = False
# Source line numbers and uuids in catalogues would churn on every edit.
gettext_location = False
gettext_uuid = False
gettext_auto_build = True
# Figures: each gallery figure is rendered once per language from one run of its example
# (docs/_ext/posenc_figures.py); the zh_CN page shows sphx_glr_<example>_NNN.zh_CN.png.
figure_language_filename = "{root}.{language}{ext}"

# -- HTML ------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "posenc"
html_static_path = ["_static", str(posenc_docs.stage_mathjax(DOCS))]
html_css_files = ["posenc.css"]
html_favicon = "_static/favicon.svg"
html_theme_options = {
    "navbar_end": ["language-switcher", "theme-switcher"],
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # Parts 1-7 in the top bar; the claims ledger, the reference and the gallery under "More".
    "header_links_before_dropdown": 7,
}
html_context = {"default_mode": "light"}
html_last_updated_fmt = None
html_copy_source = True
# Chinese search segments text with jieba; the glossary's terms are added to its dictionary so
# that a query such as 位置编码 matches as one word (jieba alone splits it into 位置 / 编码).
html_search_options = {"dict": str(posenc_glossary.write_search_dictionary(DOCS / "_build" / "zh_terms.txt"))}
html_show_sourcelink = True

# MathJax is served from the site itself (copied from the npm package), never from a CDN.
mathjax_path = "mathjax/tex-chtml.js"

# -- API reference ---------------------------------------------------------------------
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options: dict[str, object] = {}
# Our modules document themselves; inherited torch docstrings (extra_repr...) would not be ours.
autodoc_inherit_docstrings = False
autosummary_generate = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_preprocess_types = True

intersphinx_mapping = {
    name: (url, str(posenc_docs.build_inventory(DOCS / "_intersphinx" / f"{name}.txt", DOCS / "_build" / "intersphinx")))
    for name, url in {
        "python": "https://docs.python.org/3/",
        "numpy": "https://numpy.org/doc/stable/",
        "torch": "https://docs.pytorch.org/docs/stable/",
    }.items()
}

# -- sphinx-gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": posenc_docs.GALLERY_DIR,
    # One overview page; the parts' index pages (docs/<part>/index.md) place the examples in the
    # navigation, and posenc_docs removes the overview's own toctrees.
    "nested_sections": False,
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    # The overview lists the parts in the order of the top bar; the folders' numbers give their
    # order of creation (Today's models came after Troubleshooting).
    "subsection_order": [
        f"../examples/{part}"
        for part in ("01_foundations", "02_properties", "03_implementations", "04_variants", "05_comparisons",
                     "06_beyond_sequences", "08_todays_models", "07_troubleshooting")
    ],
    "reset_modules": ("matplotlib", "posenc_docs.reset_matplotlib", "posenc_docs.report_progress",
                      "posenc_ledger.forget_claims"),
    # matplotlib's scraper, plus a pickle of each figure so that it can be re-rendered with its
    # words translated (docs/_ext/posenc_figures.py).
    "image_scrapers": ("posenc_figures.figure_scraper", "posenc_ledger.claims_scraper"),
    "reset_modules_order": "both",
    # Timings would change the generated pages (and so the catalogues) on every run.
    "min_reported_time": float("inf"),
    "write_computation_times": False,
    "show_memory": False,
    "remove_config_comments": True,
    "download_all_examples": False,
    "first_notebook_cell": None,
    "doc_module": ("posenc",),
    # One file per posenc name listing the examples that use it; the API reference links them
    # under each function and class (posenc_docs).
    "backreferences_dir": "gen_modules/backreferences",
    "image_srcset": [],
    "promote_jupyter_magic": False,
}

# -- myst-nb ---------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
nb_execution_mode = "cache"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 120
nb_execution_raise_on_error = True
# Anything a notebook cell writes to stderr (e.g. a missing-glyph warning) fails the build.
nb_output_stderr = "warn"
nb_merge_streams = True
