"""The attention-sinks experiment's readings of a stream: what each loss is the loss of."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.experiments import attention_sinks as experiment
from posenc.models import CausalLM, TransformerConfig, stdlib_corpus, token_losses

VOCAB, START = 12, 11


def tiny_model(layers: int = 2) -> CausalLM:
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=16, num_heads=2, num_layers=layers, max_len=64,
                               position="rope", causal=True)
    return CausalLM(config).double().eval()


def stream(length: int = 20, streams: int = 3) -> torch.Tensor:
    return torch.randint(0, START, (streams, length + 1), generator=torch.Generator().manual_seed(1))


def test_a_window_longer_than_the_stream_reads_it_whole() -> None:
    model, tokens = tiny_model(), stream()
    whole = token_losses(model, tokens)
    for sinks in (0, 4):
        torch.testing.assert_close(experiment.streamed_losses(model, tokens, window=32, sinks=sinks), whole)
    torch.testing.assert_close(experiment.recomputed_losses(model, tokens, window=32), whole)


def test_a_stream_exactly_one_window_long_is_one_pass() -> None:
    model, tokens = tiny_model(), stream(length=6)  # 6 inputs: a window of 5 plus the new token
    torch.testing.assert_close(experiment.recomputed_losses(model, tokens, window=5), token_losses(model, tokens))


def test_recompute_reads_the_most_recent_window_plus_one() -> None:
    model, tokens, window, t = tiny_model(), stream(), 5, 12
    losses = experiment.recomputed_losses(model, tokens, window)
    expected = token_losses(model, tokens[:, t - window: t + 2])[:, -1]  # the last window + 1 inputs, then target
    torch.testing.assert_close(losses[:, t], expected)
    torch.testing.assert_close(losses[:, : window + 1], token_losses(model, tokens[:, : window + 2]))


def test_recompute_with_a_start_token_puts_it_first() -> None:
    model, tokens, window, t = tiny_model(), stream(), 5, 12
    losses = experiment.recomputed_losses(model, tokens, window, start=START)
    context = torch.cat([torch.full((3, 1), START), tokens[:, t - window + 1: t + 2]], dim=1)  # (3, window + 2)
    torch.testing.assert_close(losses[:, t], token_losses(model, context)[:, -1])


def test_one_layer_window_only_equals_recompute() -> None:
    """With one layer a cached key depends on its token alone, so a rolling cache is a recomputation."""
    model, tokens = tiny_model(layers=1), stream()
    torch.testing.assert_close(experiment.streamed_losses(model, tokens, window=5, sinks=0),
                               experiment.recomputed_losses(model, tokens, window=5))


def test_sinks_keep_the_first_tokens() -> None:
    """With one layer, sinks + window is a fresh pass over the first tokens and the most recent ones."""
    model, tokens, window, sinks, t = tiny_model(layers=1), stream(), 6, 2, 15
    losses = experiment.streamed_losses(model, tokens, window=window, sinks=sinks)
    context = torch.cat([tokens[:, :sinks], tokens[:, t - (window - sinks): t + 2]], dim=1)
    torch.testing.assert_close(losses[:, t], token_losses(model, context)[:, -1])


def test_with_start_and_the_start_token() -> None:
    tokens = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert experiment.with_start(tokens, 9).tolist() == [[9, 1, 2], [9, 4, 5]]
    corpus = stdlib_corpus(["textwrap"], ["shutil"])
    assert experiment.start_token(corpus) == corpus.vocab_size
    config = {**experiment.SHORT, "streams": 2, "stream_length": 10, "attention_windows": 3}
    plain, started = (experiment.streams(config, corpus, t) for t in experiment.TRAINING)
    assert plain.shape == started.shape == (2, 11)
    assert (started[:, 0] == corpus.vocab_size).all() and torch.equal(started[:, 1:], plain[:, :-1])
    windows = experiment.attention_windows(config, corpus, "start token")
    assert windows.shape == (3, config["train_length"]) and (windows[:, 0] == corpus.vocab_size).all()
    assert (experiment.attention_windows(config, corpus, "random windows") < corpus.vocab_size).all()


def test_batches_by_training() -> None:
    corpus = stdlib_corpus(["textwrap"], ["shutil"])
    config = {**experiment.SHORT, "batch": 4}
    generator = torch.Generator().manual_seed(0)
    batch = experiment.batches(config, corpus, "start token")(generator)
    assert batch.shape == (4, config["train_length"] + 1) and (batch[:, 0] == corpus.vocab_size).all()
    assert (batch[:, 1:] < corpus.vocab_size).all()
    message = "unknown training 'bos'; expected one of ['random windows', 'start token']"
    with pytest.raises(ValueError, match=re.escape(message)):
        experiment.batches(config, corpus, "bos")


def test_first_key_attention() -> None:
    model = tiny_model()
    windows = torch.randint(0, START, (4, 10), generator=torch.Generator().manual_seed(2))
    weights = experiment.first_key_attention(model, windows, since=0)
    assert weights.shape == (2, 2)
    # query 0 sees only key 0 (weight 1), so the mean over queries 0..9 exceeds 1/10
    assert (weights > 0.1).all() and (weights < 1).all()
    last = experiment.first_key_attention(model, windows[:, :1], since=0)
    torch.testing.assert_close(last, torch.ones(2, 2, dtype=torch.float64))


def test_uniform_first_key_weight() -> None:
    assert experiment.uniform_first_key_weight(4, 2) == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert experiment.uniform_first_key_weight(1, 0) == 1.0


def test_run_reports_every_metric_and_one_layer_streams_exactly() -> None:
    """With one layer a rolling cache is a recomputation of what it holds: the window alone for the
    model trained on random windows, the start token (one sink) and the window for the other."""
    config = {**experiment.SHORT, "steps": 3, "dim": 16, "heads": 2, "layers": 1, "train_length": 32, "batch": 2,
              "warmup": 1, "average": 2, "streams": 2, "stream_length": 48, "block": 16, "window": 15, "sinks": 1,
              "attention_windows": 2}
    metrics = experiment.run(config, seed=0)
    expected = {f"{kind}/{training}" for kind in ("train_end", "first_key_attention") for training in experiment.TRAINING}
    expected |= {f"{kind}/{training}/{method}" for kind in ("loss", "loss_by_block")
                 for training in experiment.TRAINING for method in experiment.METHODS}
    assert set(metrics) == expected
    loss = {key.removeprefix("loss/"): value for key, value in metrics.items() if key.startswith("loss/")}
    assert loss["random windows/window only"] == pytest.approx(loss["random windows/recompute"], abs=1e-5)
    assert loss["start token/sinks + window"] == pytest.approx(loss["start token/recompute"], abs=1e-5)
    assert abs(loss["start token/window only"] - loss["start token/recompute"]) > 1e-4
    for training in experiment.TRAINING:
        assert 0 < metrics[f"first_key_attention/{training}"] < 1 and metrics[f"train_end/{training}"] > 0
        for method in experiment.METHODS:
            blocks = metrics[f"loss_by_block/{training}/{method}"]
            assert len(blocks) == 3 and all(isinstance(v, float) for v in blocks)
            # the loss counts the predictions after the first eviction: from window + 1 = 16 on, blocks 2 and 3
            assert loss[f"{training}/{method}"] == pytest.approx(sum(blocks[1:]) / 2, abs=2e-5)
    assert experiment.run(config, seed=0) == metrics  # seeded: a run repeats


def test_readings_track_no_gradients() -> None:
    model, tokens = tiny_model(), stream()
    assert all(p.requires_grad for p in model.parameters())
    readings = [
        experiment.streamed_losses(model, tokens, window=5, sinks=1),
        experiment.recomputed_losses(model, tokens, window=5),
        experiment.recomputed_losses(model, tokens, window=32),  # one pass
        experiment.first_key_attention(model, tokens, since=0),
    ]
    assert not any(reading.requires_grad for reading in readings)
