"""Figures in the reader's language, from one run of each gallery example.

The pipeline (see docs/dev/site-pipeline.md):

1. ``figure_scraper`` (a sphinx-gallery image scraper) pickles every figure an example leaves
   open, next to the PNG that sphinx-gallery's own matplotlib scraper then saves. The example
   runs once, in whichever build first finds it changed.
2. The gettext builder collects the words of every pickled figure (titles, axis labels, word
   tick labels, legends, annotations, colour-bar labels, table cells, suptitles) into
   ``figures.pot``; ``sphinx-intl`` turns it into ``locale/<lang>/LC_MESSAGES/figures.po`` like any
   other catalogue, and ``tools/check_translations.py`` requires every message to be translated.
3. A build in another language loads each pickled figure, replaces its words with their
   translations, lets the layout engine run again, checks that no text is clipped, overlaps
   another or lacks a glyph, and saves ``sphx_glr_<example>_NNN.<lang>.png``
   (``figure_language_filename``) plus the matching gallery thumbnail. Pages of that language
   point at those files, and gallery cards show the translated title and intro.

Math (``$...$``), numbers and code identifiers are not messages: a text is a message when, with
its math removed, it still holds a word of two or more Latin letters that is not an identifier.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import pickle
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from docutils import nodes

from posenc_docs import MATPLOTLIBRC, MissingGlyph, guard_missing_glyphs

#: The catalogue (domain) that holds figure words, beside the pages' catalogues.
DOMAIN = "figures"

_MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$", re.DOTALL)
_WORD = re.compile(r"[A-Za-z]{2,}")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.]*(\(\))?$")
# (indented when a code block draws several figures: sphinx-gallery lists them side by side)
_IMAGE_SG = re.compile(r"^\s*\.\. image-sg:: (/\S+\.png)\s*$", re.MULTILINE)


def is_message(text: str) -> bool:
    """True when ``text`` has words to translate (not only math, numbers or a code identifier)."""
    rest = _MATH.sub(" ", text).strip()
    if not _WORD.search(rest):
        return False
    if _IDENTIFIER.match(rest) and ("_" in rest or "." in rest or rest.endswith("()")):
        return False
    return True


def pickle_path(image: Path) -> Path:
    return image.with_suffix(".fig.pickle")


# -- 1. Scraper ----------------------------------------------------------------------------


def figure_scraper(block: Any, block_vars: dict[str, Any], gallery_conf: dict[str, Any], **kwargs: Any) -> str:
    """sphinx-gallery's matplotlib scraper, keeping a pickle of each figure for re-rendering.

    The figures are pickled before sphinx-gallery saves and closes them; the pickle is named
    after the PNG the matplotlib scraper will write (the next names of the example's image path
    iterator).
    """
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import matplotlib_scraper

    iterator = block_vars["image_path_iterator"]
    for k, number in enumerate(plt.get_fignums()):
        image = Path(iterator.image_path.format(len(iterator) + 1 + k))
        try:
            data = pickle.dumps(plt.figure(number))
        except Exception as exc:  # lambdas in formatters, open files...
            plt.close("all")
            raise RuntimeError(
                f"figure {image.name} cannot be pickled ({exc}); the build re-renders every figure "
                "in each language from its pickle: use named functions rather than lambdas in it"
            ) from exc
        pickle_path(image).write_bytes(data)
    return matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)


# -- Figure text ---------------------------------------------------------------------------


class _TranslatedFormatter:
    """Wraps a tick formatter so that the labels it produces are translated."""

    def __init__(self, inner: Any, translate: Callable[[str], str]) -> None:
        self.inner = inner
        self.translate = lambda s: translate(s) if is_message(s) else s  # numbers stay as they are

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, x: Any, pos: Any = None) -> str:
        return self.translate(self.inner(x, pos))

    def format_ticks(self, values: Any) -> list[str]:
        return [self.translate(s) for s in self.inner.format_ticks(values)]

    # matplotlib's Formatter base class defines these, so __getattr__ would not reach the inner one.
    def get_offset(self) -> str:
        return self.translate(self.inner.get_offset())

    def set_locs(self, locs: Any) -> None:
        self.inner.set_locs(locs)

    def set_axis(self, axis: Any) -> None:
        self.inner.set_axis(axis)

    def format_data(self, value: Any) -> str:
        return self.translate(self.inner.format_data(value))

    def format_data_short(self, value: Any) -> str:
        return self.translate(self.inner.format_data_short(value))


def _make_formatter(inner: Any, translate: Callable[[str], str]) -> Any:
    from matplotlib.ticker import Formatter

    cls = type("TranslatedFormatter", (_TranslatedFormatter, Formatter), {})
    wrapper = cls.__new__(cls)
    _TranslatedFormatter.__init__(wrapper, inner, translate)
    return wrapper


def _tick_labels(fig: Any) -> tuple[set[int], list[Any]]:
    """(ids of every tick label, the labels of the ticks that are drawn)."""
    every: set[int] = set()
    drawn: list[Any] = []
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                every.update((id(tick.label1), id(tick.label2)))
            if ax.get_visible() and axis.get_visible():
                # the ticks inside the view limits, with their labels as drawn (private API)
                for tick in axis._update_ticks():
                    drawn += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    return every, drawn


def _texts(fig: Any) -> Iterator[Any]:
    """Every drawn Text artist of a drawn figure: tick labels in view, table cells included."""
    from matplotlib.text import Text

    every, drawn = _tick_labels(fig)
    seen: set[int] = set()
    candidates = [t for t in fig.findobj(Text) if id(t) not in every] + drawn
    for ax in fig.axes:
        for table in ax.tables:
            candidates += [cell.get_text() for cell in table.get_celld().values()]
    for artist in candidates:
        if id(artist) not in seen:
            seen.add(id(artist))
            yield artist


def _visible(text: Any) -> bool:
    axes = getattr(text, "axes", None)
    return text.get_visible() and (axes is None or axes.get_visible()) and bool(text.get_text().strip())


def figure_messages(fig: Any) -> list[str]:
    """The messages of a figure, in drawing order, without repeats."""
    fig.canvas.draw()
    found: list[str] = []
    for text in _texts(fig):
        s = text.get_text()
        if _visible(text) and is_message(s) and s not in found:
            found.append(s)
    return found


def translate_figure(fig: Any, translate: Callable[[str], str]) -> None:
    """Replace the words of ``fig`` in place: texts directly, tick labels through their formatter."""
    fig.canvas.draw()  # tick labels exist once the figure is drawn
    tick_labels: set[int] = set()
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            for which, ticks in (("major", axis.get_major_ticks()), ("minor", axis.get_minor_ticks())):
                labels = [t for tick in ticks for t in (tick.label1, tick.label2)]
                tick_labels.update(id(t) for t in labels)
                if any(is_message(t.get_text()) for t in labels):
                    ticker = getattr(axis, which)
                    ticker.formatter = _make_formatter(ticker.formatter, translate)
    for text in _texts(fig):
        if id(text) not in tick_labels and is_message(text.get_text()):
            text.set_text(translate(text.get_text()))
            _font_for_words(text)


def _font_for_words(text: Any) -> None:
    """Put first the family that has every character written outside math.

    With math in a string, matplotlib's mathtext draws the words around it in the first family
    only (no fallback): "位置 $p$" needs the CJK font first. Plain text keeps the site's order.
    """
    from matplotlib.font_manager import FontProperties, findfont, get_font

    s = text.get_text()
    if not _MATH.search(s):
        return
    chars = {ord(c) for c in _MATH.sub("", s) if not c.isspace()}
    families = list(text.get_fontfamily())
    for family in families:
        try:
            font = get_font(findfont(FontProperties(family=family), fallback_to_default=False))
        except ValueError:  # family not installed
            continue
        if all(font.get_char_index(c) for c in chars):
            text.set_fontfamily([family] + [f for f in families if f != family])
            return


def layout_problems(fig: Any, translated: set[str]) -> list[str]:
    """Translated texts that leave the figure or overlap another text (after a draw)."""
    renderer = fig.canvas.get_renderer()
    boxes = [(t, t.get_window_extent(renderer)) for t in _texts(fig) if _visible(t)]
    fig_box = fig.bbox
    found = []
    for i, (text, box) in enumerate(boxes):
        if text.get_text() not in translated:
            continue
        if box.x0 < fig_box.x0 - 1 or box.y0 < fig_box.y0 - 1 or box.x1 > fig_box.x1 + 1 or box.y1 > fig_box.y1 + 1:
            found.append(f"{text.get_text()!r} is clipped by the figure edge")
        for j, (other, other_box) in enumerate(boxes):
            if j != i and box.overlaps(other_box):
                inter_w = min(box.x1, other_box.x1) - max(box.x0, other_box.x0)
                inter_h = min(box.y1, other_box.y1) - max(box.y0, other_box.y0)
                if inter_w > 2 and inter_h > 2:
                    found.append(f"{text.get_text()!r} overlaps {other.get_text()!r}")
    return found


def figure_titles(fig: Any, separator: str = "，") -> str:
    """Alt text as sphinx-gallery writes it (the suptitle, then the axes titles), with a
    full-width comma between them (for a translated figure) or ``separator``."""
    titles = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
    return separator.join(t.strip() for t in titles if t.strip())


# -- Catalogue -----------------------------------------------------------------------------


def load_catalogue(po: Path) -> dict[str, str | None]:
    """msgid -> translation (None when empty or fuzzy)."""
    from babel.messages.pofile import read_po

    if not po.is_file():
        return {}
    with po.open("rb") as f:
        catalogue = read_po(f)
    return {
        m.id: (None if m.fuzzy or not m.string else m.string)
        for m in catalogue
        if m.id and isinstance(m.id, str)
    }


def catalogue_path(app: Any) -> Path | None:
    for directory in app.config.locale_dirs:
        po = Path(app.srcdir, directory, app.config.language, "LC_MESSAGES", DOMAIN + ".po")
        if po.is_file():
            return po
    return None


# -- Which figures exist -----------------------------------------------------------------


def gallery_images(app: Any) -> dict[str, list[Path]]:
    """Generated example page (docname) -> its figures (PNG paths), from sphinx-gallery's rst."""
    conf = app.config.sphinx_gallery_conf
    dirs = conf["gallery_dirs"]
    result: dict[str, list[Path]] = {}
    for gallery in [dirs] if isinstance(dirs, str) else dirs:
        for rst in sorted(Path(app.srcdir, gallery).rglob("*.rst")):
            images = [Path(app.srcdir, uri.lstrip("/")) for uri in _IMAGE_SG.findall(rst.read_text(encoding="utf-8"))]
            if images:
                result[rst.relative_to(app.srcdir).with_suffix("").as_posix()] = images
    return result


