"""Layers that differ: sliding and full attention, a local RoPE base, NoPE layers."""

from __future__ import annotations

import pytest
import torch

from posenc.models import CausalLM, KVCache, TransformerConfig

VOCAB, DIM, HEADS, SEQ, WINDOW = 13, 16, 2, 12, 4
MIXED = ("sliding_attention", "full_attention")


def model(layers: int = 2, **options) -> CausalLM:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    options = {"position": "rope", **options}
    config = TransformerConfig(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, num_layers=layers, max_len=32,
                               causal=True, **options)
    net = CausalLM(config).double().eval()
    with torch.no_grad():  # no parameter left at an exact zero or one
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return net


def tokens(seq: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(0))


def test_the_default_layer_kinds_follow_sliding_window() -> None:
    assert TransformerConfig(vocab_size=VOCAB, num_layers=3).attention_kinds == ("full_attention",) * 3
    windowed = TransformerConfig(vocab_size=VOCAB, num_layers=3, sliding_window=WINDOW)
    assert windowed.attention_kinds == ("sliding_attention",) * 3
    mixed = TransformerConfig(vocab_size=VOCAB, num_layers=2, sliding_window=WINDOW, layer_types=list(MIXED))
    assert mixed.attention_kinds == MIXED  # a list is kept as a tuple


def test_layer_types_that_all_slide_or_none_equal_the_single_setting() -> None:
    x = tokens()
    full = model(layer_types=("full_attention",) * 2, sliding_window=WINDOW)(x)
    torch.testing.assert_close(full, model()(x), rtol=0, atol=0)
    sliding = model(layer_types=("sliding_attention",) * 2, sliding_window=WINDOW)(x)
    torch.testing.assert_close(sliding, model(sliding_window=WINDOW)(x), rtol=0, atol=0)


def test_a_mixed_model_differs_from_full_attention_only_past_the_window() -> None:
    x = tokens()
    mixed, full = model(layer_types=MIXED, sliding_window=WINDOW)(x), model()(x)
    # Within the window the sliding layer hides nothing; past it, it does.
    torch.testing.assert_close(mixed[:, :WINDOW], full[:, :WINDOW], rtol=0, atol=1e-12)
    assert (mixed[:, WINDOW:] - full[:, WINDOW:]).abs().amax(dim=-1).min() > 1e-6
    # Not the same as sliding in every layer either.
    assert (mixed - model(sliding_window=WINDOW)(x))[:, WINDOW:].abs().max() > 1e-6


def test_the_local_base_rotates_the_sliding_layers_only() -> None:
    x = tokens()
    # One layer: a sliding layer with its own base is a model with that base.
    alone = model(layers=1, sliding_window=WINDOW, rope_base=10000.0, local_rope_base=50.0)(x)
    torch.testing.assert_close(alone, model(layers=1, sliding_window=WINDOW, rope_base=50.0)(x), rtol=0, atol=0)
    # A full layer keeps rope_base and its scaling; the local rotary is unscaled by default.
    scaling = {"rope_type": "linear", "factor": 4.0}
    full_only = model(layers=1, layer_types=("full_attention",), sliding_window=WINDOW, rope_scaling=scaling)(x)
    with_local = model(layers=1, layer_types=("full_attention",), sliding_window=WINDOW, rope_scaling=scaling)
    assert with_local.transformer.position.local_rope is None
    torch.testing.assert_close(with_local(x), full_only, rtol=0, atol=0)
    two = model(layer_types=MIXED, sliding_window=WINDOW, rope_scaling=scaling, local_rope_base=100.0)
    assert two.transformer.position.layer_rotary == ["local_rope", "rope"]
    assert two.transformer.position.local_rope.scaling.rope_type == "default"
    assert two.transformer.position.rope.scaling.rope_type == "linear"
    same_base = model(layer_types=MIXED, sliding_window=WINDOW, rope_scaling=scaling)(x)
    assert (two(x) - same_base).abs().max() > 1e-6


def test_the_local_scaling_applies_to_the_local_rotary() -> None:
    x = tokens()
    scaling = {"rope_type": "linear", "factor": 4.0}
    local = model(layers=1, sliding_window=WINDOW, local_rope_base=50.0, local_rope_scaling=scaling)(x)
    torch.testing.assert_close(
        local, model(layers=1, sliding_window=WINDOW, rope_base=50.0, rope_scaling=scaling)(x), rtol=0, atol=0
    )


