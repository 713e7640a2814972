"""The length check of the Chinese catalogues (tools/length_check.py) flags stale or cut translations."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import length_check  # noqa: E402

SOURCE = ("Training packs several documents into one row, and serving caches keys, prefills in chunks and "
          "limits attention to a window; each of these moves positions around.")
GOOD = "训练时把多篇文档打包进同一行，推理时缓存键、分块预填充并把注意力限制在窗口内；每一步都会改变位置。"


def test_a_faithful_translation_passes() -> None:
    assert length_check.length_ratio_problems(SOURCE, GOOD) == []


def test_a_translation_with_a_stale_sentence_is_flagged() -> None:
    stale = GOOD + "多模态模型还为每个轴各给一个位置，这些页面展示每种做法对位置的影响，复现用户报告的失败，并检验修复方法是否有效，" * 2 + "。"
    problems = length_check.length_ratio_problems(SOURCE, stale)
    assert len(problems) == 1 and problems[0].startswith("translation much longer than its source")


def test_a_translation_that_lost_most_of_its_text_is_flagged() -> None:
    problems = length_check.length_ratio_problems(SOURCE, "训练时打包。")
    assert len(problems) == 1 and problems[0].startswith("translation much shorter than its source")


def test_short_messages_and_code_are_not_judged() -> None:
    assert length_check.length_z("Run it.", "运行它，然后看看会发生什么事情以及为什么会这样。") is None
    assert length_check.length_z("``rope_cos_sin(positions, dim)``", "``rope_cos_sin(positions, dim)``") is None


def test_the_catalogues_have_no_message_out_of_line() -> None:
    assert length_check.main(["length_check.py", str(ROOT / "docs" / "locale" / "zh_CN" / "LC_MESSAGES")]) == 0
