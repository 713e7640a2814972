"""Position tables cached in buffers that grow on demand (sinusoidal, video frames, RoPE)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from typing import Any

__all__ = ["RecomputedOnCast", "cached_rows"]


class RecomputedOnCast(nn.Module):
    """Base of the modules whose cached tables are a function of their arguments.

    A dtype cast (``.half()``, ``.double()``, ``.to(dtype)``) recomputes the tables with
    ``reset_parameters()``, rounded once to the new dtype, instead of casting the old dtype's
    values: a cast table would round twice (float64 → float32 → float16), and rows added later,
    when the cache grows, would be rounded once, so the same position would change bits.
    ``_cast_buffer`` names the buffer whose dtype tells whether a cast happened.
    """

    _cast_buffer: str

    def reset_parameters(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _apply(self, fn: Any, recurse: bool = True) -> RecomputedOnCast:
        dtype = getattr(self, self._cast_buffer).dtype
        super()._apply(fn, recurse)
        table = getattr(self, self._cast_buffer)
        if table.dtype != dtype and table.device.type != "meta":
            self.reset_parameters()
        return self


def cached_rows(
    module: nn.Module,
    names: tuple[str, ...],
    start: int,
    end: int,
    build: Callable[[int, int], tuple[torch.Tensor, ...]],
) -> tuple[torch.Tensor, ...]:
    """Rows ``start … end-1`` of the tables held in ``module``'s buffers ``names``.

    ``build(first, last)`` computes rows ``first … last-1`` of every table in the buffers' dtype
    and on their device. Past the cache, the tables are rebuilt at ``max(end, 2 * length)`` rows
    (doubling keeps token-by-token decoding from rebuilding at every step). Under
    ``torch.compile``, or for negative positions, the rows are computed directly instead: a
    compiled graph cannot replace a buffer, and negative positions are never cached.
    """
    length = getattr(module, names[0]).shape[0]
    if 0 <= start and end <= length:
        return tuple(getattr(module, name)[start:end] for name in names)
    if start < 0 or torch.compiler.is_compiling():
        return build(start, end)
    tables = build(0, max(end, 2 * length))
    for name, table in zip(names, tables):
        setattr(module, name, table)
    return tuple(table[start:end] for table in tables)
