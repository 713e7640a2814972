"""The training loop every experiment on the site shares, and the language-model loss."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from posenc._checks import (
    check_int,
    check_nonnegative_float,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
)
from posenc.models._distributed import data_parallel, mean_over_processes, share, world
from posenc.models._transformer import CausalLM, check_tokens

__all__ = ["next_token_loss", "token_losses", "TrainingLog", "train"]


def _check_sequence(tokens: torch.Tensor) -> None:
    check_tokens(tokens)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens need at least 2 positions to predict one, got seq={tokens.shape[1]}")


def next_token_loss(model: CausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting ``tokens[:, 1:]`` from ``tokens[:, :-1]``.

    Parameters
    ----------
    model : CausalLM
        The language model.
    tokens : torch.Tensor
        Integer token ids ``(batch, seq)``, ``seq >= 2``.

    Returns
    -------
    torch.Tensor
        Scalar loss (natural log).
    """
    _check_sequence(tokens)
    logits = model(tokens[:, :-1])  # (batch, seq - 1, vocab)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())


def token_losses(model: CausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each prediction: :func:`next_token_loss` before the mean.

    ``token_losses(model, tokens)[b, i]`` is the loss of predicting ``tokens[b, i + 1]`` from
    ``tokens[b, : i + 1]``. Averaged over rows it gives the loss by position; on the windows of
    :meth:`posenc.models.CharCorpus.held_out_windows`, it gives every held-out character's loss in text order.

    Parameters
    ----------
    model : CausalLM
        The language model.
    tokens : torch.Tensor
        Integer token ids ``(batch, seq)``, ``seq >= 2``.

    Returns
    -------
    torch.Tensor
        ``(batch, seq - 1)`` losses (natural log), in the grad mode of the caller.
    """
    _check_sequence(tokens)
    logits = model(tokens[:, :-1])  # (batch, seq - 1, vocab)
    return nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (batch, seq - 1)


@dataclass
class TrainingLog:
    """What :func:`train` did: the loss of every step and the wall-clock time it took."""

    losses: list[float]
    seconds: float


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    make_batch: Callable[[torch.Generator], Any],
    *,
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = 1.0,
    warmup: int = 0,
    threads: int | None = 1,
) -> TrainingLog:
    """Train ``model`` in place with AdamW: the loop every experiment on the site shares.

    Each step draws a batch with ``make_batch(generator)`` (a ``torch.Generator`` seeded from
    ``seed``), computes ``loss_fn(model, batch)``, clips the gradient norm and steps. The learning
    rate rises linearly over ``warmup`` steps, then stays at ``lr``. Dropout draws from the global
    generator, seeded with ``seed`` too, so a run is repeatable. The model is left in eval mode.

    Under ``torchrun`` (an initialised process group), every process draws the same batch, trains
    on its equal share of the rows through DistributedDataParallel, and logs the whole batch's
    loss: without dropout the result equals one process's on the whole batch, up to the order of
    floating-point sums (``loss_fn`` must call the model through its forward only).

    Parameters
    ----------
    model : torch.nn.Module
        Model to train (its parameters are updated).
    loss_fn : collections.abc.Callable
        ``loss_fn(model, batch) -> scalar tensor``, e.g. :func:`next_token_loss`.
    make_batch : collections.abc.Callable
        ``make_batch(generator) -> batch``.
    steps : int
        Number of optimiser steps.
    lr : float, optional
        Peak learning rate.
    seed : int, optional
        Seed of the data generator and of dropout.
    weight_decay : float, optional
        AdamW's decoupled weight decay.
    max_grad_norm : float or None, optional
        Clip the global gradient norm to this value; ``None`` disables clipping.
    warmup : int, optional
        Steps of linear warm-up.
    threads : int or None, optional
        CPU threads during training (restored afterwards). One thread is fastest and repeatable
        for the site's small models on a shared machine; ``None`` leaves the setting alone.

    Returns
    -------
    TrainingLog
        Loss per step and the time taken.
    """
    steps = check_positive_int("steps", steps)
    lr = check_positive_float("lr", lr)
    seed = check_int("seed", seed)
    weight_decay = check_nonnegative_float("weight_decay", weight_decay)
    if max_grad_norm is not None:
        max_grad_norm = check_positive_float("max_grad_norm", max_grad_norm)
    warmup = check_nonnegative_int("warmup", warmup)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check_positive_int("threads", threads))
    try:
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        losses = []
        rank, processes = world()
        stepped = data_parallel(model)
        start = time.perf_counter()
        model.train()
        for step in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / warmup) if warmup else lr
            loss = loss_fn(stepped, share(make_batch(generator), rank, processes))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            losses.append(mean_over_processes(loss).item())
        model.eval()
        return TrainingLog(losses, time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous_threads)
