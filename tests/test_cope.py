"""Tests for posenc.cope (Golovneva et al. 2024)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc.cope import CoPE, cope_logits, cope_positions


def causal_logits(batch: int, heads: int, seq: int, *, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, heads, seq, seq, generator=g, dtype=dtype) * 2
    mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return logits.masked_fill(mask, float("-inf"))


def cope_loop(query: torch.Tensor, logits: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    """The paper's formula, one (b, h, i, j) at a time, in float64."""
    batch, heads, q_len, _ = query.shape
    k_len = logits.shape[-1]
    max_pos = pos_emb.shape[1]
    out = torch.zeros(batch, heads, q_len, k_len, dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            for i in range(q_len):
                for j in range(k_len):
                    p = sum(1.0 / (1.0 + math.exp(-float(logits[b, h, i, t]))) for t in range(j, k_len))
                    p = min(p, max_pos - 1)
                    lo, hi = math.floor(p), math.ceil(p)
                    w = p - lo
                    e_lo = float(query[b, h, i].double() @ pos_emb[:, lo].double())
                    e_hi = float(query[b, h, i].double() @ pos_emb[:, hi].double())
                    out[b, h, i, j] = w * e_hi + (1 - w) * e_lo
    return out


def random_cope(head_dim: int, max_pos: int, seed: int = 1) -> CoPE:
    cope = CoPE(head_dim, max_pos).double()
    with torch.no_grad():
        cope.pos_emb.copy_(torch.randn(head_dim, max_pos, generator=torch.Generator().manual_seed(seed)))
    return cope


@pytest.mark.parametrize("max_pos", [3, 8])
def test_matches_loop_formula(max_pos):
    logits = causal_logits(2, 2, 5)
    query = torch.randn(2, 2, 5, 4, dtype=torch.float64)
    cope = random_cope(4, max_pos)
    torch.testing.assert_close(cope(query, logits), cope_loop(query, logits, cope.pos_emb.detach()), rtol=1e-12, atol=1e-12)


def test_matches_loop_formula_without_mask_and_rectangular():
    logits = torch.randn(1, 3, 4, 6, dtype=torch.float64)
    query = torch.randn(1, 3, 4, 5, dtype=torch.float64)
    cope = random_cope(5, 7)
    torch.testing.assert_close(cope(query, logits), cope_loop(query, logits, cope.pos_emb.detach()), rtol=1e-12, atol=1e-12)


def test_open_gates_give_token_relative_positions():
    # Gates forced to 1 by huge logits: p_ij = i - j + 1 (the query counts itself), the paper's
    # "token-based relative position".
    seq = 6
    logits = causal_logits(1, 1, seq).masked_fill(torch.ones(seq, seq, dtype=torch.bool).tril(), 1e4)
    positions = cope_positions(logits, max_pos=seq + 1)[0, 0]
    i, j = torch.meshgrid(torch.arange(seq), torch.arange(seq), indexing="ij")
    expected = torch.where(j <= i, i - j + 1, 0).double()
    torch.testing.assert_close(positions, expected, rtol=0, atol=0)


def test_open_gates_reduce_to_relative_position_embedding():
    # With integer positions the logit is q_i . e[i - j + 1]: a relative-position key term.
    seq, head_dim = 5, 3
    logits = torch.zeros(1, 1, seq, seq, dtype=torch.float64).masked_fill(
        torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf")
    ) + 1e4
    query = torch.randn(1, 1, seq, head_dim, dtype=torch.float64)
    cope = random_cope(head_dim, seq + 1)
    out = cope(query, logits)[0, 0]
    for i in range(seq):
        for j in range(i + 1):
            torch.testing.assert_close(out[i, j], query[0, 0, i] @ cope.pos_emb[:, i - j + 1])


def test_closed_gates_give_position_zero():
    logits = torch.full((1, 1, 3, 3), -1e4, dtype=torch.float64)
    assert torch.equal(cope_positions(logits, 5), torch.zeros(1, 1, 3, 3, dtype=torch.float64))


def test_clamped_to_max_pos():
    logits = torch.full((1, 1, 2, 10), 1e4, dtype=torch.float64)
    positions = cope_positions(logits, max_pos=4)
    assert positions.max() == 3
    assert torch.equal(positions[0, 0, 0, -1], torch.tensor(1.0, dtype=torch.float64))


def test_causal_masking():
    # Masked keys have gate 0: they add nothing to the count of any earlier key, and the
    # output for query i does not depend on logits of masked keys j > i.
    seq = 5
    logits = causal_logits(1, 2, seq)
    query = torch.randn(1, 2, seq, 4, dtype=torch.float64)
    cope = random_cope(4, seq + 1)
    positions = cope_positions(logits, seq + 1)
    assert positions[0, :, 2, 3:].abs().max() == 0
    changed = logits.clone()
    changed[..., 2:, :] = causal_logits(1, 2, seq, seed=5)[..., 2:, :]  # only later queries
    before, after = cope(query, logits), cope(query, changed)
    torch.testing.assert_close(before[..., :2, :], after[..., :2, :], rtol=0, atol=0)
    assert (before[..., 2:, :2] - after[..., 2:, :2]).abs().max() > 1e-3
    # Adding the CoPE logits keeps -inf where masked.
    assert torch.isneginf((logits + before)[0, :, 1, 2:]).all()


def test_gradients_reach_logits_query_and_table():
    logits = causal_logits(1, 1, 4).requires_grad_()
    query = torch.randn(1, 1, 4, 3, dtype=torch.float64, requires_grad=True)
    cope = random_cope(3, 6)
    cope(query, logits).pow(2).sum().backward()
    assert cope.pos_emb.grad.abs().sum() > 0
    assert query.grad.abs().sum() > 0
    assert logits.grad[0, 0].tril().abs().sum() > 0  # positions are differentiable through w
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dtypes(dtype):
    logits = causal_logits(1, 2, 6)
    query = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    cope = random_cope(4, 7)
    expected = cope(query, logits)
    cope_low = cope.to(dtype)
    out = cope_low(query.to(dtype), logits.to(dtype))
    assert out.dtype == dtype
    tol = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 1.5e-1}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol * 8)


