"""Contracts of posenc.models' training loop, loss and character corpus.

The training tests drive :func:`train` with a one-parameter model whose loss is linear in the
parameter: the gradient is known exactly, so each step shows the learning rate, the clipping and
the weight decay that were applied, and a run takes milliseconds.
"""

from __future__ import annotations

import io
import sysconfig
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from posenc.models import (CausalLM, CharCorpus, TrainingLog, TransformerConfig, next_token_loss, stdlib_corpus,
                           token_losses, train)


class Scalar(nn.Module):
    """One float64 parameter ``w`` (and a dropout, to show which generator it draws from)."""

    def __init__(self, value: float = 1.0, dropout: float = 0.0) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(value, dtype=torch.float64))
        self.drop = nn.Dropout(dropout)


def linear_loss(slope: float, seen: list | None = None):  # type: ignore[no-untyped-def]
    """``loss = slope * w``: gradient ``slope``; records ``w`` (and the last gradient) before each step."""

    def loss_fn(model: Scalar, batch: torch.Tensor) -> torch.Tensor:
        if seen is not None:
            seen.append((model.w.item(), None if model.w.grad is None else model.w.grad.item(), model.training))
        return slope * model.w

    return loss_fn


def no_batch(generator: torch.Generator) -> None:
    return None


def steps_taken(seen: list, final: float) -> list[float]:
    w = [s[0] for s in seen] + [final]
    return [a - b for a, b in zip(w, w[1:])]


# --- train(): learning rate, clipping, weight decay -----------------------------------------------


def test_the_learning_rate_warms_up_linearly_from_lr_over_warmup() -> None:
    # Adam's step is lr * g / (|g| + eps) for a constant gradient: the step sizes are the learning rates.
    model, seen = Scalar(), []
    train(model, linear_loss(1.0, seen), no_batch, steps=6, lr=0.1, warmup=4, max_grad_norm=None)
    torch.testing.assert_close(steps_taken(seen, model.w.item()), [0.025, 0.05, 0.075, 0.1, 0.1, 0.1],
                               rtol=1e-6, atol=0)
    model, seen = Scalar(), []
    train(model, linear_loss(1.0, seen), no_batch, steps=3, lr=0.1, max_grad_norm=None)  # no warm-up
    torch.testing.assert_close(steps_taken(seen, model.w.item()), [0.1, 0.1, 0.1], rtol=1e-6, atol=0)


def test_the_default_learning_rate_is_1e_3() -> None:
    model, seen = Scalar(), []
    train(model, linear_loss(1.0, seen), no_batch, steps=2, max_grad_norm=None)
    torch.testing.assert_close(steps_taken(seen, model.w.item()), [1e-3, 1e-3], rtol=1e-6, atol=0)


def test_train_clips_the_gradient_norm_unless_told_not_to() -> None:
    # The gradient of the previous step is still there when loss_fn runs again.
    for max_grad_norm, expected in ((0.5, 0.5), (None, 3.0), (4.0, 3.0)):
        model, seen = Scalar(), []
        train(model, linear_loss(3.0, seen), no_batch, steps=2, max_grad_norm=max_grad_norm)
        assert seen[1][1] == pytest.approx(expected, rel=1e-5)


def test_train_default_clips_at_one() -> None:
    model, seen = Scalar(), []
    train(model, linear_loss(3.0, seen), no_batch, steps=2)
    assert seen[1][1] == pytest.approx(1.0, rel=1e-5)


def test_train_applies_decoupled_weight_decay() -> None:
    # AdamW: w <- w (1 - lr * weight_decay) - lr * g / (|g| + eps).
    model = Scalar(2.0)
    train(model, linear_loss(1.0), no_batch, steps=1, lr=0.1, weight_decay=0.5)
    assert model.w.item() == pytest.approx(2.0 * (1 - 0.05) - 0.1, rel=1e-6)
    model = Scalar(2.0)
    train(model, linear_loss(1.0), no_batch, steps=1, lr=0.1)  # default: no decay
    assert model.w.item() == pytest.approx(2.0 - 0.1, rel=1e-6)


def test_a_step_leaves_alone_the_parameters_its_loss_does_not_reach() -> None:
    # w is used by the first step only: the later steps neither decay it nor move it with momentum.
    model = Scalar()
    model.v = nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    calls = []

    def loss_fn(model: Scalar, batch: None) -> torch.Tensor:
        calls.append(model.w.item())
        return model.w * 1.0 if len(calls) == 1 else model.v * 1.0

    train(model, loss_fn, no_batch, steps=3, lr=0.1, weight_decay=0.5)
    assert calls[1] == calls[2] == model.w.item() == pytest.approx(0.85, rel=1e-6)


