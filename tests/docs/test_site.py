"""Checks on the built static site: both languages, relative links, offline assets, catalogues."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import check_translations  # noqa: E402
from site_languages import LANGUAGES  # noqa: E402

EXAMPLE = "auto_examples/01_foundations/plot_word_order"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.lang: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if tag == "html" and name == "lang":
                self.lang = value
            if name in ("href", "src") and value:
                self.refs.append((tag, name, value))


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _pages(tree: Path) -> list[Path]:
    skip = {"_sources", "_modules", "_static"}  # _static holds theme template fragments, not pages
    return sorted(p for p in tree.rglob("*.html") if not skip & set(p.relative_to(tree).parts))


def test_root_index_links_both_languages(site: Path) -> None:
    refs = {value for _, _, value in _parse(site / "index.html").refs}
    assert {"en/index.html", "zh_CN/index.html"} <= refs


def test_every_page_exists_in_both_languages(site: Path) -> None:
    en = {p.relative_to(site / "en") for p in _pages(site / "en")}
    zh = {p.relative_to(site / "zh_CN") for p in _pages(site / "zh_CN")}
    assert en == zh
    assert Path(EXAMPLE + ".html") in en


@pytest.mark.parametrize("lang", LANGUAGES)
def test_links_are_relative_and_resolve(site: Path, lang: str) -> None:
    """No root-relative or CDN URLs, and every local link points at a file of the tree."""
    broken, absolute, remote_assets = [], [], []
    for page in _pages(site / lang):
        for tag, attr, value in _parse(page).refs:
            url = urlsplit(value)
            if url.scheme in ("http", "https") or value.startswith("//"):
                # Outbound links are fine; scripts, images and frames must come from the site.
                if tag in ("script", "img", "iframe"):
                    remote_assets.append((page.name, value))
                continue
            if url.scheme in ("mailto", "data", "javascript") or not url.path:
                continue
            if value.startswith("/"):
                absolute.append((page.name, value))
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if not target.exists():
                broken.append((str(page.relative_to(site)), value))
    assert not absolute, f"root-relative links break when the site is served from a sub-path: {absolute[:5]}"
    assert not remote_assets, f"assets loaded from the network: {remote_assets[:5]}"
    assert not broken, f"links to missing files: {broken[:10]}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_cdn_in_pages(site: Path, lang: str) -> None:
    pattern = re.compile(r"""<(script|link)[^>]+(src|href)=["'](https?:)?//""")
    offenders = [p.name for p in _pages(site / lang) if pattern.search(p.read_text(encoding="utf-8"))]
    assert not offenders


