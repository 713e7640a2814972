"""ALiBi: attention with linear biases (Press, Smith and Lewis, 2022)."""

from __future__ import annotations

import torch

from posenc._dtypes import round_once
from posenc._checks import check_float_dtype, check_positive_int
from posenc._positions import key_minus_query, query_key_positions

__all__ = ["alibi_slopes", "alibi_bias"]


def _slopes_float64(num_heads: int, device: torch.device | str | None) -> torch.Tensor:
    closest = 1 << (num_heads.bit_length() - 1)  # largest power of two <= num_heads
    exponents = torch.arange(1, closest + 1, dtype=torch.float64, device=device) * (-8.0 / closest)
    extra = num_heads - closest
    if extra:
        # Every other slope of the 2 * closest case: the odd multiples of -8 / (2 * closest).
        odd = torch.arange(1, 2 * extra, 2, dtype=torch.float64, device=device) * (-4.0 / closest)
        exponents = torch.cat([exponents, odd])
    return torch.exp2(exponents)


def alibi_slopes(
    num_heads: int, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""ALiBi's per-head slopes.

    For :math:`n` a power of two, a geometric sequence starting at and with ratio
    :math:`2^{-8/n}`:

    .. math::

        m_h = 2^{-8 h / n}, \qquad h = 1, \dots, n.

    Otherwise, with :math:`c` the largest power of two below :math:`n`, the :math:`c` slopes of
    the :math:`c`-head case followed by the first :math:`n - c` of every other slope of the
    :math:`2c`-head case, :math:`2^{-4(2h - 1)/c}` for :math:`h = 1, \dots, n - c`.

    Parameters
    ----------
    num_heads : int
        Number of attention heads.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(num_heads,)``, computed in float64 and rounded once to ``dtype``.

    References
    ----------
    Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases Enables Input
    Length Extrapolation", ICLR 2022, section 3.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    return round_once(_slopes_float64(num_heads, device), dtype)


def alibi_bias(
    num_heads: int,
    q_len: int | torch.Tensor,
    k_len: int | torch.Tensor | None = None,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""ALiBi's additive attention bias, symmetric in distance and unmasked.

    For a query at position :math:`i` and a key at position :math:`j`,

    .. math::

        B_{h i j} = -m_h \, \lvert i - j \rvert .

    Given lengths, the keys sit at :math:`0 \dots k-1` and the queries are the last ``q_len`` of
    them (as when decoding with a key cache), so query row :math:`r` is position :math:`k - q + r`.
    Given tensors, they are the positions themselves: restarted positions of a packed batch, the
    positions kept after a cache eviction.

    The paper applies the bias under a causal mask (:math:`j \le i`); keys after the query get
    the mirror-image bias here, and masking them is the caller's job. Under a causal mask the rows
    differ from BLOOM's :math:`m_h j` by the per-row constant :math:`m_h i`, which softmax ignores.

    Parameters
    ----------
    num_heads : int
        Number of attention heads.
    q_len : int or torch.Tensor
        Number of queries, or their integer positions ``(..., q)``.
    k_len : int or torch.Tensor, optional
        Number of keys, at least ``q_len``, or their integer positions ``(..., k)`` (leading
        dimensions broadcastable with the queries'). Default: the same as ``q_len``.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result for lengths (positions keep their own device).

    Returns
    -------
    torch.Tensor
        ``(num_heads, q_len, k_len)`` for lengths, ``(..., num_heads, q, k)`` for positions;
        computed in float64 and rounded once to ``dtype``.

    Raises
    ------
    TypeError
        If one of ``q_len``, ``k_len`` is a length and the other a tensor, or positions are not
        integers.
    ValueError
        If ``k_len < q_len``, or the positions' leading dimensions do not broadcast.

    References
    ----------
    Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases Enables Input
    Length Extrapolation", ICLR 2022, section 3.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    q_pos, k_pos = query_key_positions(q_len, k_len, device=device)
    distance = key_minus_query(q_pos, k_pos).abs().double()  # (..., q, k)
    slopes = _slopes_float64(num_heads, distance.device)[:, None, None]  # (heads, 1, 1)
    # (..., 1, q, k) * (heads, 1, 1) -> (..., heads, q, k); ``0.0 - x`` keeps the diagonal +0.0.
    return round_once(0.0 - slopes * distance.unsqueeze(-3), dtype)
