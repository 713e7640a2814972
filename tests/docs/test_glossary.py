"""The site's terminology (docs/glossary.toml) and what is derived from it.

The glossary page, the terminology lint (tools/lint_terms.py) and the Chinese search dictionary
all read the one data file. Each term is written ``english (中文)`` on the English page; the
Chinese page must show that rendering first, with the English in parentheses.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "glossary.md"
CATALOGUE = ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES" / "reference" / "glossary.po"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import lint_terms  # noqa: E402
import posenc_glossary  # noqa: E402

ENTRIES, SEARCH_WORDS = posenc_glossary.load()
TERMS = posenc_glossary.terms(ENTRIES)


def test_the_page_shows_the_data_file() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "```{posenc-glossary}\n```" in text
    assert "```{glossary}" not in text, "the page must not keep a second list of terms"
    assert len(TERMS) >= 50, f"only {len(TERMS)} terms: is docs/glossary.toml read?"


def test_the_page_block_lists_every_term_with_its_definition() -> None:
    block = posenc_glossary.page_markdown(ENTRIES)
    for entry in ENTRIES:
        heads = "\n".join(f"{t.en} ({t.zh})" for t in entry.terms)
        first_line = entry.definition.splitlines()[0]
        assert f"{heads}\n  {first_line}" in block


def test_chinese_page_leads_with_the_stated_rendering() -> None:
    with CATALOGUE.open("rb") as f:
        catalogue = read_po(f)
    wrong = []
    for term in TERMS:
        message = catalogue.get(f"{term.en} ({term.zh})")
        expected = f"{term.zh}（{term.en}）"
        if message is None or message.string != expected or message.fuzzy:
            wrong.append(f"{term.en} ({term.zh}): {message.string if message else 'missing'!r}, expected {expected!r}")
    assert wrong == [], "\n".join(wrong)


def test_the_lint_enforces_the_glossary_renderings() -> None:
    for term in TERMS:
        if term.lint:
            assert (term.lint, term.lint_zh or term.zh) in lint_terms.TERMS
            # The word the lint checks is part of the term's rendering (桶 of 相对位置分桶).
            assert (term.lint_zh or term.zh) in term.zh, term.en
        if term.avoid:
            assert (term.avoid, f"{term.zh} ({term.en})") in lint_terms.FORBIDDEN
            assert not re.search(term.avoid, term.zh), f"{term.en}: the rendering is one it avoids"


def test_a_rendering_the_glossary_avoids_is_reported() -> None:
    problems = lint_terms.check_message("The rotary position embedding.", "旋转位置嵌入。", "x.po")
    assert "forbidden '旋转位置嵌入': write 旋转位置编码 (rotary position embedding, RoPE)" in problems


def test_the_search_dictionary_holds_the_chinese_terms(tmp_path: Path) -> None:
    target = posenc_glossary.write_search_dictionary(tmp_path / "zh_terms.txt")
    words = target.read_text(encoding="utf-8").split("\n")
    assert {"位置编码", "旋转位置编码", "注意力汇", "多模态", "图像块", "视频块"} <= set(words)
    assert all(re.fullmatch(r"[\u4e00-\u9fff]{2,}", w) for w in words if w), "jieba reads one word per line"


@pytest.mark.parametrize(("text", "message"), [
    ('[[entry]]\nterms = [{ en = "x", zh = "位置" }]\n', "entry 1 needs 'terms' and 'definition', got ['terms']"),
    ('[[entry]]\nterms = [{ en = "x" }]\ndefinition = "d"\n', "entry 1: a term needs en and zh, got ['en']"),
    ('[[entry]]\nterms = [{ en = "x", zh = "y" }]\ndefinition = "d"\n', "'x': zh must be Chinese, and neither may hold brackets"),
    ('[[entry]]\nterms = [{ en = "x", zh = "位" }, { en = "x", zh = "置" }]\ndefinition = "d"\n', "a term is listed twice"),
])
def test_a_bad_data_file_is_refused_with_its_entry(tmp_path: Path, text: str, message: str) -> None:
    data = tmp_path / "glossary.toml"
    data.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^glossary.toml: {re.escape(message)}$"):
        posenc_glossary.load(data)
