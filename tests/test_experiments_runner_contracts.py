"""Contracts of the experiment runner (posenc/experiments/__init__.py) that the record files rely on:
the decision rule at its boundaries, what ``run`` puts in a record, and how ``save`` writes it."""

from __future__ import annotations

import json
import re
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


def _record(metrics: dict[str, dict], seeds: list[int]) -> experiments.Record:
    return experiments.Record(
        experiment="x", size="full", config={}, seeds=seeds, metrics=metrics, hash="h", commit="abc1234",
        torch="2.13.0+cpu", machine={"python": "3.11.7", "cpus": 2, "processes": 1}, seconds=150.0,
        finished="2026-12-03T05:00:00+00:00",
    )


def test_arrays_hold_one_row_per_seed_in_the_record_order() -> None:
    record = _record({"0": {"loss": 1.0, "curve": [1, 2]}, "7": {"loss": 3.0, "curve": [3, 4]}}, seeds=[7, 0])
    arrays = record.arrays()
    assert list(arrays) == ["loss", "curve"]
    assert arrays["loss"].tolist() == [3.0, 1.0] and arrays["curve"].tolist() == [[3, 4], [1, 2]]


@pytest.mark.parametrize(("metrics", "message"), [
    ({"0": {"loss": 1.0}, "1": {"other": 1.0}}, "seed 1 reports the metrics ['other'], seed 0 ['loss']"),
    ({"0": {"curve": [1, 2]}, "1": {"curve": [1, 2, 3]}}, "metric 'curve' has values of shapes [(2,), (3,)] across seeds"),
])
def test_arrays_refuse_seeds_that_do_not_match(metrics: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _record(metrics, seeds=[0, 1]).arrays()


def test_provenance_says_how_the_run_was_made() -> None:
    record = _record({"0": {"loss": 1.0}}, seeds=[0])
    assert record.provenance() == ("2 min on 2 CPU(s), 1 process(es), torch 2.13.0+cpu, Python 3.11.7, commit abc1234, "
                                   "2026-12-03")
    record.seconds = 3540.0  # 59 minutes exactly
    assert record.provenance().startswith("59 min on ")


def test_a_run_records_its_wall_time_to_a_tenth_of_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    module = experiment("learned_vs_sinusoidal")
    monkeypatch.setattr(module, "run", lambda config, seed: {"loss": 1.0})
    clock = iter([100.0, 112.34])
    monkeypatch.setattr(experiments.time, "perf_counter", lambda: next(clock))
    assert run("learned_vs_sinusoidal", seeds=[0], overrides=QUICK).seconds == 12.3


def test_the_build_run_is_made_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def fake_run(name: str, size: str = "full") -> str:
        calls.append((name, size))
        return f"{name} {size} run {len(calls)}"

    monkeypatch.setattr(experiments, "run", fake_run)
    experiments.build_run.cache_clear()
    try:
        first = experiments.build_run("two_languages")
        assert experiments.build_run("two_languages") is first and first == "two_languages short run 1"
        assert experiments.build_run("long_range") == "long_range short run 2"
        assert calls == [("two_languages", "short"), ("long_range", "short")]
    finally:
        experiments.build_run.cache_clear()