def _load(pickled: Path) -> Any:
    import matplotlib

    matplotlib.use("agg")
    with pickled.open("rb") as f:
        return pickle.load(f)


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


#: The layout of the ``*.messages.json`` caches (a cache of another layout is computed again).
_WORDS_FORMAT = 2


def _cached_words(pickled: Path) -> dict[str, Any]:
    """The messages and the alt text of one pickled figure, cached beside its pickle (keyed by the
    pickle's hash)."""
    digest = hashlib.sha256(pickled.read_bytes()).hexdigest()
    cache = pickled.with_name(pickled.name.removesuffix(".fig.pickle") + ".messages.json")
    if cache.is_file():
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data.get("pickle") == digest and data.get("format") == _WORDS_FORMAT:
            return data
    import matplotlib

    fig = _load(pickled)
    try:
        with matplotlib.rc_context(fname=str(MATPLOTLIBRC)):
            data = {"pickle": digest, "format": _WORDS_FORMAT, "messages": figure_messages(fig),
                    "alt": figure_titles(fig, ", ")}
    finally:
        _close(fig)
    cache.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return data


def cached_messages(pickled: Path) -> list[str]:
    """The messages of one pickled figure."""
    return _cached_words(pickled)["messages"]


# -- 2. Extraction (gettext builder) ---------------------------------------------------------