def test_math_is_served_locally(site: Path) -> None:
    page = site / "en" / "properties" / "boundedness.html"
    scripts = [value for tag, _, value in _parse(page).refs if tag == "script"]
    mathjax = [urlsplit(s).path for s in scripts if urlsplit(s).path.endswith("mathjax/tex-chtml.js")]
    assert mathjax, scripts
    assert (page.parent / mathjax[0]).resolve().is_file()
    assert (site / "en" / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_example_offers_script_and_notebook(site: Path, lang: str) -> None:
    page = site / lang / (EXAMPLE + ".html")
    downloads = [value for _, _, value in _parse(page).refs if "_downloads" in value]
    suffixes = {Path(d).suffix for d in downloads}
    assert {".py", ".ipynb"} <= suffixes
    for d in downloads:
        assert (page.parent / d).resolve().is_file()


def test_no_example_prints_a_python_warning(site: Path) -> None:
    """A warning an example raises (``file.py:12: UserWarning: ...``) would be shown on its page."""
    warned = {}
    for page in sorted((site / "en" / "auto_examples").rglob("*.html")):
        found = re.findall(r"\.py:\d+: \w*Warning: [^<\n]*", page.read_text(encoding="utf-8"))
        if found:
            warned[page.name] = found
    assert warned == {}


def _example_images(site: Path, lang: str) -> list[str]:
    page = site / lang / (EXAMPLE + ".html")
    return [value for tag, _, value in _parse(page).refs if tag == "img" and "sphx_glr_plot_word_order" in value]


def test_each_language_shows_its_own_figures(site: Path) -> None:
    """The English page shows the figures as drawn, the Chinese page their Chinese rendering."""
    en, zh = _example_images(site, "en"), _example_images(site, "zh_CN")
    assert len(en) >= 2 and len(en) == len(zh), (en, zh)
    assert all(re.search(r"sphx_glr_plot_word_order_\d{3}\.png$", src) for src in en), en
    assert all(re.search(r"sphx_glr_plot_word_order_\d{3}\.zh_CN\.png$", src) for src in zh), zh
    for src_en, src_zh in zip(en, zh):
        file_en = (site / "en" / EXAMPLE).parent / src_en
        file_zh = (site / "zh_CN" / EXAMPLE).parent / src_zh
        assert file_en.stat().st_size > 1000 and file_zh.stat().st_size > 1000
        assert file_en.read_bytes() != file_zh.read_bytes(), f"{src_zh} is the English figure"


def test_chinese_figure_alt_text_is_chinese(site: Path) -> None:
    text = (site / "zh_CN" / (EXAMPLE + ".html")).read_text(encoding="utf-8")
    alts = re.findall(r'<img src="[^"]*sphx_glr_plot_word_order[^"]*" [^>]*alt="([^"]*)"', text)
    assert alts and all(re.search(r"[\u4e00-\u9fff]", a) and not re.search(r"[A-Za-z]{2,}", a) for a in alts), alts


def test_gallery_cards_speak_the_page_language(site: Path) -> None:
    """Card titles and tooltips (raw HTML that gettext cannot reach) and thumbnails on zh_CN."""
    page = (site / "zh_CN" / "auto_examples" / "index.html").read_text(encoding="utf-8")
    titles = re.findall(r'<div class="sphx-glr-thumbnail-title">([^<]*)</div>', page)
    tooltips = re.findall(r'tooltip="([^"]*)"', page)
    thumbs = re.findall(r'<img [^>]*src="([^"]*_thumb[^"]*)"', page)
    assert len(titles) >= 2 and len(tooltips) == len(titles) and len(thumbs) == len(titles)
    assert "语序为何重要：猫追老鼠与老鼠追猫" in titles
    for text in titles + tooltips:
        assert not re.search(r"\b(the|and|of|with|Why|The)\b", text), text
    # An example without a figure shows sphinx-gallery's placeholder, which has no words.
    drew = {png.name.removesuffix("_001.png") for png in (ROOT / "docs" / "auto_examples").rglob("sphx_glr_*_001.png")}
    english_thumbs = [t for t in thumbs if not t.endswith(".zh_CN.png")]
    assert all(Path(t).name.removesuffix("_thumb.png") not in drew for t in english_thumbs), english_thumbs
    assert len(english_thumbs) < len(thumbs) / 10, english_thumbs
    english = (site / "en" / "auto_examples" / "index.html").read_text(encoding="utf-8")
    assert "Why order matters: 猫追老鼠 vs 老鼠追猫" in re.findall(r'<div class="sphx-glr-thumbnail-title">([^<]*)</div>', english)
    assert not re.findall(r'<img [^>]*src="([^"]*_thumb\.zh_CN[^"]*)"', english)


def test_language_attribute_and_switcher(site: Path) -> None:
    for lang, html_lang in (("en", "en"), ("zh_CN", "zh-CN")):
        page = site / lang / (EXAMPLE + ".html")
        parsed = _parse(page)
        assert parsed.lang == html_lang
        other = "zh_CN" if lang == "en" else "en"
        switch = [v for tag, _, v in parsed.refs if tag == "a" and f"/{other}/" in v and v.endswith("plot_word_order.html")]
        assert switch, "no link to the same page in the other language"
        assert (page.parent / switch[0]).resolve() == (site / other / (EXAMPLE + ".html")).resolve()


def test_chinese_pages_are_in_chinese(site: Path) -> None:
    text = (site / "zh_CN" / (EXAMPLE + ".html")).read_text(encoding="utf-8")
    body = re.sub(r"<[^>]+>", " ", text.split("<article", 1)[1])
    han = len(re.findall(r"[\u4e00-\u9fff]", body))
    assert han > 300, f"only {han} Chinese characters on the Chinese example page"
    assert "位置编码" in body


def test_no_english_prose_paragraph_on_chinese_pages(site: Path) -> None:
    # A translation whose markup parses to another node type (a paragraph starting "(a) ..."
    # becomes a list) is silently dropped by Sphinx, and the English shows on the Chinese page.
    english = []
    for page in sorted((site / "zh_CN").rglob("*.html")):
        if {"_modules", "_static", "_sources"} & set(page.relative_to(site).parts):
            continue
        text = page.read_text(encoding="utf-8")
        article = text[text.find("<article") : text.find("</article>")]
        for paragraph in re.findall(r"<p>(.*?)</p>", article, re.DOTALL):
            # Identifiers only: run output (the claims ledger), linked test names (the conventions table).
            outside_code = re.sub(r"<code[^>]*>.*?</code>|</?a\b[^>]*>", "", paragraph, flags=re.DOTALL)
            if not re.search(r"[A-Za-z]", outside_code):
                continue
            plain = re.sub(r"<[^>]+>", "", paragraph).strip()
            if len(plain) > 50 and not re.search(r"[\u4e00-\u9fff]", plain):
                english.append(f"{page.relative_to(site)}: {plain[:80]}")
    assert english == []


def test_chinese_search_index_is_segmented(site: Path) -> None:
    text = (site / "zh_CN" / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    # jieba splits Chinese text into words; without it Sphinx would index whole runs of characters.
    assert {"位置", "编码", "位置编码", "旋转位置编码"} <= set(index["terms"])
    pages = set()
    for table in ("terms", "titleterms"):  # Sphinx lists a page under one of the two
        found = index[table].get("位置编码", [])
        pages |= set(found if isinstance(found, list) else [found])
    assert len(pages) >= 3


def test_catalogues_are_complete() -> None:
    pot = ROOT / "docs" / "_build" / "gettext"
    if not pot.is_dir():
        pytest.skip("no gettext output: run make html")
    assert check_translations.problems(pot, ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES") == []


def test_catalogues_hold_no_run_dependent_text() -> None:
    """Timings or memory figures in messages would change the catalogues on every build."""
    pattern = re.compile(r"running time|seconds\)|\bMB\b|minutes [0-9.]+ seconds", re.IGNORECASE)
    catalogues = list((ROOT / "docs" / "locale").rglob("*.po"))
    assert catalogues
    for po in catalogues:
        with po.open("rb") as file:
            ids = [m.id for m in read_po(file) if m.id]  # multi-line messages included
        assert ids, po
        assert not [i for i in ids if pattern.search(i)], po


@pytest.mark.parametrize("page", ["index.html", "api/index.html", EXAMPLE + ".html"])
def test_theme_strings_are_chinese(site: Path, page: str) -> None:
    """Search box, aria labels and footers of the zh_CN pages: Chinese, with Chinese punctuation."""
    text = (site / "zh_CN" / page).read_text(encoding="utf-8")
    attributes = re.findall(r'(?:placeholder|aria-label)="([^"]*)"', text)
    english = [a for a in attributes if re.search(r"[A-Za-z]{3,}", a)]
    assert not english, english
    assert 'placeholder="搜索文档……"' in text
    footer = re.sub(r"<[^>]+>", "", text.split('class="bd-footer', 1)[1])
    footer = re.sub(r"\s+", " ", footer)
    assert "由 Sphinx 9" in footer and re.search(r"Sphinx \d+\.\d+\.\d+ 创建。", footer), footer
    assert re.search(r"PyData Sphinx Theme \d+\.\d+\.\d+ 构建。", footer), footer
    assert "Copyright" not in footer and "developers" not in footer, footer
    # The top bar's menu for the parts that do not fit.
    header = text.split('class="bd-header', 1)[1].split("</header>", 1)[0]
    assert "更多" in header and not re.search(r">\s*More\s*<", header)


def test_api_parameter_types_say_optional_in_chinese(site: Path) -> None:
    zh = (site / "zh_CN" / "api" / "index.html").read_text(encoding="utf-8")
    en = (site / "en" / "api" / "index.html").read_text(encoding="utf-8")
    assert "<em>optional</em>" in en
    assert "optional" not in re.sub(r"<[^>]+>", " ", zh.split("<article", 1)[1]), "English 'optional' on the zh_CN API page"
    assert ", 可选)" in re.sub(r"<[^>]+>", "", zh)


def test_general_index_names_modules_in_chinese(site: Path) -> None:
    text = re.sub(r"<[^>]+>", " ", (site / "zh_CN" / "genindex.html").read_text(encoding="utf-8"))
    assert "模块" in text and not re.search(r"\bmodule\b", text)


def test_api_references_heading_is_the_glossary_term(site: Path) -> None:
    text = (site / "zh_CN" / "api" / "index.html").read_text(encoding="utf-8")
    rubrics = re.findall(r'class="rubric">([^<]*)<', text)
    assert "参考文献" in rubrics and "引用" not in rubrics, sorted(set(rubrics))


@pytest.mark.parametrize(("lang", "heading"), [("en", "Examples using this"), ("zh_CN", "用到它的示例")])
def test_api_entries_link_the_examples_that_use_them(site: Path, lang: str, heading: str) -> None:
    page = (site / lang / "api" / "index.html").read_text(encoding="utf-8")
    entry = page[page.index('id="posenc.sinusoidal_table"'):]
    entry = entry[: entry.index('<dl class="py')]  # up to the next API entry
    assert heading in entry
    assert 'href="../auto_examples/01_foundations/plot_sinusoidal_formula.html"' in entry
