"""Cached positions: chunked prefill, sliding windows, context shift and attention sinks."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.models import POSITIONS, CausalLM, KVCache, Transformer, TransformerConfig

VOCAB, DIM, HEADS, SEQ = 13, 16, 2, 11
ABSOLUTE = ("sinusoidal", "learned")
SHIFTABLE = tuple(p for p in POSITIONS if p not in ABSOLUTE)


def model(position: str, *, layers: int = 2, **options) -> CausalLM:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, num_layers=layers, max_len=32,
                               position=position, causal=True, **options)
    net = CausalLM(config).double().eval()
    with torch.no_grad():  # no parameter left at an exact zero or one (CoPE's table, biases)
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return net


def tokens(seq: int = SEQ, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("position", POSITIONS)
def test_chunked_prefill_equals_one_full_pass(position: str) -> None:
    net, x = model(position), tokens()
    torch.testing.assert_close(net.logits_in_chunks(x, (4, 3, 4)), net(x), rtol=0, atol=1e-10)


@pytest.mark.parametrize("causal", [True, False])
def test_a_sliding_window_shows_each_query_window_keys_itself_included(causal: bool) -> None:
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, position="rope", causal=causal,
                               sliding_window=3)
    transformer = Transformer(config)
    positions = torch.arange(6)[None]
    hidden = transformer._hidden_keys(positions, positions, None, None, positions.device)
    hidden = transformer._window(positions, positions, hidden)[0, 0]
    visible = (~hidden).sum(dim=1)
    expected = torch.tensor([1, 2, 3, 3, 3, 3]) if causal else torch.tensor([3, 4, 5, 5, 4, 3])
    assert torch.equal(visible, expected)
    # The farthest visible key is window - 1 back.
    assert not bool(hidden[5, 3]) and bool(hidden[5, 2])


@pytest.mark.parametrize("position", POSITIONS)
def test_a_windowed_model_decodes_with_a_rolling_cache_as_in_one_pass(position: str) -> None:
    window = 4
    net, x = model(position, sliding_window=window), tokens()
    full = net(x)
    # Prefill 5 tokens, then one token at a time, evicting what the window no longer shows:
    # the positions must then be given, since the cache no longer counts them.
    cache = KVCache()
    steps = [net(x[:, :5], cache=cache)]
    for t in range(5, SEQ):
        cache.drop(0, len(cache) - (window - 1))
        assert len(cache) == window - 1
        steps.append(net(x[:, t:t + 1], position_ids=torch.tensor([[t]]), cache=cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_a_window_the_model_never_had_changes_only_what_lies_beyond_it(position: str) -> None:
    net, windowed, x = model(position), model(position, sliding_window=4), tokens()
    plain, limited = net(x), windowed(x)
    torch.testing.assert_close(limited[:, :4], plain[:, :4], rtol=0, atol=1e-10)
    assert (limited[:, 4:] - plain[:, 4:]).abs().max() > 1e-3


def shifted_then_next(net: CausalLM, x: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """Prefill ``x[:, :-1]``, shift the cache, then feed the last token."""
    cache = KVCache()
    net(x[:, :-1], cache=cache)
    net.transformer.shift_cache(cache, start, count)
    assert torch.equal(cache.positions, torch.arange(x.shape[1] - 1 - count)[None])
    return net(x[:, -1:], cache=cache)


@pytest.mark.parametrize("position", SHIFTABLE)
def test_a_context_shift_in_one_layer_equals_recomputing_the_kept_tokens(position: str) -> None:
    # In one layer a cached key or value depends on its own token (and RoPE's angle) only, so
    # after the shift the cache is exactly what the kept tokens give at their new positions.
    net, x = model(position, layers=1), tokens()
    start, count = 2, 4
    kept = torch.cat([x[:, :start], x[:, start + count:]], dim=1)
    torch.testing.assert_close(shifted_then_next(net, x, start, count), net(kept)[:, -1:], rtol=0, atol=1e-10)


def test_a_shift_rerotates_cached_rope_keys_to_their_new_positions() -> None:
    net, x = model("rope", layers=1), tokens()
    cache, fresh = KVCache(), KVCache()
    net(x, cache=cache)
    net.transformer.shift_cache(cache, 1, 3)
    net(torch.cat([x[:, :1], x[:, 4:]], dim=1), cache=fresh)
    torch.testing.assert_close(cache.keys[0], fresh.keys[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(cache.values[0], fresh.values[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("position", ["rope", "alibi", "t5"])
def test_deeper_layers_keep_the_context_of_the_dropped_tokens(position: str) -> None:
    # What a shift cannot undo: from the second layer on, cached keys and values were computed
    # by attending to the tokens that are now gone.
    net, x = model(position), tokens()
    start, count = 2, 4
    kept = torch.cat([x[:, :start], x[:, start + count:]], dim=1)
    assert (shifted_then_next(net, x, start, count) - net(kept)[:, -1:]).abs().max() > 1e-4


def test_forgetting_to_rerotate_is_detected() -> None:
    net, x = model("rope", layers=1), tokens()
    start, count = 2, 4
    kept = torch.cat([x[:, :start], x[:, start + count:]], dim=1)
    expected = net(kept)[:, -1:]
    cache = KVCache()
    net(x[:, :-1], cache=cache)
    cache.drop(start, count)  # evicted, but the later keys keep their old angles
    # The cache offset taken as the new token's position, the old angles kept: wrong.
    wrong = net(x[:, -1:], cache=cache)
    assert (wrong - expected).abs().max() > 1e-3
    # Positions renumbered without rotating the keys: also wrong.
    cache = KVCache()
    net(x[:, :-1], cache=cache)
    cache.drop(start, count)
    cache.positions = torch.arange(len(cache))[None]
    assert (net(x[:, -1:], cache=cache) - expected).abs().max() > 1e-3


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_attention_sinks_keep_the_first_tokens_and_a_recent_window(position: str) -> None:
    # StreamingLLM in one layer: the last step sees the sinks and the recent tokens at positions
    # counted within the cache, which is a full pass over exactly those tokens.
    net, x = model(position, layers=1), tokens(16)
    sinks, window = 2, 6
    cache = KVCache()
    net(x[:, :window], cache=cache)
    for t in range(window, x.shape[1]):
        net.transformer.stream_cache(cache, window=window - 1, sinks=sinks)  # room for the new token
        last = net(x[:, t:t + 1], cache=cache)
    assert len(cache) == window
    seen = torch.cat([x[:, :sinks], x[:, -(window - sinks):]], dim=1)
    torch.testing.assert_close(last, net(seen)[:, -1:], rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", ABSOLUTE)
def test_absolute_encodings_refuse_a_context_shift(position: str) -> None:
    net, x = model(position), tokens()
    cache = KVCache()
    net(x, cache=cache)
    with pytest.raises(ValueError, match="the cached keys of every layer were computed from inputs that carry absolute "
                                         r"positions; a context shift cannot move them \(recompute the kept tokens instead\)"):
        net.transformer.shift_cache(cache, 0, 2)


def test_length_dependent_rope_scaling_refuses_a_context_shift() -> None:
    net = model("rope", rope_scaling={"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8})
    cache = KVCache()
    net(tokens(), cache=cache)
    with pytest.raises(ValueError, match="'dynamic' scaling changes the frequencies with the sequence length; cached "
                                         "keys cannot be re-rotated by a shift"):
        net.transformer.shift_cache(cache, 0, 2)


def test_bad_spans_windows_and_sinks_are_refused() -> None:
    net = model("rope")
    cache = KVCache()
    net(tokens(), cache=cache)
    with pytest.raises(ValueError, match=r"tokens 8 … 11 reach past the cache, which holds 11"):
        net.transformer.shift_cache(cache, 8, 4)
    with pytest.raises(ValueError, match=r"tokens 0 … 11 reach past the cache, which holds 11"):
        cache.drop(0, 12)
    with pytest.raises(ValueError, match="count must be a positive integer, got 0"):
        cache.drop(3, 0)
    with pytest.raises(ValueError, match="start must be a non-negative integer, got -1"):
        net.transformer.shift_cache(cache, -1, 2)
    with pytest.raises(ValueError, match=r"tokens 0 … 0 reach past the cache, which holds 0"):
        KVCache().drop(0, 1)
    with pytest.raises(TypeError, match="cache must be a posenc.models.KVCache, got list"):
        net.transformer.shift_cache([], 0, 1)
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        net.transformer.stream_cache(cache, window=0)
    with pytest.raises(ValueError, match=r"sinks must be smaller than the window \(room for recent tokens\), got sinks=4 "
                                         "and window=4"):
        net.transformer.stream_cache(cache, window=4, sinks=4)
    with pytest.raises(ValueError, match="sliding_window must be a positive integer, got 0"):
        TransformerConfig(vocab_size=VOCAB, sliding_window=0)
    assert len(cache) == 11  # nothing was changed by the refused calls


def test_logits_in_chunks_are_the_chunks_of_one_cache_concatenated() -> None:
    """The method is the loop it replaces: one new cache, the chunks in order, default positions."""
    net, x = model("rope"), tokens()
    cache = KVCache()
    by_hand = torch.cat([net(x[:, :2], cache=cache), net(x[:, 2:3], cache=cache), net(x[:, 3:], cache=cache)], dim=1)
    assert torch.equal(net.logits_in_chunks(x, [2, 1, SEQ - 3]), by_hand)
    # A fresh cache each call: calling twice gives the same logits.
    assert torch.equal(net.logits_in_chunks(x, [2, 1, SEQ - 3]), by_hand)


@pytest.mark.parametrize(("sizes", "error", "message"), [
    ((4, 3), ValueError, f"the chunk sizes [4, 3] sum to 7, not to the {SEQ} tokens"),
    ((SEQ, 0), ValueError, "each chunk size must be a positive integer, got 0"),
    ((), ValueError, "sizes is empty: give at least one chunk"),
    ((SEQ - 1.5, 1.5), TypeError, f"each chunk size must be an int, got {SEQ - 1.5} of type float"),
])
def test_logits_in_chunks_refuse_sizes_that_do_not_cover_the_tokens(sizes, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        model("rope").logits_in_chunks(tokens(), sizes)