def write_template(app: Any, exception: Exception | None) -> None:
    """Write ``figures.pot`` into the gettext output, beside the pages' templates."""
    if exception is not None or app.builder.name != "gettext":
        return
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    messages: list[str] = []
    for images in gallery_images(app).values():
        for image in images:
            if not pickle_path(image).is_file():
                logger.warning("figure %s has no pickle: delete docs/auto_examples to re-run the examples", image.name)
                continue
            messages += [m for m in cached_messages(pickle_path(image)) if m not in messages]
    for pickled in notebook_pickles(app):
        if not pickled.is_file():
            logger.warning("a notebook figure has no pickle (%s): delete %s to run the notebooks again",
                           pickled.name, pickled.parent.parent.parent)
            continue
        messages += [m for m in cached_messages(pickled) if m not in messages]
    catalogue = Catalog(project=app.config.project, version=app.config.version, charset="utf-8", fuzzy=False)
    for message in sorted(messages):
        catalogue.add(message)
    out = Path(app.outdir, DOMAIN + ".pot")
    with out.open("wb") as f:
        write_po(f, catalogue, omit_header=False, width=0)
    # The header date would change on every build; sphinx-intl only compares messages.


# -- 3. Rendering in the reader's language -------------------------------------------------


def localized(path: Path, app: Any) -> Path:
    """The file name ``figure_language_filename`` gives ``path`` in the build's language."""
    root, ext = str(path.with_suffix("")), path.suffix
    return Path(
        app.config.figure_language_filename.format(
            root=root, ext=ext, path=str(path.parent) + "/", basename=path.stem, docpath="", language=app.config.language
        )
    )


