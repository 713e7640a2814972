"""Learned or sinusoidal absolute positions in a small character-level language model.

A causal :class:`posenc.models.CausalLM` predicts the next character of Python's standard-library
source. Two training sets: five modules (``"large"``) and their first ``small_chars`` characters
(``"small"``, seen many times over); two held-out modules. The encoding is the only thing that
changes (``position="sinusoidal"`` or ``"learned"``); with the same seed every other weight starts
equal. Page: "Learned or sinusoidal: does it matter?".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, train

ENCODINGS = ("sinusoidal", "learned")
DATASETS = ("large", "small")
COMMON = {"heads": 4, "window": 32, "batch": 16, "lr": 3e-3, "warmup": 20, "average": 25, "small_chars": 4096,
          "train_modules": ["argparse", "difflib", "functools", "statistics", "calendar"],
          "held_out_modules": ["textwrap", "shlex"]}
#: The page's build-time run.
SHORT = {**COMMON, "steps": 400, "dim": 32, "layers": 1, "seeds": [0, 1, 2]}
#: The recorded run.
FULL = {**COMMON, "steps": 2000, "dim": 64, "layers": 2, "seeds": [0, 1, 2, 3, 4]}


def data(config: dict[str, Any]) -> tuple[CharCorpus, dict[str, torch.Tensor], torch.Tensor]:
    """The corpus, the training sets by name, and the held-out windows ``(n, window + 1)``."""
    corpus = stdlib_corpus(config["train_modules"], config["held_out_modules"])
    window = config["window"]
    usable = (len(corpus.held_out) - 1) // (window + 1) * (window + 1)
    held_out = corpus.held_out[:usable].view(-1, window + 1)  # non-overlapping windows
    return corpus, {"large": corpus.train, "small": corpus.train[: config["small_chars"]]}, held_out


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train both encodings on both training sets with one seed.

    Metrics: ``held_out/<data>/<encoding>`` (nats per character), ``train_end/<data>/<encoding>``
    (mean training loss of the last ``average`` steps), ``gap/<data>`` (learned minus sinusoidal
    training loss, moving average over ``average`` steps, one value every ``average`` steps),
    ``table_std/<data>`` (standard deviation of the trained learned table).
    """
    corpus, datasets, held_out = data(config)
    metrics: dict[str, Any] = {}
    average = config["average"]
    for data_name in DATASETS:
        curves = {}
        for position in ENCODINGS:
            torch.manual_seed(seed)
            model = CausalLM(TransformerConfig(vocab_size=corpus.unknown + 1, dim=config["dim"], num_heads=config["heads"],
                                               num_layers=config["layers"], max_len=config["window"],
                                               position=position, causal=True))
            make_batch = corpus.windows(config["window"], config["batch"], datasets[data_name])
            log = train(model, next_token_loss, make_batch, steps=config["steps"], lr=config["lr"], seed=seed,
                        warmup=config["warmup"])
            with torch.no_grad():
                metrics[f"held_out/{data_name}/{position}"] = next_token_loss(model, held_out).item()
            curves[position] = np.array(log.losses)
            metrics[f"train_end/{data_name}/{position}"] = float(curves[position][-average:].mean())
            if position == "learned":
                metrics[f"table_std/{data_name}"] = model.transformer.position.table.weight.std().item()
        gap = np.convolve(curves["learned"] - curves["sinusoidal"], np.ones(average) / average, mode="valid")
        metrics[f"gap/{data_name}"] = [round(float(v), 5) for v in gap[::average]]
    return metrics
