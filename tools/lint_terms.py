"""Terminology and punctuation lint for the Chinese catalogues.

Usage: python tools/lint_terms.py [PO_DIR_OR_FILE ...]   (default: docs/locale/zh_CN/LC_MESSAGES)

Checks every translated message against the project's glossary (docs/dev/glossary.md, the site's 术语表):

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

#: Renderings the glossary rules out: (pattern in the Chinese text, what to write instead).
FORBIDDEN: list[tuple[str, str]] = [
    (r"持有", "rephrase (缓存、保存、包含…); 持有 is a calque of 'holds'"),
    (r"健全性|健全检查|合理性检查|完整性检查", "基本检查 (sanity check)"),
    (r"图样", "rephrase (模式、规律、图案…)"),
    (r"逆频率", "频率（代码名 inv_freq）"),
    (r"几何级数", "等比数列 / 按等比分布 (几何级数 is the sum of a series)"),
    (r"几何分布|几何间隔|几何地", "按等比分布"),
    (r"配对索引|对索引", "配对下标 (pair index)"),
    (r"裁剪|钳制|夹紧", "截断 (clip / clamp)"),
    (r"注意力得分|注意力打分|注意力评分|(?<!分)得分|打分", "注意力分数 (attention score)"),
    (r"\bet al\b\.?", "等（如 Vaswani 等，2017）"),
    (r"等人", "等（如 Vaswani 等，2017）"),
    (r"旋转位置嵌入|旋转式位置编码|旋转编码", "旋转位置编码（RoPE）"),
    (r"外插", "外推 (extrapolation)"),
    (r"内插", "插值 (interpolation)"),
    (r"词汇表", "词表 (vocabulary)"),
    (r"令牌", "词元 (token)"),
    (r"因果遮罩|因果掩膜|因果屏蔽", "因果掩码 (causal mask)"),
    (r"缓冲器", "缓冲区 (buffer)"),
    (r"交织布局|交叉布局|交替布局", "交错布局 (interleaved layout)"),
    (r"对半分布局|半分布局|拆半布局", "前后对半布局 (half-split layout)"),
    (r"(?<!底)基数", "底数（base）"),
    (r"缩放系数|缩放比例因子", "缩放因子 (scaling factor)"),
    (r"相对位置桶|相对位置分箱", "相对位置分桶 (relative position bucket)"),
    (r"远距离衰减|长程衰减|长距离衰减", "远程衰减 (long-range decay)"),
    (r"左侧填充|左边填充", "左填充 (left padding)"),
    (r"混乱度|困惑值", "困惑度 (perplexity)"),
    (r"自我注意力|自关注", "自注意力 (self-attention)"),
]

#: Glossary terms: an English term in the source (outside code) must come out as its rendering.
TERMS: list[tuple[str, str]] = [
    (r"positional encodings?", "位置编码"),
    (r"attention bias(es)?", "注意力偏置"),
    (r"attention scores?", "注意力分数"),
    (r"pair index", "配对下标"),
    # "geometric progression", "geometrically spaced"; not "geometrically, ..." (seen as geometry)
    # nor "geometric mean" (几何平均), nor the library PyTorch Geometric.
    (r"(?<!PyTorch )geometric(?!ally,| mean)(ally)?", "等比"),
    (r"\b(clamp)(s|ed|ing)?\b|clipped (relative )?distance", "截断"),
    (r"sanity check", "基本检查"),
    (r"extrapolat\w*", "外推"),
    (r"perplexity", "困惑度"),
    (r"vocabular(y|ies)", "词表"),
    (r"causal mask", "因果掩码"),
    # A bucket is 桶 (bucket 17: 桶 17); the term "relative position bucket" is 相对位置分桶 (above).
    (r"buckets?", "桶"),
    (r"left padding", "左填充"),
    (r"scaling factor", "缩放因子"),
    (r"wavelengths?", "波长"),
    (r"long-range decay", "远程衰减"),
    (r"\bet al\.", "等"),
    (r"sliding[- ]window", "滑动窗口"),
    (r"context shift", "上下文平移"),
    (r"attention sinks?", "注意力汇"),
    (r"chunked prefill", "分块预填充"),
    (r"document mask", "文档掩码"),
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


def check_message(msgid: str, msgstr: str, catalogue: str) -> list[str]:
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
    rules += markup_edge_problems(msgstr)

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
    first_use_seen: set[str] = set()
    for message in catalogue:
        if not message.id or not isinstance(message.id, str) or not isinstance(message.string, str):
            continue
        msgid, msgstr = message.id, message.string
        if not msgstr:
            continue
        for rule in check_message(msgid, msgstr, po.name):
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
        print(f"lint_terms: {len(problems)} problem(s); terms and rules: docs/dev/glossary.md, the site's 术语表", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
