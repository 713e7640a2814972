"""Length check for the Chinese catalogues: a translation far longer or shorter than its source.

Usage: python tools/length_check.py [--stats] [PO_DIR_OR_FILE ...]   (default: docs/locale/zh_CN/LC_MESSAGES)

A stale translation (one kept from an older English message that said more, or less) or a
sentence left out shows up as a length out of line with the source. Lengths are compared in
units of meaning, after ``lint_terms.mask`` has replaced code, math, URLs and roles by a
placeholder:

* English: the words and numbers of the source that the translation does not keep as they are
  (names, titles in quotes and numbers usually stay Latin in the Chinese text);
* Chinese: the Han characters of the translation that are not already in the source, with the
  glossed names of ``lint_terms.FIRST_USE`` (旋转位置编码（RoPE）) counted as the bare name.

Calibration, on the catalogues as they stood when this check was written (3 475 messages, of
which 1 530 are judged): the ratio Han characters / English words has a median of 1.76; the
spread of its log shrinks with the length of the message, about
``sqrt(0.09**2 + 0.55 / words)`` (measured: 0.24 for 8–16 words, 0.17 for 16–32, 0.13 for
32–48, 0.10 past 64). A message is flagged when its log ratio is more than ``Z_MAX`` spreads from
the median, in either direction. There, the one message past 3 spreads (+3.7) was a stale
translation (``auto_examples/index.po``, Foundations); with it fixed, all judged messages lie
within -2.8 … +2.8. Messages with fewer than ``MIN_WORDS`` translated words, or that keep most of
their source in Latin (citations, code-like labels), are not judged: their ratio says nothing.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from babel.messages.pofile import read_po

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_terms import DEFAULT, FIRST_USE, _is_math_message, mask  # noqa: E402

#: Median Han characters per translated English word (calibrated, see the module docstring).
MEDIAN_RATIO = 1.76
#: Spread of the log ratio: sqrt(SPREAD_FLOOR**2 + SPREAD_PER_WORD / words).
SPREAD_FLOOR = 0.09
SPREAD_PER_WORD = 0.55
#: How many spreads from the median a message may lie.
Z_MAX = 3.0
#: Fewer translated English words than this: not judged.
MIN_WORDS = 8
#: A source whose words stay Latin in the translation at least this often is not judged.
MAX_KEPT_SHARE = 0.6

_HAN = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+(?:[.,]\d+)?")


def length_units(msgid: str, msgstr: str) -> tuple[int, int, int]:
    """(English words of the source, of which kept in Latin by the translation, new Han characters)."""
    target = msgstr
    for term, gloss in FIRST_USE.items():  # a glossed name stands for the name
        if gloss not in msgid:
            target = target.replace(gloss, term)
    # A title in book-title marks that the source quotes too is text on both sides; any other
    # (a work the translation names) is masked like code, as the lint masks it.
    target = re.sub(r"《([^《》]*)》", lambda m: m.group(1) if m.group(1) in msgid else m.group(0), target)
    source, target = mask(msgid), mask(target)
    words = len(_WORD.findall(source))
    kept = min(len(_WORD.findall(target)), words)
    han = max(len(_HAN.findall(target)) - len(_HAN.findall(source)), 0)
    return words, kept, han


def length_z(msgid: str, msgstr: str) -> float | None:
    """How many spreads the message's log ratio lies from the median; None if it is not judged."""
    if not msgstr or msgstr == msgid or not _HAN.search(msgstr) or _is_math_message(msgid):
        return None
    words, kept, han = length_units(msgid, msgstr)
    translated = words - kept
    if translated < MIN_WORDS or kept >= MAX_KEPT_SHARE * words:
        return None
    spread = math.sqrt(SPREAD_FLOOR**2 + SPREAD_PER_WORD / translated)
    return math.log(max(han, 1) / translated / MEDIAN_RATIO) / spread


def length_ratio_problems(msgid: str, msgstr: str) -> list[str]:
    """A one-item list if the translation's length is far out of line with its source, else []."""
    z = length_z(msgid, msgstr)
    if z is None or abs(z) <= Z_MAX:
        return []
    words, kept, han = length_units(msgid, msgstr)
    ratio = han / (words - kept)
    side = "longer" if z > 0 else "shorter"
    return [
        f"translation much {side} than its source: {han} Han characters for {words - kept} English words "
        f"(ratio {ratio:.2f}, typical {MEDIAN_RATIO}; {z:+.1f} spreads): stale, added or missing text?"
    ]


def _messages(paths: list[Path]):
    for path in paths:
        files = sorted(path.rglob("*.po")) if path.is_dir() else [path]
        for po in files:
            with po.open("rb") as f:
                catalogue = read_po(f)
            name = str(po.relative_to(path)) if path.is_dir() else po.name
            for message in catalogue:
                if message.id and isinstance(message.id, str) and isinstance(message.string, str) and message.string:
                    yield name, message.id, message.string


def main(argv: list[str]) -> int:
    stats = "--stats" in argv
    paths = [Path(a) for a in argv[1:] if a != "--stats"] or [DEFAULT]
    found = 0
    zs: list[float] = []
    for name, msgid, msgstr in _messages(paths):
        z = length_z(msgid, msgstr)
        if z is not None:
            zs.append(z)
        for problem in length_ratio_problems(msgid, msgstr):
            found += 1
            print(f"{name}: {problem}: {msgid[:70]!r}", file=sys.stderr)
    if stats and zs:
        zs.sort()
        pick = [0, 0.005, 0.05, 0.25, 0.5, 0.75, 0.95, 0.995, 1]
        marks = ", ".join(f"{q:g}: {zs[min(int(q * len(zs)), len(zs) - 1)]:+.2f}" for q in pick)
        print(f"length_check: {len(zs)} messages judged; spreads from the median by quantile: {marks}")
    if found:
        print(f"length_check: {found} message(s) out of line", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
