"""The conventions table: every row backed by conformance tests that exist, and linked to their source."""

from __future__ import annotations

import copy
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import posenc_conventions  # noqa: E402
from site_languages import LANGUAGES  # noqa: E402

ROWS = posenc_conventions.ROWS
CHECKED = [row for row in ROWS if row.get("checked", True)]
TEST_IDS = sorted({test_id for row in CHECKED for test_id in row["tests"]})
LINK = re.compile(r'<a class="reference internal" href="([^"#]*)#([^"]+)" title="([^"]+)">')


def test_every_checked_row_names_tests_that_exist() -> None:
    posenc_conventions.check_rows(ROWS)  # raises on a row without tests or with a missing one
    assert all(row["tests"] for row in CHECKED)
    assert posenc_conventions.missing_tests(TEST_IDS) == []


def test_every_library_of_the_issue_has_a_row() -> None:
    libraries = {row["library"] for row in ROWS}
    assert set(posenc_conventions.LIBRARIES) <= libraries
    for row in ROWS:
        if not row.get("checked", True):
            # A library without a test says so instead of stating conventions.
            assert row["reason"] and not set(posenc_conventions.PROSE) & set(row)
            assert "tests" not in row


def test_named_tests_are_collected_by_pytest() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/conformance"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    collected = {line.split("[", 1)[0] for line in result.stdout.splitlines() if "::" in line}
    assert set(TEST_IDS) <= collected, sorted(set(TEST_IDS) - collected)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda row: row.update(tests=["tests/conformance/test_sinusoidal_refs.py::test_no_such_test"]), "no such"),
        (lambda row: row.update(tests=["tests/conformance/test_nowhere.py::test_marian_sinusoidal_equals_concat"]),
         "no such"),
        (lambda row: row.update(tests=["tests/test_sinusoidal.py::test_x"]), "not a conformance test"),
        (lambda row: row.update(tests=[]), "at least one"),
        (lambda row: row.update(layout=""), "layout"),
        (lambda row: row.update(group="elsewhere"), "group"),
        (lambda row: row.update(checked=False), "says why"),
    ],
)
def test_bad_rows_are_refused(change, message: str) -> None:
    row = copy.deepcopy(CHECKED[0])
    change(row)
    with pytest.raises(ValueError, match=message):
        posenc_conventions.check_rows([row])


def test_functions_are_read_without_importing() -> None:
    path = ROOT / "tests" / "conformance" / "test_sinusoidal_refs.py"
    functions = posenc_conventions.test_functions(path)
    assert "test_marian_sinusoidal_equals_concat" in functions
    assert "pytorch_tutorial_pe" not in functions  # a transcription, not a test
    start, end = functions["test_marian_sinusoidal_equals_concat"]
    lines = path.read_text().splitlines()
    assert lines[start - 1].startswith("@pytest.mark.parametrize") and start < end


@pytest.mark.docs
@pytest.mark.parametrize("lang", LANGUAGES)
def test_built_table_links_every_test_to_its_source(site: Path, lang: str) -> None:
    page = (site / lang / "reference" / "conventions.html").read_text(encoding="utf-8")
    source = (site / lang / "reference" / "conformance.html").read_text(encoding="utf-8")
    links = LINK.findall(page)
    linked = {html.unescape(title) for _, _, title in links}
    assert linked == set(TEST_IDS)
    for href, anchor, title in links:
        assert href == "conformance.html", href
        assert anchor == posenc_conventions.test_anchor(html.unescape(title))
        assert f'id="{anchor}"' in source, f"{title}: no anchor {anchor} on the conformance page"


@pytest.mark.docs
@pytest.mark.parametrize("lang", LANGUAGES)
def test_conformance_page_shows_every_test(site: Path, lang: str) -> None:
    source = (site / lang / "reference" / "conformance.html").read_text(encoding="utf-8")
    for path in posenc_conventions.conformance_files():
        for name in posenc_conventions.test_functions(path):
            test_id = f"{path.relative_to(ROOT).as_posix()}::{name}"
            assert f'id="{posenc_conventions.test_anchor(test_id)}"' in source, test_id


@pytest.mark.docs
def test_chinese_table_is_translated(site: Path) -> None:
    page = (site / "zh_CN" / "reference" / "conventions.html").read_text(encoding="utf-8")
    for header in ("布局", "频率", "精度"):
        assert f"<p>{header}</p>" in page or f">{header}<" in page, header
    assert "not checked" not in page
