"""Terminology and punctuation lint for the Chinese catalogues.

Usage: python tools/lint_terms.py [PO_DIR_OR_FILE ...]   (default: docs/locale/zh_CN/LC_MESSAGES)

Checks every translated message against the project's glossary (docs/glossary.toml, shown as the site's 术语表):

* forbidden renderings (calques and second renderings of a glossary term);
* glossary terms: an English term in the source must appear in its one Chinese rendering;
* first use: the first message of a catalogue that names ALiBi, NoPE or RoPE glosses it in
  Chinese, e.g. 线性偏置（ALiBi）;
* punctuation and spacing: full-width punctuation in Chinese text, one space between Chinese and
  Latin letters or digits, no space around full-width punctuation, sentences end with 。;
* no italics on Chinese text, no English words in math (``\\text{ even}``);
* figure text (figures.po) keeps its math and numbers unchanged;
* reST: inline markup does not touch a full-width bracket on the wrong side (it would not parse).

Code (````x````, roles, ``$...$`` and ``:math:``), URLs, reST targets and titles of works in
book-title marks (《…》, quoted as published) are masked before the text rules run. Exit status 1 lists the problems, one per line.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES"

HAN = "\u4e00-\u9fff"

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import posenc_glossary  # noqa: E402  (reads docs/glossary.toml)

_GLOSSARY = posenc_glossary.terms(posenc_glossary.load()[0])

#: Renderings the lint rules out: (pattern in the Chinese text, what to write instead). The
#: glossary's ``avoid`` patterns, then writing rules that belong to no term.
FORBIDDEN: list[tuple[str, str]] = [(t.avoid, f"{t.zh} ({t.en})") for t in _GLOSSARY if t.avoid] + [
    (r"持有", "rephrase (缓存、保存、包含…); 持有 is a calque of 'holds'"),
    (r"图样", "rephrase (模式、规律、图案…)"),
    (r"\bet al\b\.?", "等（如 Vaswani 等，2017）"),
    (r"等人", "等（如 Vaswani 等，2017）"),
    (r"令牌", "词元 (token)"),
    (r"奈特|纳特|\bnat\b", "nats (the unit of a loss, written in Latin letters in both languages)"),
    (r"源文章", "原文, or name the article"),
]

#: Terms: an English term in the source (outside code) must come out as its rendering. The
#: glossary's ``lint`` patterns, then writing rules ("et al.", the unit nats).
TERMS: list[tuple[str, str]] = [(t.lint, t.lint_zh or t.zh) for t in _GLOSSARY if t.lint] + [
    (r"\bet al\.", "等"),
    (r"\bnats?\b", "nats"),
]

#: Exact messages with a fixed rendering.
EXACT = {"References": "参考文献"}

#: Names glossed in Chinese on their first use in a page (catalogue).
FIRST_USE = {"ALiBi": "线性偏置（ALiBi）", "NoPE": "无位置编码（NoPE）", "RoPE": "旋转位置编码（RoPE）"}

_MASKS = [
    # A Chinese title of a work in book-title marks is quoted as published (spacing and terms
    # included), like an English paper title in quotes: 《Transformer升级之路：2、博采众长的旋转式位置编码》.
    re.compile(r"《[^《》]*》"),
    re.compile(r"``.+?``", re.DOTALL),  # inline literal
    re.compile(r":[\w:.-]+:`[^`]*`"),  # roles (:math:, :func:, :doc: ...)
    re.compile(r"`[^`]*`_{1,2}"),  # reST links
    re.compile(r"`[^`]+`"),  # default role / MyST code
    re.compile(r"(?<!\\)\$\$.+?(?<!\\)\$\$|(?<!\\)\$[^$]+?(?<!\\)\$", re.DOTALL),  # math
    re.compile(r"https?://\S+"),
    re.compile(r"<[^>]+>"),  # HTML in theme strings, link targets
    re.compile(r"%\([a-z_]+\)s|\{[a-z_0-9]*\}"),  # format placeholders
]
_MATH_SOURCES = [
    re.compile(r":math:`([^`]*)`"),
    re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$([^$]+?)(?<!\\)\$", re.DOTALL),
]
_ENGLISH_IN_TEXT = re.compile(r"\\(?:text|mathrm|textrm|mbox)\{([^}]*)\}")
_PROSE_WORDS = {"if", "even", "odd", "otherwise", "else", "and", "or", "for", "when", "where", "not", "all", "with", "terms", "distance", "scale"}


#: reST inline markup (literals, roles, links, strong, emphasis) whose edges must touch allowed characters.
_MARKUP = re.compile(r":[\w:.-]+:`[^`]*`|``.+?``|`[^`]*`_{0,2}|\*\*[^*]+\*\*|(?<!\*)\*[^*\s][^*]*\*(?!\*)", re.DOTALL)
#: docutils: an end-string may not be followed by an opening bracket (Unicode Ps), a start-string
#: may not follow a closing one (Pe); write "\ " between them (``x``\ （…）).
_OPENING = "（【《「『〈〔"
_CLOSING = "）】》」』〉〕"


def markup_edge_problems(msgstr: str) -> list[str]:
    found = []
    for match in _MARKUP.finditer(msgstr):
        after = msgstr[match.end() : match.end() + 1]
        before = msgstr[match.start() - 1 : match.start()] if match.start() else ""
        if after and after in _OPENING:
            found.append(f"inline markup {match.group(0)[:30]!r} followed by {after!r}: write \\ between them")
        if before and before in _CLOSING:
            found.append(f"inline markup {match.group(0)[:30]!r} after {before!r}: write \\ between them")
    return found


def myst_escape_problems(msgstr: str) -> list[str]:
    """In a MyST page, reST's escaped space ("\\ ") outside math shows as a backslash: Markdown
    markup may touch Chinese text and full-width brackets directly."""
    outside_math = _MATH_SOURCES[1].sub("", msgstr)
    return ["'\\ ' shows as a backslash in a MyST page: let the markup touch the text"] if "\\ " in outside_math else []


def mask(text: str) -> str:
    """Replace code, math, URLs and markup by the Latin placeholder ``X`` (spacing rules see it)."""
    for pattern in _MASKS:
        # a role whose text is Chinese (:ref:`跳转到页尾 <...>`) stands for Chinese, not Latin
        text = pattern.sub(lambda m: "中" if re.search(f"[{HAN}]", m.group(0)) else "X", text)
    return text


def _is_math_message(msgid: str) -> bool:
    """A display-math block's source (no prose, LaTeX commands or only symbols)."""
    return "\\" in msgid and not re.search(r"[A-Za-z]{3,} [A-Za-z]{3,} [A-Za-z]{3,}", mask(msgid))