def _example_source(app: Any, docname: str) -> Path:
    """The example script a generated gallery page comes from (pairs gallery_dirs with examples_dirs)."""
    conf = app.config.sphinx_gallery_conf
    examples = conf["examples_dirs"]
    galleries = conf["gallery_dirs"]
    examples = [examples] if isinstance(examples, str) else list(examples)
    galleries = [galleries] if isinstance(galleries, str) else list(galleries)
    for example_dir, gallery_dir in zip(examples, galleries):
        prefix = gallery_dir.strip("/") + "/"
        if docname.startswith(prefix):
            return Path(app.srcdir, example_dir, docname[len(prefix) :] + ".py")
    return Path(app.srcdir, docname + ".py")


def _thumbnail_number(source: Path) -> int | None:
    """sphinx-gallery's choice of thumbnail figure (1 by default); None for a thumbnail file."""
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    match = re.search(r"^# *sphinx_gallery_thumbnail_number *= *(-?\d+)", text, re.MULTILINE)
    if match:
        return int(match.group(1))
    return None if re.search(r"^# *sphinx_gallery_thumbnail_path *=", text, re.MULTILINE) else 1


def render_translated(
    pickled: Path, target: Path, catalogue: dict[str, str | None], language: str, logger: Any, **savefig: Any
) -> None:
    """Save the figure of ``pickled`` with its words translated, as ``target``, unless its pickle,
    its translations and this module are the same as the last time (the key in ``target``'s
    sidecar ``.json``, which also keeps the translated alt text). Warns on a missing translation,
    a clipped or overlapping text and a missing glyph."""
    import matplotlib

    messages = cached_messages(pickled)
    name = pickled.name.removesuffix(".fig.pickle")
    for m in messages:
        if not catalogue.get(m):
            logger.warning("figure %s: no %s translation in %s.po for %r", name, language, DOMAIN, m)
    used = {m: catalogue.get(m) or m for m in messages}
    # the pickle, the translations and this module: a change to any re-renders the figure
    key = hashlib.sha256(
        pickled.read_bytes() + json.dumps(used, sort_keys=True).encode() + Path(__file__).read_bytes()
    ).hexdigest()
    sidecar = target.with_suffix(".json")
    if target.is_file() and sidecar.is_file() and json.loads(sidecar.read_text(encoding="utf-8")).get("key") == key:
        return
    fig = _load(pickled)
    try:
        with warnings.catch_warnings(), matplotlib.rc_context(fname=str(MATPLOTLIBRC)):
            guard_missing_glyphs()
            translate_figure(fig, lambda s: used.get(s, s))
            fig.savefig(target, **{"facecolor": fig.get_facecolor(), "edgecolor": fig.get_edgecolor(), **savefig})
            problems = layout_problems(fig, set(used.values()) - set(k for k, v in used.items() if k == v))
            for problem in problems:
                logger.warning("figure %s (%s): %s", name, language, problem)
            alt = figure_titles(fig)
    except (Warning, MissingGlyph) as exc:
        logger.warning("figure %s (%s): %s", name, language, exc)
        return
    finally:
        _close(fig)
    # With a problem, no key: the next build renders it again, and warns again.
    sidecar.write_text(json.dumps({"key": None if problems else key, "alt": alt}, ensure_ascii=False), encoding="utf-8")


