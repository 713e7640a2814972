"""Contracts of the stretching-RoPE experiment (posenc.experiments.stretching_rope): the methods, the
copies, what each loss is of, on the tiniest configurations."""

from __future__ import annotations

import pytest
import torch

from posenc import RotaryEmbedding
from posenc.experiments import stretching_rope as experiment
from posenc.models import CausalLM, TrainingLog, next_token_loss, stdlib_corpus, token_losses

TINY = {**experiment.SHORT, "train_modules": ["textwrap"], "held_out_modules": ["shlex"], "train_len": 4,
        "factors": [1, 2], "s": 2, "base": 100.0, "heads": 2, "layers": 1, "tokens_per_step": 16, "warmup": 1,
        "ft_steps": 1, "ft_lr": 1e-3, "ft_warmup": 0, "eval_tokens": 64, "dim": 16, "steps": 2}


def test_the_corpus_is_read_once() -> None:
    corpus = experiment.corpus(TINY)
    assert experiment.corpus(dict(TINY)) is corpus
    want = stdlib_corpus(["textwrap"], ["shlex"])
    assert torch.equal(corpus.train, want.train) and torch.equal(corpus.held_out, want.held_out)


def test_model_config() -> None:
    config = experiment.model_config(TINY)
    assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (
        experiment.corpus(TINY).vocab_size, 16, 2, 1, 32)
    assert config.position == "rope" and config.rope_base == 100.0 and config.causal


def test_methods_bases_and_scalings() -> None:
    assert experiment.methods(TINY) == {
        "no scaling": (100.0, None),
        "linear": (100.0, {"rope_type": "linear", "factor": 2}),
        "NTK-aware": (100.0 * 2 ** (8 / 6), None),
        "dynamic NTK": (100.0, {"rope_type": "dynamic", "factor": 2, "max_position_embeddings": 4}),
        "YaRN": (100.0, {"rope_type": "yarn", "factor": 2, "original_max_position_embeddings": 4}),
    }
    assert list(experiment.methods(TINY)) == list(experiment.METHODS)


@pytest.mark.parametrize("method", experiment.METHODS)
def test_with_rope_copies_the_model_with_the_methods_rotary_embedding(method: str) -> None:
    torch.manual_seed(0)
    model = CausalLM(experiment.model_config(TINY))
    original = model.transformer.position.rope
    stretched = experiment.with_rope(model, TINY, method)
    assert model.transformer.position.rope is original
    rope = stretched.transformer.position.rope
    base, scaling = experiment.methods(TINY)[method]
    want = RotaryEmbedding(8, base=base, scaling=scaling, max_len=32)
    assert rope.dim == 8 and rope.scaling.base == base and rope.cos_cached.shape == (32, 8)
    assert torch.equal(rope.cos_cached, want.cos_cached) and torch.equal(rope.sin_cached, want.sin_cached)
    assert rope.scaling.rope_type == (scaling or {"rope_type": "default"})["rope_type"]
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), stretched.parameters()))
    assert next(stretched.parameters()) is not next(model.parameters())


def test_batches_hold_tokens_per_step_characters() -> None:
    batch = experiment.batches(TINY, 8)(torch.Generator().manual_seed(0))
    assert batch.shape == (2, 9)
    want = experiment.corpus(TINY).windows(8, 2)(torch.Generator().manual_seed(0))
    assert torch.equal(batch, want)


def test_held_out_loss_reads_the_same_characters_at_every_length() -> None:
    torch.manual_seed(0)
    model = CausalLM(experiment.model_config(TINY)).eval()
    windows = experiment.corpus(TINY).held_out_windows(8, 64)
    with torch.no_grad():
        want = token_losses(model, windows).mean().item()
    assert experiment.held_out_loss(model, TINY, 8) == want


def test_train_base_averages_every_loss_of_a_run_shorter_than_20_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "train", lambda *args, **kwargs: TrainingLog(losses=[1.0, 2.0, 6.0], seconds=0.0))
    assert experiment.train_base(TINY, seed=0)[1] == 3.0


def test_train_base_is_seeded_and_reports_the_mean_of_the_last_20_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)),
                    weights=[p.detach().clone() for p in model.parameters()])
        return TrainingLog(losses=[100.0] * 5 + [float(i) for i in range(20)], seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    model, loss = experiment.train_base(TINY, seed=3)
    assert loss == sum(range(20)) / 20
    assert seen["model"] is model and seen["loss_fn"] is next_token_loss
    assert seen["kwargs"] == {"steps": 2, "lr": TINY["lr"], "seed": 3, "warmup": 1}
    assert torch.equal(seen["batch"], experiment.batches(TINY, 4)(torch.Generator().manual_seed(0)))
    torch.manual_seed(3)
    fresh = CausalLM(experiment.model_config(TINY))
    assert all(torch.equal(a, b) for a, b in zip(seen["weights"], fresh.parameters()))


def test_fine_tune_trains_in_place_on_windows_of_the_length(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)))
        return TrainingLog(losses=[], seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    model = CausalLM(experiment.model_config(TINY))
    assert experiment.fine_tune(model, {**TINY, "ft_steps": 7, "ft_warmup": 2}, 8, seed=4) is model
    assert seen["model"] is model and seen["loss_fn"] is next_token_loss
    assert seen["kwargs"] == {"steps": 7, "lr": 1e-3, "seed": 104, "warmup": 2}
    assert torch.equal(seen["batch"], experiment.batches(TINY, 8)(torch.Generator().manual_seed(0)))


def test_run_reads_each_method_before_and_after_its_fine_tune(monkeypatch: pytest.MonkeyPatch) -> None:
    base = CausalLM(experiment.model_config(TINY))
    tuned_at: dict[int, list[int]] = {}

    def fake_fine_tune(model, config, length, seed):
        assert seed == 5
        tuned_at.setdefault(id(model), []).append(length)
        return model

    def fake_loss(model, config, length):
        rope = model.transformer.position.rope
        return (rope.scaling.base, rope.scaling.rope_type, tuple(tuned_at.get(id(model), [])), length)

    monkeypatch.setattr(experiment, "train_base", lambda config, seed: (base, 0.5 + seed))
    monkeypatch.setattr(experiment, "fine_tune", fake_fine_tune)
    monkeypatch.setattr(experiment, "held_out_loss", fake_loss)
    metrics = experiment.run(TINY, seed=5)
    assert metrics["train_loss"] == 5.5
    ntk = 100.0 * 2 ** (8 / 6)
    kinds = {"no scaling": (100.0, "default"), "linear": (100.0, "linear"), "NTK-aware": (ntk, "default"),
             "dynamic NTK": (100.0, "dynamic"), "YaRN": (100.0, "yarn")}
    for method, (b, kind) in kinds.items():
        assert metrics[f"untuned/{method}"] == [(b, kind, (), 4), (b, kind, (), 8)]
        assert metrics[f"tuned/{method}"] == [(b, kind, (8,), 4), (b, kind, (8,), 8)]
    assert metrics["tuned/no scaling, tuned at train_len"] == [(100.0, "default", (4,), 4), (100.0, "default", (4,), 8)]
    assert len(metrics) == 1 + 2 * 5 + 1
    assert base.transformer.position.rope.scaling.rope_type == "default"  # the base model is never tuned
    assert id(base) not in tuned_at


def test_a_tiny_run_repeats() -> None:
    config = {**TINY, "steps": 1}
    metrics = experiment.run(config, seed=0)
    assert experiment.run(config, seed=0) == metrics
    assert all(len(v) == 2 for k, v in metrics.items() if k != "train_loss")
