"""The glossary page (docs/reference/glossary.md) and its Chinese catalogue say the same thing.

Each term of the page is written ``english (中文)``: the Chinese rendering the site uses for it.
The Chinese page must show that rendering first, with the English in parentheses, and the
rendering must agree with the terminology lint (tools/lint_terms.py), which enforces the same
glossary on every other catalogue.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "glossary.md"
CATALOGUE = ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES" / "reference" / "glossary.po"
sys.path.insert(0, str(ROOT / "tools"))

import lint_terms  # noqa: E402

HAN = re.compile(r"[\u4e00-\u9fff]")


def _term_lines() -> list[str]:
    """The term lines of the page's glossary block: unindented, not an option, not blank."""
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return [line for line in block.splitlines()[1:] if line.strip() and not line[0].isspace() and not line.startswith(":")]


def _terms() -> list[tuple[str, str]]:
    terms = []
    for line in _term_lines():
        match = re.fullmatch(r"(?P<en>[^()]+) \((?P<zh>[^()]+)\)", line)
        assert match and HAN.search(match["zh"]), f"glossary term without its Chinese rendering: {line!r}"
        terms.append((match["en"], match["zh"]))
    return terms


def test_page_states_a_chinese_rendering_for_every_term() -> None:
    terms = _terms()
    assert len(terms) >= 50, f"only {len(terms)} terms: is the glossary block parsed?"
    english = [en for en, _ in terms]
    assert len(set(english)) == len(english), "a term is listed twice"


def test_chinese_page_leads_with_the_stated_rendering() -> None:
    with CATALOGUE.open("rb") as f:
        catalogue = read_po(f)
    wrong = []
    for en, zh in _terms():
        message = catalogue.get(f"{en} ({zh})")
        expected = f"{zh}（{en}）"
        if message is None or message.string != expected or message.fuzzy:
            wrong.append(f"{en} ({zh}): {message.string if message else 'missing'!r}, expected {expected!r}")
    assert wrong == [], "\n".join(wrong)


def test_renderings_agree_with_the_terminology_lint() -> None:
    # lint_terms.TERMS: (English pattern, Chinese rendering) for the terms the lint enforces.
    disagree = []
    for en, zh in _terms():
        for pattern, rendering in lint_terms.TERMS:
            if re.search(pattern, en, re.IGNORECASE) and rendering not in zh:
                disagree.append(f"{en} ({zh}): the lint renders {pattern!r} as {rendering}")
    assert disagree == [], "\n".join(disagree)
