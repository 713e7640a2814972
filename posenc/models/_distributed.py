"""Data parallelism for :func:`posenc.models.train` under ``torchrun`` (PyTorch's DDP).

Every process draws the same global batch from the same seeded generator and trains on its own
equal share of it; DDP averages the gradients, so each step equals one step of a single process on
the whole batch (up to the order of floating-point sums). Without an initialised process group
these functions do nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch import distributed as dist

__all__ = ["world", "share", "data_parallel", "mean_over_processes"]


def world() -> tuple[int, int]:
    """``(rank, number of processes)``; ``(0, 1)`` without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def share(batch: Any, rank: int, size: int) -> Any:
    """This process's rows of ``batch``: a tensor ``(batch, ...)`` or a tuple/list of such tensors.

    Raises
    ------
    ValueError
        If the batch size is not a multiple of the number of processes (the shares would differ in
        size, and the averaged gradient would no longer be the whole batch's).
    TypeError
        If the batch is neither a tensor nor a tuple/list of tensors.
    """
    if size == 1:
        return batch
    if isinstance(batch, (tuple, list)):
        return type(batch)(share(part, rank, size) for part in batch)
    if not isinstance(batch, torch.Tensor):
        raise TypeError(f"a batch to share between processes must be a tensor or a tuple/list of tensors, "
                        f"got {type(batch).__name__}")
    if batch.shape[0] % size:
        raise ValueError(f"batch size {batch.shape[0]} is not a multiple of the {size} processes")
    rows = batch.shape[0] // size
    return batch[rank * rows : (rank + 1) * rows]


def data_parallel(model: nn.Module) -> nn.Module:
    """``model`` wrapped in DistributedDataParallel when several processes train, else ``model``."""
    if world()[1] == 1:
        return model
    return nn.parallel.DistributedDataParallel(model)


def mean_over_processes(value: torch.Tensor) -> torch.Tensor:
    """The mean of a scalar over the processes (the whole batch's loss from the shares' losses)."""
    if world()[1] == 1:
        return value
    value = value.detach().clone()
    dist.all_reduce(value)
    return value / world()[1]
