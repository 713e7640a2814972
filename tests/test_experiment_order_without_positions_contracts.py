"""Contracts of the sortedness experiment (posenc.experiments.order_without_positions): the pairs,
the batches, what each reported number is, on the tiniest configurations."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posenc.experiments import order_without_positions as experiment
from posenc.models import TrainingLog

TINY = {**experiment.SHORT, "vocab": 6, "length": 5, "heads": 2, "pairs": 3, "warmup": 1, "test_pairs": 4,
        "steps": 2, "dim": 8}


def test_names_of_the_four_models() -> None:
    assert [experiment.name(c, p) for c, p in experiment.COMBOS] == [
        "encoder, no PE", "encoder, sinusoidal", "decoder, no PE", "decoder, sinusoidal"]


def test_pairs_are_sorted_sequences_and_twins_with_two_different_tokens_swapped() -> None:
    config = {**TINY, "length": 8}
    positive, negative = experiment.make_pairs(config, 50, torch.Generator().manual_seed(0))
    assert positive.shape == negative.shape == (50, 8)
    assert positive.min() >= 0 and positive.max() < 6
    assert torch.equal(positive, positive.sort(dim=1).values)
    for p, n in zip(positive, negative):
        differ = (p != n).nonzero().flatten().tolist()
        assert len(differ) == 2
        i, j = differ
        assert p[i] == n[j] and p[j] == n[i] and p[i] != p[j]
        assert not torch.equal(n, n.sort().values)  # the twin is not sorted


def test_pairs_are_drawn_from_the_generator() -> None:
    one = experiment.make_pairs(TINY, 5, torch.Generator().manual_seed(3))
    two = experiment.make_pairs(TINY, 5, torch.Generator().manual_seed(3))
    other = experiment.make_pairs(TINY, 5, torch.Generator().manual_seed(4))
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])
    assert not torch.equal(one[0], other[0])
    sorted_seqs = torch.randint(0, 6, (5, 5), generator=torch.Generator().manual_seed(3)).sort(dim=1).values
    assert torch.equal(one[0], sorted_seqs)


def test_a_batch_is_the_sorted_sequences_then_their_twins() -> None:
    tokens, labels = experiment.batches(TINY)(torch.Generator().manual_seed(1))
    positive, negative = experiment.make_pairs(TINY, 3, torch.Generator().manual_seed(1))
    assert torch.equal(tokens, torch.cat([positive, negative]))
    assert labels.tolist() == [1, 1, 1, 0, 0, 0] and labels.dtype == torch.long


def test_held_out_pairs_are_fixed() -> None:
    positive, negative = experiment.held_out_pairs(TINY)
    want = experiment.make_pairs(TINY, 4, torch.Generator().manual_seed(1000))
    assert torch.equal(positive, want[0]) and torch.equal(negative, want[1])


def test_the_four_models_share_their_starting_weights() -> None:
    models = {(c, p): experiment.make_model(TINY, c, p, seed=2) for c, p in experiment.COMBOS}
    for (causal, position), model in models.items():
        config = model.transformer.config
        assert (config.vocab_size, config.dim, config.num_heads, config.num_layers, config.max_len) == (6, 8, 2, 1, 5)
        assert (config.causal, config.position) == (causal, position)
        assert model.head.out_features == 2
    first = dict(models[(False, "none")].named_parameters())
    for model in models.values():
        assert all(torch.equal(first[n], p) for n, p in model.named_parameters() if n in first)
    other = experiment.make_model(TINY, False, "none", seed=3)
    assert not torch.equal(other.head.weight, models[(False, "none")].head.weight)


class Fixed(nn.Module):
    """Logits given per first token."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table[tokens[:, 0]]


def test_loss_is_the_cross_entropy_of_the_labels() -> None:
    table = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 3.0]])
    tokens, labels = torch.tensor([[0, 1], [1, 0], [2, 2]]), torch.tensor([1, 1, 0])
    loss = experiment.loss_fn(Fixed(table), (tokens, labels))
    want = -(table[[0, 1, 2]].log_softmax(-1)[[0, 1, 2], [1, 1, 0]]).mean()
    torch.testing.assert_close(loss, want)


