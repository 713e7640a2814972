"""Position tables cached in buffers that grow on demand (sinusoidal, video frames, RoPE)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["cached_rows"]


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
