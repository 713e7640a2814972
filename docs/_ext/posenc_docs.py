"""Site machinery for the posenc docs: language switcher, offline assets, figure fonts.

Loaded by ``conf.py`` both as a Sphinx extension (``setup``) and as a helper module
(``stage_mathjax``, ``build_inventory``, ``reset_matplotlib``).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import shutil
import tomllib
import warnings
import zlib
from pathlib import Path
from typing import Any

#: Languages of the site, in switcher order: code -> name shown in the switcher (docs/languages.toml).
LANGUAGES = {
    entry["code"]: entry["name"]
    for entry in tomllib.loads((Path(__file__).resolve().parents[1] / "languages.toml").read_text(encoding="utf-8"))["language"]
}

#: matplotlib's message when a font lacks a character; in a figure it means tofu boxes.
MISSING_GLYPH = r".*[Gg]lyph .* missing from (current )?font.*"

#: Figure settings for examples and notebooks (CJK font fallback).
MATPLOTLIBRC = Path(__file__).resolve().parent.parent / "matplotlibrc"


def stage_mathjax(docs: Path) -> Path:
    """Copy the parts of MathJax 3 the site uses into ``_build/mathjax-static/mathjax``.

    The files come from the npm package installed in ``docs/node_modules`` by ``make html``.
    Returns the folder to put in ``html_static_path``.
    """
    source = docs / "node_modules" / "mathjax" / "es5"
    stage = docs / "_build" / "mathjax-static"
    target = stage / "mathjax"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(
            f"MathJax not found in {source}; run `make html` (it runs `npm ci` in docs/) "
            "so that math renders without a CDN"
        )
    if not (target / "tex-chtml.js").is_file():
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / "tex-chtml.js", target / "tex-chtml.js")
        for sub in ("output/chtml/fonts/woff-v2", "input/tex/extensions"):
            shutil.copytree(source / sub, target / sub, dirs_exist_ok=True)
    return stage


def build_inventory(listing: Path, outdir: Path) -> Path:
    """Write a Sphinx v2 ``objects.inv`` from a plain-text listing (see ``_intersphinx/README.md``)."""
    lines = [
        line.strip()
        for line in listing.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {listing.stem}\n"
        "# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    ).encode()
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{listing.stem}.inv"
    data = header + zlib.compress(("\n".join(lines) + "\n").encode())
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)
    return path


class MissingGlyph(RuntimeError):
    """A character of a figure has no glyph in any of the figure's fonts."""


class _MathtextGlyphGuard(logging.Filter):
    """matplotlib's mathtext reports a missing glyph through logging, not warnings: raise instead.

    Text with math (``$...$``) is laid out by mathtext, whose words outside the math use one font
    only (no fallback), so a Chinese word beside math would otherwise render as dummy symbols.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if "does not have a glyph" in record.getMessage():
            raise MissingGlyph(record.getMessage())
        return True


def guard_missing_glyphs() -> None:
    """Turn every missing-glyph report of matplotlib (warnings and mathtext logs) into an error."""
    warnings.filterwarnings("error", message=MISSING_GLYPH)
    mathtext = logging.getLogger("matplotlib.mathtext")
    if not any(isinstance(f, _MathtextGlyphGuard) for f in mathtext.filters):
        mathtext.addFilter(_MathtextGlyphGuard())


_EXAMPLE_STARTED: dict[str, float] = {}


def report_progress(gallery_conf: dict[str, Any], fname: str, when: str) -> None:
    """Print each gallery example as it runs, with its time (``make html`` runs Sphinx quietly).

    A sphinx-gallery reset hook, called before and after each example; the time is wall-clock.
    The line goes to the terminal only: timings never reach a page or a catalogue.
    """
    import sys
    import time

    if when == "before":
        _EXAMPLE_STARTED[fname] = time.perf_counter()
        return
    seconds = time.perf_counter() - _EXAMPLE_STARTED.pop(fname, time.perf_counter())
    print(f"  ran {fname} in {seconds:.1f} s", file=sys.stderr, flush=True)


def reset_matplotlib(gallery_conf: dict[str, Any], fname: str) -> None:
    """Apply the site's matplotlib settings before and after each gallery example.

    sphinx-gallery resets matplotlib to its built-in defaults between examples, which drops the
    CJK fallback fonts of ``docs/matplotlibrc``; this puts them back, and turns a missing glyph
    (a warning for plain text, a log record for math text) into an error so that a figure with
    unrenderable labels fails the build.
    """
    import matplotlib

    matplotlib.rc_file(MATPLOTLIBRC)
    guard_missing_glyphs()


def _other_language_links(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Give every page the URLs of the same page in each language (relative, host-independent).

    The languages are built side by side (``html/en/``, ``html/zh_CN/``), so the same page in
    another language is ``../<lang>/<pagename>.html`` from the root of this language's tree.
    """
    current = app.config.language or "en"
    to_root = "../" * pagename.count("/")
    links = []
    for code, name in LANGUAGES.items():
        url = posixpath.join(to_root + "..", code, pagename + ".html")
        links.append({"code": code, "name": name, "url": url, "current": code == current})
    context["posenc_languages"] = links
    context["posenc_language"] = current
    # Theme options and conf.py values are plain strings, not messages: pass the ones a reader
    # sees through the "sphinx" catalogue (docs/locale/<lang>/LC_MESSAGES/sphinx.po).
    from sphinx.locale import _

    # (A _() call in our own template would make the gettext builder write a sphinx.pot, and
    # sphinx-intl would then drop every other entry of sphinx.po as obsolete.)
    context["posenc_language_label"] = _("Language")
    context["theme_search_bar_text"] = _(app.config.html_theme_options.get("search_bar_text", "Search the docs ..."))
    if context.get("copyright"):
        context["copyright"] = _(context["copyright"])


