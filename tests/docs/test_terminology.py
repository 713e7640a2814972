"""The terminology lint (tools/lint_terms.py): the catalogues pass it, and it catches bad Chinese."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import lint_terms  # noqa: E402

LOCALE = ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES"


def _po(path: Path, pairs: list[tuple[str, str]]) -> Path:
    def quote(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    body = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    body += "".join(f"msgid {quote(i)}\nmsgstr {quote(s)}\n\n" for i, s in pairs)
    path.write_text(body, encoding="utf-8")
    return path


def test_catalogues_pass_the_lint() -> None:
    problems = lint_terms.lint([LOCALE])
    assert problems == [], "\n".join(map(str, problems))


def test_lint_command_fails_on_a_bad_catalogue(tmp_path: Path) -> None:
    good = _po(tmp_path / "good.po", [("The positional encoding.", "位置编码。")])
    bad = _po(tmp_path / "bad.po", [("A sanity check.", "健全性检查。")])
    run = lambda p: subprocess.run([sys.executable, str(ROOT / "tools" / "lint_terms.py"), str(p)], capture_output=True, text=True)  # noqa: E731
    assert run(good).returncode == 0
    result = run(bad)
    assert result.returncode == 1 and "健全性" in result.stderr


GOOD = [
    ("Adds a sinusoidal positional encoding to ``x``.", "把正弦位置编码加到 ``x`` 上。"),
    ("Vaswani et al. (2017) define it.", "Vaswani 等（2017）给出了它的定义。"),
    ("Uses ALiBi.", "使用线性偏置（ALiBi）。"),
    ("References", "参考文献"),
    ("j \\text{ even}", "j \\text{ 为偶数}"),
    ("A cache for positions ``0 … n``.", "缓存位置 ``0 … n`` 的值。"),
    ("See Geometrically, the pair turns.", "从几何上看，这一对在转动。"),
    ("The geometric mean.", "几何平均。"),
    # A title in book-title marks is quoted as published: no spacing or term rules inside.
    ("See the post on RoPE.", "见旋转位置编码（RoPE）的博文《Transformer升级之路：2、博采众长的旋转式位置编码》。"),
]

BAD = [
    ("Holds a cache.", "持有一个缓存。", "持有"),
    ("A sanity check.", "健全性检查。", "健全性"),
    ("A pattern.", "一种图样。", "图样"),
    ("Inverse frequencies.", "逆频率。", "逆频率"),
    ("Spaced geometrically.", "按几何级数分布。", "几何级数"),
    ("The pair index.", "配对索引。", "配对索引"),
    ("Clipped distances.", "裁剪后的距离。", "裁剪"),
    ("Attention scores.", "注意力得分。", "得分"),
    ("Vaswani et al. (2017).", "Vaswani et al.（2017）。", "et al"),
    ("Vaswani et al. (2017).", "Vaswani 等人（2017）。", "等人"),
    ("The RoPE base.", "RoPE 基数。", "基数"),
    ("The attention bias.", "偏置。", "注意力偏置"),
    ("References", "引用", "参考文献"),
    ("Uses ALiBi.", "使用 ALiBi。", "first use of ALiBi"),
    ("Uses NoPE.", "使用 NoPE。", "first use of NoPE"),
    ("Done, then stop.", "完成,然后停止。", "half-width punctuation"),
    ("Done.", "完成.", "half-width period"),
    ("A table (of rows).", "一张表(由行组成)。", "half-width parentheses"),
    ("Uses float64.", "使用float64计算。", "no space between Chinese and Latin"),
    ("Uses ``x``.", "使用\\ ``x``\\ 计算。", "no space between Chinese and Latin"),
    ("Uses float64, see the post.", "使用float64计算，见《博文》。", "no space between Chinese and Latin"),
    ("A, B.", "甲， 乙。", "space beside full-width punctuation"),
    ("Ends here.", "到此结束", "ends with 。"),
    ("An *important* word.", "一个*重要*的词。", "italics"),
    ("j \\text{ even}", "j \\text{ even}", "English words in math"),
    ("x \\text{ if not scale}", "x \\text{ if not scale}", "English words in math"),
    ("A ``dim`` (here).", "一个 ``dim``（此处）。", "followed by '（'"),
    ("(Here) :math:`x`.", "（此处）:math:`x`。", "after '）'"),
    ("**cos** (a tuple).", "**cos**（元组）。", "followed by '（'"),
]


@pytest.mark.parametrize(("msgid", "msgstr"), GOOD)
def test_good_messages_pass(msgid: str, msgstr: str) -> None:
    assert lint_terms.check_message(msgid, msgstr, "page.po") == []


@pytest.mark.parametrize(("msgid", "msgstr", "rule"), BAD, ids=[b[2] for b in BAD])
def test_bad_sample_fails(tmp_path: Path, msgid: str, msgstr: str, rule: str) -> None:
    problems = lint_terms.lint([_po(tmp_path / "page.po", [(msgid, msgstr)])])
    assert any(rule in p.rule for p in problems), [str(p) for p in problems]


def test_figure_text_keeps_math_and_numbers(tmp_path: Path) -> None:
    ok = [("position $p$, d = 128", "位置 $p$，d = 128")]
    assert lint_terms.lint([_po(tmp_path / "figures.po", ok)]) == []
    bad = [("position $p$, d = 128", "位置 p，d = 256")]
    rules = [p.rule for p in lint_terms.lint([_po(tmp_path / "figures.po", bad)])]
    assert any("math changed" in r for r in rules) and any("numbers changed" in r for r in rules), rules


def test_first_use_is_a_whole_word(tmp_path: Path) -> None:
    # LongRoPE is a name of its own: it needs no 旋转位置编码（RoPE） gloss; RoPE itself does.
    assert lint_terms.lint([_po(tmp_path / "page.po", [("LongRoPE factors.", "LongRoPE 的因子。")])]) == []
    problems = lint_terms.lint([_po(tmp_path / "other.po", [("RoPE factors.", "RoPE 的因子。")])])
    assert any("first use of RoPE" in p.rule for p in problems)


def test_a_bucket_is_tong(tmp_path: Path) -> None:
    assert lint_terms.lint([_po(tmp_path / "page.po", [("Bucket 17.", "桶 17。")])]) == []
    problems = lint_terms.lint([_po(tmp_path / "other.po", [("Bucket 17.", "箱 17。")])])
    assert any("bucket" in p.rule.lower() for p in problems)


def test_figure_labels_need_no_first_use_gloss(tmp_path: Path) -> None:
    # A figure title sits on a page whose text glosses ALiBi; the label stays short.
    assert lint_terms.lint([_po(tmp_path / "figures.po", [("ALiBi bias", "ALiBi 偏置")])]) == []
    problems = lint_terms.lint([_po(tmp_path / "page.po", [("ALiBi bias.", "ALiBi 偏置。")])])
    assert any("first use of ALiBi" in p.rule for p in problems)


def test_myst_pages_follow_markdown_escaping_not_rest() -> None:
    """In a MyST page, markup touches full-width brackets directly, and reST's "\\ " would show
    as a backslash (only inside math is it a LaTeX space)."""
    touching = ("The **relative bound** (RoFormer).", "即**相对上界**（RoFormer）。")
    assert lint_terms.check_message(*touching, "page.po", myst=True) == []
    assert any("followed by '（'" in rule for rule in lint_terms.check_message(*touching, "page.po"))
    escaped = ("The **relative bound** (RoFormer).", "即\\ **相对上界**\\ （RoFormer）。")
    assert any("shows as a backslash" in rule for rule in lint_terms.check_message(*escaped, "page.po", myst=True))
    in_math = ("A space $a\\ b$ in math.", "数学中的空格 $a\\ b$。")
    assert lint_terms.check_message(*in_math, "page.po", myst=True) == []


def test_catalogues_of_myst_pages_are_linted_as_myst(tmp_path: Path) -> None:
    escaped = [("The **relative bound** (RoFormer).", "即\\ **相对上界**\\ （RoFormer）。")]
    folder = tmp_path / "LC_MESSAGES" / "variants"
    folder.mkdir(parents=True)
    # variants/rope_long_term_decay is a MyST page of the site; "variants/not_a_page" is not.
    myst = lint_terms.lint_catalogue(_po(folder / "rope_long_term_decay.po", escaped), "variants/rope_long_term_decay.po")
    rest = lint_terms.lint_catalogue(_po(folder / "not_a_page.po", escaped), "variants/not_a_page.po")
    assert any("shows as a backslash" in p.rule for p in myst)
    assert not any("shows as a backslash" in p.rule for p in rest)