def render_language(app: Any) -> None:
    """Render every gallery figure in the build's language (only figures whose inputs changed)."""
    language = app.config.language
    if not language or language == "en" or app.builder.format != "html":
        return
    from sphinx.util import logging
    from sphinx_gallery.utils import scale_image

    logger = logging.getLogger(__name__)
    po = catalogue_path(app)
    catalogue = load_catalogue(po) if po else {}
    conf = app.config.sphinx_gallery_conf
    thumb_size = conf.get("thumbnail_size", (400, 280))
    for docname, images in gallery_images(app).items():
        for image in images:
            pickled = pickle_path(image)
            if not pickled.is_file():
                logger.warning("figure %s has no pickle: delete docs/auto_examples to re-run the examples", image.name)
                continue
            render_translated(pickled, localized(image, app), catalogue, language, logger)
        # The gallery thumbnail, from the translated rendering of the same figure.
        stem = Path(docname).name
        number = _thumbnail_number(_example_source(app, docname))
        if number is not None and number < 0:
            number += len(images) + 1
        if number is not None and 1 <= number <= len(images):
            zh_image = localized(images[number - 1], app)
            thumb = localized(images[0].parent / "thumb" / f"sphx_glr_{stem}_thumb.png", app)
            if zh_image.is_file() and (not thumb.is_file() or thumb.stat().st_mtime < zh_image.stat().st_mtime):
                scale_image(str(zh_image), str(thumb), *thumb_size)


def localize_doctree(app: Any, doctree: nodes.document) -> None:
    """Point gallery figures at their rendering in the build's language; mark gallery cards."""
    language = app.config.language
    if not language or language == "en":
        return
    from sphinx.util import logging
    from sphinx_gallery.directives import imgsgnode

    logger = logging.getLogger(__name__)
    for node in doctree.findall(imgsgnode):
        image = Path(app.srcdir, node["uri"].lstrip("/"))
        if not pickle_path(image).is_file():
            continue
        target = localized(image, app)
        sidecar = localized(image.with_suffix(".json"), app)
        if not target.is_file() or not sidecar.is_file():
            logger.warning("figure %s has no %s rendering", image.name, language, location=node)
            continue
        uri = "/" + target.relative_to(Path(app.srcdir)).as_posix()
        node["srcset"] = (node["srcset"] or node["uri"]).replace(node["uri"], uri)
        node["uri"] = uri
        node["alt"] = json.loads(sidecar.read_text(encoding="utf-8"))["alt"]
        app.env.note_dependency(str(target))
    # Gallery cards: raw HTML around a :doc: reference. Remember which example each card shows.
    from sphinx.addnodes import pending_xref

    current: nodes.raw | None = None
    for node in doctree.findall(lambda n: isinstance(n, (nodes.raw, pending_xref))):
        if isinstance(node, nodes.raw) and "sphx-glr-thumbcontainer" in node.astext():
            current = node
        elif isinstance(node, pending_xref) and current is not None and node.get("reftype") == "doc":
            target_doc = node["reftarget"].lstrip("/")
            current["posenc_card"] = target_doc
            # The card shows the example's translated title: re-read when its catalogue changes.
            for directory in app.config.locale_dirs:
                app.env.note_dependency(str(Path(app.srcdir, directory, language, "LC_MESSAGES", target_doc + ".po")))
        elif isinstance(node, nodes.raw) and "sphx-glr-thumbnail-title" in node.astext() and current is not None:
            node["posenc_card"] = current.get("posenc_card")
            current = None


def translate_cards(app: Any, doctree: nodes.document, docname: str) -> None:
    """Gallery cards show the example's title and intro in the page's language (title div, tooltip)."""
    for node in list(doctree.findall(nodes.raw)):
        example = node.get("posenc_card")
        if not example or example not in app.env.found_docs:
            continue
        page = app.env.get_doctree(example)
        section = page.next_node(nodes.section)
        if section is None:
            continue
        title = section.next_node(nodes.title).astext()
        intro = next((c.astext().replace("\n", " ") for c in section.children if isinstance(c, nodes.paragraph)), "")
        text = node.astext()
        if "sphx-glr-thumbcontainer" in text:
            text = re.sub(r'tooltip="[^"]*"', lambda _: f'tooltip="{html.escape(intro, quote=True)}"', text)
        else:
            text = re.sub(
                r'(<div class="sphx-glr-thumbnail-title">).*?(</div>)',
                lambda m: m.group(1) + html.escape(title) + m.group(2),
                text,
                flags=re.DOTALL,
            )
        new = nodes.raw("", text, format="html")
        node.replace_self(new)


# -- Notebook figures ----------------------------------------------------------------------

#: myst-nb names an image output after the SHA-256 of the image (``render_image``), and so does
#: the kernel start-up file for the figure's pickle.
_NOTEBOOK_IMAGE = re.compile(r"/jupyter_execute/([0-9a-f]{64})\.png$")
#: The start-up file of the notebook kernels, which pickles every figure they show.
KERNEL_STARTUP = Path(__file__).with_name("posenc_notebook_kernel.py")