def test_train_returns_every_loss_and_leaves_the_model_in_eval_mode() -> None:
    model, seen = Scalar().eval(), []
    start = time.perf_counter()
    log = train(model, linear_loss(2.0, seen), no_batch, steps=3, lr=0.1, max_grad_norm=None)
    assert isinstance(log, TrainingLog) and 0 < log.seconds <= time.perf_counter() - start
    assert log.losses == pytest.approx([2.0 * s[0] for s in seen], rel=1e-12)
    assert all(isinstance(loss, float) for loss in log.losses)
    assert [s[2] for s in seen] == [True, True, True]  # trained in training mode
    assert not model.training


# --- train(): seeds and threads ---------------------------------------------------------------------


def dropout_loss(model: Scalar, batch: torch.Tensor) -> torch.Tensor:
    return (model.drop(torch.ones(8, dtype=torch.float64)) * batch).sum() * model.w


def test_the_same_seed_gives_the_same_run_whatever_the_global_generator_did() -> None:
    batches = []

    def make_batch(generator: torch.Generator) -> torch.Tensor:
        batches.append(torch.rand(8, generator=generator, dtype=torch.float64))
        return batches[-1]

    def run(seed: int) -> list[float]:
        torch.manual_seed(123 + len(batches))  # a global generator disturbed differently before each run
        torch.rand(7)
        batches.clear()
        return train(Scalar(dropout=0.5), dropout_loss, make_batch, steps=3, seed=seed).losses

    first = run(5)
    assert torch.equal(batches[0], torch.rand(8, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    assert run(5) == first
    assert run(6) != first
    torch.manual_seed(1)
    batches.clear()
    train(Scalar(), dropout_loss, make_batch, steps=1)  # the default seed is 0
    assert torch.equal(batches[0], torch.rand(8, generator=torch.Generator().manual_seed(0), dtype=torch.float64))


def test_the_batches_depend_on_the_seed_only_not_on_dropout() -> None:
    # Models that differ in dropout (or in what draws from the global generator) see the same data.
    def batches(dropout: float) -> list[list[float]]:
        drawn = []

        def make_batch(generator: torch.Generator) -> torch.Tensor:
            drawn.append(torch.rand(8, generator=generator, dtype=torch.float64))
            return drawn[-1]

        train(Scalar(dropout=dropout), dropout_loss, make_batch, steps=3, seed=4)
        return [b.tolist() for b in drawn]

    assert batches(0.5) == batches(0.0)


def test_each_process_trains_on_its_share_of_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under torchrun every process draws the same batch and keeps its own rows: process 1 of 2
    # gets the second half. (The process group is simulated: one process answers as rank 1 of 2.)
    import posenc.models._training as training

    monkeypatch.setattr(training, "world", lambda: (1, 2))
    seen = []

    def loss_fn(model: Scalar, batch: torch.Tensor) -> torch.Tensor:
        seen.append(batch.tolist())
        return model.w * batch.sum()

    train(Scalar(), loss_fn, lambda generator: torch.arange(6.0), steps=1)
    assert seen == [[3.0, 4.0, 5.0]]


def test_dropout_draws_from_the_global_generator_seeded_with_seed() -> None:
    torch.manual_seed(0)
    log = train(Scalar(dropout=0.5), dropout_loss, lambda g: torch.ones(8, dtype=torch.float64), steps=1, seed=9)
    torch.manual_seed(9)
    kept = nn.Dropout(0.5)(torch.ones(8, dtype=torch.float64)).sum().item()
    assert log.losses == [kept]


def test_train_runs_on_the_given_threads_and_restores_them() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        inside = []

        def loss_fn(model: Scalar, batch: None) -> torch.Tensor:
            inside.append(torch.get_num_threads())
            return model.w * 1.0

        train(Scalar(), loss_fn, no_batch, steps=1)
        train(Scalar(), loss_fn, no_batch, steps=1, threads=None)
        train(Scalar(), loss_fn, no_batch, steps=1, threads=3)
        assert inside == [1, 2, 3]
        assert torch.get_num_threads() == 2

        def failing(model: Scalar, batch: None) -> torch.Tensor:
            raise RuntimeError("stop")

        with pytest.raises(RuntimeError, match="stop"):
            train(Scalar(), failing, no_batch, steps=1)
        assert torch.get_num_threads() == 2  # restored after an error too
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": 0}, ValueError, "^steps must be a positive integer, got 0$"),
        ({"lr": 0.0}, ValueError, "^lr must be a finite number > 0, got 0.0$"),
        ({"seed": 1.5}, TypeError, "^seed must be an int, got 1.5 of type float$"),
        ({"weight_decay": -0.5}, ValueError, "^weight_decay must be a finite number >= 0, got -0.5$"),
        ({"weight_decay": float("inf")}, ValueError, "^weight_decay must be a finite number >= 0, got inf$"),
        ({"weight_decay": float("nan")}, ValueError, "^weight_decay must be a finite number >= 0, got nan$"),
        ({"weight_decay": None}, TypeError, "^weight_decay must be a real number, got None of type NoneType$"),
        ({"weight_decay": "0.1"}, TypeError, "^weight_decay must be a real number, got '0.1' of type str$"),
        ({"max_grad_norm": 0.0}, ValueError, "^max_grad_norm must be a finite number > 0, got 0.0$"),
        ({"warmup": -1}, ValueError, "^warmup must be a non-negative integer, got -1$"),
        ({"threads": 0}, ValueError, "^threads must be a positive integer, got 0$"),
    ],
)
def test_train_names_the_bad_argument(kwargs: dict, error: type, match: str) -> None:
    model = Scalar()
    with pytest.raises(error, match=match):
        train(model, linear_loss(1.0), no_batch, **{"steps": 1, **kwargs})
    assert model.w.item() == 1.0


