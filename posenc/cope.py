"""Contextual position encoding, CoPE (Golovneva et al., 2024)."""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import check_floating_tensor, check_ndim, check_positive_int

__all__ = ["cope_positions", "cope_logits", "CoPE"]


def _check_logits(attn_logits: torch.Tensor) -> None:
    check_floating_tensor("attn_logits", attn_logits)
    check_ndim("attn_logits", attn_logits, 4, "(batch, heads, q_len, k_len)")


def cope_positions(attn_logits: torch.Tensor, max_pos: int) -> torch.Tensor:
    r"""Contextual positions: how many gated keys lie between each key and the query.

    .. math::

        g_{ij} = \sigma(z_{ij}), \qquad
        p_{ij} = \min\Bigl(\sum_{t=j}^{n-1} g_{it},\; P - 1\Bigr)

    where :math:`z` are the attention logits, :math:`n` is ``k_len`` and :math:`P` is ``max_pos``.
    With a causal mask (:math:`z_{it} = -\infty` for :math:`t > i`, so :math:`g_{it} = 0`) the sum
    runs over :math:`t = j \dots i`, the paper's definition; if every gate is 1 then
    :math:`p_{ij} = i - j + 1`, token-count relative position. Without a mask the sum runs to the
    last key.

    Parameters
    ----------
    attn_logits : torch.Tensor
        Scaled attention logits ``(batch, heads, q_len, k_len)``, ``-inf`` where masked.
    max_pos : int
        Number of integer positions; positions are clamped to ``max_pos - 1``.

    Returns
    -------
    torch.Tensor
        Fractional positions ``(batch, heads, q_len, k_len)``, differentiable with respect to
        ``attn_logits``; float32 when ``attn_logits`` is float16 or bfloat16 (a running count
        is not held in half precision), otherwise ``attn_logits.dtype``.

    References
    ----------
    Golovneva et al., "Contextual Position Encoding: Learning to Count What's Important",
    arXiv:2405.18719, 2024, section 3.
    """
    _check_logits(attn_logits)
    max_pos = check_positive_int("max_pos", max_pos)
    gates = torch.sigmoid(attn_logits.to(torch.promote_types(attn_logits.dtype, torch.float32)))
    # A reversed cumulative sum gives, for every key j, the sum over keys j .. end.
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1)
    return positions.clamp(max=max_pos - 1)


def cope_logits(query: torch.Tensor, attn_logits: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    r"""Position logits of CoPE, to be added to ``attn_logits``.

    A position :math:`p_{ij}` from :func:`cope_positions` is fractional, so its logit interpolates
    between the logits of the neighbouring integer positions, :math:`q_i^\top e[\cdot]`:

    .. math::

        \lfloor p \rfloor = \operatorname{floor}(p_{ij}), \quad w = p_{ij} - \lfloor p \rfloor,
        \qquad
        z^{\text{pos}}_{ij} = w \, q_i^\top e[\lceil p \rceil] + (1 - w) \, q_i^\top e[\lfloor p \rfloor].

    Parameters
    ----------
    query : torch.Tensor
        Queries ``(batch, heads, q_len, head_dim)``.
    attn_logits : torch.Tensor
        Scaled attention logits ``(batch, heads, q_len, k_len)``, ``-inf`` where masked.
    pos_emb : torch.Tensor
        Integer-position embeddings ``(head_dim, max_pos)``, one column per position.

    Returns
    -------
    torch.Tensor
        ``(batch, heads, q_len, k_len)`` in the promoted dtype of ``query`` and ``attn_logits``.

    References
    ----------
    Golovneva et al., "Contextual Position Encoding: Learning to Count What's Important",
    arXiv:2405.18719, 2024, section 3 and its reference code.
    """
    check_floating_tensor("query", query)
    check_ndim("query", query, 4, "(batch, heads, q_len, head_dim)")
    _check_logits(attn_logits)
    check_floating_tensor("pos_emb", pos_emb)
    check_ndim("pos_emb", pos_emb, 2, "(head_dim, max_pos)")
    if query.shape[:3] != attn_logits.shape[:3]:
        raise ValueError(
            f"query and attn_logits must agree on (batch, heads, q_len), got query shape "
            f"{tuple(query.shape)} and attn_logits shape {tuple(attn_logits.shape)}"
        )
    if query.shape[-1] != pos_emb.shape[0]:
        raise ValueError(
            f"query.shape[-1] must equal head_dim={pos_emb.shape[0]}, got shape {tuple(query.shape)}"
        )
    positions = cope_positions(attn_logits, pos_emb.shape[1])
    # Integer-position logits once per query, then gathered at floor and ceil of each p_ij.
    logits_int = torch.matmul(query, pos_emb.to(query.dtype))  # (batch, heads, q_len, max_pos)
    floor = positions.floor()
    w = positions - floor
    logits_floor = logits_int.gather(-1, floor.long())  # (batch, heads, q_len, k_len)
    logits_ceil = logits_int.gather(-1, positions.ceil().long())
    out = logits_ceil * w + logits_floor * (1 - w)
    return out.to(torch.promote_types(query.dtype, attn_logits.dtype))


class CoPE(nn.Module):
    r"""Contextual position encoding: learned embeddings of gated, counted positions.

    ``forward(query, attn_logits)`` returns the logits of :func:`cope_logits`; add them to the
    attention logits before the softmax::

        logits = q @ k.transpose(-1, -2) / head_dim**0.5
        logits = logits.masked_fill(~mask, float("-inf"))
        logits = logits + cope(q, logits)

    One table ``pos_emb`` of shape ``(head_dim, max_pos)`` is shared by all heads of a layer and
    starts at zero, as in the paper's code, so the module contributes nothing until trained.

    Parameters
    ----------
    head_dim : int
        Width of one attention head.
    max_pos : int
        Number of learned integer positions; counts above ``max_pos - 1`` are clamped. With every
        gate open a causal query counts up to ``seq_len`` (itself included), so
        ``max_pos = seq_len + 1`` never clamps.

    References
    ----------
    Golovneva et al., "Contextual Position Encoding: Learning to Count What's Important",
    arXiv:2405.18719, 2024.
    """

    def __init__(self, head_dim: int, max_pos: int) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.max_pos = check_positive_int("max_pos", max_pos)
        self.pos_emb = nn.Parameter(torch.empty(head_dim, max_pos))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set the position table to zero, as the paper's code initialises it."""
        nn.init.zeros_(self.pos_emb)

    def forward(self, query: torch.Tensor, attn_logits: torch.Tensor) -> torch.Tensor:
        """Position logits to add to ``attn_logits``.

        Parameters
        ----------
        query : torch.Tensor
            Queries ``(batch, heads, q_len, head_dim)``.
        attn_logits : torch.Tensor
            Scaled attention logits ``(batch, heads, q_len, k_len)``, ``-inf`` where masked.

        Returns
        -------
        torch.Tensor
            ``(batch, heads, q_len, k_len)``.
        """
        return cope_logits(query, attn_logits, self.pos_emb)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_pos={self.max_pos}"
