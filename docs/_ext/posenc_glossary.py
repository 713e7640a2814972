"""The site's terminology from one data file, ``docs/glossary.toml``.

Three things are derived from it: the glossary page (the ``posenc-glossary`` directive writes
its MyST ``glossary`` block), the rules of the terminology lint (``tools/lint_terms.py``), and
the words that Chinese search keeps whole (jieba's user dictionary). See docs/dev/glossary.md.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

DATA = Path(__file__).resolve().parents[1] / "glossary.toml"
HAN = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Term:
    en: str
    zh: str
    lint: str | None = None  # English pattern whose translation must contain lint_zh
    lint_zh: str | None = None  # the word the lint checks, when shorter than zh
    avoid: str | None = None  # Chinese renderings the lint refuses for this term


@dataclass(frozen=True)
class Entry:
    terms: tuple[Term, ...]
    definition: str


def load(path: Path = DATA) -> tuple[list[Entry], list[str]]:
    """The glossary's entries and the extra search words; raise ``ValueError`` on a bad entry."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = []
    for number, raw in enumerate(data["entry"], 1):
        if set(raw) != {"terms", "definition"} or not raw["terms"]:
            raise ValueError(f"{path.name}: entry {number} needs 'terms' and 'definition', got {sorted(raw)}")
        terms = []
        for term in raw["terms"]:
            unknown = set(term) - {"en", "zh", "lint", "lint_zh", "avoid"}
            if unknown or not {"en", "zh"} <= set(term):
                raise ValueError(f"{path.name}: entry {number}: a term needs en and zh, got {sorted(term)}")
            if not HAN.search(term["zh"]) or re.search(r"[()（）]", term["en"] + term["zh"]):
                raise ValueError(f"{path.name}: {term['en']!r}: zh must be Chinese, and neither may hold brackets")
            for key in ("lint", "avoid"):
                if key in term:
                    re.compile(term[key])
            terms.append(Term(**term))
        entries.append(Entry(tuple(terms), raw["definition"].strip("\n")))
    english = [t.en for e in entries for t in e.terms]
    if len(set(english)) != len(english):
        raise ValueError(f"{path.name}: a term is listed twice")
    return entries, list(data.get("search_words", []))


def terms(entries: list[Entry]) -> list[Term]:
    return [t for e in entries for t in e.terms]


def page_markdown(entries: list[Entry]) -> str:
    """The MyST ``glossary`` block of the page: ``en (zh)`` term lines, indented definitions."""
    items = []
    for entry in entries:
        lines = [f"{t.en} ({t.zh})" for t in entry.terms]
        lines += [f"  {line}" if line else "" for line in entry.definition.splitlines()]
        items.append("\n".join(lines))
    return "```{glossary}\n:sorted:\n\n" + "\n\n".join(items) + "\n```\n"


def search_words(entries: list[Entry], extra: list[str]) -> list[str]:
    """Words jieba keeps whole: every all-Chinese rendering of two or more characters (split at
    " / "), then the extras."""
    words = [part for t in terms(entries) for part in t.zh.split(" / ") if re.fullmatch(r"[\u4e00-\u9fff]{2,}", part)]
    return list(dict.fromkeys(words + extra))


def write_search_dictionary(target: Path) -> Path:
    """Write jieba's user dictionary (one word per line) to ``target`` if it changed."""
    text = "\n".join(search_words(*load())) + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


class GlossaryDirective(SphinxDirective):
    """``posenc-glossary``: the glossary block, written from docs/glossary.toml."""

    def run(self) -> list:
        self.env.note_dependency(str(DATA))
        return self.parse_text_to_nodes(page_markdown(load()[0]))


def setup(app: Sphinx) -> dict:
    app.add_directive("posenc-glossary", GlossaryDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
