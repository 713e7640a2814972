"""The site's comparison experiments, and their recorded full runs.

Each comparison page of the site trains small models to test a claim. The experiment itself lives
here, one module per comparison, with two sizes: ``"short"``, which the page runs while the site is
built, and ``"full"``, run once by ``python -m posenc.experiments run NAME`` (on one process, or
under ``torchrun``) and written as a *record*: one JSON file per experiment in ``records/`` at the
root of the repository. A record holds every seed's metrics, the configuration, a hash of the
experiment's code and configuration, the commit, the torch version, the machine and the wall time.
Pages print the record's numbers beside their short run and grade claims on the record. A record
whose hash differs from the current code is *stale*; the tests fail on it.

A verdict that compares two settings follows :func:`compare`: the difference of the means must
exceed twice the spread (largest minus smallest) of either setting across seeds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import numpy as np
import torch

__all__ = ["EXPERIMENTS", "RECORDS", "Record", "build_run", "compare", "experiment", "code_hash", "run", "save",
           "load_record", "stale_records"]

#: The experiments, by name (each a module of this package).
EXPERIMENTS = ("attention_sinks", "embedding_width", "learned_vs_sinusoidal", "long_range", "order_without_positions",
               "past_training_length", "stretching_rope", "train_short_test_long", "two_languages")
#: The folder of the records, ``records/`` at the root of the repository.
RECORDS = Path(__file__).resolve().parents[2] / "records"
SIZES = ("short", "full")


def experiment(name: str) -> ModuleType:
    """The module of experiment ``name``: its ``SHORT`` and ``FULL`` configurations and ``run``."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; the experiments are {list(EXPERIMENTS)}")
    return importlib.import_module(f"posenc.experiments.{name}")


def code_hash(name: str, config: dict[str, Any]) -> str:
    """SHA-256 of the experiment module's source and of its configuration (canonical JSON).

    The hash covers the experiment's own code, not the library it calls: a change of the model or
    of the training loop does not make a record stale by itself, which is why the pages also check
    that their short run agrees in direction with the record.
    """
    source = inspect.getsource(experiment(name))
    digest = hashlib.sha256(source.encode())
    digest.update(json.dumps(config, sort_keys=True).encode())
    return digest.hexdigest()


@dataclass
class Record:
    """One recorded run of an experiment (every seed). Attributes are the JSON file's keys.

    Attributes
    ----------
    experiment, size : str
        The experiment's name and the size run (``"full"`` for the committed records).
    config : dict
        The configuration run.
    seeds : list of int
        The seeds, one training of every setting each.
    metrics : dict
        ``{str(seed): {metric: value}}``; a value is a number or a list of numbers (a curve).
    hash : str
        :func:`code_hash` of the experiment and configuration when the run was made.
    commit : str
        ``git describe --always --dirty`` of the repository.
    torch : str
        The torch version.
    machine : dict
        Platform, processor, CPU count, device, and the number of processes and their backend.
    seconds : float
        Wall time of the whole run.
    finished : str
        When it ended (UTC, ISO 8601).
    """

    experiment: str
    size: str
    config: dict[str, Any]
    seeds: list[int]
    metrics: dict[str, dict[str, Any]]
    hash: str
    commit: str
    torch: str
    machine: dict[str, Any]
    seconds: float
    finished: str

    def values(self, metric: str) -> list[Any]:
        """``metric`` for every seed, in the order of :attr:`seeds`."""
        return [self.metrics[str(seed)][metric] for seed in self.seeds]

    def arrays(self) -> dict[str, np.ndarray]:
        """Every metric as an array with one row per seed: ``{metric: (seeds, ...)}``.

        Raises
        ------
        ValueError
            If the seeds report different metrics, or a metric's shapes differ across seeds.
        """
        names = list(self.metrics[str(self.seeds[0])])
        for seed in self.seeds:
            if list(self.metrics[str(seed)]) != names:
                raise ValueError(f"seed {seed} reports the metrics {sorted(self.metrics[str(seed)])}, "
                                 f"seed {self.seeds[0]} {sorted(names)}")
        result = {}
        for name in names:
            shapes = {np.shape(value) for value in self.values(name)}
            if len(shapes) > 1:
                raise ValueError(f"metric {name!r} has values of shapes {sorted(shapes)} across seeds")
            result[name] = np.array(self.values(name))
        return result

    def provenance(self) -> str:
        """One line saying how the run was made: wall time, CPUs and processes, torch and Python
        versions, commit and date."""
        machine = self.machine
        return (f"{self.seconds / 60:.0f} min on {machine['cpus']} CPU(s), {machine['processes']} process(es), "
                f"torch {self.torch}, Python {machine['python']}, commit {self.commit}, {self.finished[:10]}")

    @property
    def stale(self) -> bool:
        """Whether the experiment's code or configuration changed since the run."""
        return self.hash != code_hash(self.experiment, self.config)


