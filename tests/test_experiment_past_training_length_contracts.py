"""Contracts of the past-the-training-length experiment (posenc.experiments.past_training_length): the
models, the scalings, what each perplexity and loss is of, on the tiniest configurations."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc.experiments import past_training_length as experiment
from posenc.models import TrainingLog, next_token_loss, stdlib_corpus, token_losses

TINY = {**experiment.SHORT, "train_modules": ["textwrap"], "held_out_modules": ["shlex"], "train_length": 4,
        "eval_lengths": [4, 8], "learned_rows": 8, "batch": 2, "warmup": 1, "average": 2, "heads": 2, "layers": 1,
        "eval_windows": 3, "block": 2, "longer_batch": 2, "longer_lr": 1e-3, "longer_fraction": 0.1, "steps": 2,
        "dim": 8}


def test_names_in_order() -> None:
    assert experiment.NAMES == ("learned", "sinusoidal", "RoPE", "ALiBi", "RoPE + linear x4", "RoPE + dynamic NTK x4",
                                "RoPE, trained on 256 more")


def test_data_are_fixed_windows_of_the_longest_length_plus_one() -> None:
    corpus, windows = experiment.data(TINY)
    want = stdlib_corpus(["textwrap"], ["shlex"])
    assert torch.equal(corpus.held_out, want.held_out)
    starts = torch.randint(0, len(corpus.held_out) - 9, (3,), generator=torch.Generator().manual_seed(1))
    assert windows.shape == (3, 9)
    for row, start in zip(windows, starts.tolist()):
        assert torch.equal(row, corpus.held_out[start: start + 9])
    assert torch.equal(experiment.data(TINY)[1], windows)


@pytest.mark.parametrize(("max_len", "want"), [(None, 4), (8, 8)])
def test_new_model_settings(max_len: int | None, want: int) -> None:
    model = experiment.new_model(TINY, 30, "alibi", seed=1, max_len=max_len)
    config = model.transformer.config
    assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (30, 8, 2, 1, want)
    assert config.position == "alibi" and config.causal


def test_every_model_of_a_seed_starts_from_the_same_weights() -> None:
    first = dict(experiment.new_model(TINY, 30, "rope", seed=1).named_parameters())
    for position in ("learned", "sinusoidal", "alibi"):
        other = dict(experiment.new_model(TINY, 30, position, seed=1, max_len=8).named_parameters())
        assert all(torch.equal(first[n], p) for n, p in other.items() if n in first)
    later = dict(experiment.new_model(TINY, 30, "rope", seed=2).named_parameters())
    assert not torch.equal(later["transformer.embed.embedding.weight"], first["transformer.embed.embedding.weight"])


def test_scalings_stretch_by_the_longest_over_the_training_length() -> None:
    assert experiment.scalings({"eval_lengths": [4, 12, 8], "train_length": 4}) == {
        "RoPE + linear x4": {"rope_type": "linear", "factor": 3.0},
        "RoPE + dynamic NTK x4": {"rope_type": "dynamic", "factor": 3.0, "max_position_embeddings": 4}}


def test_with_scaling_copies_the_model_and_swaps_its_rotary_embedding() -> None:
    model = experiment.new_model(TINY, 30, "rope", seed=0)
    original = model.transformer.position.rope
    scaling = {"rope_type": "linear", "factor": 2.0}
    scaled = experiment.with_scaling(model, scaling, 8)
    assert model.transformer.position.rope is original  # the trained model is left as it was
    rope = scaled.transformer.position.rope
    assert isinstance(rope, posenc.RotaryEmbedding)
    assert rope.dim == 4 and rope.scaling.rope_type == "linear" and rope.cos_cached.shape[0] == 8
    want = posenc.RotaryEmbedding(4, scaling=scaling, max_len=8)
    assert torch.equal(rope.cos_cached, want.cos_cached)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), scaled.parameters()))
    assert next(scaled.parameters()) is not next(model.parameters())


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """train replaced: each call (its model, batch, arguments); given losses, weights unchanged."""
    calls: list[dict] = []

    def fake_train(model, loss_fn, make_batch, **kwargs):
        calls.append({"model": model, "loss_fn": loss_fn, "batch": make_batch(torch.Generator().manual_seed(0)),
                      "kwargs": kwargs})
        return TrainingLog(losses=[9.0, 3.0, float(len(calls))], seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    return calls


def test_train_models_trains_each_encoding_then_rope_longer(trained: list[dict]) -> None:
    corpus = stdlib_corpus(["textwrap"], ["shlex"])
    models, train_end = experiment.train_models(TINY, corpus, seed=3)
    assert list(models) == list(experiment.NAMES)
    positions = [c["model"].transformer.config.position for c in trained]
    assert positions == ["learned", "sinusoidal", "rope", "alibi", "rope"]
    assert [c["model"].transformer.config.max_len for c in trained[:4]] == [8, 4, 4, 4]
    assert all(c["model"].transformer.config.vocab_size == corpus.vocab_size for c in trained)
    for call, name in zip(trained[:4], experiment.TRAINED):
        assert call["model"] is models[name]
        assert call["loss_fn"] is next_token_loss
        assert call["kwargs"] == {"steps": 2, "lr": TINY["lr"], "warmup": 1, "seed": 3}
        assert torch.equal(call["batch"], corpus.windows(4, 2)(torch.Generator().manual_seed(0)))
    longer = trained[4]
    assert longer["model"] is models["RoPE, trained on 256 more"] and longer["model"] is not models["RoPE"]
    assert longer["loss_fn"] is next_token_loss
    assert longer["kwargs"] == {"steps": 1, "lr": 1e-3, "seed": 1003}  # max(1, round(2 * 0.1))
    assert torch.equal(longer["batch"], corpus.windows(8, 2)(torch.Generator().manual_seed(0)))
    # The mean of the last `average` = 2 losses: (3 + k) / 2 for the k-th call.
    assert train_end == {"learned": 2.0, "sinusoidal": 2.5, "RoPE": 3.0, "ALiBi": 3.5}
    for name, scaling in experiment.scalings(TINY).items():
        rope = models[name].transformer.position.rope
        assert rope.scaling.rope_type == scaling["rope_type"] and rope.cos_cached.shape[0] == 8


def test_train_models_trains_longer_for_a_fraction_of_the_steps(trained: list[dict]) -> None:
    corpus = stdlib_corpus(["textwrap"], ["shlex"])
    experiment.train_models({**TINY, "steps": 30, "longer_fraction": 0.25}, corpus, seed=0)
    assert trained[4]["kwargs"]["steps"] == 8  # round(7.5)
    assert trained[0]["kwargs"]["steps"] == 30


def test_per_position_is_the_mean_loss_at_each_position() -> None:
    model = experiment.new_model(TINY, 30, "rope", seed=0).eval()
    windows = torch.randint(0, 30, (3, 9), generator=torch.Generator().manual_seed(0))
    got = experiment.per_position(model, windows, 5)
    assert got.shape == (5,)
    with torch.no_grad():
        torch.testing.assert_close(got, token_losses(model, windows[:, :6]).mean(0))


def test_evaluate_reads_every_length_from_the_longest_pass() -> None:
    model = experiment.new_model(TINY, 30, "rope", seed=0).eval()
    windows = torch.randint(0, 30, (3, 9), generator=torch.Generator().manual_seed(0))
    perplexity, curve = experiment.evaluate(model, windows, [2, 8])
    torch.testing.assert_close(curve, experiment.per_position(model, windows, 8))
    assert perplexity == [math.exp(curve[:2].mean().item()), math.exp(curve.mean().item())]


def test_evaluate_with_a_length_dependent_encoding_reads_each_length_alone() -> None:
    model = experiment.new_model(TINY, 30, "rope", seed=0).eval()
    model = experiment.with_scaling(model, {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 4}, 8)
    windows = torch.randint(0, 30, (3, 9), generator=torch.Generator().manual_seed(0))
    perplexity, curve = experiment.evaluate(model, windows, [6, 8], depends_on_length=True)
    alone = experiment.per_position(model, windows, 6)
    assert perplexity[0] == math.exp(alone.mean().item())
    assert perplexity[0] != math.exp(curve[:6].mean().item())  # the pass at 8 scales differently
    assert perplexity[1] == math.exp(curve.mean().item())


def test_run_models_metrics(monkeypatch: pytest.MonkeyPatch, trained: list[dict]) -> None:
    flags = {}
    real = experiment.evaluate

    def recording_evaluate(model, windows, lengths, depends_on_length=False):
        name = next(n for n, m in models_seen.items() if m is model)
        flags[name] = depends_on_length
        return real(model, windows, lengths, depends_on_length)

    models_seen: dict = {}
    real_train_models = experiment.train_models

    def recording_train_models(config, corpus, seed):
        models, train_end = real_train_models(config, corpus, seed)
        models_seen.update(models)
        return models, train_end

    monkeypatch.setattr(experiment, "evaluate", recording_evaluate)
    monkeypatch.setattr(experiment, "train_models", recording_train_models)
    models, metrics = experiment.run_models(TINY, seed=0)
    assert flags == {name: name == "RoPE + dynamic NTK x4" for name in experiment.NAMES}
    _, windows = experiment.data(TINY)
    for name, model in models.items():
        perplexity, curve = real(model, windows, [4, 8], depends_on_length=name == "RoPE + dynamic NTK x4")
        assert metrics[f"perplexity/{name}"] == [round(p, 5) for p in perplexity]
        assert metrics[f"loss_by_block/{name}"] == [round(v, 5) for v in curve.view(4, 2).mean(1).tolist()]
    assert {k: v for k, v in metrics.items() if k.startswith("train_end/")} == {
        "train_end/learned": 2.0, "train_end/sinusoidal": 2.5, "train_end/RoPE": 3.0, "train_end/ALiBi": 3.5}
    assert len(metrics) == 4 + 2 * 7


def test_train_end_is_rounded_to_five_decimals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "train", lambda *a, **k: TrainingLog(losses=[1.0, 1 / 3], seconds=0.0))
    metrics = experiment.run(TINY, seed=0)
    assert metrics["train_end/RoPE"] == 0.66667


def test_a_tiny_run_repeats() -> None:
    metrics = experiment.run(TINY, seed=0)
    assert experiment.run(TINY, seed=0) == metrics
    assert all(len(metrics[f"perplexity/{n}"]) == 2 and len(metrics[f"loss_by_block/{n}"]) == 4
               for n in experiment.NAMES)


def test_training_longer_leaves_the_rope_model_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    def shifting_train(model, loss_fn, make_batch, **kwargs):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        return TrainingLog(losses=[1.0], seconds=0.0)

    monkeypatch.setattr(experiment, "train", shifting_train)
    corpus = stdlib_corpus(["textwrap"], ["shlex"])
    models, _ = experiment.train_models(TINY, corpus, seed=0)
    start = experiment.new_model(TINY, corpus.vocab_size, "rope", seed=0)
    rope, longer = models["RoPE"], models["RoPE, trained on 256 more"]
    assert all(torch.equal(a, b + 1) for a, b in zip(rope.parameters(), start.parameters()))
    assert all(torch.equal(a, b + 1 + 1) for a, b in zip(longer.parameters(), start.parameters()))
