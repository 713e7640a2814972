"""The Chinese catalogues are in step with the English sources and do not churn between builds."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LOCALE = DOCS / "locale"


def test_refreshing_catalogues_changes_nothing(site: Path, tmp_path: Path) -> None:
    """`make i18n` on an unchanged tree must leave every .po file byte for byte as committed.

    A difference means either English text changed without a catalogue update, or a message
    carries something that varies from run to run (timings, memory, paths, dates).
    """
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    locale = tmp_path / "locale"
    shutil.copytree(LOCALE, locale, ignore=shutil.ignore_patterns("*.mo"))
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "pot")],
        check=True, env=env, capture_output=True, text=True, timeout=600,
    )
    subprocess.run(
        [str(bin_dir / "sphinx-intl"), "update", "-p", str(tmp_path / "pot"), "-l", "zh_CN", "-d", str(locale), "--no-obsolete", "-w", "0"],
        check=True, env=env, capture_output=True, text=True, timeout=120,
    )
    committed = sorted(p.relative_to(LOCALE) for p in LOCALE.rglob("*.po"))
    refreshed = sorted(p.relative_to(locale) for p in locale.rglob("*.po"))
    assert committed == refreshed
    changed = [str(p) for p in committed if not filecmp.cmp(LOCALE / p, locale / p, shallow=False)]
    assert changed == [], f"catalogues differ after a refresh: {changed} (run `make i18n` and translate)"


@pytest.mark.parametrize("po", sorted(LOCALE.rglob("*.po")), ids=lambda p: str(p.relative_to(LOCALE)))
def test_catalogue_has_no_fuzzy_or_empty_entries(po: Path) -> None:
    from babel.messages.pofile import read_po

    with po.open("rb") as f:
        catalogue = read_po(f)
    for message in catalogue:
        if message.id:
            assert message.string, f"untranslated: {message.id!r}"
            assert not message.fuzzy, f"fuzzy: {message.id!r}"
