"""Contracts of the long-range copying experiment (posenc.experiments.long_range): the targets, the
loss, what the accuracy counts, on the tiniest configurations."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posenc.experiments import long_range as experiment
from posenc.models import TransformerConfig

TINY = {**experiment.SHORT, "vocab": 5, "length": 6, "distances": [1, 3], "batch": 3, "warmup": 1, "steps": 2,
        "dim": 8, "test_streams": 4}


def test_batches_hold_the_token_each_distance_back() -> None:
    make_batch = experiment.batches(TINY)
    tokens, targets = make_batch(torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 6) and targets.shape == (3, 6, 2)
    assert tokens.min() >= 0 and tokens.max() < 5
    for b in range(3):
        for t in range(6):
            for d, distance in enumerate([1, 3]):
                want = tokens[b, t - distance].item() if t >= distance else -100
                assert targets[b, t, d].item() == want
    again, _ = make_batch(torch.Generator().manual_seed(0))
    assert torch.equal(again, tokens)
    assert torch.equal(tokens, torch.randint(0, 5, (3, 6), generator=torch.Generator().manual_seed(0)))


def test_batches_of_another_size() -> None:
    tokens, targets = experiment.batches(TINY)(torch.Generator().manual_seed(1), 7)
    assert tokens.shape == (7, 6) and targets.shape == (7, 6, 2)


def test_lookup_has_one_readout_per_distance() -> None:
    config = TransformerConfig(vocab_size=5, dim=8, num_heads=2, num_layers=1, max_len=6, position="rope", causal=True)
    torch.manual_seed(0)
    model = experiment.Lookup(config, 2)
    assert model.distances == 2
    assert (model.readout.in_features, model.readout.out_features) == (8, 10)
    tokens = torch.randint(0, 5, (3, 6))
    logits = model(tokens)
    assert logits.shape == (3, 6, 2, 5)
    want = model.readout(model.transformer(tokens)).view(3, 6, 2, 5)
    assert torch.equal(logits, want)


class Fixed(nn.Module):
    """A model whose logits are given."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits


def test_loss_is_the_cross_entropy_of_the_scored_targets() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 2, 4)
    targets = torch.tensor([[[-100, -100], [1, -100], [2, 3]], [[-100, -100], [0, -100], [3, 1]]])
    loss = experiment.loss_fn(Fixed(logits), (torch.zeros(2, 3), targets))
    scored = [(b, t, d) for b in range(2) for t in range(3) for d in range(2) if targets[b, t, d] >= 0]
    want = sum(-logits[b, t, d].log_softmax(-1)[targets[b, t, d]] for b, t, d in scored) / len(scored)
    torch.testing.assert_close(loss, want)


def test_accuracy_counts_only_the_scored_positions_per_distance() -> None:
    targets = torch.tensor([[[-100, -100], [1, -100], [2, 3]], [[-100, -100], [0, -100], [3, 1]]])
    logits = torch.zeros(2, 3, 2, 4)
    # The largest logit is the guess; targets at distance 0: 1, 2, 0, 3; at distance 1: 3, 1.
    for b, t, d, guess in [(0, 1, 0, 1), (0, 2, 0, 0), (1, 1, 0, 0), (1, 2, 0, 3),  # 3 of 4 right
                           (0, 2, 1, 3), (1, 2, 1, 2),  # 1 of 2 right
                           (0, 0, 0, 2), (0, 0, 1, 2)]:  # unscored positions do not count
        logits[b, t, d, guess] = 1.0
    assert experiment.accuracy(Fixed(logits), torch.zeros(2, 3), targets) == [0.75, 0.5]


def test_test_set_is_fixed_and_of_its_size() -> None:
    tokens, targets = experiment.test_set(TINY)
    want_tokens, want_targets = experiment.batches(TINY)(torch.Generator().manual_seed(2000), 4)
    assert torch.equal(tokens, want_tokens) and torch.equal(targets, want_targets)


def test_train_model_builds_one_head_per_distance_and_trains_with_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    real_train = experiment.train

    def recording_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)),
                    weights=[p.detach().clone() for p in model.parameters()])
        return real_train(model, loss_fn, make_batch, **kwargs)

    monkeypatch.setattr(experiment, "train", recording_train)
    model = experiment.train_model(TINY, "alibi", seed=4)
    assert seen["model"] is model and not model.training
    config = model.transformer.config
    assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (5, 8, 2, 1, 6)
    assert config.position == "alibi" and config.causal
    assert model.distances == 2
    assert seen["loss_fn"] is experiment.loss_fn
    assert seen["kwargs"] == {"steps": 2, "lr": TINY["lr"], "seed": 4, "warmup": 1}
    want = experiment.batches(TINY)(torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(seen["batch"], want))
    torch.manual_seed(4)
    fresh = experiment.Lookup(config, 2)
    assert all(torch.equal(a, b) for a, b in zip(seen["weights"], fresh.parameters()))


def test_run_scores_every_encoding_on_the_test_set(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_train(config, position, seed):
        calls.append((position, seed))
        return position

    def fake_accuracy(model, tokens, targets):
        want_tokens, want_targets = experiment.test_set(TINY)
        assert torch.equal(tokens, want_tokens) and torch.equal(targets, want_targets)
        return [len(model), 1.0]

    monkeypatch.setattr(experiment, "train_model", fake_train)
    monkeypatch.setattr(experiment, "accuracy", fake_accuracy)
    metrics = experiment.run(TINY, seed=9)
    assert calls == [(p, 9) for p in experiment.ENCODINGS]
    assert metrics == {f"accuracy/{p}": [len(p), 1.0] for p in experiment.ENCODINGS}


def test_a_tiny_run_repeats() -> None:
    config = {**TINY, "steps": 1}
    metrics = experiment.run(config, seed=0)
    assert experiment.run(config, seed=0) == metrics
    assert set(metrics) == {f"accuracy/{p}" for p in experiment.ENCODINGS}
    assert all(len(v) == 2 and all(0 <= a <= 1 for a in v) for v in metrics.values())
