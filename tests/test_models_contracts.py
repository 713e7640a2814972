"""Contracts of posenc.models that the other model tests leave open.

Each test states one promise of the model (an encoding's formula, a dtype or device it follows,
an option that reaches the library, an error a caller can catch) with the smallest input that
shows it. Run by the mutation tests of posenc/models (tools/mutation_targets.json): keep them fast.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc.models import POSITIONS, Attention, CausalLM, EncoderClassifier, KVCache, Transformer, TransformerConfig
from posenc.relative import t5_relative_position_bucket
from posenc.rope import apply_rope, rope_cos_sin
from posenc.sinusoidal import sinusoidal_table

VOCAB, DIM, HEADS = 11, 16, 2
HEAD_DIM = DIM // HEADS
ABSOLUTE = ("sinusoidal", "learned")


def config(position: str, **kwargs) -> TransformerConfig:  # type: ignore[no-untyped-def]
    options = dict(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, num_layers=1, max_len=32, position=position)
    options.update(kwargs)
    return TransformerConfig(**options)


def perturbed(model: torch.nn.Module, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Eval mode in ``dtype``, no parameter left at an exact zero or one (CoPE's table, biases)."""
    torch.manual_seed(1)
    model = model.to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def causal_lm(position: str, dtype: torch.dtype = torch.float64, **kwargs) -> CausalLM:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return perturbed(CausalLM(config(position, causal=True, **kwargs)), dtype)


def tokens(batch: int = 1, seq: int = 6, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def first_layer(
    model: Transformer, x: torch.Tensor, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The first layer's logits (as :meth:`Attention.scores` returns them), queries and keys."""
    explicit = positions is not None
    pos = positions if explicit else torch.arange(x.shape[1])[None]
    hidden = model.position.embed(model.embed(x), pos, explicit)
    context = model._context(hidden, pos, pos, explicit)
    attn = model.blocks[0].attn
    normed = model.blocks[0].norm1(hidden)
    q, k, _ = attn.qkv(normed).view(*x.shape, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
    return attn.scores(normed, context)[0], q, k


def masked(logits: torch.Tensor) -> torch.Tensor:
    """``logits (..., seq, seq)`` with the keys after each query set to the most negative float."""
    seq = logits.shape[-1]
    return logits.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), torch.finfo(logits.dtype).min)


# --- Encodings: the formula each adapter promises ------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_t5_bias_uses_the_configured_buckets_in_the_configured_direction(causal: bool) -> None:
    # A decoder (causal) buckets past keys only, with all num_buckets for them; an encoder splits
    # the buckets between the two directions. 8 buckets ending at distance 12, over 15 tokens:
    # exact, logarithmic and clipped distances all occur.
    buckets, max_distance, seq = 8, 12, 15
    model = perturbed(Transformer(config("t5", causal=causal, t5_num_buckets=buckets, t5_max_distance=max_distance)))
    x = tokens(seq=seq)
    logits, q, k = first_layer(model, x)
    position = torch.arange(seq)
    bucket = t5_relative_position_bucket(
        position[None, :] - position[:, None], bidirectional=not causal, num_buckets=buckets, max_distance=max_distance
    )
    table = model.position.t5.relative_attention_bias.weight  # (buckets, heads)
    assert table.shape == (buckets, HEADS)
    expected = q[0] @ k[0].transpose(-1, -2) / math.sqrt(HEAD_DIM) + table[bucket].permute(2, 0, 1)
    torch.testing.assert_close(logits[0], masked(expected) if causal else expected, rtol=0, atol=1e-12)
    # Same through the explicit positions a cache or a padding mask uses.
    logits, _, _ = first_layer(model, x, positions=position[None])
    torch.testing.assert_close(logits[0], masked(expected) if causal else expected, rtol=0, atol=1e-12)


def test_cope_adds_its_position_logits_to_the_masked_logits() -> None:
    model = perturbed(Transformer(config("cope", causal=True)))
    x = tokens()
    logits, q, k = first_layer(model, x)
    content = masked(q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM))
    cope = model.blocks[0].attn.position.cope
    torch.testing.assert_close(logits, content + cope(q, content), rtol=0, atol=1e-12)