def _commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=RECORDS.parent, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _machine(processes: int, backend: str | None) -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "processes": processes, "backend": backend}


def run(name: str, size: str = "full", seeds: Sequence[int] | None = None, *,
        overrides: dict[str, Any] | None = None) -> Record:
    """Run experiment ``name`` at ``size`` for every seed and return its record (not written).

    Under ``torchrun`` every process runs every seed, training on its share of each batch
    (:func:`posenc.models.train`); the record is the same on each.

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.
    size : str
        ``"short"`` or ``"full"``.
    seeds : list of int, optional
        Default: the configuration's ``seeds``.
    overrides : dict, optional
        Configuration values to replace (a quick check of the runner, such as fewer ``steps``).
        The record then hashes the changed configuration.
    """
    module = experiment(name)
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    config = dict(module.SHORT if size == "short" else module.FULL)
    unknown = sorted(set(overrides or {}) - set(config))
    if unknown:
        raise ValueError(f"overrides {unknown} are not keys of {name}'s configuration {sorted(config)}")
    config.update(overrides or {})
    seeds = list(config["seeds"] if seeds is None else seeds)
    from posenc.models._distributed import world

    processes = world()[1]
    backend = torch.distributed.get_backend() if processes > 1 else None
    digest = code_hash(name, config)  # of the code about to run, whatever happens to the file meanwhile
    start = time.perf_counter()
    metrics = {str(seed): module.run(config, seed) for seed in seeds}
    return Record(experiment=name, size=size, config=config, seeds=seeds, metrics=metrics,
                  hash=digest, commit=_commit(), torch=torch.__version__,
                  machine=_machine(processes, backend), seconds=round(time.perf_counter() - start, 1),
                  finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))


@functools.cache
def build_run(name: str) -> Record:
    """The short run of experiment ``name`` (``run(name, "short")``), made once per process.

    The site builds its pages in one process, and two pages that show the same build run share
    it instead of training the same models twice. Every seed's training is seeded, so the shared
    run is the run either page would have made.
    """
    return run(name, "short")


def save(record: Record, folder: Path = RECORDS) -> Path:
    """Write ``record`` as ``<folder>/<experiment>.json`` (``<experiment>.<size>.json`` if not full)."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = "" if record.size == "full" else f".{record.size}"
    path = folder / f"{record.experiment}{suffix}.json"
    path.write_text(json.dumps(asdict(record), indent=1) + "\n")
    return path


def load_record(name: str, folder: Path = RECORDS) -> Record:
    """The committed full-size record of experiment ``name``.

    Raises
    ------
    FileNotFoundError
        If there is none (run ``python -m posenc.experiments run NAME``).
    """
    path = folder / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no record of {name!r} in {folder}: run `python -m posenc.experiments run {name}`")
    return Record(**json.loads(path.read_text()))


def stale_records(folder: Path = RECORDS) -> list[str]:
    """Names of the records in ``folder`` whose experiment code or configuration has changed."""
    return sorted(path.stem for path in folder.glob("*.json") if load_record(path.stem, folder).stale)


def compare(first: Sequence[float], second: Sequence[float]) -> tuple[str, float, float]:
    """The site's decision rule for two settings measured over the same seeds.

    Returns ``(verdict, difference, spread)``: ``difference`` is mean(second) − mean(first),
    ``spread`` the larger of the two settings' ranges across seeds (largest minus smallest), and
    ``verdict`` is ``"second higher"`` or ``"first higher"`` when ``|difference| > 2 * spread``,
    else ``"inconclusive"``. With one seed the spread is unknown and the verdict is inconclusive.
    """
    first, second = [float(v) for v in first], [float(v) for v in second]
    if len(first) != len(second) or not first:
        raise ValueError(f"compare needs the same non-zero number of seeds, got {len(first)} and {len(second)}")
    difference = sum(second) / len(second) - sum(first) / len(first)
    spread = max(max(first) - min(first), max(second) - min(second))
    if len(first) < 2 or abs(difference) <= 2 * spread:
        return "inconclusive", difference, spread
    return ("second higher" if difference > 0 else "first higher"), difference, spread
