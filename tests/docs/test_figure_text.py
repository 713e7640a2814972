"""Which words of a figure are messages, and how they are replaced (no site build needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("agg")
matplotlib.rc_file(ROOT / "docs" / "matplotlibrc")  # the site's fonts: Chinese glyphs render
import matplotlib.pyplot as plt  # noqa: E402

import posenc_figures  # noqa: E402


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("position $p$", True),
        ("training step", True),
        (r"$\ln 2$ (guessing)", True),
        ("$j = 10$", False),
        (r"$\lambda \approx 12.5$", False),
        ("0.97", False),
        ("猫追老鼠", False),
        ("inv_freq", False),
        ("torch.float16", False),
        ("d = 128", False),
    ],
)
def test_is_message(text: str, expected: bool) -> None:
    assert posenc_figures.is_message(text) is expected


def _figure():  # type: ignore[no-untyped-def]
    fig, (ax, ax2) = plt.subplots(1, 2)
    im = ax.imshow([[0, 1], [1, 0]])
    ax.set_xticks([0, 1], ["early", "late"])
    ax.set_title("two words")
    ax.set_xlabel("position $p$")
    fig.colorbar(im, ax=ax, label="cosine similarity")
    ax2.plot([0, 1], label="with PE")
    ax2.legend()
    ax2.annotate("peak", (0.5, 0.5))
    ax2.table(cellText=[["small", "1.0"]], loc="bottom")
    fig.suptitle("a suptitle")
    return fig


def test_every_kind_of_figure_text_is_found_and_translated() -> None:
    fig = _figure()
    expected = {"early", "late", "two words", "position $p$", "cosine similarity", "with PE", "peak", "small", "a suptitle"}
    try:
        assert set(posenc_figures.figure_messages(fig)) == expected
        posenc_figures.translate_figure(fig, lambda s: "译" + s)
        fig.canvas.draw()
        drawn = {t.get_text() for t in posenc_figures._texts(fig) if posenc_figures._visible(t)}
        assert {"译" + s for s in expected} <= drawn
        assert not expected & drawn, "an English word is still drawn"
        assert "1.0" in drawn  # numbers are left alone
    finally:
        plt.close(fig)


def test_clipped_translation_is_reported() -> None:
    fig, ax = plt.subplots(figsize=(2, 2), layout=None)
    ax.set_title("short")
    try:
        posenc_figures.translate_figure(fig, lambda s: "很长的标题" * 8)
        fig.canvas.draw()
        assert any("clipped" in p for p in posenc_figures.layout_problems(fig, {"很长的标题" * 8}))
    finally:
        plt.close(fig)


def test_overlapping_translation_is_reported() -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.1, 0.5, "left")
    ax.text(0.3, 0.5, "right")
    try:
        posenc_figures.translate_figure(fig, lambda s: "一段很长的译文" if s == "left" else s)
        fig.canvas.draw()
        problems = posenc_figures.layout_problems(fig, {"一段很长的译文"})
        assert any("overlaps 'right'" in p for p in problems), problems
    finally:
        plt.close(fig)


def test_translated_layout_without_collisions_passes() -> None:
    """Control: labels, title, legend and colour bar re-laid out after translation collide with nothing."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    im = ax.imshow([[0, 1], [1, 0]])
    ax.set_xticks([0, 1], ["early", "late"])
    ax.set_xlabel("position $p$")
    ax.set_title("two words")
    ax.plot([0, 1], [0, 1], label="with PE")
    ax.legend(loc="upper right")
    fig.colorbar(im, ax=ax, label="cosine similarity")
    try:
        posenc_figures.translate_figure(fig, lambda s: "译文" + s)
        fig.canvas.draw()
        texts = {t.get_text() for t in posenc_figures._texts(fig)}
        assert posenc_figures.layout_problems(fig, {t for t in texts if t.startswith("译文")}) == []
    finally:
        plt.close(fig)


def test_word_tick_labels_of_a_categorical_axis_are_translated() -> None:
    fig, ax = plt.subplots()
    ax.bar(["small", "large"], [1, 2])
    try:
        assert {"small", "large"} <= set(posenc_figures.figure_messages(fig))
        posenc_figures.translate_figure(fig, {"small": "小", "large": "大"}.get)
        fig.canvas.draw()
        labels = {t.get_text() for t in ax.get_xticklabels()}
        assert labels == {"小", "大"}, labels
    finally:
        plt.close(fig)