def test_cope_counts_up_to_max_len_by_default() -> None:
    # cope_max_pos defaults to max_len + 1 (counts 0 … max_len, never clamped within max_len).
    model = Transformer(config("cope", max_len=20))
    assert model.blocks[0].attn.position.cope.pos_emb.shape == (HEAD_DIM, 21)
    model = Transformer(config("cope", max_len=20, cope_max_pos=7))
    assert model.blocks[0].attn.position.cope.pos_emb.shape == (HEAD_DIM, 7)


def test_shaw_without_values_has_no_value_table() -> None:
    with_values = Transformer(config("shaw", max_relative_position=3))
    names = {name for name, _ in with_values.named_parameters() if "rel_" in name}
    assert names == {"blocks.0.attn.position.rel_k.embedding.weight", "blocks.0.attn.position.rel_v.embedding.weight"}
    assert with_values.blocks[0].attn.position.rel_v.embedding.weight.shape == (7, HEAD_DIM)
    without = Transformer(config("shaw", max_relative_position=3, shaw_values=False))
    assert {name for name, _ in without.named_parameters() if "rel_" in name} == {
        "blocks.0.attn.position.rel_k.embedding.weight"
    }


def test_xl_projects_the_relative_sinusoids_without_a_bias() -> None:
    # ((q_i + u) . k_j + (q_i + v) . W_R R_{i-j}) / sqrt(d_h): W_R is a matrix, no bias term,
    # both for the full pass and at explicit positions.
    model = perturbed(Transformer(config("xl", causal=True)))
    layer = model.blocks[0].attn.position
    assert [name for name, _ in layer.named_parameters()] == ["content_bias", "position_bias", "r_proj.weight"]
    x = tokens()
    seq = x.shape[1]
    for positions in (None, torch.arange(seq)[None]):
        logits, q, k = first_layer(model, x, positions)
        q, k = q[0], k[0]
        distance = torch.arange(seq)[:, None] - torch.arange(seq)[None, :]
        r = sinusoidal_table(2 * seq - 1, DIM, style="concat", offset=1 - seq, dtype=torch.float64)
        r = (r @ layer.r_proj.weight.T).view(2 * seq - 1, HEADS, HEAD_DIM)[distance + seq - 1]  # (q, k, heads, hd)
        content = (q + layer.content_bias[:, None]) @ k.transpose(-1, -2)
        position = torch.einsum("hid,ijhd->hij", q + layer.position_bias[:, None], r)
        torch.testing.assert_close(logits[0], masked((content + position) / math.sqrt(HEAD_DIM)), rtol=0, atol=1e-12)


def test_xl_global_biases_start_small() -> None:
    # u and v are drawn with std 0.02, as in the authors' code.
    torch.manual_seed(0)
    layer = Transformer(config("xl", dim=64, num_heads=4)).blocks[0].attn.position
    for bias in (layer.content_bias, layer.position_bias):
        assert bias.shape == (4, 16)
        assert 0.01 < float(bias.detach().std()) < 0.04


def test_sinusoidal_table_holds_max_len_rows() -> None:
    # max_len sizes the sinusoidal table the model stores (and saves in its state_dict).
    state = Transformer(config("sinusoidal", max_len=20)).state_dict()
    assert state["position.table.pe"].shape == (20, DIM)