def _depends_on_the_interface_catalogue(app: Any, docname: str, source: list[str]) -> None:
    """Re-read a page when the project's "sphinx" catalogue changes.

    Sphinx re-reads a page when the page's own catalogue changes, but not for the "sphinx"
    domain, whose strings (napoleon's "References" heading...) are built into the doctrees.
    """
    language = app.config.language or "en"
    for directory in app.config.locale_dirs:
        po = Path(app.srcdir, directory, language, "LC_MESSAGES", "sphinx.po")
        if po.is_file():
            app.env.note_dependency(str(po))


def _translate_optional(app: Any, doctree: Any) -> None:
    """napoleon's "int, optional" keeps the English word, in italics: translate it, upright; and
    the index's "module" entries, which Sphinx writes in English.

    napoleon renders the ``optional`` of a parameter's type as emphasis and never translates it;
    the word goes through the "sphinx" catalogue like the other interface strings.
    """
    if (app.config.language or "en") == "en":
        return
    from docutils import nodes
    from sphinx.locale import _

    for node in list(doctree.findall(nodes.emphasis)):
        if node.astext() == "optional" and any(isinstance(a, nodes.field_body) for a in _ancestors(node)):
            node.replace_self(nodes.Text(_("optional")))
    # Sphinx's Python domain indexes a module as the literal pair "module; <name>" (untranslated).
    from sphinx import addnodes

    def translated(entries: list[tuple]) -> list[tuple]:
        return [
            (kind, f"{_('module')}; {name[len('module; '):]}" if kind == "pair" and name.startswith("module; ") else name, *rest)
            for kind, name, *rest in entries
        ]

    for node in doctree.findall(addnodes.index):
        node["entries"] = translated(node["entries"])
    # The index domain has already collected this page's entries (a transform, before this event).
    index = app.env.domains["index"]
    docname = app.env.current_document.docname
    if docname in index.entries:
        index.entries[docname] = translated(index.entries[docname])


def _ancestors(node: Any) -> Any:
    while node.parent is not None:
        node = node.parent
        yield node


def _chinese_search_fix(app: Any) -> None:
    if (app.config.language or "").startswith("zh"):
        app.add_js_file("posenc-zh-search.js")


# A toctree block of the generated gallery overview: the directive, then its indented or blank lines.
GALLERY_DIR = "auto_examples"
_TOCTREE = re.compile(r"^\.\. toctree::\n(?:[ \t]+\S.*\n|[ \t]*\n)*", re.MULTILINE)


def _gallery_overview_without_toctree(app: Any, docname: str, source: list[str]) -> None:
    """Drop the toctrees sphinx-gallery writes into its overview page.

    The site's navigation follows the parts (docs/<part>/index.md lists each part's examples and
    notebook pages in reading order); the gallery overview stays one entry with its thumbnails,
    which link to the examples without making it their parent in the navigation.
    """
    if docname == f"{GALLERY_DIR}/index":
        source[0] = _TOCTREE.sub("", source[0])


def _examples_using(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """End the API entry of a posenc function or class with links to the examples that use it.

    sphinx-gallery records, per name, the examples whose code calls it
    (``backreferences_dir``); its own mini-gallery would show English thumbnails on the Chinese
    site, so the entry gets plain links to the pages instead, whose titles are translated.
    """
    if what not in ("function", "class") or not name.startswith("posenc"):
        return
    index = Path(app.srcdir) / app.config.sphinx_gallery_conf["backreferences_dir"] / "backreferences_all.json"
    # The links change with the examples while the API page's own source does not.
    app.env.note_dependency(str(index))
    if not index.exists():
        return
    users = json.loads(index.read_text(encoding="utf-8")).get(name, [])
    pages = sorted(
        {"/" + Path(os.path.relpath(gallery_dir, app.srcdir), Path(file).stem).as_posix()
         for file, _, gallery_dir, *_ in users}
    )
    if pages:
        lines += ["", ".. rubric:: Examples using this", ""] + [f"* :doc:`{page}`" for page in pages] + [""]


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _gallery_overview_without_toctree)
    app.connect("autodoc-process-docstring", _examples_using)
    app.connect("html-page-context", _other_language_links)
    app.connect("builder-inited", _chinese_search_fix)
    app.connect("source-read", _depends_on_the_interface_catalogue)
    app.connect("doctree-read", _translate_optional)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
