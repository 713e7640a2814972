"""Packed sequences: positions that restart, the inverse, the document mask, and bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from posenc import (
    apply_rope,
    cu_seqlens_from_position_ids,
    document_ids,
    document_mask,
    packed_position_ids,
    rope_cos_sin,
)

CU = torch.tensor([0, 3, 4, 8], dtype=torch.int32)  # documents of 3, 1 and 4 tokens


def test_positions_restart_in_each_document() -> None:
    assert packed_position_ids(CU).tolist() == [0, 1, 2, 0, 0, 1, 2, 3]
    assert document_ids(CU).tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    assert packed_position_ids(CU).dtype == torch.int64
    # A document of length 0 has no token and changes nothing.
    assert packed_position_ids(torch.tensor([0, 3, 3, 4])).tolist() == [0, 1, 2, 0]


def test_inverse_round_trips() -> None:
    positions = packed_position_ids(CU)
    cu = cu_seqlens_from_position_ids(positions)
    assert cu.dtype == torch.int32 and cu.tolist() == CU.tolist()
    assert cu_seqlens_from_position_ids(positions[None]).tolist() == CU.tolist()  # a collator's (1, total)
    single = torch.arange(5)
    assert cu_seqlens_from_position_ids(single).tolist() == [0, 5]


def test_document_mask() -> None:
    causal = document_mask(CU)
    both = document_mask(CU, causal=False)
    assert causal.dtype == torch.bool and causal.shape == (8, 8)
    docs = document_ids(CU)
    for i in range(8):
        for j in range(8):
            same = bool(docs[i] == docs[j])
            assert both[i, j] == same
            assert causal[i, j] == (same and j <= i)


def test_packed_attention_equals_each_document_alone() -> None:
    # RoPE attention over a pack, with restarting positions and the document mask, gives each
    # document the output it gets alone; counting positions across documents or dropping the mask
    # does not.
    torch.manual_seed(0)
    heads, dim, total = 2, 16, int(CU[-1])
    q, k, v = (torch.randn(heads, total, dim, dtype=torch.float64) for _ in range(3))

    def attend(positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        cos, sin = rope_cos_sin(positions, dim, dtype=torch.float64)
        return F.scaled_dot_product_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, attn_mask=mask)

    packed = attend(packed_position_ids(CU), document_mask(CU))
    alone = []
    for start, end in zip(CU[:-1].tolist(), CU[1:].tolist()):
        cos, sin = rope_cos_sin(end - start, dim, dtype=torch.float64)
        part = slice(start, end)
        alone.append(F.scaled_dot_product_attention(apply_rope(q[:, part], cos, sin), apply_rope(k[:, part], cos, sin),
                                                    v[:, part], is_causal=True))
    torch.testing.assert_close(packed, torch.cat(alone, dim=1), rtol=1e-12, atol=1e-12)
    counting = attend(torch.arange(total), document_mask(CU))
    seeing = attend(packed_position_ids(CU), torch.ones(total, total, dtype=torch.bool).tril())
    # RoPE is relative: positions that keep counting change nothing within a document ...
    torch.testing.assert_close(counting, packed, rtol=1e-12, atol=1e-12)
    # ... but documents that see each other do.
    assert not torch.allclose(seeing[:, 3:], packed[:, 3:])


@pytest.mark.parametrize(
    ("cu_seqlens", "error", "message"),
    [
        ([0.0, 3.0], TypeError, r"^cu_seqlens must have an integer dtype, got torch.float32$"),
        ([[0, 3]], ValueError, r"^cu_seqlens must be 1-D \(n_docs \+ 1,\), got a 2-D tensor of shape \(1, 2\)$"),
        ([0], ValueError, r"^cu_seqlens needs at least 2 entries \(0 and the pack's length\), got \[0\]$"),
        ([1, 3], ValueError, r"^cu_seqlens must start at 0, got 1$"),
        ([0, 3, 2], ValueError, r"^cu_seqlens must not decrease, got cu_seqlens\[1\] = 3 > cu_seqlens\[2\] = 2$"),
        # An empty document before the decrease is allowed; the message names the decrease.
        ([0, 3, 3, 2], ValueError, r"got cu_seqlens\[2\] = 3 > cu_seqlens\[3\] = 2$"),
    ],
    ids=["float", "2d", "short", "start", "decreasing", "empty-then-decreasing"],
)
def test_bad_cu_seqlens(cu_seqlens: list, error: type[Exception], message: str) -> None:
    tensor = torch.tensor(cu_seqlens)
    for function in (packed_position_ids, document_ids, document_mask):
        with pytest.raises(error, match=message):
            function(tensor)


@pytest.mark.parametrize(
    ("position_ids", "error", "message"),
    [
        (torch.tensor([0.0, 1.0]), TypeError, r"^position_ids must have an integer dtype, got torch.float32$"),
        (torch.zeros(2, 3, dtype=torch.long), ValueError,
         r"^position_ids must be 1-D \(total,\) or \(1, total\), got a 2-D tensor of shape \(2, 3\)$"),
        (torch.tensor([], dtype=torch.long), ValueError, r"^position_ids is empty: a pack needs at least one token$"),
        (torch.tensor([1, 2, 0]), ValueError, r"^position_ids must start at 0 \(a document's first token\), got 1$"),
        (torch.tensor([0, 1, 2, 3, 5]), ValueError, r"position_ids\[4\] = 5 follows 3"),
        (torch.tensor([0, 1, 2, 2]), ValueError, r"position_ids\[3\] = 2 follows 2"),
    ],
    ids=["float", "batch", "empty", "start", "gap", "repeat"],
)
def test_bad_position_ids(position_ids: torch.Tensor, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        cu_seqlens_from_position_ids(position_ids)


def test_causal_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="^causal must be a bool"):
        document_mask(CU, causal="yes")  # type: ignore[arg-type]