@dataclass
class Problem:
    where: str
    msgid: str
    rule: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.msgid[:70]!r}"


def _math_segments(text: str) -> list[str]:
    found = []
    for pattern in _MATH_SOURCES:
        for match in pattern.finditer(text):
            found.append(next(g for g in match.groups() if g is not None))
    return found


def check_message(msgid: str, msgstr: str, catalogue: str, myst: bool = False) -> list[str]:
    """The rules a single translated message breaks (catalogue-level rules are elsewhere)."""
    rules: list[str] = []
    han = re.search(f"[{HAN}]", msgstr) is not None
    math_only = _is_math_message(msgid) and not han
    text = mask(msgstr)
    # English titles of papers (in quotes) keep their words.
    source = re.sub(r'"[^"]*"', "X", mask(msgid))

    # Math: no English words in \text{} (prose in formulas); applies to math blocks too.
    segments = _math_segments(msgstr) + ([msgstr] if _is_math_message(msgid) else [])
    for segment in segments:
        for words in _ENGLISH_IN_TEXT.findall(segment):
            stripped = words.strip()
            if re.search(f"[{HAN}]", words):  # translated words in math are fine
                continue
            if words != stripped or " " in stripped or stripped.lower() in _PROSE_WORDS:
                rules.append(f"English words in math: \\text{{{words}}} (rephrase the formula or translate)")
    if math_only or _is_math_message(msgid):
        return rules
    rules += myst_escape_problems(msgstr) if myst else markup_edge_problems(msgstr)

    for pattern, instead in FORBIDDEN:
        found = re.search(pattern, text)
        if found:
            rules.append(f"forbidden {found.group(0)!r}: write {instead}")
    for pattern, rendering in TERMS:
        if re.search(pattern, source, re.IGNORECASE) and rendering not in msgstr and han:
            rules.append(f"term {re.search(pattern, source, re.IGNORECASE).group(0)!r} must be rendered {rendering}")
    if msgid in EXACT and msgstr != EXACT[msgid]:
        rules.append(f"{msgid!r} is {EXACT[msgid]}")

    if han:
        if re.search(f"[{HAN}][,;:!?]|[,;:!?] ?[{HAN}]", text):
            rules.append("half-width punctuation in Chinese text (use ，；：！？)")
        if re.search(f"[{HAN}]\\.(\\s|$)", text):
            rules.append("half-width period after Chinese (use 。)")
        if re.search(f"\\([^()]*[{HAN}][^()]*\\)", text):
            rules.append("half-width parentheses around Chinese text (use （）)")
        if re.search(f"[{HAN}][A-Za-z0-9]|[A-Za-z0-9][{HAN}]", text.replace("\\ ", "")) or re.search(
            f"[{HAN}]\\\\ [A-Za-z0-9X]|[A-Za-z0-9X]\\\\ [{HAN}]", text
        ):
            rules.append("no space between Chinese and Latin text or digits")
        # "\ " is reST's escaped space: it renders as nothing. A list may follow a full stop.
        if re.search(r" [，。：；、！？）」”]|[（，。：；、！？「“] (?![*-] )", text.replace("\\ ", "").replace(" ::", "")):
            rules.append("space beside full-width punctuation")
        if re.search(f"(?<!\\*)\\*(?![*\\s])[^*\\n]*[{HAN}][^*\\n]*(?<![*\\s])\\*(?!\\*)", text):
            rules.append("italics on Chinese text")
        end = msgid.rstrip()
        if end.endswith(".") and not end.endswith("..") and not msgstr.rstrip().endswith(("。", "。）", "？", "！", "。”")):
            rules.append("a sentence ends with 。")
    if catalogue == "figures.po":
        for segment in _math_segments(msgid):
            if f"${segment}$" not in msgstr:
                rules.append(f"figure math changed: ${segment}$")
        numbers = re.findall(r"\d+(?:\.\d+)?", re.sub(r"\$[^$]*\$", "", msgid))
        if sorted(numbers) != sorted(re.findall(r"\d+(?:\.\d+)?", re.sub(r"\$[^$]*\$", "", msgstr))):
            rules.append("figure numbers changed")
    return rules


