"""Positions in place of lengths: every two-sided and absolute encoding at arbitrary positions."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import (
    LearnedPositionalEncoding,
    RelativePositionEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    rel_shift,
    relative_position_indices,
    sinusoidal_table,
    t5_relative_position_bucket,
    xl_position_logits,
    xl_relative_embedding,
)

HEADS = 4
# Two rows of positions: one restarts (a pack), one has a gap (an evicted cache).
Q_POS = torch.tensor([[0, 1, 2, 0, 1], [3, 4, 9, 10, 11]])
K_POS = torch.tensor([[0, 1, 2, 0, 1, 2, 3], [0, 1, 2, 3, 4, 9, 10]])


def distances() -> torch.Tensor:
    return K_POS[:, None, :] - Q_POS[:, :, None]  # (2, q, k), key minus query


def test_alibi_bias_at_positions_is_the_formula() -> None:
    got = alibi_bias(HEADS, Q_POS, K_POS, dtype=torch.float64)
    expected = -alibi_slopes(HEADS, dtype=torch.float64)[None, :, None, None] * distances()[:, None].abs()
    assert got.shape == (2, HEADS, 5, 7)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_alibi_bias_positions_broadcast_over_rows_and_default_to_the_queries() -> None:
    shared_keys = alibi_bias(HEADS, Q_POS, K_POS[:1])
    torch.testing.assert_close(shared_keys[1], alibi_bias(HEADS, Q_POS[1], K_POS[0]), rtol=0, atol=0)
    torch.testing.assert_close(alibi_bias(HEADS, Q_POS[1]), alibi_bias(HEADS, Q_POS[1], Q_POS[1]), rtol=0, atol=0)


@pytest.mark.parametrize(("q", "k"), [(1, 6), (4, 4), (3, 9)])
def test_lengths_are_the_positions_of_the_last_queries(q: int, k: int) -> None:
    keys = torch.arange(k)
    queries = keys[k - q:]
    torch.testing.assert_close(alibi_bias(HEADS, q, k), alibi_bias(HEADS, queries, keys), rtol=0, atol=0)
    assert torch.equal(relative_position_indices(q, k, 2), relative_position_indices(queries, keys, 2))
    shaw = RelativePositionEmbedding(2, 8)
    assert torch.equal(shaw(q, k), shaw(queries, keys))
    t5 = T5RelativePositionBias(HEADS, bidirectional=False, num_buckets=8, max_distance=16)
    assert torch.equal(t5(q, k, offset=k - q)[0], t5(queries, keys))


def test_shaw_indices_and_vectors_at_positions() -> None:
    expected = distances().clamp(-2, 2) + 2
    assert torch.equal(relative_position_indices(Q_POS, K_POS, 2), expected)
    shaw = RelativePositionEmbedding(2, 8)
    assert torch.equal(shaw(Q_POS, K_POS), shaw.embedding.weight[expected])


def test_t5_bias_at_positions() -> None:
    t5 = T5RelativePositionBias(HEADS, bidirectional=True, num_buckets=8, max_distance=16)
    bucket = t5_relative_position_bucket(distances(), bidirectional=True, num_buckets=8, max_distance=16)
    got = t5(Q_POS, K_POS)
    assert got.shape == (2, HEADS, 5, 7)
    assert torch.equal(got, t5.relative_attention_bias.weight[bucket].permute(0, 3, 1, 2))


def test_sinusoidal_table_at_positions_is_its_rows() -> None:
    table = sinusoidal_table(32, 10, dtype=torch.float64)
    for style in ("interleaved", "concat", "tensor2tensor"):
        rows = sinusoidal_table(32, 9, style=style)
        assert torch.equal(sinusoidal_table(K_POS, 9, style=style), rows[K_POS])
    assert torch.equal(sinusoidal_table(torch.tensor([-3, 4]), 10, dtype=torch.float64),
                       sinusoidal_table(8, 10, offset=-3, dtype=torch.float64)[[0, 7]])
    assert torch.equal(sinusoidal_table(torch.tensor(5), 10, dtype=torch.float64), table[5])


@pytest.mark.parametrize("module", [SinusoidalPositionalEncoding, LearnedPositionalEncoding])
@pytest.mark.parametrize("batch_first", [True, False])
def test_absolute_modules_add_the_rows_of_the_positions(module: type, batch_first: bool) -> None:
    pe = module(8, max_len=16, batch_first=batch_first)
    table = pe.pe if module is SinusoidalPositionalEncoding else pe.weight
    x = torch.randn(2, 5, 8)
    positions = Q_POS
    if not batch_first:
        x, positions = x.transpose(0, 1), positions.T
    torch.testing.assert_close(pe(x, positions=positions), x + table[positions], rtol=0, atol=0)
    # (1, seq) is shared by the batch, and arange positions equal the default.
    first = positions[:1] if batch_first else positions[:, :1]
    torch.testing.assert_close(pe(x, positions=first), x + table[first], rtol=0, atol=0)
    arange = torch.arange(5)[None] if batch_first else torch.arange(5)[:, None]
    torch.testing.assert_close(pe(x, positions=arange), pe(x), rtol=0, atol=0)


def test_sinusoidal_module_grows_for_a_far_position() -> None:
    pe = SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.zeros(1, 2, 8)
    got = pe(x, positions=torch.tensor([[1, 40]]))
    torch.testing.assert_close(got[0], sinusoidal_table(torch.tensor([1, 40]), 8), rtol=0, atol=0)


def test_xl_position_logits_are_the_formula() -> None:
    torch.manual_seed(0)
    heads, head_dim, dim = 2, 3, 8
    query = torch.randn(2, heads, 5, head_dim, dtype=torch.float64)
    weight = torch.randn(heads * head_dim, dim, dtype=torch.float64)
    got = xl_position_logits(query, weight, Q_POS, K_POS)
    r = sinusoidal_table(-distances(), dim, style="concat", dtype=torch.float64)  # R_{i-j}: (2, q, k, dim)
    projected = (r @ weight.T).unflatten(-1, (heads, head_dim))  # (2, q, k, heads, head_dim)
    expected = torch.einsum("bhid,bijhd->bhij", query, projected)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("q", "k"), [(4, 4), (2, 6)])
def test_xl_position_logits_equal_the_shift_form_on_and_below_the_diagonal(q: int, k: int) -> None:
    torch.manual_seed(1)
    heads, head_dim, dim = 2, 4, 8
    query = torch.randn(heads, q, head_dim, dtype=torch.float64)
    weight = torch.randn(heads * head_dim, dim, dtype=torch.float64)
    r = (xl_relative_embedding(k, dim, dtype=torch.float64) @ weight.T).view(k, heads, head_dim).transpose(0, 1)
    shifted = rel_shift(query @ r.transpose(-1, -2))  # (heads, q, k)
    got = xl_position_logits(query, weight, q, k)
    visible = torch.ones(q, k, dtype=torch.bool).tril(k - q)
    torch.testing.assert_close(got[:, visible], shifted[:, visible], rtol=0, atol=1e-12)


def test_xl_position_logits_bad_input() -> None:
    query, weight = torch.zeros(2, 3, 4), torch.zeros(8, 6)
    with pytest.raises(TypeError, match="query and weight must be torch.Tensors"):
        xl_position_logits(query.tolist(), weight, 3, 3)
    with pytest.raises(ValueError, match=r"query must be \(\.\.\., heads, q, head_dim\) and weight \(heads \* head_dim, dim\), "
                                         r"got shapes \(3, 4\) and \(8, 6\)"):
        xl_position_logits(query[0], weight, 3, 3)
    with pytest.raises(ValueError, match=r"weight must be \(heads \* head_dim, even dim\) = \(8, 2F\), got \(8, 5\)"):
        xl_position_logits(query, torch.zeros(8, 5), 3, 3)
    with pytest.raises(ValueError, match=r"weight must be .*got \(6, 6\)"):
        xl_position_logits(query, torch.zeros(6, 6), 3, 3)
    with pytest.raises(ValueError, match="2 query positions for 3 queries"):
        xl_position_logits(query, weight, torch.arange(2), torch.arange(3))


@pytest.mark.parametrize("call", [
    lambda q, k: alibi_bias(HEADS, q, k),
    lambda q, k: relative_position_indices(q, k, 2),
    lambda q, k: RelativePositionEmbedding(2, 4)(q, k),
    lambda q, k: T5RelativePositionBias(HEADS)(q, k),
])
def test_bad_positions_are_refused(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=r"q_len and k_len must both be lengths \(int\) or both be positions "
                                        r"\(integer tensors\), got int and Tensor"):
        call(3, torch.arange(3))
    with pytest.raises(TypeError, match="got Tensor and int"):
        call(torch.arange(3), 3)
    with pytest.raises(TypeError, match="q_len must have an integer dtype, got torch.float32"):
        call(torch.arange(3.0), torch.arange(3))
    with pytest.raises(ValueError, match=r"q_len must be \(\.\.\., n\) with n >= 1 positions, got shape \(\)"):
        call(torch.tensor(2), torch.arange(3))
    with pytest.raises(ValueError, match=r"k_len must be \(\.\.\., n\) with n >= 1 positions, got shape \(2, 0\)"):
        call(torch.arange(3), torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"query positions \(2, 3\) and key positions \(3, 4\) must have broadcastable "
                                         r"leading \(batch\) dimensions"):
        call(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long))


def test_offset_and_positions_together_are_refused() -> None:
    with pytest.raises(ValueError, match="offset applies to lengths only; add it to the positions, got offset=2"):
        T5RelativePositionBias(HEADS)(torch.arange(3), torch.arange(3), offset=2)
    with pytest.raises(ValueError, match="offset applies to a length only; add it to the positions, got offset=1"):
        sinusoidal_table(torch.arange(3), 8, offset=1)
    with pytest.raises(TypeError, match="positions must have an integer dtype, got torch.float32"):
        sinusoidal_table(torch.arange(3.0), 8)
    x = torch.zeros(1, 3, 8)
    for module in (SinusoidalPositionalEncoding(8), LearnedPositionalEncoding(8, 4)):
        with pytest.raises(ValueError, match="offset applies without positions only; add it to the positions, got offset=1"):
            module(x, offset=1, positions=torch.arange(3)[None])


@pytest.mark.parametrize("make", [lambda: SinusoidalPositionalEncoding(8), lambda: LearnedPositionalEncoding(8, 4)])
def test_bad_token_positions_are_refused(make) -> None:  # type: ignore[no-untyped-def]
    module = make()  # a new one: the test changes batch_first
    x = torch.zeros(2, 3, 8)
    with pytest.raises(TypeError, match="positions must have an integer dtype, got torch.float32"):
        module(x, positions=torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"positions must have shape \(batch, seq\) or \(1, seq\) = \(2, 3\) or \(1, 3\), "
                                         r"got \(3,\)"):
        module(x, positions=torch.arange(3))
    with pytest.raises(ValueError, match="positions must be >= 0, got a minimum of -1"):
        module(x, positions=torch.tensor([[0, -1, 2]]))
    module.batch_first = False
    with pytest.raises(ValueError, match=r"positions must have shape \(seq, batch\) or \(seq, 1\) = \(2, 3\) or \(2, 1\), "
                                         r"got \(1, 3\)"):
        module(x, positions=torch.tensor([[0, 1, 2]]))


def test_learned_table_refuses_a_position_past_max_len() -> None:
    pe = LearnedPositionalEncoding(8, 4)
    x = torch.zeros(1, 3, 8)
    pe(x, positions=torch.tensor([[0, 3, 1]]))  # the last row is fine
    with pytest.raises(ValueError, match=r"position 4 is past the learned table \(max_len=4\); a learned table has no "
                                         "vectors past max_len"):
        pe(x, positions=torch.tensor([[0, 4, 1]]))


def test_positions_keep_their_device_and_lengths_use_the_argument() -> None:
    assert alibi_bias(HEADS, 2, 3, device="meta").device.type == "meta"
    meta = torch.arange(3, device="meta")
    assert relative_position_indices(meta, meta, 2).device.type == "meta"
    assert math.isclose(float(alibi_bias(HEADS, Q_POS, K_POS).abs().max()), 11 * 2 ** -2)


def test_leading_dimensions_broadcast_like_tensors() -> None:
    # Two batch axes each way: the result takes their broadcast shape.
    q = torch.arange(8).view(1, 2, 4)
    k = torch.arange(15).view(3, 1, 5)
    assert alibi_bias(HEADS, q, k).shape == (3, 2, HEADS, 4, 5)
    q, k = torch.arange(6).view(2, 1, 3), torch.arange(20).view(1, 4, 5)
    assert relative_position_indices(q, k, 2).shape == (2, 4, 3, 5)


def test_whole_messages_for_bad_lengths_and_devices() -> None:
    with pytest.raises(ValueError, match=r"^q_len must be a positive integer, got 0$"):
        alibi_bias(HEADS, 0)
    with pytest.raises(ValueError, match=r"^k_len must be a positive integer, got -1$"):
        relative_position_indices(2, -1, 2)
    with pytest.raises(ValueError, match=r"^query positions are on meta, key positions on cpu$"):
        alibi_bias(HEADS, torch.arange(3, device="meta"), torch.arange(3))
