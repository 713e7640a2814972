"""Query and key positions from lengths or tensors: the one rule of every two-sided encoding.

Where a function takes ``q_len`` and ``k_len``, it also takes integer tensors of positions in
their place. Two lengths mean the usual layout: the keys sit at ``0 … k_len - 1`` and the queries
are the last ``q_len`` of them (decoding with a cache). Two tensors are the positions themselves,
``(..., q)`` and ``(..., k)`` with broadcastable leading (batch) dimensions: restarted positions of
a packed batch, positions kept after a cache eviction, anything.
"""

from __future__ import annotations

from typing import Any

import torch

from posenc._checks import check_integer_tensor, check_keys_cover_queries, check_positive_int

__all__ = ["query_key_positions", "key_minus_query"]


def _check_positions(name: str, x: torch.Tensor) -> torch.Tensor:
    check_integer_tensor(name, x)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"{name} must be (..., n) with n >= 1 positions, got shape {tuple(x.shape)}")
    return x


def query_key_positions(
    q_len: Any, k_len: Any, *, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q_pos, k_pos)`` of shapes ``(..., q)`` and ``(..., k)``, from two lengths or two tensors.

    ``k_len=None`` means "the same as ``q_len``" (self-attention over the same tokens). With
    lengths, ``device`` places the result; tensors keep their own device.
    """
    if k_len is None:
        k_len = q_len
    q_is_tensor, k_is_tensor = isinstance(q_len, torch.Tensor), isinstance(k_len, torch.Tensor)
    if q_is_tensor != k_is_tensor:
        raise TypeError(
            "q_len and k_len must both be lengths (int) or both be positions (integer tensors), "
            f"got {type(q_len).__name__} and {type(k_len).__name__}"
        )
    if not q_is_tensor:
        q_len = check_positive_int("q_len", q_len)
        k_len = check_positive_int("k_len", k_len)
        check_keys_cover_queries(q_len, k_len)
        keys = torch.arange(k_len, device=device)
        return keys[k_len - q_len :], keys
    q_pos, k_pos = _check_positions("q_len", q_len), _check_positions("k_len", k_len)
    if q_pos.device != k_pos.device:
        raise ValueError(f"query positions are on {q_pos.device}, key positions on {k_pos.device}")
    try:
        torch.broadcast_shapes(q_pos.shape[:-1], k_pos.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"query positions {tuple(q_pos.shape)} and key positions {tuple(k_pos.shape)} must have "
            "broadcastable leading (batch) dimensions"
        ) from None
    return q_pos.long(), k_pos.long()


def key_minus_query(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """Relative positions ``k_pos[j] - q_pos[i]``, int64 ``(..., q, k)``."""
    # (..., q) -> (..., q, 1) and (..., k) -> (..., 1, k), broadcast to (..., q, k)
    return k_pos[..., None, :] - q_pos[..., :, None]


def check_token_positions(positions: Any, x: torch.Tensor, batch_first: bool, offset: int) -> torch.Tensor:
    """Non-negative integer positions of the tokens of ``x``, broadcastable to its token axes.

    ``(batch or 1, seq)`` for a batch-first ``x``, ``(seq, batch or 1)`` otherwise, so that
    ``table[positions]`` lines up with ``x``. Returns them as int64.
    """
    check_integer_tensor("positions", positions)
    if offset:
        raise ValueError(f"offset applies without positions only; add it to the positions, got offset={offset}")
    batch, seq = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    allowed = [(batch, seq), (1, seq)] if batch_first else [(seq, batch), (seq, 1)]
    if tuple(positions.shape) not in allowed:
        axes = "(batch, seq) or (1, seq)" if batch_first else "(seq, batch) or (seq, 1)"
        raise ValueError(f"positions must have shape {axes} = {' or '.join(map(str, allowed))}, "
                         f"got {tuple(positions.shape)}")
    if positions.numel() and bool((positions < 0).any()):
        raise ValueError(f"positions must be >= 0, got a minimum of {int(positions.min())}")
    return positions.to(device=x.device, dtype=torch.long)
