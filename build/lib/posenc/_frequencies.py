"""The geometric frequencies shared by sinusoidal tables and RoPE."""

from __future__ import annotations

import torch

__all__ = ["inverse_frequencies"]


def inverse_frequencies(
    width: int, base: float | torch.Tensor, *, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""Float64 :math:`\omega_i = 1 / \mathrm{base}^{2i/w}` for :math:`i = 0 \dots \lceil w/2 \rceil - 1`.

    The frequencies of a ``w``-wide sinusoidal table (Vaswani et al.) and of a ``w``-wide RoPE
    head (Su et al.): one sine/cosine pair, or one rotated channel pair, per frequency. ``base``
    may be a float64 tensor (dynamic NTK scaling computes it on the device).
    """
    exponents = torch.arange(0, width, 2, dtype=torch.float64, device=device) / width
    return 1.0 / base**exponents
