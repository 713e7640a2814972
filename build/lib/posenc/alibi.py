"""ALiBi: attention with linear biases (Press, Smith and Lewis, 2022)."""

from __future__ import annotations

import torch

from posenc._dtypes import round_once
from posenc._checks import check_float_dtype, check_keys_cover_queries, check_positive_int

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
    q_len: int,
    k_len: int | None = None,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""ALiBi's additive attention bias, symmetric in distance and unmasked.

    The queries are the last ``q_len`` of the ``k_len`` positions (as when decoding with a key
    cache), so query :math:`i` sits at :math:`i' = k - q + i` and

    .. math::

        B_{h i j} = -m_h \, \lvert i' - j \rvert .

    The paper applies it under a causal mask (:math:`j \le i'`); keys after the query get the
    mirror-image bias here, and masking them is the caller's job. Under a causal mask the rows
    differ from BLOOM's :math:`m_h j` by the per-row constant :math:`m_h i'`, which softmax
    ignores.

    Parameters
    ----------
    num_heads : int
        Number of attention heads.
    q_len : int
        Number of queries.
    k_len : int, optional
        Number of keys, at least ``q_len`` (default: ``q_len``).
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(num_heads, q_len, k_len)``, computed in float64 and rounded once to ``dtype``.

    References
    ----------
    Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases Enables Input
    Length Extrapolation", ICLR 2022, section 3.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    q_len = check_positive_int("q_len", q_len)
    k_len = q_len if k_len is None else check_positive_int("k_len", k_len)
    check_keys_cover_queries(q_len, k_len)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    keys = torch.arange(k_len, dtype=torch.float64, device=device)
    queries = keys[k_len - q_len :]
    distance = (queries[:, None] - keys[None, :]).abs()
    # ``0.0 - x`` rather than ``-x``: the diagonal is +0.0, not -0.0.
    return round_once(0.0 - _slopes_float64(num_heads, device)[:, None, None] * distance, dtype)
