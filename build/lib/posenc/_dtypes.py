"""Rounding float64 results to the requested dtype exactly once."""

from __future__ import annotations

import torch

__all__ = ["round_once"]

_HALF_TYPES = (torch.float16, torch.bfloat16)


def round_once(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round a float64 tensor to ``dtype`` with a single round-to-nearest-even.

    PyTorch converts float64 to float16/bfloat16 through float32, which rounds twice and can land
    one unit in the last place away from the nearest representable value. Rounding the float32
    intermediate *to odd* (keeping a sticky bit when the first rounding was inexact) makes the
    second rounding correct, because float32 carries many more bits than either half type.
    """
    if dtype not in _HALF_TYPES or x.dtype != torch.float64:
        return x.to(dtype)
    x32 = x.to(torch.float32)
    back = x32.to(torch.float64)
    even = (x32.view(torch.int32) & 1) == 0
    toward = torch.where(x > back, torch.inf, -torch.inf).to(torch.float32)
    x32 = torch.where((back != x) & even, torch.nextafter(x32, toward), x32)
    return x32.to(dtype)
