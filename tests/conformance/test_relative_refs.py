"""posenc.relative against tensor2tensor, Hugging Face T5 and Transformer-XL."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    relative_position_indices,
    t5_relative_position_bucket,
    xl_relative_embedding,
)

# --------------------------------------------------------------------------- tensor2tensor


def t2t_generate_relative_positions_matrix(length_q, length_k, max_relative_position, cache=False):
    """Transcription (tf -> torch) of tensor2tensor/layers/common_attention.py,
    ``_generate_relative_positions_matrix``."""
    if not cache:
        if length_q == length_k:
            range_vec_q = range_vec_k = torch.arange(length_q)
        else:
            range_vec_k = torch.arange(length_k)
            range_vec_q = range_vec_k[-length_q:]
        distance_mat = range_vec_k[None, :] - range_vec_q[:, None]
    else:
        distance_mat = torch.arange(-length_k + 1, 1, 1).unsqueeze(0)
    distance_mat_clipped = torch.clamp(distance_mat, -max_relative_position, max_relative_position)
    return distance_mat_clipped + max_relative_position


def t2t_generate_relative_positions_embeddings(length_q, length_k, depth, max_relative_position, embeddings_table, cache=False):
    """Transcription of tensor2tensor ``_generate_relative_positions_embeddings`` (gather rows)."""
    relative_positions_matrix = t2t_generate_relative_positions_matrix(
        length_q, length_k, max_relative_position, cache=cache
    )
    return embeddings_table[relative_positions_matrix]


@pytest.mark.parametrize(("q_len", "k_len", "k"), [(1, 1, 1), (7, 7, 3), (3, 10, 4), (1, 12, 5), (20, 20, 64)])
def test_indices_equal_tensor2tensor(q_len, k_len, k):
    # t2t aligns the queries with the *last* q_len keys when q_len != k_len.
    assert torch.equal(relative_position_indices(q_len, k_len, k), t2t_generate_relative_positions_matrix(q_len, k_len, k))


@pytest.mark.parametrize(("k_len", "k"), [(1, 2), (6, 2), (9, 16)])
def test_indices_equal_tensor2tensor_cache_mode(k_len, k):
    # cache=True: one query, the newest token; same as q_len = 1.
    assert torch.equal(relative_position_indices(1, k_len, k), t2t_generate_relative_positions_matrix(1, k_len, k, cache=True))


def test_embedding_equals_tensor2tensor():
    emb = RelativePositionEmbedding(3, 6)
    table = emb.embedding.weight.detach()
    expected = t2t_generate_relative_positions_embeddings(4, 9, 6, 3, table)
    assert torch.equal(emb(4, 9).detach(), expected)


# --------------------------------------------------------------------------- Hugging Face T5

T5_CONFIGS = [
    (True, 32, 128),
    (False, 32, 128),
    (True, 64, 256),
    (False, 64, 256),
    (True, 4, 5),
    (False, 2, 3),
    (True, 33, 100),
    (False, 17, 1000),
    (True, 18, 128),  # float32 rounding decides distances 8, 16 and 64 (exact bucket boundaries)
    (False, 9, 128),
    (False, 256, 10**6),  # float32 log disagrees with exact arithmetic here; HF's numbers rule
]


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"), T5_CONFIGS)
def test_t5_bucket_exhaustive_equals_hf(bidirectional, num_buckets, max_distance):
    pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    span = max(20_000, 3 * min(max_distance, 10**6))
    rel = torch.arange(-span, span + 1)
    extremes = torch.tensor([-(2**62), -(2**40), -(2**31), 2**31, 2**40, 2**62])
    rel = torch.cat([rel, extremes])
    options = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    expected = T5Attention._relative_position_bucket(rel, **options)
    out = t5_relative_position_bucket(rel, **options)
    assert out.dtype == expected.dtype == torch.long
    assert torch.equal(out, expected)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32])
def test_t5_bucket_equals_hf_for_narrow_integers(dtype):
    pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-30_000, 30_000).to(dtype)
    for bidirectional in (True, False):
        expected = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional)
        assert torch.equal(t5_relative_position_bucket(rel, bidirectional=bidirectional), expected)


@settings(max_examples=150, deadline=None)
@given(
    rel=st.lists(st.integers(-(2**45), 2**45), min_size=1, max_size=64),
    bidirectional=st.booleans(),
    num_buckets=st.integers(4, 300),
    extra=st.integers(1, 5000),
)
def test_t5_bucket_hypothesis_equals_hf(rel, bidirectional, num_buckets, extra):
    pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    per_direction = num_buckets // 2 if bidirectional else num_buckets
    options = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=per_direction // 2 + extra)
    x = torch.tensor(rel)
    assert torch.equal(t5_relative_position_bucket(x, **options), T5Attention._relative_position_bucket(x, **options))


def hf_t5_attention(num_heads, bidirectional, num_buckets, max_distance):
    transformers = pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    config = transformers.T5Config(
        d_model=16,
        d_kv=4,
        num_heads=num_heads,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=not bidirectional,
    )
    config._attn_implementation = "eager"
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()


def matched_pair(num_heads=4, bidirectional=True, num_buckets=32, max_distance=128):
    hf = hf_t5_attention(num_heads, bidirectional, num_buckets, max_distance)
    ours = T5RelativePositionBias(num_heads, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    # Same parameter name as Hugging Face: the weight loads by name.
    ours.load_state_dict({"relative_attention_bias.weight": hf.relative_attention_bias.weight.detach().clone()})
    return hf, ours


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("q_len", "k_len", "offset"), [(7, 7, 0), (200, 200, 0), (1, 50, 49), (5, 30, 25), (3, 9, 0), (9, 3, 0)])
def test_t5_bias_equals_hf_compute_bias(bidirectional, q_len, k_len, offset):
    hf, ours = matched_pair(bidirectional=bidirectional, num_buckets=16, max_distance=40)
    with torch.no_grad():
        expected = hf.compute_bias(q_len, k_len, past_seen_tokens=offset)
        assert torch.equal(ours(q_len, k_len, offset=offset), expected)


def test_t5_bias_equals_hf_forward_position_bias():
    hf, ours = matched_pair(num_heads=2)
    hidden = torch.randn(1, 11, 16)
    with torch.no_grad():
        _, position_bias, _ = hf(hidden)
        assert torch.equal(ours(11, 11), position_bias)


def test_t5_offset_equals_hf_offset_query_positions():
    # Decoding step t with t cached tokens: HF's past_seen_tokens, our offset, and the
    # matching rows of the full bias all agree.
    hf, ours = matched_pair(bidirectional=False)
    with torch.no_grad():
        full = hf.compute_bias(40, 40)
        for t in (0, 1, 17, 39):
            step = ours(1, t + 1, offset=t)
            assert torch.equal(step, hf.compute_bias(1, t + 1, past_seen_tokens=t))
            assert torch.equal(step, full[:, :, t : t + 1, : t + 1])


# --------------------------------------------------------------------------- Transformer-XL


def xl_rel_shift(x, zero_triu=False):
    """Transcription of kimiyoung/transformer-xl pytorch/mem_transformer.py,
    ``RelMultiHeadAttn._rel_shift``; ``x`` is ``(qlen, klen, bsz, n_head)``."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    x = x_padded[1:].view_as(x)
    if zero_triu:
        ones = torch.ones((x.size(0), x.size(1)))
        x = x * torch.tril(ones, x.size(1) - x.size(0))[:, :, None, None]
    return x


