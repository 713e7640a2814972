"""Copying the token exactly D positions back: which encodings can single out one distance?

Streams of random tokens; at every position the model predicts, with one read-out per distance,
the tokens D = 1, 4, 12 and 24 positions back. A causal one-layer :class:`posenc.models.Transformer`
with one head per distance; only ``position`` changes between runs. Page: "Long-range dependencies:
absolute vs relative encodings".
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from posenc.models import Transformer, TransformerConfig, train

ENCODINGS = ("sinusoidal", "learned", "shaw", "t5", "rope", "alibi")
COMMON = {"vocab": 16, "length": 40, "distances": [1, 4, 12, 24], "batch": 16, "lr": 6e-3, "warmup": 20,
          "test_streams": 1000}
#: The page's build-time run: RoPE's heads are 8 wide (4 frequency pairs).
SHORT = {**COMMON, "steps": 200, "dim": 32, "seeds": [0, 1, 2]}
#: The recorded run: heads 32 wide, so RoPE has 16 frequency pairs.
FULL = {**COMMON, "steps": 1500, "dim": 128, "seeds": [0, 1, 2, 3, 4]}


def batches(config: dict[str, Any]):
    """``make_batch(generator, size)``: tokens ``(size, length)`` and targets ``(size, length, D)``,
    the token D back or -100 where there is none."""
    distances = torch.tensor(config["distances"])

    def make_batch(generator: torch.Generator, size: int = config["batch"]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, config["vocab"], (size, config["length"]), generator=generator)
        source = torch.arange(config["length"])[None, :, None] - distances  # (1, length, D): position t - D
        copied = tokens[:, :, None].expand(-1, -1, len(distances))
        targets = copied.gather(1, source.clamp(min=0).expand(size, -1, -1))
        return tokens, torch.where(source >= 0, targets, -100)

    return make_batch


class Lookup(nn.Module):
    """A causal Transformer and one linear read-out per distance."""

    def __init__(self, config: TransformerConfig, distances: int):
        super().__init__()
        self.distances = distances
        self.readout = nn.Linear(config.dim, distances * config.vocab_size)
        self.transformer = Transformer(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(tokens)  # (batch, length, dim)
        return self.readout(hidden).view(*tokens.shape, self.distances, -1)  # (batch, length, D, vocab)


def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    tokens, targets = batch
    return nn.functional.cross_entropy(model(tokens).flatten(0, 2), targets.flatten(), ignore_index=-100)


def train_model(config: dict[str, Any], position: str, seed: int) -> Lookup:
    """One model with encoding ``position``, trained with ``seed``; in eval mode."""
    torch.manual_seed(seed)
    model = Lookup(TransformerConfig(vocab_size=config["vocab"], dim=config["dim"], num_heads=len(config["distances"]),
                                     num_layers=1, max_len=config["length"], position=position, causal=True),
                   len(config["distances"]))
    train(model, loss_fn, batches(config), steps=config["steps"], lr=config["lr"], seed=seed, warmup=config["warmup"])
    return model


def test_set(config: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out streams (the same for every run)."""
    return batches(config)(torch.Generator().manual_seed(2000), config["test_streams"])


def accuracy(model: Lookup, tokens: torch.Tensor, targets: torch.Tensor) -> list[float]:
    """Held-out accuracy at each distance."""
    scored = targets >= 0
    with torch.no_grad():
        correct = (model(tokens).argmax(-1) == targets) & scored
    return (correct.sum((0, 1)) / scored.sum((0, 1))).tolist()


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train every encoding with one seed. Metrics: ``accuracy/<encoding>``, one value per distance."""
    tokens, targets = test_set(config)
    return {f"accuracy/{position}": accuracy(train_model(config, position, seed), tokens, targets)
            for position in ENCODINGS}
