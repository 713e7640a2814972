"""Is this sequence sorted? An encoder and a decoder, each with and without positional encoding.

Each example is ``length`` digits; a positive example is sorted in non-decreasing order, its
negative twin is the same sequence with two tokens of different value swapped. A one-layer
:class:`posenc.models.EncoderClassifier`, bidirectional (encoder) or causal (decoder), with
``position="none"`` or ``"sinusoidal"``. Page: "Can a model learn order without positions?".
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from posenc.models import EncoderClassifier, TransformerConfig, train

#: (causal, position) of the four models.
COMBOS = ((False, "none"), (False, "sinusoidal"), (True, "none"), (True, "sinusoidal"))
COMMON = {"vocab": 10, "length": 12, "heads": 4, "pairs": 32, "lr": 3e-3, "warmup": 20, "test_pairs": 1000}
#: The page's build-time run.
SHORT = {**COMMON, "steps": 250, "dim": 32, "seeds": [0, 1, 2]}
#: The recorded run.
FULL = {**COMMON, "steps": 1000, "dim": 64, "seeds": [0, 1, 2, 3, 4]}


def name(causal: bool, position: str) -> str:
    """``"encoder, no PE"``, ``"decoder, sinusoidal"``…"""
    return f"{'decoder' if causal else 'encoder'}, {'no PE' if position == 'none' else 'sinusoidal'}"


def make_pairs(config: dict[str, Any], n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sorted sequences ``(n, length)`` and, for each, a copy with two tokens of different value
    swapped."""
    sorted_seqs = torch.randint(0, config["vocab"], (n, config["length"]), generator=generator).sort(dim=1).values
    rows = torch.arange(n)
    first = torch.randint(0, config["length"], (n,), generator=generator)
    # The second position: a random one among those holding a different value.
    scores = torch.rand(n, config["length"], generator=generator)
    scores[sorted_seqs == sorted_seqs[rows, first][:, None]] = -1.0
    second = scores.argmax(dim=1)
    swapped = sorted_seqs.clone()
    swapped[rows, first], swapped[rows, second] = sorted_seqs[rows, second], sorted_seqs[rows, first]
    return sorted_seqs, swapped


def batches(config: dict[str, Any]):
    """``make_batch(generator)``: a balanced batch of tokens ``(2 * pairs, length)`` and labels (1 =
    sorted)."""

    def make_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        positive, negative = make_pairs(config, config["pairs"], generator)
        ones, zeros = torch.ones(config["pairs"], dtype=torch.long), torch.zeros(config["pairs"], dtype=torch.long)
        return torch.cat([positive, negative]), torch.cat([ones, zeros])

    return make_batch


def held_out_pairs(config: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out pairs (the same for every run): sorted sequences and their twins."""
    return make_pairs(config, config["test_pairs"], torch.Generator().manual_seed(1000))


def make_model(config: dict[str, Any], causal: bool, position: str, seed: int) -> EncoderClassifier:
    """An untrained model; for one seed the four models start from the same shared weights."""
    torch.manual_seed(seed)
    return EncoderClassifier(TransformerConfig(vocab_size=config["vocab"], dim=config["dim"], num_heads=config["heads"],
                                               num_layers=1, max_len=config["length"], position=position,
                                               causal=causal), num_classes=2)


def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    tokens, labels = batch
    return nn.functional.cross_entropy(model(tokens), labels)


def twin_gap(model: nn.Module, positive: torch.Tensor, negative: torch.Tensor) -> float:
    """Largest difference between the logits of a sorted sequence and of its twin."""
    with torch.no_grad():
        return (model(positive) - model(negative)).abs().max().item()


def run_one(config: dict[str, Any], causal: bool, position: str, seed: int) -> dict[str, Any]:
    """Train one model; its test accuracy, largest twin logit difference and training losses."""
    positive, negative = held_out_pairs(config)
    tokens = torch.cat([positive, negative])
    labels = torch.cat([torch.ones(len(positive), dtype=torch.long), torch.zeros(len(negative), dtype=torch.long)])
    model = make_model(config, causal, position, seed)
    log = train(model, loss_fn, batches(config), steps=config["steps"], lr=config["lr"], seed=seed,
                warmup=config["warmup"])
    with torch.no_grad():
        accuracy = (model(tokens).argmax(-1) == labels).float().mean().item()
    return {"accuracy": accuracy, "twin_gap": twin_gap(model, positive, negative), "losses": log.losses}


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train the four models with one seed. Metrics: ``accuracy/<name>`` and ``twin_gap/<name>``."""
    metrics: dict[str, Any] = {}
    for causal, position in COMBOS:
        result = run_one(config, causal, position, seed)
        metrics[f"accuracy/{name(causal, position)}"] = result["accuracy"]
        metrics[f"twin_gap/{name(causal, position)}"] = result["twin_gap"]
    return metrics