def test_rope_base_and_max_len_reach_the_rotary_embedding() -> None:
    # Position p rotates channel pair i by p * base^(-2i / head_dim); the cos/sin cache holds max_len rows.
    model = perturbed(Transformer(config("rope", rope_base=100.0, max_len=20)))
    x = tokens(seq=3)
    logits, q, k = first_layer(model, x)
    pairs = torch.arange(0, HEAD_DIM, 2, dtype=torch.float64)
    angles = torch.arange(3, dtype=torch.float64)[:, None] * 100.0 ** (-pairs / HEAD_DIM)
    cos, sin = torch.cat([angles.cos(), angles.cos()], -1), torch.cat([angles.sin(), angles.sin()], -1)

    def rotated(t: torch.Tensor) -> torch.Tensor:
        half = torch.cat([-t[..., HEAD_DIM // 2:], t[..., : HEAD_DIM // 2]], -1)
        return t * cos + half * sin

    expected = rotated(q) @ rotated(k).transpose(-1, -2) / math.sqrt(HEAD_DIM)
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-12)
    assert model.position.rope.cos_cached.shape[0] == 20


def test_alibi_bias_follows_the_model_dtype_not_the_default_dtype(default_float64: None) -> None:
    # A float32 model under a float64 default dtype: ALiBi's bias is built in the model's dtype,
    # in the full pass and at explicit positions (a cache, a padding mask).
    torch.set_default_dtype(torch.float32)
    model = causal_lm("alibi", torch.float32)
    x = tokens(batch=2, seq=5)
    full = model(x)
    torch.set_default_dtype(torch.float64)
    assert model(x).dtype == torch.float32
    torch.testing.assert_close(model(x), full, rtol=0, atol=1e-6)
    cache = KVCache()
    steps = torch.cat([model(x[:, :3], cache=cache), model(x[:, 3:], cache=cache)], dim=1)
    assert steps.dtype == torch.float32
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


def test_t5_bias_is_cast_to_the_activations_dtype() -> None:
    # The T5 table kept in float64 in a float32 model: the bias is cast to the logits' dtype.
    model = causal_lm("t5", torch.float32)
    x = tokens(batch=2, seq=5)
    full = model(x)
    model.transformer.position.double()
    assert model(x).dtype == torch.float32
    torch.testing.assert_close(model(x), full, rtol=0, atol=1e-6)
    cache = KVCache()
    steps = torch.cat([model(x[:, :3], cache=cache), model(x[:, 3:], cache=cache)], dim=1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("position", POSITIONS)
def test_a_model_on_the_meta_device_creates_its_tensors_there(position: str) -> None:
    # Every tensor a pass creates (masks, positions, biases, tables) follows the model's device;
    # the meta device stands in for a second device on a CPU-only machine.
    with torch.device("meta"):
        encoder = Transformer(config(position))
        lm = CausalLM(config(position, causal=True))
    x = torch.zeros(2, 5, dtype=torch.long, device="meta")
    mask = torch.ones(2, 5, dtype=torch.long, device="meta")
    assert encoder(x).device.type == "meta"
    assert lm(x).shape == (2, 5, VOCAB)
    if position in ABSOLUTE:  # their tables check the positions' values, which meta has not
        return
    assert encoder(x, attention_mask=mask).shape == (2, 5, DIM)
    cache = KVCache()
    lm(x, cache=cache)
    lm.transformer.shift_cache(cache, 1, 2)
    assert lm(x[:, :1], cache=cache).device.type == "meta"
    assert len(cache) == 4


# --- RoPE's context shift ------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_rope_shift_rotates_in_the_models_layout(layout: str) -> None:
    model, x = causal_lm("rope", rope_layout=layout), tokens(seq=7)
    cache, fresh = KVCache(), KVCache()
    model(x, cache=cache)
    model.transformer.shift_cache(cache, 1, 3)
    model(torch.cat([x[:, :1], x[:, 4:]], dim=1), cache=fresh)
    torch.testing.assert_close(cache.keys[0], fresh.keys[0], rtol=0, atol=1e-12)


def test_a_rope_shift_keeps_the_cache_dtype() -> None:
    model, x = causal_lm("rope", torch.float32), tokens(seq=7)
    cache, fresh = KVCache(), KVCache()
    model(x, cache=cache)
    model.transformer.shift_cache(cache, 1, 3)
    model(torch.cat([x[:, :1], x[:, 4:]], dim=1), cache=fresh)
    assert cache.keys[0].dtype == torch.float32
    torch.testing.assert_close(cache.keys[0], fresh.keys[0])


def test_a_rope_shift_rounds_its_rotation_once_to_the_cache_dtype() -> None:
    # The shift rotates by the cos/sin that posenc.rope_cos_sin gives for position -count, rounded
    # once to the cache's dtype. At base 100 and head width 32, a shift of 294 is a case where
    # rounding float64 -> float16 by way of float32 would miss the nearest float16.
    model = CausalLM(TransformerConfig(vocab_size=VOCAB, dim=32, num_heads=1, num_layers=1, position="rope",
                                       rope_base=100.0, causal=True))
    keys = torch.randn(1, 1, 295, 32, generator=torch.Generator().manual_seed(0)).half()
    cache = KVCache()
    cache.keys, cache.values, cache.positions = [keys.clone()], [keys.clone()], torch.arange(295)[None]
    model.transformer.shift_cache(cache, 0, 294)
    cos, sin = rope_cos_sin(torch.tensor([-294]), 32, base=100.0, dtype=torch.float16)
    assert torch.equal(cache.keys[0], apply_rope(keys[:, :, 294:], cos, sin))
    assert torch.equal(cache.positions, torch.tensor([[0]]))


# --- Cached decoding at lengths where the relative encodings clip or bucket ----------------------


@pytest.mark.parametrize(
    ("position", "options"),
    [("shaw", {"max_relative_position": 2}), ("t5", {"t5_num_buckets": 6, "t5_max_distance": 8})],
)
def test_cached_decoding_past_the_clipping_distance_equals_the_full_pass(position: str, options: dict) -> None:
    # Shaw clips distances beyond K = 2; T5's 6 causal buckets are exact up to 2 and end at 8.
    model, x = causal_lm(position, **options), tokens(seq=10)
    full = model(x)
    cache = KVCache()
    steps = torch.cat([model(x[:, :3], cache=cache), *(model(x[:, t:t + 1], cache=cache) for t in range(3, 10))], 1)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-10)


# --- TransformerConfig: every bad value named ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"vocab_size": 0}, ValueError, r"^vocab_size must be a positive integer, got 0$"),
        ({"dim": -16}, ValueError, r"^dim must be a positive integer, got -16$"),
        ({"num_heads": 0}, ValueError, r"^num_heads must be a positive integer, got 0$"),
        ({"num_layers": 0}, ValueError, r"^num_layers must be a positive integer, got 0$"),
        ({"ff_mult": 0}, ValueError, r"^ff_mult must be a positive integer, got 0$"),
        ({"max_len": 0}, ValueError, r"^max_len must be a positive integer, got 0$"),
        ({"max_relative_position": 0}, ValueError, r"^max_relative_position must be a positive integer, got 0$"),
        ({"t5_num_buckets": 0}, ValueError, r"^t5_num_buckets must be a positive integer, got 0$"),
        ({"t5_max_distance": 0}, ValueError, r"^t5_max_distance must be a positive integer, got 0$"),
        ({"dropout": 1.0}, ValueError, r"^dropout must be in \[0, 1\), got 1.0$"),
        ({"position": "nope"}, ValueError,
         r"^position must be one of 'none', 'sinusoidal', 'learned', 'shaw', 'xl', 't5', 'rope', 'alibi', 'cope'; "
         r"got 'nope'$"),
        ({"rope_base": 0.0}, ValueError, r"^rope_base must be a finite number > 0, got 0.0$"),
        ({"rope_layout": "neox"}, ValueError, r"^rope_layout must be one of 'half', 'interleaved'; got 'neox'$"),
        ({"rope_scaling": 2.0}, TypeError, r"^rope_scaling must be a dict or None, got float$"),
        ({"causal": 1}, TypeError, r"^causal must be a bool, got 1 of type int$"),
        ({"shaw_values": "yes"}, TypeError, r"^shaw_values must be a bool, got 'yes' of type str$"),
        ({"num_heads": 3}, ValueError, r"^num_heads must divide dim=16, got num_heads=3$"),
        ({"position": "rope", "dim": 12, "num_heads": 4}, ValueError,
         r"^head_dim must be even \(channels are rotated in pairs\), got 3$"),
        ({"position": "xl", "dim": 9, "num_heads": 1}, ValueError,
         r"^dim must be even \(channels are rotated in pairs\), got 9$"),
        ({"cope_max_pos": 0}, ValueError, r"^cope_max_pos must be a positive integer, got 0$"),
        ({"sliding_window": -2}, ValueError, r"^sliding_window must be a positive integer, got -2$"),
    ],
)
def test_a_bad_config_value_is_named(options: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        TransformerConfig(**{"vocab_size": VOCAB, "dim": DIM, "num_heads": HEADS, **options})


def test_config_accepts_the_edge_values() -> None:
    # Odd head widths need no pairs outside RoPE (and XL's dim is what must be even there).
    assert TransformerConfig(vocab_size=1, dim=3, num_heads=1, position="alibi").head_dim == 3
    assert TransformerConfig(vocab_size=1, dim=12, num_heads=4, position="xl").head_dim == 3
    assert TransformerConfig(vocab_size=1, dim=16, num_heads=4, position="rope").head_dim == 4
    edge = TransformerConfig(vocab_size=1, dropout=0.0, rope_scaling={"rope_type": "linear", "factor": 2.0},
                             cope_max_pos=1, sliding_window=1, max_len=1)
    assert edge.attention_kinds == ("sliding_attention",) * 2


# --- Transformer: positions, masks and the cache ---------------------------------------------------


def test_a_learned_table_refuses_position_max_len_with_a_value_error() -> None:
    model = causal_lm("learned", max_len=8)
    x = tokens(seq=8)
    assert model(x[:, :1], position_ids=torch.tensor([[7]])).shape == (1, 1, VOCAB)  # the last row
    with pytest.raises(ValueError, match=r"^position 8 is past the learned table \(max_len=8\)"):
        model(x[:, :1], position_ids=torch.tensor([[8]]))
    cache = KVCache()
    model(x, cache=cache)  # positions 0 … 7: the whole table
    with pytest.raises(ValueError, match=r"^position 8 is past the learned table \(max_len=8\)"):
        model(x[:, :1], cache=cache)
    assert len(cache) == 8 and [k.shape[2] for k in cache.keys] == [8]  # the refused step added nothing


@pytest.mark.parametrize("position", POSITIONS)
def test_a_prompt_cached_without_a_mask_continues_with_a_mask(position: str) -> None:
    # The mask of a later step covers the cached tokens too; all ones, it changes nothing.
    model, x = causal_lm(position), tokens(batch=2, seq=6)
    full = model(x)
    cache = KVCache()
    model(x[:, :4], cache=cache)
    step = model(x[:, 4:], attention_mask=torch.ones(2, 6, dtype=torch.long), cache=cache)
    torch.testing.assert_close(step, full[:, 4:], rtol=0, atol=1e-10)
    assert torch.equal(cache.positions, torch.arange(6)[None].expand(2, -1))


@pytest.mark.parametrize("position", ["sinusoidal", "rope", "alibi", "t5"])
def test_one_row_of_position_ids_serves_the_whole_batch(position: str) -> None:
    model, x = causal_lm(position), tokens(batch=2, seq=5)
    positions = torch.tensor([[0, 2, 3, 7, 9]])
    torch.testing.assert_close(model(x, position_ids=positions), model(x, position_ids=positions.expand(2, -1)),
                               rtol=0, atol=0)


@pytest.mark.parametrize("position", ["shaw", "xl", "t5", "rope", "alibi"])
def test_position_ids_follow_the_tokens_to_their_device(position: str) -> None:
    with torch.device("meta"):
        model = CausalLM(config(position, causal=True))
    x = torch.zeros(1, 4, dtype=torch.long, device="meta")
    assert model(x, position_ids=torch.tensor([[0, 1, 5, 6]])).device.type == "meta"


def test_dropping_the_last_cached_tokens_is_allowed() -> None:
    model, x = causal_lm("alibi"), tokens(seq=6)
    cache = KVCache()
    model(x, cache=cache)
    cache.drop(4, 2)
    assert len(cache) == 4 and torch.equal(cache.positions, torch.arange(4)[None])
    model.transformer.shift_cache(cache, 2, 2)
    assert len(cache) == 2 and cache.keys[0].shape[2] == 2 and cache.values[0].shape[2] == 2


def test_stream_cache_keeps_a_cache_that_fits_and_rolls_without_sinks_by_default() -> None:
    model, x = causal_lm("rope"), tokens(seq=7)
    cache = KVCache()
    model(x[:, :4], cache=cache)
    keys = cache.keys[0].clone()
    model.transformer.stream_cache(cache, window=4)  # exactly full: nothing to evict
    assert len(cache) == 4 and torch.equal(cache.keys[0], keys)
    model(x[:, 4:], cache=cache)
    model.transformer.stream_cache(cache, window=3)  # a plain rolling window: the last 3 tokens
    fresh = KVCache()
    model(x[:, 4:], cache=fresh)
    assert torch.equal(cache.positions, torch.arange(3)[None])
    torch.testing.assert_close(cache.keys[0], fresh.keys[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(cache.values[0], fresh.values[0], rtol=0, atol=1e-12)


def test_the_classifier_passes_positions_on_and_pools_each_row_over_its_own_tokens() -> None:
    torch.manual_seed(0)
    classifier = perturbed(EncoderClassifier(config("sinusoidal"), num_classes=3))
    x = tokens(batch=2, seq=5)
    positions = torch.arange(3, 8)[None]
    hidden = classifier.transformer(x, position_ids=positions)
    torch.testing.assert_close(classifier(x, position_ids=positions), classifier.head(hidden.mean(dim=1)),
                               rtol=0, atol=1e-12)
    # Rows padded differently: each mean runs over that row's tokens only.
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    hidden = classifier.transformer(x, attention_mask=mask)
    pooled = torch.stack([hidden[0, 2:].mean(dim=0), hidden[1, 1:].mean(dim=0)])
    torch.testing.assert_close(classifier(x, attention_mask=mask), classifier.head(pooled), rtol=0, atol=1e-12)


def test_bad_calls_are_named_in_full() -> None:
    model, x = causal_lm("rope"), tokens(batch=2, seq=5)
    with pytest.raises(ValueError, match=r"^position_ids must have shape \(batch, seq\) = \(2, 5\) or \(1, seq\), "
                                         r"got \(2, 4\)$"):
        model(x, position_ids=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^cache must be a posenc.models.KVCache, got dict$"):
        model(x, cache={})
    with pytest.raises(ValueError, match=r"^a KV cache needs a causal model \(config.causal=True\), got causal=False$"):
        Transformer(config("rope"))(x, cache=KVCache())
    with pytest.raises(TypeError, match=r"^attention_mask must be an integer or bool torch.Tensor \(1 = token, 0 = "
                                        r"padding\), got list$"):
        model(x, attention_mask=[[1] * 5] * 2)
    float_mask = r"^attention_mask must be an integer or bool torch.Tensor .*, got torch.float32$"
    with pytest.raises(TypeError, match=float_mask):
        model(x, attention_mask=torch.ones(2, 5))
    cache = KVCache()
    model(tokens(batch=3, seq=4), cache=cache)
    with pytest.raises(ValueError, match=r"^the cache holds a batch of 3, got tokens of batch 1$"):
        model(x[:1, :2], cache=cache)
    cache = KVCache()
    model(x, cache=cache)
    with pytest.raises(ValueError, match=r"^attention_mask must have shape \(batch, cached \+ seq\) = \(2, 6\), "
                                         r"got \(2, 1\)$"):
        model(x[:, :1], attention_mask=torch.ones(2, 1, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"^config.causal must be True for a CausalLM, got False$"):
        CausalLM(config("rope"))
    with pytest.raises(ValueError, match=r"^num_classes must be a positive integer, got 0$"):
        EncoderClassifier(config("rope"), num_classes=0)
    with pytest.raises(TypeError, match=r"^tokens must have an integer dtype, got torch.float32$"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"^tokens must be 2-D \(batch, seq\), got a 1-D tensor of shape \(3,\)$"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^cache must be a posenc.models.KVCache, got list$"):
        model.transformer.shift_cache([], 0, 1)
    with pytest.raises(TypeError, match=r"^position_ids must have an integer dtype, got torch.float32$"):
        model(x, position_ids=torch.zeros(1, 5))
    with pytest.raises(TypeError, match=r"^document_mask must be a bool torch.Tensor \(True where a query may see a "
                                        r"key, as posenc.document_mask returns it\), got torch.int64$"):
        model(x, document_mask=torch.ones(5, 5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^document_mask must be a bool torch.Tensor .*, got list$"):
        model(x, document_mask=[[True] * 5] * 5)
    with pytest.raises(ValueError, match=r"^sinks must be a non-negative integer, got -1$"):
        model.transformer.stream_cache(cache, window=3, sinks=-1)
    with pytest.raises(ValueError, match=r"^window must be a positive integer, got 0$"):
        model.transformer.stream_cache(cache, window=0)


def test_a_document_mask_is_combined_with_the_causal_and_padding_masks() -> None:
    # A mask that allows every pair hides nothing more: the model stays causal and padding stays hidden.
    model, x = causal_lm("rope"), tokens(batch=2, seq=5)
    everything = torch.ones(5, 5, dtype=torch.bool)
    torch.testing.assert_close(model(x, document_mask=everything), model(x), rtol=0, atol=0)
    padding = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    torch.testing.assert_close(model(x, attention_mask=padding, document_mask=everything),
                               model(x, attention_mask=padding), rtol=0, atol=0)
    encoder = perturbed(Transformer(config("rope")))
    torch.testing.assert_close(encoder(x, attention_mask=padding, document_mask=everything),
                               encoder(x, attention_mask=padding), rtol=0, atol=0)


def test_a_block_is_pre_norm_with_two_residual_branches_and_a_gelu() -> None:
    # h = x + Attn(LN1(x)); out = h + W2 GELU(W1 LN2(h) + b1) + b2, checked through the whole model.
    model = perturbed(Transformer(config("none", num_layers=1)))
    x = tokens(seq=4)
    block = model.blocks[0]
    embedded = model.embed(x)
    context = model._context(embedded, torch.arange(4)[None], torch.arange(4)[None], False)
    h = embedded + block.attn(block.norm1(embedded), context)
    first, second = block.ff[0], block.ff[2]
    ff = torch.nn.functional.gelu(block.norm2(h) @ first.weight.T + first.bias) @ second.weight.T + second.bias
    assert first.weight.shape == (4 * DIM, DIM)
    torch.testing.assert_close(model(x), model.norm(h + ff), rtol=0, atol=1e-12)


def test_a_standalone_attention_is_layer_zero_and_scores_content_only() -> None:
    # Before a Transformer gives it an encoding's part, an Attention adds no position term.
    options = dict(num_layers=2, sliding_window=3, layer_types=("sliding_attention", "full_attention"))
    assert Attention(config("none", **options)).sliding and not Attention(config("none", **options), 1).sliding
    assert Attention(config("none", num_layers=1)).layer == 0
    model = perturbed(Transformer(config("none")))
    torch.manual_seed(0)
    attention = Attention(config("none")).double()
    attention.load_state_dict(model.blocks[0].attn.state_dict())
    x = model.embed(tokens(seq=4))
    context = model._context(x, torch.arange(4)[None], torch.arange(4)[None], False)
    torch.testing.assert_close(attention(x, context), model.blocks[0].attn(x, context), rtol=0, atol=0)


def test_an_untied_head_is_a_separate_matrix_without_bias() -> None:
    tied = CausalLM(config("none", causal=True))
    assert tied.head is None and not any(name.startswith("head") for name, _ in tied.named_parameters())
    untied = perturbed(CausalLM(config("none", causal=True), tie_weights=False))
    assert [name for name, _ in untied.named_parameters() if name.startswith("head")] == ["head.weight"]
    assert untied.head.weight.shape == (VOCAB, DIM)
    x = tokens(seq=3)
    torch.testing.assert_close(untied(x), untied.transformer(x) @ untied.head.weight.T, rtol=0, atol=1e-12)
    tied = perturbed(tied)
    torch.testing.assert_close(tied(x), tied.transformer(x) @ tied.transformer.embed.weight.T, rtol=0, atol=1e-12)