def test_a_nope_layer_is_a_layer_without_positions() -> None:
    x = tokens()
    torch.testing.assert_close(model(layers=1, nope_layers=(0,))(x), model(layers=1, position="none")(x),
                               rtol=0, atol=0)
    partly = model(nope_layers=[1])
    assert partly.transformer.position.layer_rotary == ["rope", None]
    assert (partly(x) - model()(x)).abs().max() > 1e-6
    assert (partly(x) - model(position="none")(x)).abs().max() > 1e-6


@pytest.mark.parametrize("options", [
    {"layer_types": MIXED, "sliding_window": WINDOW, "local_rope_base": 100.0, "nope_layers": (1,)},
    {"layer_types": ("full_attention", "sliding_attention"), "sliding_window": WINDOW, "nope_layers": (0,)},
])
def test_cached_decoding_of_a_mixed_model_equals_one_pass(options: dict) -> None:
    net, x = model(**options), tokens()
    torch.testing.assert_close(net.logits_in_chunks(x, (5, 1, 6)), net(x), rtol=0, atol=1e-10)


@pytest.mark.parametrize("options", [
    {"sliding_window": 64, "local_rope_base": 50.0},  # re-rotated with the local base
    {"nope_layers": (0,)},  # a NoPE layer's keys stay as they are
])
def test_a_context_shift_moves_each_layer_with_its_own_rotary(options: dict) -> None:
    net, x = model(layers=1, **options), tokens()
    cache, fresh = KVCache(), KVCache()
    net(x, cache=cache)
    net.transformer.shift_cache(cache, 1, 3)
    net(torch.cat([x[:, :1], x[:, 4:]], dim=1), cache=fresh)
    torch.testing.assert_close(cache.keys[0], fresh.keys[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("options, error, message", [
    ({"layer_types": ("full_attention",)}, ValueError,
     r"^layer_types must list one attention kind per layer \(2\), got \('full_attention',\)$"),
    ({"layer_types": "full_attention"}, ValueError,
     r"^layer_types must list one attention kind per layer \(2\), got 'full_attention'$"),
    ({"layer_types": ("full_attention", "chunked")}, ValueError,
     r"^layer_types entry must be one of 'full_attention', 'sliding_attention'; got 'chunked'$"),
    ({"layer_types": MIXED}, ValueError, r"^layer_types has sliding_attention layers, which need sliding_window$"),
    ({"nope_layers": 1}, TypeError, r"^nope_layers must be a tuple of layer indices, got int$"),
    ({"nope_layers": (2,)}, ValueError, r"^nope_layers must hold layer indices 0 … 1, got 2$"),
    ({"nope_layers": (-1,)}, ValueError, r"^nope_layers must hold layer indices 0 … 1, got -1$"),
    ({"nope_layers": (True,)}, ValueError, r"^nope_layers must hold layer indices 0 … 1, got True$"),
    ({"nope_layers": (1, 1)}, ValueError, r"^nope_layers lists a layer twice: \(1, 1\)$"),
    ({"nope_layers": (0,), "position": "alibi"}, ValueError,
     r"^nope_layers applies to position='rope' only, got position='alibi'$"),
    ({"local_rope_base": 100.0, "sliding_window": WINDOW, "position": "t5"}, ValueError,
     r"^local_rope_base applies to position='rope' only, got position='t5'$"),
    ({"local_rope_base": 0.0, "sliding_window": WINDOW}, ValueError,
     r"^local_rope_base must be a finite number > 0, got 0.0$"),
    ({"local_rope_base": 100.0}, ValueError,
     r"^local_rope_base sets the RoPE of sliding_attention layers, but no layer slides$"),
    ({"local_rope_scaling": {"rope_type": "linear", "factor": 2.0}, "sliding_window": WINDOW}, ValueError,
     r"^local_rope_scaling needs local_rope_base \(the sliding layers' own rotary embedding\)$"),
    ({"local_rope_scaling": [2.0], "local_rope_base": 100.0, "sliding_window": WINDOW}, TypeError,
     r"^local_rope_scaling must be a dict or None, got list$"),
])
def test_bad_layer_settings_are_refused(options: dict, error: type, message: str) -> None:
    options = {"position": "rope", **options}
    with pytest.raises(error, match=message):
        TransformerConfig(vocab_size=VOCAB, num_layers=2, **options)


def test_a_bad_local_scaling_is_refused_with_the_library_message() -> None:
    with pytest.raises(ValueError, match=r"^rope_type='linear' needs scaling\['factor'\]$"):
        model(sliding_window=WINDOW, local_rope_base=100.0, local_rope_scaling={"rope_type": "linear"})