def lint_catalogue(po: Path, name: str | None = None) -> list[Problem]:
    name = name or po.name
    with po.open("rb") as f:
        catalogue = read_po(f)
    problems: list[Problem] = []
    # A page written in MyST (docs/<page>.md) has Markdown's escaping rules, not reST's.
    myst = (ROOT / "docs" / Path(name).with_suffix(".md")).is_file()
    first_use_seen: set[str] = set()
    for message in catalogue:
        if not message.id or not isinstance(message.id, str) or not isinstance(message.string, str):
            continue
        msgid, msgstr = message.id, message.string
        if not msgstr:
            continue
        for rule in check_message(msgid, msgstr, po.name, myst):
            problems.append(Problem(name, msgid, rule))
        plain = mask(msgstr)
        # Figure strings are short labels on pages whose text already glosses the term.
        for term, gloss in ({} if po.name == "figures.po" else FIRST_USE).items():
            # A whole word only: LongRoPE is a name of its own, not a use of RoPE.
            used = re.search(rf"(?<![A-Za-z]){re.escape(term)}(?![A-Za-z])", plain)
            if used and term not in first_use_seen:
                first_use_seen.add(term)
                if gloss not in msgstr:
                    problems.append(Problem(name, msgid, f"first use of {term} in this page: write {gloss}"))
    return problems


def lint(paths: list[Path]) -> list[Problem]:
    problems: list[Problem] = []
    for path in paths:
        files = sorted(path.rglob("*.po")) if path.is_dir() else [path]
        for po in files:
            problems += lint_catalogue(po, str(po.relative_to(path)) if path.is_dir() else po.name)
    return problems


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv[1:]] or [DEFAULT]
    problems = lint(paths)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"lint_terms: {len(problems)} problem(s); terms: docs/glossary.toml (the site's 术语表), rules: docs/dev/glossary.md", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
