"""posenc.alibi against the ALiBi paper's code, BLOOM, MPT and x-transformers."""

from __future__ import annotations

import math

import pytest
import torch

from posenc.alibi import alibi_bias, alibi_slopes

HEADS = list(range(1, 65))


def paper_get_slopes(n):
    """Transcription of ofirpress/attention_with_linear_biases fairseq/models/transformer.py,
    ``get_slopes`` (inside ``TransformerDecoder.__init__``)."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + paper_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]


def mpt_gen_slopes(n_heads, alibi_bias_max=8, device=None):
    """Transcription of mosaicml/llm-foundry llmfoundry/models/layers/attention.py, ``gen_slopes``."""
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32, device=device)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.view(1, n_heads, 1, 1)


def mpt_build_alibi_bias(n_heads, seq_len, full=False, alibi_bias_max=8, device=None, dtype=None):
    """Transcription of llm-foundry llmfoundry/models/layers/attention.py, ``build_alibi_bias``."""
    alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32, device=device).view(1, 1, 1, seq_len)
    if full:
        alibi_bias = alibi_bias - torch.arange(1 - seq_len, 1, dtype=torch.int32, device=device).view(1, 1, seq_len, 1)
        alibi_bias = alibi_bias.abs().mul(-1)
    slopes = mpt_gen_slopes(n_heads, alibi_bias_max, device=device)
    alibi_bias = alibi_bias * slopes
    return alibi_bias.to(dtype=dtype)


# --------------------------------------------------------------------------- slopes, 1..64 heads


@pytest.mark.parametrize("num_heads", HEADS)
def test_slopes_equal_paper(num_heads):
    expected = torch.tensor(paper_get_slopes(num_heads), dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(num_heads, dtype=torch.float64), expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("num_heads", HEADS)
def test_slopes_equal_mpt_llm_foundry(num_heads):
    expected = mpt_gen_slopes(num_heads).flatten()
    torch.testing.assert_close(alibi_slopes(num_heads, dtype=torch.float32), expected)


def test_slopes_equal_bloom():
    pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    for num_heads in HEADS:
        torch.testing.assert_close(alibi_slopes(num_heads, dtype=torch.float32), _get_alibi_slopes(num_heads, torch.device("cpu")))


def test_slopes_equal_hf_mpt():
    pytest.importorskip("transformers")
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    for num_heads in HEADS:
        # Two keys: column 0 holds -slope (distance 1), column 1 holds 0.
        alibi = build_mpt_alibi_tensor(num_heads, 2)
        torch.testing.assert_close(-alibi[:, 0, 0], alibi_slopes(num_heads, dtype=torch.float32))


def test_slopes_equal_x_transformers():
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import AlibiPositionalBias

    for num_heads in HEADS:
        expected = torch.tensor(AlibiPositionalBias._get_slopes(num_heads), dtype=torch.float64)
        torch.testing.assert_close(alibi_slopes(num_heads, dtype=torch.float64), expected, rtol=1e-14, atol=0)


# --------------------------------------------------------------------------- bias matrices


def test_bias_equals_x_transformers():
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import AlibiPositionalBias

    for num_heads, q_len, k_len in [(8, 6, 6), (12, 3, 10), (5, 1, 7), (16, 9, 9)]:
        module = AlibiPositionalBias(heads=num_heads)
        # x-transformers takes (i, j) = (queries, keys) and, like us, ends the queries at the last key.
        torch.testing.assert_close(alibi_bias(num_heads, q_len, k_len, dtype=torch.float32), module(q_len, k_len))


def test_x_transformers_pads_unalibied_heads_with_zeros():
    pytest.importorskip("x_transformers")
    from x_transformers.x_transformers import AlibiPositionalBias

    # total_heads > heads: the extra heads get no bias; the alibied ones keep their own slopes.
    out = AlibiPositionalBias(heads=4, total_heads=6)(5, 5)
    assert out.shape == (6, 5, 5)
    torch.testing.assert_close(out[:4], alibi_bias(4, 5, dtype=torch.float32))
    assert bool((out[4:] == 0).all())


@pytest.mark.parametrize(("num_heads", "seq_len"), [(8, 7), (12, 5), (3, 9), (1, 4)])
def test_bias_equals_mpt_llm_foundry_full(num_heads, seq_len):
    expected = mpt_build_alibi_bias(num_heads, seq_len, full=True, dtype=torch.float32)[0]
    torch.testing.assert_close(alibi_bias(num_heads, seq_len, dtype=torch.float32), expected)


@pytest.mark.parametrize(("num_heads", "seq_len"), [(8, 7), (12, 5)])
def test_last_row_equals_mpt_llm_foundry_causal(num_heads, seq_len):
    # MPT's causal bias is one row, slope * (j - (L - 1)): the row of the last query.
    expected = mpt_build_alibi_bias(num_heads, seq_len, full=False, dtype=torch.float32)[0]
    torch.testing.assert_close(alibi_bias(num_heads, 1, seq_len, dtype=torch.float32), expected)


def test_last_row_equals_hf_mpt():
    pytest.importorskip("transformers")
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    for num_heads, seq_len in [(8, 7), (12, 5), (32, 20)]:
        torch.testing.assert_close(alibi_bias(num_heads, 1, seq_len, dtype=torch.float32), build_mpt_alibi_tensor(num_heads, seq_len))


@pytest.mark.parametrize(("num_heads", "seq_len"), [(8, 10), (12, 7), (5, 16)])
def test_bloom_differs_by_a_row_constant_equal_under_causal_softmax(num_heads, seq_len):
    pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    bloom = build_alibi_tensor(torch.ones(1, seq_len), num_heads, torch.float64)  # (heads, 1, L): slope * j
    ours = alibi_bias(num_heads, seq_len, dtype=torch.float64)
    slopes = alibi_slopes(num_heads, dtype=torch.float32).double()  # BLOOM's slopes are float32
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    # On the causal part: ours - BLOOM = -slope * i, a constant per row.
    row_constant = -slopes[:, None, None] * torch.arange(seq_len, dtype=torch.float64)[None, :, None]
    diff = (ours - bloom).masked_select(causal)
    torch.testing.assert_close(diff, row_constant.expand(-1, -1, seq_len).masked_select(causal), rtol=1e-6, atol=1e-6)

    scores = torch.randn(num_heads, seq_len, seq_len, dtype=torch.float64)
    a = torch.softmax((scores + ours).masked_fill(~causal, -math.inf), dim=-1)
    b = torch.softmax((scores + bloom).masked_fill(~causal, -math.inf), dim=-1)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

    # Without the mask the two are different attention patterns: BLOOM's form needs it.
    assert not torch.allclose(torch.softmax(scores + ours, dim=-1), torch.softmax(scores + bloom, dim=-1), atol=1e-3)

