"""Contracts of posenc.cope that a reviewer's bug would break."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.cope import CoPE, cope_logits, cope_positions


def _query() -> torch.Tensor:
    return torch.randn(1, 2, 3, 4, dtype=torch.float64)


def _logits() -> torch.Tensor:
    return torch.randn(1, 2, 3, 3, dtype=torch.float64)


def test_positions_refuse_integer_logits_by_name() -> None:
    with pytest.raises(TypeError, match="^attn_logits must have a floating-point dtype, got torch.int64$"):
        cope_positions(torch.zeros(1, 1, 2, 2, dtype=torch.long), 4)


def test_positions_refuse_three_dimensional_logits_by_name() -> None:
    message = "attn_logits must be 4-D (batch, heads, q_len, k_len), got a 3-D tensor of shape (1, 2, 2)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cope_positions(torch.zeros(1, 2, 2), 4)


@pytest.mark.parametrize("max_pos", [0, -1])
def test_positions_refuse_non_positive_max_pos_by_name(max_pos: int) -> None:
    with pytest.raises(ValueError, match=f"^max_pos must be a positive integer, got {max_pos}$"):
        cope_positions(_logits(), max_pos)


def test_logits_refuse_integer_query_by_name() -> None:
    with pytest.raises(TypeError, match="^query must have a floating-point dtype, got torch.int64$"):
        cope_logits(torch.zeros(1, 2, 3, 4, dtype=torch.long), _logits(), torch.zeros(4, 5))


def test_logits_refuse_three_dimensional_query_by_name() -> None:
    message = "query must be 4-D (batch, heads, q_len, head_dim), got a 3-D tensor of shape (2, 3, 4)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cope_logits(torch.zeros(2, 3, 4), _logits(), torch.zeros(4, 5))


def test_logits_refuse_integer_logits_by_name() -> None:
    with pytest.raises(TypeError, match="^attn_logits must have a floating-point dtype, got torch.bool$"):
        cope_logits(_query(), _logits() > 0, torch.zeros(4, 5))


def test_logits_refuse_integer_table_by_name() -> None:
    with pytest.raises(TypeError, match="^pos_emb must have a floating-point dtype, got torch.int64$"):
        cope_logits(_query(), _logits(), torch.zeros(4, 5, dtype=torch.long))


def test_logits_refuse_one_dimensional_table_by_name() -> None:
    message = "pos_emb must be 2-D (head_dim, max_pos), got a 1-D tensor of shape (4,)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cope_logits(_query(), _logits(), torch.zeros(4))


def test_logits_refuse_mismatched_query_rows_with_both_shapes() -> None:
    message = ("query and attn_logits must agree on (batch, heads, q_len), got query shape (1, 2, 3, 4) "
               "and attn_logits shape (1, 2, 4, 3)")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cope_logits(_query(), torch.zeros(1, 2, 4, 3, dtype=torch.float64), torch.zeros(4, 5))


def test_logits_refuse_query_width_other_than_table_height() -> None:
    message = "query.shape[-1] must equal head_dim=5, got shape (1, 2, 3, 4)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cope_logits(_query(), _logits(), torch.zeros(5, 6))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"head_dim": 0, "max_pos": 4}, "head_dim must be a positive integer, got 0"),
    ({"head_dim": 4, "max_pos": 0}, "max_pos must be a positive integer, got 0"),
])
def test_module_refuses_non_positive_sizes_by_name(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        CoPE(**kwargs)


def test_module_keeps_its_sizes_and_starts_at_zero() -> None:
    cope = CoPE(3, 7)
    assert (cope.head_dim, cope.max_pos) == (3, 7)
    assert cope.pos_emb.shape == (3, 7)
    assert torch.equal(cope.pos_emb.detach(), torch.zeros(3, 7))
    assert cope.extra_repr() == "head_dim=3, max_pos=7"


def test_logits_accept_a_table_in_another_float_dtype() -> None:
    query, logits = _query(), _logits()
    table = torch.randn(4, 5, dtype=torch.float32)
    out = cope_logits(query, logits, table)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, cope_logits(query, logits, table.double()))
