"""Contracts of the attention-sinks experiment (posenc.experiments.attention_sinks): where its windows
and streams come from, how its models are made and trained, what each reported number is."""

from __future__ import annotations

import pytest
import torch

from posenc.experiments import attention_sinks as experiment
from posenc.models import TrainingLog, next_token_loss, stdlib_corpus, token_losses

CORPUS = stdlib_corpus(["textwrap"], ["shutil"])
TINY = {**experiment.SHORT, "train_modules": ["textwrap"], "held_out_modules": ["shutil"], "steps": 3, "dim": 16,
        "heads": 2, "layers": 1, "train_length": 32, "batch": 2, "warmup": 1, "average": 2, "streams": 3,
        "stream_length": 48, "block": 16, "window": 15, "sinks": 1, "attention_windows": 3}


def _evenly_spread_starts(last: int, count: int) -> list[int]:
    return [int(last * i / (count - 1)) for i in range(count)]


def test_streams_are_spread_evenly_from_the_first_to_the_last_held_out_character() -> None:
    held_out, length = CORPUS.held_out, TINY["stream_length"]
    streams = experiment.streams(TINY, CORPUS, "random windows")
    starts = _evenly_spread_starts(len(held_out) - length - 1, TINY["streams"])
    assert starts[0] == 0 and starts[-1] + length + 1 == len(held_out)
    assert torch.equal(streams, torch.stack([held_out[s: s + length + 1] for s in starts]))


def test_attention_windows_are_spread_evenly_from_the_first_to_the_last_held_out_character() -> None:
    held_out, length = CORPUS.held_out, TINY["train_length"]
    windows = experiment.attention_windows(TINY, CORPUS, "random windows")
    starts = _evenly_spread_starts(len(held_out) - length, TINY["attention_windows"])
    assert starts[-1] + length == len(held_out)
    assert torch.equal(windows, torch.stack([held_out[s: s + length] for s in starts]))


def test_start_token_batches_are_the_random_windows_after_the_start_token() -> None:
    batch = experiment.batches(TINY, CORPUS, "start token")(torch.Generator().manual_seed(5))
    windows = CORPUS.windows(TINY["train_length"], TINY["batch"])(torch.Generator().manual_seed(5))
    assert torch.equal(batch, experiment.with_start(windows, experiment.start_token(CORPUS)))


def test_new_model_has_the_configured_shape_and_is_seeded() -> None:
    config = {**TINY, "dim": 24, "heads": 3, "layers": 2, "train_length": 40}
    model = experiment.new_model(config, CORPUS, seed=4)
    got = model.transformer.config
    assert (got.vocab_size, got.dim, got.num_heads, got.num_layers, got.max_len) == (CORPUS.vocab_size + 1, 24, 3, 2, 40)
    assert got.position == "rope" and got.causal
    again = experiment.new_model(config, CORPUS, seed=4)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_train_model_passes_the_schedule_and_averages_the_last_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def fake_train(model, loss_fn, make_batch, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(model=model, loss_fn=loss_fn, kwargs=kwargs, batch=make_batch(torch.Generator().manual_seed(0)))
        return TrainingLog(losses=[100.0, 100.0, 1.0, 2.0, 6.0], seconds=0.0)

    monkeypatch.setattr(experiment, "train", fake_train)
    model, loss = experiment.train_model({**TINY, "average": 3, "lr": 0.01, "warmup": 2}, CORPUS, "start token", 7)
    assert loss == 3.0
    assert seen["model"] is model and seen["loss_fn"] is next_token_loss  # train() leaves it in eval mode
    assert seen["kwargs"] == {"steps": 3, "lr": 0.01, "warmup": 2, "seed": 7}
    expected = experiment.batches(TINY, CORPUS, "start token")(torch.Generator().manual_seed(0))
    assert torch.equal(seen["batch"], expected)


@pytest.mark.parametrize("extra", [0, 1, 2, 3])  # streams of window, window + 1, ... inputs
def test_recompute_is_a_pass_over_at_most_window_plus_one_tokens_at_every_length(extra: int) -> None:
    torch.manual_seed(0)
    model = experiment.new_model({**TINY, "dim": 16, "heads": 2, "layers": 2}, CORPUS, seed=0).double().eval()
    window = 4
    tokens = torch.randint(0, CORPUS.vocab_size, (2, window + extra + 1), generator=torch.Generator().manual_seed(1))
    losses = experiment.recomputed_losses(model, tokens, window)
    for t in range(tokens.shape[1] - 1):
        context = tokens[:, max(0, t - window): t + 2]  # at most window + 1 inputs, then the target
        torch.testing.assert_close(losses[:, t], token_losses(model, context)[:, -1])


def test_uniform_first_key_weight_in_double_precision() -> None:
    exact = sum(1 / n for n in range(4, 301)) / 297
    assert experiment.uniform_first_key_weight(300, 3) == pytest.approx(exact, rel=1e-13)


def test_run_reports_each_number_of_the_readings_rounded_to_five_places(monkeypatch: pytest.MonkeyPatch) -> None:
    # Training replaced: each training gets its own untrained model and a given training loss.
    models = {training: experiment.new_model(TINY, CORPUS, seed=i).eval() for i, training in enumerate(experiment.TRAINING)}
    monkeypatch.setattr(experiment, "stdlib_corpus", lambda train, held_out: CORPUS)
    monkeypatch.setattr(experiment, "train_model",
                        lambda config, corpus, training, seed: (models[training], 1.2345678 + len(training)))
    metrics = experiment.run(TINY, seed=0)
    window = TINY["window"]
    for training, model in models.items():
        assert metrics[f"train_end/{training}"] == round(1.2345678 + len(training), 5)
        weights = experiment.first_key_attention(model, experiment.attention_windows(TINY, CORPUS, training), window)
        assert metrics[f"first_key_attention/{training}"] == round(weights.max().item(), 5)
        for method, losses in experiment.read(TINY, CORPUS, model, training).items():
            assert metrics[f"loss/{training}/{method}"] == round(losses[:, window + 1:].mean().item(), 5)
            blocks = losses.mean(0).view(-1, TINY["block"]).mean(1)
            assert metrics[f"loss_by_block/{training}/{method}"] == [round(v, 5) for v in blocks.tolist()]


def test_read_gives_each_method_its_reading_of_the_held_out_streams() -> None:
    model = experiment.new_model(TINY, CORPUS, seed=0).eval()
    for training in experiment.TRAINING:
        stream = experiment.streams(TINY, CORPUS, training)
        start = experiment.start_token(CORPUS) if training == "start token" else None
        readings = experiment.read(TINY, CORPUS, model, training)
        assert list(readings) == list(experiment.METHODS)
        assert torch.equal(readings["window only"], experiment.streamed_losses(model, stream, 15, 0))
        assert torch.equal(readings["sinks + window"], experiment.streamed_losses(model, stream, 15, 1))
        assert torch.equal(readings["recompute"], experiment.recomputed_losses(model, stream, 15, start))

