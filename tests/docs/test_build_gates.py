"""The build's quality gates fail when they should: a failing example, a missing glyph, a figure
word without a Chinese translation.

Each test builds a one-example site with the real docs/conf.py (through a two-line conf that
runs it and points the gallery at a temporary folder).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.skipif(
    not (DOCS / "node_modules" / "mathjax").is_dir(), reason="docs assets not installed: run make html"
)


def _build(
    tmp_path: Path, example: str, language: str = "en", figures_po: str | None = None, notebook: str | None = None
) -> subprocess.CompletedProcess[str]:
    src, examples = tmp_path / "src", tmp_path / "examples"
    src.mkdir()
    examples.mkdir()
    (examples / "README.rst").write_text("Gallery\n=======\n")
    (examples / "plot_case.py").write_text(textwrap.dedent(example))
    # The site places examples through its parts' index pages, not the gallery overview.
    pages = "   auto_examples/plot_case\n   auto_examples/index\n" + ("   notebook\n" if notebook else "")
    (src / "index.rst").write_text("Test\n====\n\n.. toctree::\n\n" + pages)
    if notebook:
        (src / "notebook.md").write_text(textwrap.dedent(notebook).lstrip())
    if figures_po is not None:
        messages = src / "locale" / language / "LC_MESSAGES"
        messages.mkdir(parents=True)
        (messages / "figures.po").write_text(textwrap.dedent(figures_po), encoding="utf-8")
    (src / "conf.py").write_text(
        textwrap.dedent(
            f"""
            import runpy
            globals().update(runpy.run_path({str(DOCS / "conf.py")!r}))
            sphinx_gallery_conf = dict(sphinx_gallery_conf, examples_dirs={str(examples)!r})
            templates_path = [{str(DOCS / "_templates")!r}]
            html_static_path = [{str(DOCS / "_static")!r}] + html_static_path[1:]
            html_favicon = {str(DOCS / "_static" / "favicon.svg")!r}
            locale_dirs = ["locale/"]
            nb_execution_cache_path = {str(tmp_path / "jupyter_cache")!r}
            """
        )
    )
    return _sphinx(tmp_path, language)


def _sphinx(tmp_path: Path, language: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q", "-D", f"language={language}",
         str(src), str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_control_example_builds(tmp_path: Path) -> None:
    result = _build(tmp_path, '''
        """
        Fine
        ====
        """
        import matplotlib.pyplot as plt

        plt.plot([0, 1])
        plt.title("位置编码 positional encoding")
        plt.show()
    ''')
    assert result.returncode == 0, result.stdout + result.stderr


def test_failing_example_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, '''
        """
        Broken
        ======
        """
        raise RuntimeError("this example is broken")
    ''')
    assert result.returncode != 0
    assert "this example is broken" in result.stdout + result.stderr


def test_missing_glyph_fails_the_build(tmp_path: Path) -> None:
    # U+13000 (an Egyptian hieroglyph) is in neither DejaVu Sans nor Noto Sans CJK.
    result = _build(tmp_path, '''
        """
        Tofu
        ====
        """
        import matplotlib.pyplot as plt

        plt.plot([0, 1])
        plt.title("\\U00013000")
        plt.show()
    ''')
    assert result.returncode != 0
    assert "missing from font" in result.stdout + result.stderr


_LABELLED = '''
    """
    Labelled
    ========
    """
    import matplotlib.pyplot as plt

    plt.plot([0, 1], label="training loss")
    plt.xlabel("position $p$")
    plt.legend()
    plt.show()

    # %%
    # Two figures from one block: sphinx-gallery lists them side by side.
    for _ in range(2):
        plt.figure()
        plt.title("training loss")
    plt.show()
'''

_PO_HEADER = '''
    msgid ""
    msgstr ""
    "Language: zh_CN\\n"
    "Content-Type: text/plain; charset=UTF-8\\n"

    msgid "position $p$"
    msgstr "位置 $p$"
'''


def test_translated_figure_builds_in_chinese(tmp_path: Path) -> None:
    """Control: with every figure word translated, the zh_CN build passes and shows its own PNGs,
    rendered from the one run of the example."""
    runs = tmp_path / "runs.txt"
    counting = _LABELLED + f"\n    with open({str(runs)!r}, 'a') as f:\n        f.write('run\\n')\n"
    result = _build(tmp_path, counting, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr "训练损失"
    ''')
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "out" / "auto_examples" / "plot_case.html").read_text(encoding="utf-8")
    images = tmp_path / "src" / "auto_examples" / "images"
    for n in ("001", "002", "003"):
        assert f"sphx_glr_plot_case_{n}.zh_CN.png" in page
        english = images / f"sphx_glr_plot_case_{n}.png"
        chinese = images / f"sphx_glr_plot_case_{n}.zh_CN.png"
        assert chinese.is_file() and chinese.read_bytes() != english.read_bytes()
    assert "sphx_glr_plot_case_001.png" not in page
    assert runs.read_text() == "run\n", "the example ran more than once"


def test_missing_figure_translation_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr ""
    ''')
    assert result.returncode != 0
    assert "no zh_CN translation in figures.po for 'training loss'" in result.stdout + result.stderr


def test_fuzzy_figure_translation_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    #, fuzzy
    msgid "training loss"
    msgstr "训练损失"
    ''')
    assert result.returncode != 0
    assert "'training loss'" in result.stdout + result.stderr


def test_missing_glyph_beside_math_fails_the_build(tmp_path: Path) -> None:
    # Text with math goes through mathtext, which logs (does not warn) a missing glyph.
    result = _build(tmp_path, '''
        """
        Tofu in math text
        =================
        """
        import matplotlib.pyplot as plt

        plt.plot([0, 1])
        plt.title("\\U00013000 $p$")
        plt.show()
    ''')
    assert result.returncode != 0
    assert "does not have a glyph" in result.stdout + result.stderr


_NOTEBOOK = '''
    ---
    file_format: mystnb
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # A notebook page

    ```{code-cell} python
    %s
    ```
'''


def test_notebook_without_figures_builds_in_chinese(tmp_path: Path) -> None:
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr "训练损失"
    ''', notebook=_NOTEBOOK % "print(1 + 1)")
    assert result.returncode == 0, result.stdout + result.stderr


def test_notebook_figure_fails_the_chinese_build(tmp_path: Path) -> None:
    """A notebook figure cannot be re-rendered in Chinese: the zh_CN build says so and fails."""
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr "训练损失"
    ''', notebook=_NOTEBOOK % "import matplotlib.pyplot as plt; plt.plot([0, 1]); plt.xlabel('step'); plt.show()")
    assert result.returncode != 0
    assert "a notebook figure would show its English words" in result.stdout + result.stderr
