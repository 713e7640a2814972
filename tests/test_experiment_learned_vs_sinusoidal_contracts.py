"""Contracts of the learned-or-sinusoidal experiment (posenc.experiments.learned_vs_sinusoidal): what
each reported number is, from given training losses and on the tiniest configurations."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from posenc.experiments import learned_vs_sinusoidal as experiment
from posenc.models import TrainingLog, next_token_loss, stdlib_corpus, train

TINY = {**experiment.SHORT, "train_modules": ["textwrap"], "held_out_modules": ["shlex"], "window": 8, "batch": 2,
        "warmup": 1, "average": 2, "small_chars": 64, "steps": 4, "dim": 8, "heads": 2, "layers": 1}


def test_data_sets_and_non_overlapping_held_out_windows() -> None:
    corpus, datasets, held_out = experiment.data(TINY)
    want = stdlib_corpus(["textwrap"], ["shlex"])
    assert torch.equal(corpus.train, want.train) and torch.equal(corpus.held_out, want.held_out)
    assert list(datasets) == ["large", "small"]
    assert torch.equal(datasets["large"], corpus.train) and torch.equal(datasets["small"], corpus.train[:64])
    n = (len(corpus.held_out) - 1) // 9
    assert torch.equal(held_out, corpus.held_out[: n * 9].view(n, 9))


def test_data_keeps_one_id_past_the_last_window(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = SimpleNamespace(train=torch.arange(100), held_out=torch.arange(18))  # (18 - 1) // 9 = 1 window, not 2
    monkeypatch.setattr(experiment, "stdlib_corpus", lambda train, held_out: corpus)
    _, _, held_out = experiment.data(TINY)
    assert held_out.tolist() == [list(range(9))]
    corpus.held_out = torch.arange(19)  # (19 - 1) // 9 = 2 windows
    _, _, held_out = experiment.data(TINY)
    assert held_out.tolist() == [list(range(9)), list(range(9, 18))]


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """run with train replaced: each call's model and arguments; the losses are given (4 steps)."""
    calls: list[dict] = []
    losses = {"sinusoidal": [4.0, 3.0, 2.0, 1.0], "learned": [5.0, 3.5, 2.5, 2.0]}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        position = model.transformer.config.position
        calls.append({"model": model, "loss_fn": loss_fn, "make_batch": make_batch, "kwargs": kwargs,
                      "weights": {n: p.detach().clone() for n, p in model.named_parameters()}})
        return TrainingLog(losses=list(losses[position]) + [0.0] * (kwargs["steps"] - 4), seconds=1.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    return calls


def test_run_trains_each_encoding_on_each_data_set(trained: list[dict]) -> None:
    metrics = experiment.run(TINY, seed=3)
    corpus, datasets, held_out = experiment.data(TINY)
    assert [(c["model"].transformer.config.position) for c in trained] == ["sinusoidal", "learned"] * 2
    for call, data in zip(trained, ["large", "large", "small", "small"]):
        config = call["model"].transformer.config
        assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len, config.causal) == (
            corpus.vocab_size, 8, 2, 1, 8, True)
        assert call["kwargs"] == {"steps": 4, "lr": TINY["lr"], "seed": 3, "warmup": 1}
        assert call["loss_fn"] is next_token_loss
        generator = torch.Generator().manual_seed(0)
        want = corpus.windows(8, 2, datasets[data])(torch.Generator().manual_seed(0))
        assert torch.equal(call["make_batch"](generator), want)
        position = config.position
        with torch.no_grad():
            assert metrics[f"held_out/{data}/{position}"] == next_token_loss(call["model"], held_out).item()
    # Same seed: every weight the encodings share starts equal.
    sinusoidal, learned = trained[0]["weights"], trained[1]["weights"]
    assert set(learned) - set(sinusoidal) == {"transformer.position.table.weight"}
    assert all(torch.equal(value, learned[name]) for name, value in sinusoidal.items())
    # A later seed starts elsewhere.
    experiment.run(TINY, seed=4)
    assert not torch.equal(trained[4]["weights"]["transformer.embed.embedding.weight"],
                           sinusoidal["transformer.embed.embedding.weight"])


def test_run_reports_the_end_of_training_and_the_gap(trained: list[dict]) -> None:
    metrics = experiment.run(TINY, seed=0)
    for data in ("large", "small"):
        assert metrics[f"train_end/{data}/sinusoidal"] == 1.5  # mean of the last 2 steps
        assert metrics[f"train_end/{data}/learned"] == 2.25
        # learned - sinusoidal = [1, 0.5, 0.5, 1]; moving average over 2: [0.75, 0.5, 0.75]; every 2nd
        assert metrics[f"gap/{data}"] == [0.75, 0.75]
    learned = [c["model"] for c in trained if c["model"].transformer.config.position == "learned"]
    assert metrics["table_std/large"] == learned[0].transformer.position.table.weight.std().item()
    assert metrics["table_std/small"] == learned[1].transformer.position.table.weight.std().item()
    assert set(metrics) == {f"{kind}/{data}/{position}" for kind in ("held_out", "train_end")
                            for data in ("large", "small") for position in ("sinusoidal", "learned")} | {
        "table_std/large", "table_std/small", "gap/large", "gap/small"}


def test_gap_values_are_rounded_to_five_decimals(trained: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = experiment.run({**TINY, "average": 3, "steps": 4}, seed=0)
    # learned - sinusoidal = [1, 0.5, 0.5, 1]: averages over 3 are [2/3, 2/3]; every 3rd: [2/3]
    assert metrics["gap/large"] == [0.66667]
    assert metrics["train_end/large/sinusoidal"] == 2.0


def test_a_tiny_run_repeats_and_trains() -> None:
    config = {**TINY, "steps": 3}
    metrics = experiment.run(config, seed=1)
    assert experiment.run(config, seed=1) == metrics
    assert experiment.run(config, seed=2) != metrics
    assert all(len(metrics[f"gap/{d}"]) == 1 for d in ("large", "small"))  # 3 - 2 + 1 = 2 averages, every 2nd