def test_train_accepts_the_boundary_values() -> None:
    # weight_decay 0, warmup 0, a seed of any sign: valid.
    log = train(Scalar(), linear_loss(1.0), no_batch, steps=1, weight_decay=0.0, warmup=0, seed=-3)
    assert len(log.losses) == 1


# --- next_token_loss ----------------------------------------------------------------------------


def test_next_token_loss_of_two_tokens_is_one_prediction() -> None:
    torch.manual_seed(0)
    model = CausalLM(TransformerConfig(vocab_size=5, dim=8, num_heads=2, num_layers=1, causal=True)).double().eval()
    x = torch.tensor([[1, 3], [4, 0]])
    logits = model(x[:, :1])[:, 0]  # (batch, vocab)
    torch.testing.assert_close(next_token_loss(model, x), nn.functional.cross_entropy(logits, x[:, 1]))
    with pytest.raises(ValueError, match=r"^tokens need at least 2 positions to predict one, got seq=1$"):
        next_token_loss(model, x[:, :1])
    with pytest.raises(TypeError, match="tokens"):
        next_token_loss(model, torch.zeros(2, 3))


def test_token_losses_are_each_prediction_before_the_mean() -> None:
    torch.manual_seed(0)
    model = CausalLM(TransformerConfig(vocab_size=5, dim=8, num_heads=2, num_layers=1, causal=True)).double().eval()
    x = torch.tensor([[1, 3, 2, 0], [4, 0, 0, 1]])
    losses = token_losses(model, x)
    assert losses.shape == (2, 3)
    logits = model(x[:, :-1])  # (2, 3, vocab)
    for b in range(2):
        for i in range(3):  # the loss of tokens[b, i + 1], from the tokens before it
            expected = -torch.log_softmax(logits[b, i], dim=-1)[x[b, i + 1]]
            torch.testing.assert_close(losses[b, i], expected)
    torch.testing.assert_close(losses.mean(), next_token_loss(model, x))
    with pytest.raises(ValueError, match=r"^tokens need at least 2 positions to predict one, got seq=1$"):
        token_losses(model, x[:, :1])
    with pytest.raises(TypeError, match="tokens"):
        token_losses(model, torch.zeros(2, 3))


# --- CharCorpus and stdlib_corpus -----------------------------------------------------------------


