"""Contracts of ``python -m posenc.experiments`` (posenc.experiments.__main__), called in-process with
the runner replaced: the arguments it passes, what it prints, its exit statuses."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from posenc.experiments import RECORDS
from posenc.experiments import __main__ as cli


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """run and save replaced: each call's arguments; the record says 12.4 s on 1 process."""
    calls: list[dict] = []

    record = SimpleNamespace(seconds=12.4, machine={"processes": 1})

    def fake_run(name, size, seeds, *, overrides):
        calls.append({"name": name, "size": size, "seeds": seeds, "overrides": overrides})
        return record

    def fake_save(saved, folder):
        assert saved is record
        calls.append({"saved": folder})
        return Path(folder) / "x.json"

    monkeypatch.setattr(cli, "run", fake_run)
    monkeypatch.setattr(cli, "save", fake_save)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return calls


@pytest.mark.parametrize(("text", "value"), [("20", 20), ("1e-3", 1e-3), ("[1, 2]", [1, 2]), ("true", True),
                                             ("null", None), ('"a"', "a"), ("rope", "rope"), ("", "")])
def test_set_values_are_json_else_text(text: str, value: object) -> None:
    assert cli._value(text) == value


def test_run_defaults(runs: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "long_range"]) == 0
    assert runs == [{"name": "long_range", "size": "full", "seeds": None, "overrides": {}}, {"saved": RECORDS}]
    captured = capsys.readouterr()
    assert captured.out == f"wrote {RECORDS / 'x.json'} (12 s, 1 process(es))\n"
    assert captured.err == ""


def test_run_passes_size_seeds_overrides_and_folder(runs: list[dict], tmp_path: Path) -> None:
    assert cli.main(["run", "two_languages", "--size", "short", "--seeds", "3", "4", "--set", "steps=20",
                     "--set", "position=rope", "--set", "lr=1e-3", "--set", "eq=a=b", "--out", str(tmp_path)]) == 0
    assert runs == [{"name": "two_languages", "size": "short", "seeds": [3, 4],
                     "overrides": {"steps": 20, "position": "rope", "lr": 1e-3, "eq": "a=b"}}, {"saved": tmp_path}]


def test_run_refuses_a_set_without_equals(runs: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "long_range", "--set", "steps"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith("error: --set takes KEY=VALUE, got 'steps'\n")
    assert runs == []


@pytest.mark.parametrize("arguments", [["run", "nope"], ["run", "long_range", "--size", "medium"],
                                       ["run", "long_range", "--seeds", "a"], []])
def test_bad_arguments_exit_with_two(arguments: list[str], runs: list[dict]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(arguments)
    assert exit_.value.code == 2
    assert runs == []


def test_a_refused_configuration_is_one_stderr_line(monkeypatch: pytest.MonkeyPatch, runs: list[dict],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(name, size, seeds, *, overrides):
        raise ValueError("overrides ['stepz'] are not keys")

    monkeypatch.setattr(cli, "run", refuse)
    assert cli.main(["run", "long_range", "--set", "stepz=1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "posenc.experiments: overrides ['stepz'] are not keys\n"


def test_stale_lists_the_stale_records(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    folders = []
    monkeypatch.setattr(cli, "stale_records", lambda folder: folders.append(folder) or ["a", "b"])
    assert cli.main(["stale", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().out == "a\nb\n"
    assert folders == [tmp_path]


def test_stale_without_stale_records(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folders = []
    monkeypatch.setattr(cli, "stale_records", lambda folder: folders.append(folder) or [])
    assert cli.main(["stale"]) == 0
    assert capsys.readouterr().out == "no stale records\n"
    assert folders == [RECORDS]


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> list:
    """A fake process group of two processes."""
    events: list = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda backend: events.append(("init", backend)))
    monkeypatch.setattr(torch.distributed, "destroy_process_group", lambda: events.append("destroy"))
    return events


@pytest.mark.parametrize(("rank", "printed"), [(0, True), (1, False)])
def test_under_torchrun_the_first_process_writes(runs: list[dict], group: list, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], rank: int, printed: bool) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: rank)
    assert cli.main(["run", "long_range"]) == 0
    assert group == [("init", "gloo"), "destroy"]
    assert (capsys.readouterr().out != "") == printed
    assert ({"saved": RECORDS} in runs) == printed


def test_under_torchrun_with_cuda_the_backend_is_nccl(runs: list[dict], group: list,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    assert cli.main(["run", "long_range"]) == 0
    assert group == [("init", "nccl"), "destroy"]


def test_under_torchrun_the_group_ends_after_an_error(runs: list[dict], group: list,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name, size, seeds, *, overrides):
        raise ValueError("no")

    monkeypatch.setattr(cli, "run", refuse)
    assert cli.main(["run", "long_range"]) == 2
    assert group == [("init", "gloo"), "destroy"]


def test_one_process_starts_no_group(runs: list[dict], group: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert cli.main(["run", "long_range"]) == 0
    assert group == []


def test_help_describes_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: python -m posenc.experiments [-h] {run,stale} ...")
    assert "run run an experiment and write its record" in out
    assert "stale list the records whose experiment has changed" in out
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--seeds SEEDS [SEEDS ...] default: the configuration's seeds" in out
    assert "--set KEY=VALUE replace a configuration value (e.g. steps=20), for quick checks" in out
    assert f"--out OUT folder of the record (default {RECORDS})" in " ".join(out.split())
    assert "--size {short,full}" in out


def test_help_keeps_the_lines_of_the_module_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert "python -m posenc.experiments stale [--out DIR]" in lines
    assert "torchrun --standalone --nproc-per-node 2 -m posenc.experiments run NAME ..." in lines
