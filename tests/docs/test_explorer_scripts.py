"""Explorer scripts load only on the pages that show an explorer, and only their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from site_languages import LANGUAGES  # noqa: E402

PAGES = {  # explorer -> the page that shows it
    "sinusoidal": "auto_examples/01_foundations/plot_sinusoidal_picture.html",
    "t5": "auto_examples/04_variants/plot_t5_buckets.html",
    "rope_scaling": "auto_examples/04_variants/plot_rope_scaling_atlas.html",
    "alibi": "auto_examples/04_variants/plot_alibi.html",
}
SCRIPT = re.compile(r'<script[^>]*src="[^"]*_static/explorers/([a-z0-9_]+)\.js')


@pytest.mark.docs
@pytest.mark.parametrize("lang", LANGUAGES)
def test_scripts_follow_the_explorers_on_each_page(site: Path, lang: str) -> None:
    root = site / lang
    for page in root.rglob("*.html"):
        loaded = set(SCRIPT.findall(page.read_text(encoding="utf-8")))
        relative = page.relative_to(root).as_posix()
        shown = {name for name, where in PAGES.items() if where == relative}
        assert loaded == ({"kit"} | shown if shown else set()), relative