def test_half_logits_count_in_float32():
    # 3000 open gates: a float16 running sum would stall at 2048.
    logits = torch.full((1, 1, 1, 3000), 20.0, dtype=torch.float16)
    positions = cope_positions(logits, max_pos=4000)
    assert positions.dtype == torch.float32
    assert positions[0, 0, 0, 0] == 3000


def test_state_dict_and_repr():
    cope = random_cope(4, 9)
    other = CoPE(4, 9).double()
    other.load_state_dict(cope.state_dict())
    assert torch.equal(other.pos_emb, cope.pos_emb)
    assert list(cope.state_dict()) == ["pos_emb"]
    assert tuple(CoPE(4, 9).pos_emb.shape) == (4, 9)
    assert "head_dim=4, max_pos=9" in repr(cope)


def test_torch_compile_fullgraph():
    cope = random_cope(4, 7)
    logits = causal_logits(2, 2, 6)
    query = torch.randn(2, 2, 6, 4, dtype=torch.float64)
    compiled = torch.compile(cope, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(query, logits), cope(query, logits))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim": 0, "max_pos": 4}, ValueError, "head_dim"),
        ({"head_dim": 4, "max_pos": 0}, ValueError, "max_pos"),
        ({"head_dim": 2.5, "max_pos": 4}, TypeError, "head_dim"),
        ({"head_dim": 4, "max_pos": True}, TypeError, "max_pos"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        CoPE(**kwargs)


def test_bad_forward_inputs():
    cope = CoPE(4, 6)
    q = torch.randn(1, 2, 3, 4)
    logits = torch.randn(1, 2, 3, 3)
    with pytest.raises(ValueError, match="query"):
        cope(q[0], logits)  # 3-D query
    with pytest.raises(ValueError, match="attn_logits"):
        cope(q, logits[0])
    with pytest.raises(ValueError, match=r"query.shape\[-1\] must equal head_dim=4"):
        cope(torch.randn(1, 2, 3, 5), logits)
    with pytest.raises(ValueError, match="query and attn_logits"):
        cope(q, torch.randn(1, 2, 4, 3))
    with pytest.raises(TypeError, match="query"):
        cope(q.long(), logits)
    with pytest.raises(TypeError, match="attn_logits"):
        cope(q, logits > 0)
    with pytest.raises(ValueError, match="max_pos"):
        cope_positions(logits, 0)
    with pytest.raises(ValueError, match="pos_emb"):
        cope_logits(q, logits, torch.zeros(4))
