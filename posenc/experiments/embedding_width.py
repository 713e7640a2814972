"""How wide should the embeddings be? One character-level language model at several widths.

A causal :class:`posenc.models.CausalLM` with the sinusoidal encoding predicts the next character
of Python's standard-library source, as in :mod:`posenc.experiments.learned_vs_sinusoidal`: two
training sets, five modules (``"large"``) and their first ``small_chars`` characters (``"small"``,
seen many times over), and two held-out modules. Only the model width ``dim`` changes; the heads
have a fixed width ``head_dim`` (``dim // head_dim`` heads), and the steps, data, batches and
learning rate are the same for every width. A control trains the largest width once more with a
lower learning rate, ``control_lr`` (none if ``None``): a wide model may train worse at the shared
rate without over-fitting. Page: "How wide should the embeddings be?".
"""

from __future__ import annotations

from typing import Any

import torch

from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, train

#: The two training sets, all of the training modules and their first ``small_chars`` characters.
DATASETS = ("large", "small")
COMMON = {"window": 32, "batch": 16, "lr": 3e-3, "warmup": 20, "head_dim": 16, "small_chars": 4096,
          "train_windows": 1024, "train_modules": ["argparse", "difflib", "functools", "statistics", "calendar"],
          "held_out_modules": ["textwrap", "shlex"]}
#: The page's build-time run.
SHORT = {**COMMON, "widths": [16, 32, 64, 128], "layers": 1, "steps": 200, "control_lr": None, "seeds": [0]}
#: The recorded run.
FULL = {**COMMON, "widths": [16, 32, 64, 128, 256], "layers": 1, "steps": 1000, "control_lr": 1e-3,
        "seeds": [0, 1, 2, 3, 4]}


def windows(ids: torch.Tensor, window: int, most: int) -> torch.Tensor:
    """At most ``most`` evenly spaced non-overlapping windows of 1-D ``ids``: ``(n, window + 1)``."""
    usable = (len(ids) - 1) // (window + 1) * (window + 1)
    cut = ids[:usable].view(-1, window + 1)  # (usable // (window + 1), window + 1)
    step = max(1, len(cut) // most)
    return cut[::step][:most]


def data(config: dict[str, Any]) -> tuple[CharCorpus, dict[str, torch.Tensor], torch.Tensor]:
    """The corpus, the training sets by name (1-D ids), and the held-out windows ``(n, window + 1)``."""
    corpus = stdlib_corpus(config["train_modules"], config["held_out_modules"])
    held_out = windows(corpus.held_out, config["window"], len(corpus.held_out))
    return corpus, {"large": corpus.train, "small": corpus.train[: config["small_chars"]]}, held_out


def make_model(config: dict[str, Any], vocab_size: int, dim: int, seed: int) -> CausalLM:
    """An untrained model of width ``dim`` with ``dim // head_dim`` heads."""
    torch.manual_seed(seed)
    return CausalLM(TransformerConfig(vocab_size=vocab_size, dim=dim, num_heads=max(1, dim // config["head_dim"]),
                                      num_layers=config["layers"], max_len=config["window"],
                                      position="sinusoidal", causal=True))


def run_one(config: dict[str, Any], corpus: CharCorpus, ids: torch.Tensor, held_out: torch.Tensor, dim: int,
            seed: int, lr: float) -> dict[str, float]:
    """Train one width on training ids ``(n,)``; its losses (nats per character) and time per step."""
    model = make_model(config, corpus.vocab_size, dim, seed)
    log = train(model, next_token_loss, corpus.windows(config["window"], config["batch"], ids),
                steps=config["steps"], lr=lr, seed=seed, warmup=config["warmup"])
    seen = windows(ids, config["window"], config["train_windows"])
    with torch.no_grad():
        return {"held_out": next_token_loss(model, held_out).item(), "train": next_token_loss(model, seen).item(),
                "seconds_per_step": log.seconds / config["steps"],
                "parameters": float(sum(p.numel() for p in model.parameters()))}


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train every width on both training sets with one seed.

    Metrics, for ``<data>`` in :data:`DATASETS` and ``<dim>`` in ``widths``:
    ``held_out/<data>/<dim>`` (held-out loss, nats per character), ``train/<data>/<dim>`` (loss of
    the trained model on up to ``train_windows`` windows of its training set),
    ``seconds_per_step/<data>/<dim>`` (wall time of training divided by the steps) and
    ``parameters/<dim>``; with a ``control_lr``, the same losses and time of the largest
    width trained at that rate as ``<key>/<data>/control``.
    """
    corpus, datasets, held_out = data(config)
    runs = [(str(dim), dim, config["lr"]) for dim in config["widths"]]
    if config["control_lr"] is not None:
        runs.append(("control", max(config["widths"]), config["control_lr"]))
    metrics: dict[str, Any] = {}
    for data_name in DATASETS:
        for label, dim, lr in runs:
            result = run_one(config, corpus, datasets[data_name], held_out, dim, seed, lr)
            for key in ("held_out", "train", "seconds_per_step"):
                metrics[f"{key}/{data_name}/{label}"] = result[key]
            metrics[f"parameters/{dim}"] = result["parameters"]
    return metrics
