"""Recorded GPU results: the files of benchmarks/results/ and the performance page that shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import posenc_benchmarks  # noqa: E402

from posenc.benchmark import main  # noqa: E402

PAGE = "auto_examples/03_implementations/plot_rope_performance.html"


def test_results_written_by_the_script_are_read(tmp_path: Path) -> None:
    assert main(["--shapes", "1,2,8,8", "--rounds", "1", "--no-compile",
                 "--json", str(tmp_path / "run.json")]) == 0
    [(path, data)] = posenc_benchmarks.read_results(tmp_path)
    assert path.name == "run.json"
    assert {row["implementation"] for row in data["rows"]} >= {"copy", "posenc"}


def test_malformed_results_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"environment": {}, "rows": [{"ms": 1.0}]}))
    with pytest.raises(ValueError, match=r"bad.json: a row lacks \['bytes_moved', 'device'"):
        posenc_benchmarks.read_results(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="bad.json: expected an object with 'environment' and 'rows'"):
        posenc_benchmarks.read_results(tmp_path)


def test_every_committed_result_file_is_valid() -> None:
    files = posenc_benchmarks.read_results()
    for path, data in files:
        assert data["environment"].get("gpu"), f"{path}: a recorded GPU result names its GPU"
    # The folder's README says whether anything is recorded; it must agree with the folder.
    readme = (ROOT / "benchmarks" / "results" / "README.md").read_text(encoding="utf-8")
    assert ("No file is recorded yet." in readme) == (not files)


@pytest.mark.docs
@pytest.mark.parametrize(("lang", "none", "recorded"), [
    ("en", "No GPU measurement has been recorded", "Recorded on a GPU:"),
    ("zh_CN", "仓库里还没有记录 GPU 测量结果", "在 GPU 上记录："),
])
def test_page_labels_recorded_results_as_such(site: Path, lang: str, none: str, recorded: str) -> None:
    text = (site / lang / PAGE).read_text()
    files = posenc_benchmarks.read_results()
    if files:
        assert text.count(recorded) == len(files)
        assert none not in text
    else:
        assert none in text
