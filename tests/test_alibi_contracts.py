"""Contracts of posenc.alibi that a reviewer's bug would break."""

from __future__ import annotations

import pytest
import torch

from posenc.alibi import alibi_bias, alibi_slopes


@pytest.mark.parametrize("num_heads", [0, -2])
def test_slopes_refuse_non_positive_head_counts_by_name(num_heads: int) -> None:
    with pytest.raises(ValueError, match=f"^num_heads must be a positive integer, got {num_heads}$"):
        alibi_slopes(num_heads)


def test_bias_refuses_non_positive_head_counts_by_name() -> None:
    with pytest.raises(ValueError, match="^num_heads must be a positive integer, got 0$"):
        alibi_bias(0, 4)


def test_slopes_refuse_integer_dtype_by_name() -> None:
    with pytest.raises(TypeError, match="^dtype must be a floating-point dtype, got torch.int64$"):
        alibi_slopes(4, dtype=torch.int64)


def test_bias_refuses_integer_dtype_by_name() -> None:
    with pytest.raises(TypeError, match="^dtype must be a floating-point dtype, got torch.int32$"):
        alibi_bias(4, 3, dtype=torch.int32)


@pytest.mark.parametrize("num_heads", [4, 6])
def test_slopes_are_made_on_the_requested_device(num_heads: int) -> None:
    slopes = alibi_slopes(num_heads, device="meta")
    assert slopes.device.type == "meta"
    assert slopes.shape == (num_heads,)


def test_bias_of_meta_positions_stays_on_meta_for_any_head_count() -> None:
    positions = torch.arange(5, device="meta")
    bias = alibi_bias(6, positions, positions, dtype=torch.float32)
    assert bias.device.type == "meta"
    assert bias.shape == (6, 5, 5)
    assert bias.dtype == torch.float32


def test_bias_of_lengths_is_made_on_the_requested_device() -> None:
    bias = alibi_bias(3, 2, 4, device="meta")
    assert bias.device.type == "meta"
    assert bias.shape == (3, 2, 4)