def notebook_outputs_folder(app: Any) -> Path:
    """Where the kernels keep their figures' pickles and their pages' claims: inside myst-nb's
    execution cache, so that they live as long as the cached outputs that show them."""
    cache = app.config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"
    return Path(cache, "posenc")


def prepare_kernels(app: Any, config: Any) -> None:
    """Every notebook kernel this build starts runs ``posenc_notebook_kernel.py`` (IPython runs
    the ``PYTHONSTARTUP`` file in each kernel), which keeps its figures and claims in the folder."""
    os.environ["PYTHONSTARTUP"] = str(KERNEL_STARTUP)
    os.environ["POSENC_NOTEBOOK_OUTPUTS"] = str(notebook_outputs_folder(app))


def name_the_page_run(app: Any, docname: str, source: list[str]) -> None:
    """Tell the kernel which page it runs (myst-nb runs a notebook while parsing it, after
    ``source-read``, in this process)."""
    os.environ["POSENC_NOTEBOOK_PAGE"] = docname


def localize_notebook_figures(app: Any, doctree: nodes.document) -> None:
    """Give each notebook figure its titles as alt text, and in another language its rendering
    with the words translated (``<sha256>.<lang>.png`` beside myst-nb's image).

    Runs before Sphinx's image collector, which then picks the rendering up through
    ``figure_language_filename``, as it does for any localised image.
    """
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    language = app.config.language
    translate = bool(language) and language != "en" and app.builder.format == "html"
    folder = notebook_outputs_folder(app) / "figures"
    shown: list[str] = []
    for node in doctree.findall(nodes.image):
        match = _NOTEBOOK_IMAGE.search(node["uri"])
        if match is None:
            continue
        pickled = folder / f"{match[1]}.fig.pickle"
        if not pickled.is_file():
            logger.warning(
                "a notebook figure has no pickle (%s): delete %s to run the notebooks again",
                pickled.name, folder.parent.parent, location=node,
            )
            continue
        shown.append(match[1])
        alt = _cached_words(pickled)["alt"]
        if translate:
            po = catalogue_path(app)
            target = localized(Path(app.srcdir, node["uri"].lstrip("/")), app)
            render_translated(pickled, target, load_catalogue(po) if po else {}, language, logger, dpi="figure",
                              bbox_inches="tight")  # as the inline backend saves it
            sidecar = target.with_suffix(".json")
            if sidecar.is_file():
                alt = json.loads(sidecar.read_text(encoding="utf-8"))["alt"]
            # A changed translation renders the figure again: re-read the page then.
            for directory in app.config.locale_dirs:
                app.env.note_dependency(str(Path(app.srcdir, directory, language, "LC_MESSAGES", DOMAIN + ".po")))
        if alt and "alt" not in node:
            node["alt"] = alt
    app.env.posenc_notebook_figures = getattr(app.env, "posenc_notebook_figures", {})
    app.env.posenc_notebook_figures[app.env.docname] = shown


def _forget_notebook_figures(app: Any, env: Any, docname: str) -> None:
    getattr(env, "posenc_notebook_figures", {}).pop(docname, None)


def _merge_notebook_figures(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    env.posenc_notebook_figures = getattr(env, "posenc_notebook_figures", {})
    for docname in docnames:
        if docname in getattr(other, "posenc_notebook_figures", {}):
            env.posenc_notebook_figures[docname] = other.posenc_notebook_figures[docname]


def notebook_pickles(app: Any) -> list[Path]:
    """The pickles of the figures the notebook pages show now."""
    folder = notebook_outputs_folder(app) / "figures"
    shown = getattr(app.env, "posenc_notebook_figures", {})
    return [folder / f"{sha}.fig.pickle" for doc in sorted(shown) for sha in shown[doc]]


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", prepare_kernels)
    app.connect("source-read", name_the_page_run)
    app.connect("builder-inited", render_language)
    # before Sphinx's image collector (priority 500), which looks for the localised file
    app.connect("doctree-read", localize_notebook_figures, priority=400)
    app.connect("env-purge-doc", _forget_notebook_figures)
    app.connect("env-merge-info", _merge_notebook_figures)
    app.connect("doctree-read", localize_doctree)
    app.connect("doctree-resolved", translate_cards)
    app.connect("build-finished", write_template)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