def test_twin_gap_is_the_largest_logit_difference() -> None:
    table = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, -3.0]])
    positive, negative = torch.tensor([[0], [1]]), torch.tensor([[2], [0]])
    assert experiment.twin_gap(Fixed(table), positive, negative) == 3.0


def test_run_one_reports_held_out_accuracy_twin_gap_and_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)))
        return TrainingLog(losses=[0.7, 0.6], seconds=1.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    result = experiment.run_one(TINY, True, "sinusoidal", seed=5)
    model = seen["model"]
    assert (model.transformer.config.causal, model.transformer.config.position) == (True, "sinusoidal")
    fresh = experiment.make_model(TINY, True, "sinusoidal", seed=5)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))
    assert seen["loss_fn"] is experiment.loss_fn
    assert seen["kwargs"] == {"steps": 2, "lr": TINY["lr"], "seed": 5, "warmup": 1}
    want_batch = experiment.batches(TINY)(torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(seen["batch"], want_batch))
    positive, negative = experiment.held_out_pairs(TINY)
    with torch.no_grad():
        right = (model(positive).argmax(-1) == 1).sum() + (model(negative).argmax(-1) == 0).sum()
    assert result["accuracy"] == pytest.approx(right.item() / 8, abs=1e-7)
    assert result["twin_gap"] == experiment.twin_gap(model, positive, negative)
    assert result["losses"] == [0.7, 0.6]


def test_run_one_accuracy_of_a_model_that_always_says_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "train", lambda *a, **k: TrainingLog(losses=[], seconds=0.0))
    monkeypatch.setattr(experiment, "make_model", lambda *a: Fixed(torch.tensor([[0.0, 1.0]] * 6)))
    result = experiment.run_one(TINY, False, "none", seed=0)
    assert result["accuracy"] == 0.5  # right on every sorted sequence, wrong on every twin
    assert result["twin_gap"] == 0.0


def test_run_names_each_models_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_run_one(config, causal, position, seed):
        calls.append((causal, position, seed))
        return {"accuracy": len(position) + causal, "twin_gap": -len(position), "losses": [1.0]}

    monkeypatch.setattr(experiment, "run_one", fake_run_one)
    metrics = experiment.run(TINY, seed=7)
    assert calls == [(c, p, 7) for c, p in experiment.COMBOS]
    assert metrics == {"accuracy/encoder, no PE": 4, "twin_gap/encoder, no PE": -4,
                       "accuracy/encoder, sinusoidal": 10, "twin_gap/encoder, sinusoidal": -10,
                       "accuracy/decoder, no PE": 5, "twin_gap/decoder, no PE": -4,
                       "accuracy/decoder, sinusoidal": 11, "twin_gap/decoder, sinusoidal": -10}


def test_a_tiny_run_repeats() -> None:
    metrics = experiment.run(TINY, seed=0)
    assert experiment.run(TINY, seed=0) == metrics
    # Without positions a bidirectional encoder cannot tell a sequence from its permutation.
    assert metrics["twin_gap/encoder, no PE"] < 1e-5
    assert metrics["twin_gap/encoder, sinusoidal"] > 1e-4


class Sorter(nn.Module):
    """A perfect model: logit 1 for "sorted" when the sequence is sorted, for "not sorted" otherwise."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        is_sorted = (tokens[:, 1:] >= tokens[:, :-1]).all(dim=1).long()
        return nn.functional.one_hot(is_sorted, 2).float()


def test_run_one_accuracy_of_a_perfect_model_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "train", lambda *a, **k: TrainingLog(losses=[], seconds=0.0))
    monkeypatch.setattr(experiment, "make_model", lambda *a: Sorter())
    result = experiment.run_one(TINY, False, "none", seed=0)
    assert result["accuracy"] == 1.0
    assert result["twin_gap"] == 1.0


def test_the_first_swapped_position_is_drawn_from_every_position() -> None:
    generator = torch.Generator().manual_seed(5)
    positive, negative = experiment.make_pairs(TINY, 40, generator)
    replay = torch.Generator().manual_seed(5)
    torch.randint(0, 6, (40, 5), generator=replay)  # the sequences
    first = torch.randint(0, 5, (40,), generator=replay)
    rows = torch.arange(40)
    assert (positive[rows, first] != negative[rows, first]).all()
    assert (first == 0).any()
