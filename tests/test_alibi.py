"""Tests for posenc.alibi (Press, Smith and Lewis, 2022)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc.alibi import alibi_bias, alibi_slopes

FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def slopes_rule(n: int) -> list[float]:
    """The paper's rule written out with exact exponents: 2^(-8h/n) for a power of two n;
    otherwise the c = 2^floor(log2 n) slopes, then 2^(-8(2h-1)/(2c)) for h = 1 .. n - c."""
    c = 2 ** (n.bit_length() - 1)
    slopes = [2.0 ** (-8 * h / c) for h in range(1, c + 1)]
    slopes += [2.0 ** (-8 * (2 * h - 1) / (2 * c)) for h in range(1, n - c + 1)]
    return slopes


@pytest.mark.parametrize("num_heads", list(range(1, 33)) + [48, 64, 96, 100])
def test_slopes_match_rule(num_heads):
    out = alibi_slopes(num_heads, dtype=torch.float64)
    assert out.shape == (num_heads,)
    torch.testing.assert_close(out, torch.tensor(slopes_rule(num_heads), dtype=torch.float64), rtol=1e-15, atol=0)


def test_slopes_known_values():
    assert alibi_slopes(8, dtype=torch.float64).tolist() == [2.0**-h for h in range(1, 9)]
    assert alibi_slopes(1, dtype=torch.float64).tolist() == [2.0**-8]
    twelve = alibi_slopes(12, dtype=torch.float64)
    assert twelve[:8].tolist() == [2.0**-h for h in range(1, 9)]
    torch.testing.assert_close(twelve[8:], torch.tensor([2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5], dtype=torch.float64))


@settings(max_examples=50, deadline=None)
@given(num_heads=st.integers(1, 512))
def test_slopes_properties(num_heads):
    out = alibi_slopes(num_heads, dtype=torch.float64)
    assert bool((out > 0).all()) and bool((out < 1).all())
    assert len(set(out.tolist())) == num_heads  # every head gets its own slope
    c = 2 ** (num_heads.bit_length() - 1)
    # The first c form a geometric sequence with ratio equal to the first slope.
    if c > 1:
        torch.testing.assert_close(out[1:c] / out[: c - 1], out[:1].expand(c - 1), rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_slopes_dtype_rounded_once(dtype):
    out = alibi_slopes(24, dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out, round_once(alibi_slopes(24, dtype=torch.float64), dtype))


def test_slopes_default_dtype_and_device():
    out = alibi_slopes(4, device="cpu")
    assert out.dtype == torch.get_default_dtype() and out.device.type == "cpu"


def bias_loop(num_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    slopes = slopes_rule(num_heads)
    out = torch.empty(num_heads, q_len, k_len, dtype=torch.float64)
    for h in range(num_heads):
        for i in range(q_len):
            for j in range(k_len):
                out[h, i, j] = -slopes[h] * abs(k_len - q_len + i - j)
    return out


@pytest.mark.parametrize(("num_heads", "q_len", "k_len"), [(1, 1, None), (4, 5, None), (6, 3, 7), (12, 1, 9), (3, 6, 6)])
def test_bias_matches_loop(num_heads, q_len, k_len):
    out = alibi_bias(num_heads, q_len, k_len, dtype=torch.float64)
    expected = bias_loop(num_heads, q_len, q_len if k_len is None else k_len)
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=1e-15, atol=0)


def test_bias_diagonal_is_positive_zero():
    out = alibi_bias(2, 4)
    diagonal = out.diagonal(dim1=1, dim2=2)
    assert bool((diagonal == 0).all()) and not bool(torch.signbit(diagonal).any())


@settings(max_examples=50, deadline=None)
@given(num_heads=st.integers(1, 16), q_len=st.integers(1, 10), extra=st.integers(0, 10))
def test_bias_properties(num_heads, q_len, extra):
    k_len = q_len + extra
    out = alibi_bias(num_heads, q_len, k_len, dtype=torch.float64)
    assert out.shape == (num_heads, q_len, k_len)
    assert bool((out <= 0).all())
    # Toeplitz (depends on i - j only) ...
    assert torch.equal(out[:, 1:, 1:], out[:, :-1, :-1])
    # ... and the rows are the last q_len rows of the square bias (cache decoding).
    assert torch.equal(out, alibi_bias(num_heads, k_len, dtype=torch.float64)[:, extra:, :])
    # Each query's own key gets 0 and the bias drops by the slope per step back.
    slopes = alibi_slopes(num_heads, dtype=torch.float64)
    assert bool((out[:, torch.arange(q_len), torch.arange(q_len) + extra] == 0).all())
    if extra:
        torch.testing.assert_close(out[:, -1, -2], -slopes, rtol=1e-15, atol=0)


def test_bias_equals_per_key_form_under_softmax_with_causal_mask():
    # alibi_bias is -slope * (i - j) below the diagonal; the per-key form slope * j (BLOOM's)
    # differs from it by slope * i, a constant per row, which the softmax ignores once the
    # future keys are masked. A wrong sign, slope or offset in alibi_bias breaks the equality.
    num_heads, seq = 4, 6
    scores = torch.randn(num_heads, seq, seq, dtype=torch.float64)
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    bias = alibi_bias(num_heads, seq, dtype=torch.float64)
    per_key = alibi_slopes(num_heads, dtype=torch.float64)[:, None, None] * torch.arange(seq, dtype=torch.float64)
    a = torch.softmax((scores + bias).masked_fill(mask, -math.inf), dim=-1)
    b = torch.softmax((scores + per_key).masked_fill(mask, -math.inf), dim=-1)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_bias_dtype_rounded_once(dtype):
    out = alibi_bias(8, 50, 70, dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out, round_once(alibi_bias(8, 50, 70, dtype=torch.float64), dtype))


def test_bias_default_dtype_device_and_compile():
    out = alibi_bias(3, 4, device="cpu")
    assert out.dtype == torch.get_default_dtype() and out.device.type == "cpu"
    compiled = torch.compile(alibi_bias, fullgraph=True, backend="eager")
    assert torch.equal(compiled(3, 4, 6), alibi_bias(3, 4, 6))


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: alibi_slopes(0), ValueError, "num_heads"),
        (lambda: alibi_slopes(8.0), TypeError, "num_heads"),
        (lambda: alibi_slopes(True), TypeError, "num_heads"),
        (lambda: alibi_slopes(8, dtype=torch.int32), TypeError, "dtype"),
        (lambda: alibi_bias(0, 4), ValueError, "num_heads"),
        (lambda: alibi_bias(2, 0), ValueError, "q_len"),
        (lambda: alibi_bias(2, 2.5), TypeError, "q_len"),
        (lambda: alibi_bias(2, 4, 0), ValueError, "k_len"),
        (lambda: alibi_bias(2, 4, 3), ValueError, "k_len"),
        (lambda: alibi_bias(2, 4, 4.0), TypeError, "k_len"),
        (lambda: alibi_bias(2, 4, dtype=torch.bool), TypeError, "dtype"),
    ],
)
def test_bad_input(call, error, name):
    with pytest.raises(error, match=name):
        call()
