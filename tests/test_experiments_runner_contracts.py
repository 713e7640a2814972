"""Contracts of the experiment runner (posenc/experiments/__init__.py) that the record files rely on:
the decision rule at its boundaries, what ``run`` puts in a record, and how ``save`` writes it."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path

import pytest
import torch

from posenc import experiments
from posenc.experiments import compare, experiment, load_record, run, save

QUICK = {"steps": 2, "warmup": 1, "average": 1}  # the runner, not the result


@pytest.mark.parametrize(("first", "second", "verdict"), [
    ([0.0, 0.0], [1.0, 1.0], "second higher"),  # two seeds are enough for a spread
    ([0.0, 1.0], [2.0, 3.0], "inconclusive"),  # a difference equal to twice the spread does not count
    ([0.0, 1.0], [2.5, 3.5], "second higher"),  # just above twice the spread counts
    ([0.0, 0.0], [0.5, 0.5], "second higher"),  # a small difference with no spread counts
    ([0.5, 0.5], [0.0, 0.0], "first higher"),
])
def test_decision_rule_at_its_boundaries(first: list[float], second: list[float], verdict: str) -> None:
    assert compare(first, second)[0] == verdict


def test_a_run_records_its_size_configuration_seeds_and_provenance() -> None:
    module = experiment("learned_vs_sinusoidal")
    start = time.perf_counter()
    record = run("learned_vs_sinusoidal", "short", overrides={**QUICK, "seeds": [1]})
    elapsed = time.perf_counter() - start
    assert record.size == "short"
    assert record.config == {**module.SHORT, **QUICK, "seeds": [1]}  # the short configuration, overridden
    assert record.seeds == [1] and list(record.metrics) == ["1"]  # the configuration's seeds by default
    assert record.commit == subprocess.run(["git", "describe", "--always", "--dirty"], cwd=experiments.RECORDS.parent,
                                           capture_output=True, text=True, check=True).stdout.strip()
    assert record.machine == {"python": platform.python_version(), "platform": platform.platform(),
                              "processor": platform.processor() or platform.machine(), "cpus": record.machine["cpus"],
                              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                              "processes": 1, "backend": None}
    assert record.seconds == round(record.seconds, 1) and 0 <= record.seconds <= round(elapsed, 1) + 0.1


def test_the_full_size_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    module = experiment("learned_vs_sinusoidal")
    monkeypatch.setattr(module, "run", lambda config, seed: {"seen": config == {**module.FULL, **QUICK}})
    record = run("learned_vs_sinusoidal", seeds=[0], overrides=QUICK)
    assert record.size == "full" and record.metrics == {"0": {"seen": True}}


def test_the_commit_outside_a_repository_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(experiments, "RECORDS", tmp_path / "records")  # tmp_path is not in a git repository
    assert experiments._commit() == "unknown"


def test_save_writes_indented_json_in_new_folders_by_size(tmp_path: Path) -> None:
    record = run("learned_vs_sinusoidal", "short", seeds=[0], overrides=QUICK)
    folder = tmp_path / "a" / "b"
    path = save(record, folder)
    assert path == folder / "learned_vs_sinusoidal.short.json"
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=1) + "\n"
    assert load_record("learned_vs_sinusoidal.short", folder) == record
    full = save(type(record)(**{**record.__dict__, "size": "full"}), folder)
    assert full == folder / "learned_vs_sinusoidal.json"


def test_the_hash_is_of_the_code_before_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run takes minutes to hours; an edit of the module meanwhile must not enter its record."""
    calls: list[str] = []
    monkeypatch.setattr(experiments, "code_hash", lambda name, config: calls.append("hash") or "before")
    monkeypatch.setattr(experiment("long_range"), "run", lambda config, seed: calls.append("run") or {})
    record = run("long_range", "short", seeds=[0])
    assert calls == ["hash", "run"] and record.hash == "before"