def test_windows_cut_from_the_given_data_and_name_the_bad_argument() -> None:
    corpus = CharCorpus.from_text("abcdefgh", "hgfedcba")
    make_batch = corpus.windows(7, 3, data=corpus.held_out)  # the whole held-out text is one window
    assert make_batch(torch.Generator().manual_seed(0)).tolist() == [corpus.held_out.tolist()] * 3
    assert corpus.windows(7, 2)(torch.Generator().manual_seed(0)).tolist() == [corpus.train.tolist()] * 2
    with pytest.raises(ValueError, match=r"^data must be 1-D with at least length \+ 1 = 9 ids, got shape \(8,\)$"):
        corpus.windows(8, 2)
    with pytest.raises(ValueError, match=r"^data must be 1-D with at least length \+ 1 = 2 ids, got shape \(2, 4\)$"):
        corpus.windows(1, 2, data=corpus.train.view(2, 4))
    with pytest.raises(ValueError, match="^length must be a positive integer, got 0$"):
        corpus.windows(0, 2)
    with pytest.raises(ValueError, match="^batch_size must be a positive integer, got 0$"):
        corpus.windows(2, 0)


def test_windows_draw_every_start_from_the_given_generator() -> None:
    corpus = CharCorpus.from_text("abcdefghij", "")
    batch = corpus.windows(2, 400)(torch.Generator().manual_seed(1))
    starts = batch[:, 0]
    assert set(starts.tolist()) == set(range(8))  # starts 0 … len - length - 1, each one drawn
    assert torch.equal(batch, starts[:, None] + torch.arange(3))  # ids are 0 … 9 in order
    expected = torch.randint(0, 8, (400,), generator=torch.Generator().manual_seed(1))
    assert torch.equal(starts, expected)


def test_corpus_ids_and_text() -> None:
    corpus = CharCorpus.from_text("ba", "abz")
    assert corpus.encode("zab").dtype == torch.long
    assert corpus.encode("zab").tolist() == [2, 0, 1]
    assert corpus.decode(torch.tensor([1, 0, 2, 1])) == "ba?b"
    assert corpus.train.tolist() == [1, 0] and corpus.held_out.tolist() == [0, 1, 2]
    assert corpus.unknown == 2 and corpus.vocab_size == 3
    assert corpus.encode("").shape == (0,) and corpus.encode("").dtype == torch.long


def test_stdlib_corpus_concatenates_the_modules_in_order() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus = stdlib_corpus(["this", "keyword"], ["this"])
    text = "".join((stdlib / f"{name}.py").read_text(encoding="utf-8") for name in ("this", "keyword"))
    assert corpus.decode(corpus.train) == "".join(c if c.isascii() else "?" for c in text)
    assert corpus.decode(corpus.held_out) == (stdlib / "this.py").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=r"^modules must be non-empty names of files in .*, missing: \[\]$"):
        stdlib_corpus([], ["this"])
    with pytest.raises(ValueError, match=r"missing: \['nope'\]$"):
        stdlib_corpus(["this"], ["nope"])


def test_stdlib_corpus_reads_utf8_whatever_the_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    # getopt.py holds non-ASCII characters: under an ASCII locale, only an explicit UTF-8 reads it.
    source = (Path(sysconfig.get_paths()["stdlib"]) / "getopt.py").read_bytes().decode("utf-8")
    assert not source.isascii()
    monkeypatch.setattr(io, "text_encoding", lambda encoding, stacklevel=2: "ascii" if encoding is None else encoding)
    corpus = stdlib_corpus(["getopt"], ["getopt"])
    assert corpus.decode(corpus.train) == "".join(c if c.isascii() else "?" for c in source)


def test_held_out_windows_predict_each_character_once_in_text_order() -> None:
    corpus = CharCorpus.from_text("abcdefghij", "abcdefghija")  # held-out ids 0 ... 9, 0
    windows = corpus.held_out_windows(3, 9)
    assert windows.tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert torch.equal(windows[:, 1:].flatten(), corpus.held_out[1:10])  # every target once, in order
    assert corpus.held_out_windows(5, 10).tolist() == [[0, 1, 2, 3, 4, 5], [5, 6, 7, 8, 9, 0]]  # count = len - 1
    assert corpus.held_out_windows(1, 3).tolist() == [[0, 1], [1, 2], [2, 3]]  # no window past count
    with pytest.raises(ValueError, match="^count must be a multiple of length = 3, got 10$"):
        corpus.held_out_windows(3, 10)
    with pytest.raises(ValueError, match=r"^count must be at most len\(held_out\) - 1 = 10, got 12$"):
        corpus.held_out_windows(4, 12)
    with pytest.raises(ValueError, match="^length must be a positive integer, got 0$"):
        corpus.held_out_windows(0, 3)
    with pytest.raises(ValueError, match="^count must be a positive integer, got 0$"):
        corpus.held_out_windows(3, 0)
