"""The built site in headless Chromium: loads cleanly, switches language, typesets math,
shows its images, searches in Chinese, copies code.

The site is served from docs/_build/html on 127.0.0.1 by a local HTTP server; Chromium is the
Debian package (/usr/bin/chromium), driven by Playwright.
"""

from __future__ import annotations

import functools
import io
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from site_languages import LANGUAGES  # noqa: E402

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "auto_examples/01_foundations/plot_word_order.html"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make test` installs the Debian package chromium")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, base_url):  # type: ignore[no-untyped-def]
    context = browser.new_context(base_url=base_url, permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.problems = []  # console errors, page errors, failed requests
    page.on("console", lambda m: page.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: page.problems.append(f"request failed: {r.url}"))
    yield page
    context.close()


def _open(page, path: str) -> None:  # type: ignore[no-untyped-def]
    response = page.goto(path, wait_until="load")
    assert response is not None and response.ok, f"{path}: HTTP {response and response.status}"
    page.wait_for_load_state("networkidle")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("path", ["index.html", EXAMPLE])
def test_page_loads_without_errors(page, lang: str, path: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, f"/{lang}/{path}")
    assert page.title()
    assert page.problems == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_image_loaded(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, f"/{lang}/{EXAMPLE}")
    images = page.evaluate("() => [...document.images].map(i => [i.currentSrc || i.src, i.naturalWidth])")
    assert len(images) >= 2
    assert [src for src, width in images if width == 0] == []
    # Chromium draws a PNG cut short as far as it goes and reports its width from the header,
    # so decode every image served to the page in full as well.
    for src, _ in images:
        response = page.request.get(src)
        assert response.ok, src
        assert _decode_error(response.body()) is None, src


def _decode_error(data: bytes) -> str | None:
    """Why ``data`` is not a complete image (``None`` if it decodes in full)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except (OSError, SyntaxError) as error:
        return str(error)
    return None


def test_truncated_image_is_reported(site: Path) -> None:
    # The control case of the check above: the site's own first figure, whole and cut to 3 KB.
    data = next(site.glob("en/_images/*.png")).read_bytes()
    assert _decode_error(data) is None
    assert _decode_error(data[:3000]) is not None


@pytest.mark.parametrize(("start", "other", "label"), [("en", "zh_CN", "简体中文"), ("zh_CN", "en", "English")])
def test_switcher_opens_same_page_in_other_language(page, start: str, other: str, label: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, f"/{start}/{EXAMPLE}")
    page.locator(".posenc-language-switcher a", has_text=label).first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/{other}/{EXAMPLE}")
    assert page.evaluate("() => document.documentElement.lang") == ("zh-CN" if other == "zh_CN" else "en")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_math_is_typeset(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, f"/{lang}/properties/boundedness.html")
    page.wait_for_selector("mjx-container", timeout=20_000)
    assert page.locator("mjx-container").count() >= 3
    text = page.inner_text("article")
    for raw in ("\\lVert", "\\sum", "$$", "\\(", "\\["):
        assert raw not in text, f"raw TeX {raw!r} visible on the page"
    assert page.problems == []


def test_chinese_search_finds_results(page) -> None:  # type: ignore[no-untyped-def]
    _open(page, "/zh_CN/search.html?q=%E4%BD%8D%E7%BD%AE%E7%BC%96%E7%A0%81")  # 位置编码
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=20_000)
    assert results.count() >= 3  # home, first example, property page, API...
    assert page.problems == []


def test_copy_button_copies_code(page) -> None:  # type: ignore[no-untyped-def]
    _open(page, "/en/" + EXAMPLE)
    block = page.locator("div.highlight-Python").first
    expected = block.locator("pre").inner_text()
    block.hover()
    block.locator("button.copybtn").click()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.strip() == expected.strip()
    assert "posenc" in copied


@pytest.mark.parametrize(("lang", "title"), [("en", "Why order matters"), ("zh_CN", "语序为何重要")])
def test_gallery_cards_show_titles_in_page_language(page, lang: str, title: str) -> None:  # type: ignore[no-untyped-def]
    _open(page, f"/{lang}/auto_examples/index.html")
    visible = page.locator(".sphx-glr-thumbcontainer").all_inner_texts()
    assert any(title in text for text in visible), visible
    if lang == "zh_CN":
        assert not any("Why order matters" in text for text in visible), visible
        thumbs = page.evaluate("() => [...document.querySelectorAll('.sphx-glr-thumbcontainer img')].map(i => [i.src, i.naturalWidth])")
        assert thumbs and all(width > 0 for _, width in thumbs), thumbs
        # An example without a figure shows sphinx-gallery's placeholder, which has no words.
        drew = {png.name.removesuffix("_001.png") for png in (ROOT / "docs" / "auto_examples").rglob("sphx_glr_*_001.png")}
        english = [src for src, _ in thumbs if not src.endswith(".zh_CN.png")]
        assert all(src.rsplit("/", 1)[-1].removesuffix("_thumb.png") not in drew for src in english), english
        assert len(english) < len(thumbs) / 10, english
    assert page.problems == []
