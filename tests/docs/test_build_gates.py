"""The build's quality gates fail when they should: a failing example, a missing glyph, a figure
word without a Chinese translation.

Each test builds a one-example site with the real docs/conf.py (through a two-line conf that
runs it and points the gallery at a temporary folder).
"""

from __future__ import annotations

import hashlib
import os
import re
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
    tmp_path: Path, example: str, language: str = "en", figures_po: str | None = None, notebook: str | None = None,
    pages: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    src, examples = tmp_path / "src", tmp_path / "examples"
    src.mkdir()
    examples.mkdir()
    (examples / "README.rst").write_text("Gallery\n=======\n")
    (examples / "plot_case.py").write_text(textwrap.dedent(example))
    # The site places examples through its parts' index pages, not the gallery overview.
    toctree = "   auto_examples/plot_case\n   auto_examples/index\n" + ("   notebook\n" if notebook else "")
    for name, text in (pages or {}).items():  # more MyST pages
        toctree += f"   {name}\n"
        (src / f"{name}.md").write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    (src / "index.rst").write_text("Test\n====\n\n.. toctree::\n\n" + toctree)
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


# Two cells, one figure each; the second is shown twice (by display() and at the end of the cell),
# which keeps one file and one pickle.
_NOTEBOOK_FIGURES = _NOTEBOOK % (
    "import matplotlib.pyplot as plt\n"
    "    plt.plot([0, 1]); plt.xlabel('position $p$'); plt.title('training loss'); plt.show()\n"
    "    ```\n\n"
    "    ```{code-cell} python\n"
    "    fig, ax = plt.subplots(); ax.plot([1, 0], label='training loss'); ax.legend(); display(fig)"
)
_NOTEBOOK_IMAGE = re.compile(r'<img alt="([^"]*)" src="(_images/([0-9a-f]{64})(\.zh_CN)?\.png)" />')