def xl_pos_emb(klen, demb, clamp_len=-1, dtype=torch.float32):
    """Transcription of mem_transformer.py: ``MemTransformerLM._forward`` (pos_seq, clamp_len)
    and ``PositionalEmbedding.forward`` (torch.ger is now torch.outer)."""
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=dtype) / demb))
    pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=dtype)
    if clamp_len > 0:
        pos_seq.clamp_(max=clamp_len)
    sinusoid_inp = torch.outer(pos_seq, inv_freq)
    return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (4, 4), (3, 8), (6, 11), (5, 3)])
def test_rel_shift_equals_xl(q_len, k_len):
    x = torch.randn(q_len, k_len, 2, 3)  # XL layout (qlen, klen, bsz, n_head)
    ours = rel_shift(x.permute(2, 3, 0, 1)).permute(2, 3, 0, 1)
    assert torch.equal(ours, xl_rel_shift(x))


@pytest.mark.parametrize(("q_len", "k_len"), [(4, 4), (3, 8)])
def test_rel_shift_with_causal_zeroing_equals_xl_zero_triu(q_len, k_len):
    x = torch.randn(q_len, k_len, 1, 2)
    keep = torch.ones(q_len, k_len).tril(k_len - q_len).bool()
    ours = rel_shift(x.permute(2, 3, 0, 1)).masked_fill(~keep, 0.0).permute(2, 3, 0, 1)
    assert torch.equal(ours, xl_rel_shift(x, zero_triu=True))


@pytest.mark.parametrize(("k_len", "dim", "clamp_len"), [(10, 16, None), (64, 32, None), (20, 8, 5), (7, 12, 100)])
def test_xl_embedding_equals_xl(k_len, dim, clamp_len):
    xl_clamp = -1 if clamp_len is None else clamp_len
    expected = xl_pos_emb(k_len, dim, xl_clamp, dtype=torch.float64)
    out = xl_relative_embedding(k_len, dim, clamp_len=clamp_len, dtype=torch.float64)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-13)
    # XL computes its angles in float32; ours are float64 rounded once, so they agree to float32 noise.
    torch.testing.assert_close(
        xl_relative_embedding(k_len, dim, clamp_len=clamp_len, dtype=torch.float32), xl_pos_emb(k_len, dim, xl_clamp), rtol=0, atol=2e-5
    )


@pytest.mark.reference_doc
def test_hf_no_longer_ships_transformer_xl():
    transformers = pytest.importorskip("transformers")
    # Transformer-XL was deprecated in transformers 4.35 and removed in 5.x, so the
    # transcription above is the reference.
    assert int(transformers.__version__.split(".")[0]) >= 5
    assert not hasattr(transformers, "TransfoXLModel")
