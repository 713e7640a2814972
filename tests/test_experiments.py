"""The experiment runner: records, staleness, the decision rule, and torchrun (DDP on the CPU)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc import experiments
from posenc.experiments import EXPERIMENTS, RECORDS, compare, load_record, run, save, stale_records
from posenc.experiments.__main__ import main
from posenc.models._distributed import share

QUICK = {"steps": 12, "warmup": 2, "average": 4}  # a few steps: the runner, not the result


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_a_fresh_full_record(name: str) -> None:
    record = load_record(name)
    assert record.size == "full" and record.config == dict(experiments.experiment(name).FULL)
    assert not record.stale, (f"records/{name}.json is stale: the experiment changed since it ran; run "
                              f"`python -m posenc.experiments run {name}` and commit the record")
    assert sorted(record.metrics) == sorted(str(seed) for seed in record.seeds)
    assert len(record.seeds) >= 3 and record.seconds > 0 and record.torch and record.commit


def test_a_changed_configuration_makes_a_record_stale(tmp_path: Path) -> None:
    record = run("learned_vs_sinusoidal", "short", [0], overrides=QUICK)
    assert not record.stale
    path = save(dataclasses.replace(record, size="full"), tmp_path)
    assert stale_records(tmp_path) == []
    data = json.loads(path.read_text())
    data["config"]["steps"] += 1  # the code and configuration no longer hash to the recorded value
    path.write_text(json.dumps(data))
    assert stale_records(tmp_path) == ["learned_vs_sinusoidal"]
    assert main(["stale", "--out", str(tmp_path)]) == 1


def test_records_hold_what_a_reader_needs() -> None:
    record = run("learned_vs_sinusoidal", "short", [3], overrides=QUICK)
    assert record.seeds == [3] and set(record.metrics) == {"3"}
    assert record.config["steps"] == 12 and record.machine["processes"] == 1 and record.machine["backend"] is None
    assert {"python", "platform", "cpus", "device"} <= set(record.machine)
    assert record.values("held_out/large/learned") == [record.metrics["3"]["held_out/large/learned"]]
    assert record.finished.endswith("+00:00") and record.torch == torch.__version__


@pytest.mark.parametrize(("arguments", "message"), [
    ({"name": "nope"}, "unknown experiment"),
    ({"size": "huge"}, "size must be one of"),
    ({"overrides": {"stepz": 3}}, "not keys of learned_vs_sinusoidal's configuration"),
])
def test_bad_runner_arguments(arguments: dict, message: str) -> None:
    call = {"name": "learned_vs_sinusoidal", "size": "short", "seeds": [0], **arguments}
    with pytest.raises(ValueError, match=message):
        run(call.pop("name"), call.pop("size"), call.pop("seeds"), **call)


def test_a_missing_record_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="python -m posenc.experiments run learned_vs_sinusoidal"):
        load_record("learned_vs_sinusoidal", tmp_path)


@pytest.mark.parametrize(("first", "second", "verdict"), [
    ([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "second higher"),  # difference 1.0 > 2 x spread 0.2
    ([2.0, 2.1, 2.2], [1.0, 1.1, 1.2], "first higher"),
    ([1.0, 1.3, 1.6], [2.0, 2.1, 2.2], "inconclusive"),  # difference 0.8, spread 0.6: within twice it
    ([1.0, 1.2, 1.4], [1.8, 1.8, 1.8], "inconclusive"),  # difference exactly twice the spread 0.4
    ([1.0], [5.0], "inconclusive"),  # one seed: no spread
])
def test_decision_rule(first: list[float], second: list[float], verdict: str) -> None:
    got, difference, spread = compare(first, second)
    assert got == verdict
    assert difference == pytest.approx(sum(second) / len(second) - sum(first) / len(first))
    assert spread == pytest.approx(max(max(first) - min(first), max(second) - min(second)))


def test_decision_rule_needs_matching_seeds() -> None:
    with pytest.raises(ValueError, match="same non-zero number of seeds"):
        compare([1.0, 2.0], [1.0])


def test_share_splits_batches_between_processes() -> None:
    batch = torch.arange(12).view(6, 2)
    assert torch.equal(share(batch, 1, 2), batch[3:])
    tokens, targets = share((batch, batch + 100), 0, 3)
    assert torch.equal(tokens, batch[:2]) and torch.equal(targets, batch[:2] + 100)
    assert share(batch, 0, 1) is batch
    with pytest.raises(ValueError, match="batch size 6 is not a multiple of the 4 processes"):
        share(batch, 0, 4)
    with pytest.raises(TypeError, match="tensor or a tuple/list of tensors"):
        share({"tokens": batch}, 0, 2)


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None, reason="needs torchrun")
def test_torchrun_with_two_processes_equals_one_process(tmp_path: Path) -> None:
    # The same global batch of 16 rows: one process, or two processes of 8 rows each (gloo, CPU).
    # The stated tolerance: 1e-5 relative, the order of float32 sums (measured: about 2e-7).
    command = ["-m", "posenc.experiments", "run", "learned_vs_sinusoidal", "--size", "short", "--seeds", "0",
               *[arg for key, value in QUICK.items() for arg in ("--set", f"{key}={value}")]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, *command, "--out", str(tmp_path / "one")], check=True, env=env,
                   capture_output=True)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    two = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", *command, "--out", str(tmp_path / "two")],
                         env=env, capture_output=True, text=True)
    assert two.returncode == 0, two.stderr[-2000:]
    one = load_record("learned_vs_sinusoidal.short", tmp_path / "one")
    both = load_record("learned_vs_sinusoidal.short", tmp_path / "two")
    assert one.machine["processes"] == 1 and both.machine["processes"] == 2 and both.machine["backend"] == "gloo"
    assert one.hash == both.hash
    for metric, value in one.metrics["0"].items():
        assert both.metrics["0"][metric] == pytest.approx(value, rel=1e-5, abs=1e-6), metric