def _notebook_images(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """(src, sha256 of the English PNG, language suffix, alt) of each image, in page order;
    an image without alt text gets its own path (docutils)."""
    page = (tmp_path / "out" / "notebook.html").read_text(encoding="utf-8")
    return [(src, sha, language, alt) for alt, src, sha, language in _NOTEBOOK_IMAGE.findall(page)]


def test_notebook_figures_build_in_chinese(tmp_path: Path) -> None:
    """A notebook page shows each figure in Chinese, rendered from the pickle its kernel kept,
    with the translated titles as alt text; the notebook runs once."""
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr "训练损失"
    ''', notebook=_NOTEBOOK_FIGURES)
    assert result.returncode == 0, result.stdout + result.stderr
    images = _notebook_images(tmp_path)
    assert [language for _, _, language, _ in images] == [".zh_CN"] * 3
    assert [alt for _, _, _, alt in images] == ["训练损失", images[1][0], images[2][0]]  # the second has no title
    assert images[1][1] == images[2][1] != images[0][1]
    for src, sha, _, _ in images:
        chinese = (tmp_path / "out" / src).read_bytes()
        english = (tmp_path / "jupyter_execute" / f"{sha}.png").read_bytes()  # as myst-nb wrote it
        assert hashlib.sha256(english).hexdigest() == sha and chinese != english
    assert sorted(p.name for p in (tmp_path / "jupyter_cache" / "posenc" / "figures").glob("*.pickle")) == sorted(
        f"{sha}.fig.pickle" for sha in {images[0][1], images[1][1]}
    )


def test_notebook_figures_keep_english_words_and_titles_in_english(tmp_path: Path) -> None:
    result = _build(tmp_path, _LABELLED, notebook=_NOTEBOOK_FIGURES)
    assert result.returncode == 0, result.stdout + result.stderr
    images = _notebook_images(tmp_path)
    assert [language for _, _, language, _ in images] == [""] * 3
    assert [alt for _, _, _, alt in images] == ["training loss", images[1][0], images[2][0]]


def test_missing_notebook_figure_translation_fails_the_build(tmp_path: Path) -> None:
    result = _build(tmp_path, _LABELLED, "zh_CN", _PO_HEADER + '''
    msgid "training loss"
    msgstr "训练损失"
    ''', notebook=_NOTEBOOK % "import matplotlib.pyplot as plt; plt.plot([0, 1]); plt.xlabel('step size'); plt.show()")
    assert result.returncode != 0
    assert "no zh_CN translation in figures.po for 'step size'" in result.stdout + result.stderr


def test_notebook_figure_without_its_pickle_fails_the_build(tmp_path: Path) -> None:
    assert _build(tmp_path, _LABELLED, notebook=_NOTEBOOK_FIGURES).returncode == 0
    for pickled in (tmp_path / "jupyter_cache" / "posenc" / "figures").glob("*.pickle"):
        pickled.unlink()
    (tmp_path / "src" / "notebook.md").touch()  # re-read from the cache: no kernel, no pickle
    result = _sphinx(tmp_path, "en")
    assert result.returncode != 0
    assert "a notebook figure has no pickle" in result.stdout + result.stderr


def test_notebook_figure_words_are_extracted(tmp_path: Path) -> None:
    """The gettext build puts the words of notebook figures into figures.pot, beside the gallery's."""
    assert _build(tmp_path, _LABELLED, notebook=_NOTEBOOK % (
        "import matplotlib.pyplot as plt; plt.plot([0, 1]); plt.ylabel('attention weight'); plt.show()"
    )).returncode == 0
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "gettext", "-q", str(tmp_path / "src"), str(tmp_path / "pot")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    template = (tmp_path / "pot" / "figures.pot").read_text(encoding="utf-8")
    assert 'msgid "attention weight"' in template and 'msgid "training loss"' in template


_CLAIMS_NOTEBOOK = _NOTEBOOK % (
    "claims = [dict(claim='Two and two make four.', source='arithmetic', measured=f'{2 + 2}', verdict='holds')]"
) + '''
    ```{claims-ledger}
    ```
'''


def test_notebook_claims_reach_the_ledger_and_leave_it_with_the_cell(tmp_path: Path) -> None:
    """A notebook page's ``claims`` become ledger rows, as an example's do; once the page no
    longer defines them, its rows are gone (here the ledger is then empty, which fails)."""
    result = _build(tmp_path, _LABELLED, notebook=_CLAIMS_NOTEBOOK)
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "out" / "notebook.html").read_text(encoding="utf-8")
    row = re.search(r"<tr[^>]*><td><p>Two and two make four\.</p></td>.*?</tr>", page, re.DOTALL)
    assert row and ">4<" in row[0] and "<p>holds</p>" in row[0] and 'href="#"><span class="doc">A notebook page' in row[0]
    (tmp_path / "src" / "notebook.md").write_text(
        textwrap.dedent(_CLAIMS_NOTEBOOK.replace("claims = [", "rows = [")).lstrip(), encoding="utf-8"
    )
    result = _sphinx(tmp_path, "en")
    assert result.returncode != 0
    assert "no page has recorded claims yet" in result.stdout + result.stderr


def test_the_ledger_page_holds_the_rows_of_notebooks_read_after_it_in_a_cold_build(tmp_path: Path) -> None:
    """Notebooks record their claims while they are read; the ledger page ("a_ledger", first in
    name order) is read after them, so the first build already shows the row."""
    notebook = _NOTEBOOK % "claims = [dict(claim='Two and two make four.', source='arithmetic', measured='4', verdict='holds')]"
    result = _build(tmp_path, _LABELLED, notebook=notebook, pages={"a_ledger": "# Ledger\n\n```{claims-ledger}\n```\n"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "<td><p>Two and two make four.</p></td>" in (tmp_path / "out" / "a_ledger.html").read_text(encoding="utf-8")
