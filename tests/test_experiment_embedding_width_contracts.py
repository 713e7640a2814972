"""Contracts of the embedding-width experiment (posenc.experiments.embedding_width): what each
reported number is, on the tiniest configurations."""

from __future__ import annotations

import pytest
import torch

from posenc.experiments import embedding_width as experiment
from posenc.models import next_token_loss, stdlib_corpus, train

TINY = {**experiment.SHORT, "train_modules": ["textwrap"], "held_out_modules": ["shlex"], "window": 8, "batch": 2,
        "warmup": 1, "head_dim": 8, "small_chars": 64, "train_windows": 3, "widths": [8, 16], "steps": 2,
        "control_lr": None}


def test_windows_are_evenly_spaced_and_at_most_most() -> None:
    ids = torch.arange(17)  # (17 - 1) // 4 = 4 windows of 4
    assert experiment.windows(ids, 3, 10).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert experiment.windows(ids, 3, 2).tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert experiment.windows(ids, 3, 3).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert experiment.windows(ids, 3, 1).tolist() == [[0, 1, 2, 3]]


def test_windows_keep_one_id_past_the_last_window() -> None:
    assert experiment.windows(torch.arange(16), 3, 10).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_data_sets_and_held_out_windows() -> None:
    corpus, datasets, held_out = experiment.data(TINY)
    want = stdlib_corpus(["textwrap"], ["shlex"])
    assert torch.equal(corpus.train, want.train) and torch.equal(corpus.held_out, want.held_out)
    assert list(datasets) == ["large", "small"]
    assert torch.equal(datasets["large"], corpus.train)
    assert torch.equal(datasets["small"], corpus.train[:64])
    n = (len(corpus.held_out) - 1) // 9
    assert torch.equal(held_out, corpus.held_out[: n * 9].view(n, 9))  # every held-out window


@pytest.mark.parametrize(("dim", "heads"), [(8, 1), (16, 2), (4, 1)])
def test_model_width_heads_and_seed(dim: int, heads: int) -> None:
    config = {**TINY, "layers": 3}
    model = experiment.make_model(config, 30, dim, seed=3)
    c = model.transformer.config
    assert (c.vocab_size, c.dim, c.num_heads, c.num_layers, c.max_len) == (30, dim, heads, 3, 8)
    assert c.position == "sinusoidal" and c.causal
    again = experiment.make_model(config, 30, dim, seed=3)
    other = experiment.make_model(config, 30, dim, seed=4)
    weights = [p for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights, again.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(weights, other.parameters()))


def test_run_one_reports_the_losses_of_the_trained_model(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def recording_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)))
        log = train(model, loss_fn, make_batch, **kwargs)
        log.seconds = 0.5
        return log

    monkeypatch.setattr(experiment, "train", recording_train)
    corpus, datasets, held_out = experiment.data(TINY)
    ids = datasets["small"]
    result = experiment.run_one(TINY, corpus, ids, held_out, 16, seed=5, lr=0.01)
    assert seen["kwargs"] == {"steps": 2, "lr": 0.01, "seed": 5, "warmup": 1}
    assert seen["loss_fn"] is next_token_loss
    assert seen["batch"].shape == (2, 9)
    assert torch.equal(seen["batch"], corpus.windows(8, 2, ids)(torch.Generator().manual_seed(0)))
    model = seen["model"]
    assert model.transformer.config.dim == 16 and model.transformer.config.vocab_size == corpus.vocab_size
    with torch.no_grad():
        assert result["held_out"] == next_token_loss(model, held_out).item()
        assert result["train"] == next_token_loss(model, experiment.windows(ids, 8, 3)).item()
    assert result["seconds_per_step"] == 0.25
    assert result["parameters"] == float(sum(p.numel() for p in model.parameters()))
    assert list(result) == ["held_out", "train", "seconds_per_step", "parameters"]


def test_run_starts_every_width_from_its_seeded_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    models = []

    def recording_train(model, loss_fn, make_batch, **kwargs):
        models.append([p.detach().clone() for p in model.parameters()])
        return train(model, loss_fn, make_batch, **kwargs)

    monkeypatch.setattr(experiment, "train", recording_train)
    corpus, datasets, held_out = experiment.data(TINY)
    experiment.run_one(TINY, corpus, datasets["small"], held_out, 8, seed=7, lr=0.01)
    fresh = experiment.make_model(TINY, corpus.vocab_size, 8, seed=7)
    assert all(torch.equal(a, b) for a, b in zip(models[0], fresh.parameters()))


def _fake_run_one(calls: list):
    def run_one(config, corpus, ids, held_out, dim, seed, lr):
        calls.append((len(ids), dim, seed, lr))
        return {"held_out": dim + lr, "train": dim - lr, "seconds_per_step": 0.5 * dim, "parameters": 10.0 * dim}
    return run_one


def test_run_names_every_metric_by_data_and_width(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(experiment, "run_one", _fake_run_one(calls))
    corpus, _, _ = experiment.data(TINY)
    metrics = experiment.run({**TINY, "lr": 0.5}, seed=2)
    large, small = len(corpus.train), 64
    assert calls == [(large, 8, 2, 0.5), (large, 16, 2, 0.5), (small, 8, 2, 0.5), (small, 16, 2, 0.5)]
    want = {}
    for data in ("large", "small"):
        for dim in (8, 16):
            want |= {f"held_out/{data}/{dim}": dim + 0.5, f"train/{data}/{dim}": dim - 0.5,
                     f"seconds_per_step/{data}/{dim}": 0.5 * dim}
    want |= {"parameters/8": 80.0, "parameters/16": 160.0}
    assert metrics == want


def test_run_with_a_control_trains_the_widest_again_at_its_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(experiment, "run_one", _fake_run_one(calls))
    metrics = experiment.run({**TINY, "lr": 0.5, "control_lr": 0.25, "widths": [16, 8]}, seed=0)
    assert [c[1:] for c in calls] == [(16, 0, 0.5), (8, 0, 0.5), (16, 0, 0.25)] * 2
    assert metrics["held_out/large/control"] == 16.25 and metrics["train/small/control"] == 15.75
    assert metrics["seconds_per_step/small/control"] == 8.0
    assert metrics["parameters/16"] == 160.0
    assert len(metrics) == 2 * 3 * 3 + 2


def test_a_tiny_run_repeats_and_reports_losses() -> None:
    config = {**TINY, "widths": [8]}
    metrics = experiment.run(config, seed=0)
    again = experiment.run(config, seed=0)
    timing = {k for k in metrics if k.startswith("seconds_per_step/")}
    assert {k: v for k, v in metrics.items() if k not in timing} == {k: v for k, v in again.items() if k not in timing}
    assert set(metrics) == {f"{kind}/{data}/8" for kind in ("held_out", "train", "seconds_per_step")
                            for data in ("large", "small")} | {"parameters/8"}
    # Untrained, a character model's loss is about ln(vocabulary size).
    corpus, _, _ = experiment.data(config)
    assert all(0 < metrics[f"held_out/{d}/8"] < 2 * torch.log(torch.tensor(corpus.vocab_size)).item()
               for d in ("large", "small"))
