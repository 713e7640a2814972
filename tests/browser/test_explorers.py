"""The interactive explorers in headless Chromium: their numbers equal posenc's, they draw fast,
answer the keyboard and the mouse, and speak the page's language.

The reference values are written by the build (``docs/_ext/posenc_explorers.py``) from posenc
itself; the JavaScript computes the same quantities in the browser.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from test_browser import _open, base_url, browser, page  # noqa: F401  (fixtures)
from site_languages import LANGUAGES  # noqa: E402

#: The page that hosts each explorer.
HOSTS = {
    "sinusoidal": "auto_examples/01_foundations/plot_sinusoidal_picture.html",
    "t5": "auto_examples/04_variants/plot_t5_buckets.html",
    "rope_scaling": "auto_examples/04_variants/plot_rope_scaling_atlas.html",
    "alibi": "auto_examples/04_variants/plot_alibi.html",
}
CJK = re.compile(r"[\u4e00-\u9fff]")


def _reference(page, lang: str, name: str):  # type: ignore[no-untyped-def]
    """The values the build exported from posenc for explorer ``name``."""
    response = page.request.get(f"/{lang}/_static/explorers/reference/{name}.json")
    assert response.ok
    return json.loads(response.body())


def _explorer(page, lang: str, name: str):  # type: ignore[no-untyped-def]
    _open(page, f"/{lang}/{HOSTS[name]}")
    root = page.locator(f'.posenc-explorer[data-explorer="{name}"]')
    assert root.count() == 1
    root.scroll_into_view_if_needed()
    return root


@pytest.mark.parametrize("lang", LANGUAGES)
def test_sinusoidal_numbers_equal_posenc(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _explorer(page, lang, "sinusoidal")
    cases = _reference(page, lang, "sinusoidal")
    assert len(cases) >= 6 and {c["layout"] for c in cases} == {"interleaved", "concat"}
    assert any(c["dim"] % 2 for c in cases)  # odd widths, where the layouts differ most
    errors = page.evaluate(
        """cases => cases.map(c => {
            const got = window.posencExplorers.sinusoidal.compute(c);
            const worst = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
            return [got.table.length === c.table.length, got.dot.length === c.dot.length,
                    worst(got.table, c.table), worst(got.dot, c.dot) / c.dim];
        })""",
        cases,
    )
    for case, (table_len_ok, dot_len_ok, table_error, dot_error) in zip(cases, errors):
        setting = (case["dim"], case["base"], case["length"], case["layout"])
        assert table_len_ok and dot_len_ok, setting
        # Float32 tolerance: entries lie in [-1, 1]; the dot product is relative to its scale d.
        assert table_error < 1e-6, (setting, table_error)
        assert dot_error < 1e-6, (setting, dot_error)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_sinusoidal_draws_fast_and_responds(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    root = _explorer(page, lang, "sinusoidal")
    first_draw_ms = float(root.get_attribute("data-first-draw-ms"))
    print(f"sinusoidal explorer, {lang}: first drawing in {first_draw_ms:.1f} ms")
    assert first_draw_ms < 100
    labels = root.locator(".posenc-explorer-control span").all_inner_texts()
    assert len(labels) == 5
    assert all(CJK.search(label) for label in labels) == (lang == "zh_CN"), labels
    canvas = root.locator("canvas")
    before = canvas.evaluate("c => c.toDataURL()")
    shown = root.locator("output").first
    width = root.locator('input[type="range"]').first
    value = shown.inner_text()
    # Keyboard: focus the width slider and step it.
    width.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert shown.inner_text() == str(int(value) + 2)
    assert canvas.evaluate("c => c.toDataURL()") != before
    # The layout menu redraws too.
    drawn = canvas.evaluate("c => c.toDataURL()")
    root.locator("select").select_option("concat")
    assert canvas.evaluate("c => c.toDataURL()") != drawn
    assert int(root.get_attribute("data-draws")) == 4
    assert page.problems == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_t5_buckets_equal_posenc(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _explorer(page, lang, "t5")
    cases = _reference(page, lang, "t5")
    assert len(cases) >= 6 and {c["bidirectional"] for c in cases} == {True, False}
    mismatches = page.evaluate(
        """cases => cases.map(c => {
            const got = window.posencExplorers.t5.compute(c).buckets;
            if (got.length !== c.buckets.length) return -1;
            return got.reduce((n, b, i) => n + (b !== c.buckets[i]), 0);
        })""",
        cases,
    )
    for case, mismatch in zip(cases, mismatches):
        # Integers: equal, not close — including the settings where float32 rounding matters.
        assert mismatch == 0, (case["bidirectional"], case["numBuckets"], case["maxDistance"], mismatch)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_t5_draws_fast_and_responds(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    root = _explorer(page, lang, "t5")
    first_draw_ms = float(root.get_attribute("data-first-draw-ms"))
    print(f"t5 explorer, {lang}: first drawing in {first_draw_ms:.1f} ms")
    assert first_draw_ms < 100
    labels = root.locator(".posenc-explorer-control span").all_inner_texts()
    assert len(labels) == 4
    assert bool(CJK.search(labels[0])) == (lang == "zh_CN"), labels
    # The defaults: 8 exact buckets per direction, the last bucket from distance 91 (as the page
    # computes with posenc above the explorer).
    assert (root.get_attribute("data-exact"), root.get_attribute("data-last-start")) == ("8", "91")
    canvas = root.locator("canvas")
    before = canvas.evaluate("c => c.toDataURL()")
    buckets = root.locator('input[type="range"]').first
    buckets.focus()
    for _ in range(16):
        page.keyboard.press("ArrowRight")  # 32 -> 64 buckets
    assert root.locator("output").first.inner_text() == "64"
    assert root.get_attribute("data-exact") == "16"
    summary = root.locator(".posenc-explorer-summary").inner_text()
    assert "16" in summary
    assert canvas.evaluate("c => c.toDataURL()") != before
    root.locator("select").select_option("causal")
    assert root.get_attribute("data-exact") == "32"
    assert page.problems == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_rope_scaling_equals_posenc(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _explorer(page, lang, "rope_scaling")
    cases = _reference(page, lang, "rope_scaling")
    assert {c["type"] for c in cases} == {"default", "linear", "dynamic", "yarn", "llama3", "longrope"}
    errors = page.evaluate(
        """cases => cases.map(c => {
            const api = window.posencExplorers.rope_scaling;
            const got = api.compute({...c, ...api.longropeLists(c.dim, c.factor)});
            if (got.invFreq.length !== c.invFreq.length) return [Infinity, Infinity];
            const rel = got.invFreq.reduce((m, v, i) => Math.max(m, Math.abs(v / c.invFreq[i] - 1)), 0);
            return [rel, Math.abs(got.attention - c.attention)];
        })""",
        cases,
    )
    for case, (relative_error, attention_error) in zip(cases, errors):
        setting = (case["type"], case["dim"], case["base"], case["factor"], case["original"], case["seqLen"])
        assert relative_error < 1e-9, (setting, relative_error)
        assert attention_error < 1e-12, (setting, attention_error)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_rope_scaling_draws_fast_and_responds(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    root = _explorer(page, lang, "rope_scaling")
    first_draw_ms = float(root.get_attribute("data-first-draw-ms"))
    print(f"rope_scaling explorer, {lang}: first drawing in {first_draw_ms:.1f} ms")
    assert first_draw_ms < 100
    labels = root.locator(".posenc-explorer-control span").all_inner_texts()
    assert bool(CJK.search(labels[0])) == (lang == "zh_CN"), labels
    # YaRN with s = 4 on the page's head: the attention factor 0.1 ln 4 + 1, 21 pairs unchanged,
    # as printed by the page from posenc.
    assert float(root.get_attribute("data-attention")) == pytest.approx(0.1 * math.log(4) + 1, rel=1e-12)
    assert root.get_attribute("data-unchanged") == "21"
    canvas = root.locator("canvas")
    before = canvas.evaluate("c => c.toDataURL()")
    root.locator("select").select_option("linear")
    assert root.get_attribute("data-unchanged") == "0"
    assert float(root.get_attribute("data-attention")) == 1.0
    # Controls a type does not read are hidden; the ones it reads answer the keyboard.
    assert not root.get_by_text("beta_fast").is_visible()
    factor = root.locator('input[type="range"]').nth(2)
    factor.focus()
    page.keyboard.press("ArrowRight")
    assert root.locator("output").nth(2).inner_text() == "4.5"
    assert canvas.evaluate("c => c.toDataURL()") != before
    assert page.problems == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_alibi_equals_posenc(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    _explorer(page, lang, "alibi")
    reference = _reference(page, lang, "alibi")
    assert len(reference["slopes"]) == 64
    errors = page.evaluate(
        """ref => {
            const api = window.posencExplorers.alibi;
            const worst = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
            const slopes = Object.entries(ref.slopes).map(([n, expected]) => {
                const got = api.compute({heads: Number(n), qLen: 1, kLen: 1}).slopes;
                return got.length === expected.length ? worst(got, expected) : Infinity;
            });
            const bias = ref.bias.map(c => {
                const got = api.compute(c).bias;
                return got.length === c.bias.length ? worst(got, c.bias) : Infinity;
            });
            return [Math.max(...slopes), Math.max(...bias)];
        }""",
        reference,
    )
    assert errors[0] < 1e-15, errors
    assert errors[1] < 1e-12, errors


@pytest.mark.parametrize("lang", LANGUAGES)
def test_alibi_draws_fast_and_responds(page, lang: str) -> None:  # type: ignore[no-untyped-def]
    root = _explorer(page, lang, "alibi")
    first_draw_ms = float(root.get_attribute("data-first-draw-ms"))
    print(f"alibi explorer, {lang}: first drawing in {first_draw_ms:.1f} ms")
    assert first_draw_ms < 100
    labels = root.locator(".posenc-explorer-control span").all_inner_texts()
    assert len(labels) == 3
    assert bool(CJK.search(labels[0])) == (lang == "zh_CN"), labels
    assert len(json.loads(root.get_attribute("data-slopes"))) == 12  # the page's default
    canvas = root.locator("canvas")
    before = canvas.evaluate("c => c.toDataURL()")
    heads = root.locator('input[type="range"]').first
    heads.focus()
    for _ in range(4):
        page.keyboard.press("ArrowRight")  # 12 -> 16 heads
    slopes = json.loads(root.get_attribute("data-slopes"))
    assert len(slopes) == 16 and slopes[0] == pytest.approx(2 ** -0.5, rel=1e-15)
    assert root.locator("output").first.inner_text() == "16"
    assert canvas.evaluate("c => c.toDataURL()") != before
    assert page.problems == []
