"""The navigation follows the parts of the site (docs/dev/site-design.md, "Navigation"), not how pages are made."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest
from site_languages import LANGUAGES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The parts that have pages, in the order of the top bar.
PARTS = ("foundations", "properties", "implementations", "variants", "comparisons", "beyond_sequences",
         "todays_models", "troubleshooting",
         "reference")
_TOCTREE = re.compile(r"```\{toctree\}\n(.*?)```", re.DOTALL)


def _toctree_entries(page: Path) -> list[str]:
    """Docnames listed by the toctrees of a MyST page, relative to docs/."""
    entries = []
    for block in _TOCTREE.findall(page.read_text(encoding="utf-8")):
        for line in block.splitlines():
            line = line.strip()
            if line.endswith(">") and "<" in line:  # "Title <doc>": an explicit title
                line = line[line.rindex("<") + 1 : -1]
            if line and not line.startswith(":"):
                entries.append(line.lstrip("/") if line.startswith("/") else f"{page.parent.name}/{line}")
    return entries


def _content_pages() -> set[str]:
    """Every gallery example and every notebook page, as docnames."""
    examples = {f"auto_examples/{p.parent.name}/{p.stem}" for p in (ROOT / "examples").glob("*/plot_*.py")}
    notebooks = {
        str(p.relative_to(DOCS).with_suffix(""))
        for p in DOCS.glob("*/*.md")
        if p.stem != "index" and "kernelspec" in p.read_text(encoding="utf-8")[:500]
    }
    return examples | notebooks


def test_every_page_belongs_to_exactly_one_part() -> None:
    placed: dict[str, list[str]] = {}
    for part in PARTS:
        for entry in _toctree_entries(DOCS / part / "index.md"):
            placed.setdefault(entry, []).append(part)
    pages = _content_pages()
    assert pages, "no example or notebook found"
    assert {p for p in pages if p not in placed} == set(), "pages outside every part's index"
    assert {p: parts for p, parts in placed.items() if len(parts) > 1} == {}
    reference = {entry for entry in placed if not entry.startswith("auto_examples/")}
    assert all((DOCS / entry).with_suffix(".md").exists() or (DOCS / entry).with_suffix(".rst").exists()
               for entry in reference), "a part index lists a page that does not exist"
    assert {e for e in placed if e.startswith("auto_examples/")} <= pages


def test_examples_sit_in_the_gallery_folder_of_their_part() -> None:
    folders = {"foundations": "01_foundations", "properties": "02_properties",
               "implementations": "03_implementations", "variants": "04_variants",
               "comparisons": "05_comparisons", "beyond_sequences": "06_beyond_sequences", "todays_models": "08_todays_models",
               "troubleshooting": "07_troubleshooting",
               "reference": None}
    for part in PARTS:
        for entry in _toctree_entries(DOCS / part / "index.md"):
            if entry.startswith("auto_examples/"):
                assert entry.split("/")[1] == folders[part], entry


def test_root_toctree_lists_the_parts_in_order_then_ledger_reference_gallery() -> None:
    entries = _toctree_entries(DOCS / "index.md")
    entries = [e.removeprefix("docs/") for e in entries]
    parts = [f"{part}/index" for part in PARTS if part != "reference"]
    assert entries == parts + ["claims", "reference/index", "auto_examples/index"]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_built_pages_name_their_part_and_link_neighbours(site: Path, lang: str) -> None:
    for part in PARTS:
        entries = _toctree_entries(DOCS / part / "index.md")
        for previous, page in zip([f"{part}/index", *entries], entries):
            html = (site / lang / f"{page}.html").read_text(encoding="utf-8")
            here = posixpath.dirname(page)
            crumbs = html[html.index('class="bd-breadcrumbs"'):]
            crumbs = crumbs[: crumbs.index("</ul>")]
            assert f'href="{posixpath.relpath(f"{part}/index.html", here)}"' in crumbs, (lang, page)
            prev_link = html[html.index('class="left-prev"'):][:200]
            assert f'href="{posixpath.relpath(f"{previous}.html", here)}"' in prev_link, (lang, page)
        for page, following in zip(entries, entries[1:]):
            html = (site / lang / f"{page}.html").read_text(encoding="utf-8")
            next_link = html[html.index('class="right-next"'):][:200]
            here = posixpath.dirname(page)
            assert f'href="{posixpath.relpath(f"{following}.html", here)}"' in next_link, (lang, page)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_gallery_overview_is_not_a_parent_in_the_navigation(site: Path, lang: str) -> None:
    html = (site / lang / "auto_examples/01_foundations/plot_word_order.html").read_text(encoding="utf-8")
    crumbs = html[html.index('class="bd-breadcrumbs"'):]
    assert "auto_examples/index.html" not in crumbs[: crumbs.index("</ul>")]
