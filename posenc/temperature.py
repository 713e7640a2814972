"""Attention temperature that grows with the position (Llama 4's NoPE layers).

A layer without positional encoding spreads its attention more thinly as the context grows: the
softmax of :math:`n` similar logits gives each about :math:`1/n`. Llama 4 multiplies the queries
of its NoPE layers by a factor that grows with the logarithm of the position, which sharpens the
softmax again at long range (scalable softmax).
"""

from __future__ import annotations

import torch

from posenc._checks import check_float_dtype, check_integer_tensor, check_positive_float

__all__ = ["attention_temperature"]


def attention_temperature(
    positions: torch.Tensor,
    *,
    floor_scale: float = 8192.0,
    attn_scale: float = 0.1,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    r"""The factor Llama 4 multiplies the queries of a NoPE layer by, per position.

    .. math::

        \tau(p) = 1 + \alpha \log\!\left(1 + \left\lfloor \frac{p + 1}{F} \right\rfloor\right),

    with :math:`\alpha` = ``attn_scale`` and :math:`F` = ``floor_scale``. It is 1 for the first
    :math:`F - 1` positions and then grows by steps of :math:`F`. Computed in float64 and rounded
    once to ``dtype``.

    Parameters
    ----------
    positions : torch.Tensor
        Integer positions of any shape (the query's position in the whole sequence, cache
        included).
    floor_scale : float, optional
        :math:`F`, the config's ``floor_scale`` (8192 in Llama 4).
    attn_scale : float, optional
        :math:`\alpha`, the config's ``attn_scale`` (0.1 in Llama 4).
    dtype : torch.dtype, optional
        Output dtype; default ``torch.get_default_dtype()``.

    Returns
    -------
    torch.Tensor
        The shape of ``positions``; multiply the queries (before the :math:`1/\sqrt{d}` scale) by
        it, broadcast over heads and channels.

    Raises
    ------
    TypeError
        If ``positions`` is not an integer tensor or ``dtype`` is not a floating dtype.
    ValueError
        If ``floor_scale`` or ``attn_scale`` is not a finite number > 0, or a position is negative.

    References
    ----------
    Nakanishi, "Scalable-Softmax Is Superior for Attention", 2025; transformers 5.24
    ``Llama4TextAttention`` (``attn_temperature_tuning``).
    """
    check_integer_tensor("positions", positions)
    floor_scale = check_positive_float("floor_scale", floor_scale)
    attn_scale = check_positive_float("attn_scale", attn_scale)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    if positions.numel() and not positions.is_meta and bool((positions < 0).any()):
        raise ValueError(f"positions must be >= 0, got a minimum of {int(positions.min())}")
    steps = torch.floor((positions.to(torch.float64) + 1.0) / floor_scale)
    return (torch.log1p(steps) * attn_scale + 1.0).to(dtype)
