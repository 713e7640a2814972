"""Past the training length: character language models trained on 64 characters, read at 256.

Causal :class:`posenc.models.CausalLM` models that differ only in their position encoding (a
learned table of ``learned_rows`` rows, the sinusoidal table, RoPE, ALiBi) are trained on windows of
``train_length`` characters of Python standard-library modules, and read held-out windows of
another module at every length of ``eval_lengths``. The fixes measured beside them: RoPE scaling
(linear, dynamic NTK) swapped into the trained RoPE model without training, ALiBi, and the RoPE
model trained further on windows of the longest length. Page: "Perplexity explodes past the
training length".
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

import posenc
from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, token_losses, train

#: The models trained on ``train_length`` characters, page name -> ``position``.
TRAINED = {"learned": "learned", "sinusoidal": "sinusoidal", "RoPE": "rope", "ALiBi": "alibi"}
#: RoPE scaling swapped into the trained RoPE model (factor = longest length / training length).
SCALED = ("RoPE + linear x4", "RoPE + dynamic NTK x4")
#: The RoPE model trained further on windows of the longest length.
LONGER = "RoPE, trained on 256 more"
#: Every model of a run, the trained ones, then the scaled ones and the one trained longer.
NAMES = (*TRAINED, *SCALED, LONGER)
COMMON = {"train_modules": ["argparse", "textwrap", "dataclasses", "inspect"], "held_out_modules": ["pathlib"],
          "train_length": 64, "eval_lengths": [64, 128, 256], "learned_rows": 256, "batch": 32, "lr": 3e-3,
          "warmup": 20, "average": 20, "heads": 4, "layers": 2, "eval_windows": 128, "block": 8, "longer_batch": 8,
          "longer_lr": 1e-3, "longer_fraction": 0.1}
#: The page's build-time run: heads 16 wide (RoPE has 8 frequency pairs); two seeds for a spread, at
#: the cost of one seed of 200 steps read on 128 windows.
SHORT = {**COMMON, "steps": 100, "dim": 64, "eval_windows": 64, "seeds": [0, 1]}
#: The recorded run: heads 32 wide (16 frequency pairs).
FULL = {**COMMON, "steps": 700, "dim": 128, "seeds": [0, 1, 2, 3, 4]}


def data(config: dict[str, Any]) -> tuple[CharCorpus, torch.Tensor]:
    """The corpus and the held-out windows ``(eval_windows, longest length + 1)``, the same for every run."""
    corpus = stdlib_corpus(config["train_modules"], config["held_out_modules"])
    longest = max(config["eval_lengths"])
    generator = torch.Generator().manual_seed(1)
    starts = torch.randint(0, len(corpus.held_out) - longest - 1, (config["eval_windows"],), generator=generator)
    windows = torch.stack([corpus.held_out[s: s + longest + 1] for s in starts.tolist()])  # (n, longest + 1)
    return corpus, windows


def new_model(config: dict[str, Any], vocab_size: int, position: str, seed: int,
              max_len: int | None = None) -> CausalLM:
    """An untrained model; for one seed every model starts from the same weights, encoding aside."""
    torch.manual_seed(seed)
    return CausalLM(TransformerConfig(vocab_size=vocab_size, dim=config["dim"], num_heads=config["heads"],
                                      num_layers=config["layers"], max_len=max_len or config["train_length"],
                                      position=position, causal=True))


def scalings(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The RoPE scaling of each name of :data:`SCALED`, with factor longest length / training length."""
    factor = max(config["eval_lengths"]) / config["train_length"]
    return {SCALED[0]: {"rope_type": "linear", "factor": factor},
            SCALED[1]: {"rope_type": "dynamic", "factor": factor, "max_position_embeddings": config["train_length"]}}


def with_scaling(rope_model: CausalLM, scaling: dict[str, Any], max_len: int) -> CausalLM:
    """A copy of a trained RoPE model whose rotary embedding has ``scaling``, without training."""
    scaled = copy.deepcopy(rope_model)
    head_dim = scaled.transformer.config.head_dim
    scaled.transformer.position.rope = posenc.RotaryEmbedding(head_dim, scaling=scaling, max_len=max_len)
    return scaled


def train_models(config: dict[str, Any], corpus: CharCorpus,
                 seed: int) -> tuple[dict[str, CausalLM], dict[str, float]]:
    """Every model of :data:`NAMES`, trained (or scaled) with ``seed``, in eval mode; and the mean
    training loss of the last ``average`` steps of each model of :data:`TRAINED`."""
    models: dict[str, CausalLM] = {}
    train_end: dict[str, float] = {}
    for name, position in TRAINED.items():
        rows = config["learned_rows"] if position == "learned" else None
        models[name] = new_model(config, corpus.unknown + 1, position, seed, rows)
        log = train(models[name], next_token_loss, corpus.windows(config["train_length"], config["batch"]),
                    steps=config["steps"], lr=config["lr"], warmup=config["warmup"], seed=seed)
        tail = log.losses[-config["average"]:]
        train_end[name] = sum(tail) / len(tail)
    longest = max(config["eval_lengths"])
    for name, scaling in scalings(config).items():
        models[name] = with_scaling(models["RoPE"], scaling, longest)
    models[LONGER] = copy.deepcopy(models["RoPE"])
    train(models[LONGER], next_token_loss, corpus.windows(longest, config["longer_batch"]),
          steps=max(1, round(config["steps"] * config["longer_fraction"])), lr=config["longer_lr"], seed=1000 + seed)
    return models, train_end


@torch.no_grad()
def per_position(model: CausalLM, windows: torch.Tensor, length: int) -> torch.Tensor:
    """Held-out loss (nats) at each position ``(length,)``, averaged over the windows ``(n, >= length + 1)``."""
    return token_losses(model, windows[:, : length + 1]).mean(0)


def evaluate(model: CausalLM, windows: torch.Tensor, lengths: list[int],
             depends_on_length: bool = False) -> tuple[list[float], torch.Tensor]:
    """Perplexity at each length (every window read at that length) and the loss by position ``(max(lengths),)``.

    In a causal model whose encoding does not depend on the input's length, the first ``n``
    positions of the longest pass are the pass at length ``n``; with ``depends_on_length`` (dynamic
    NTK scaling) every length is a pass of its own.
    """
    curve = per_position(model, windows, max(lengths))
    losses = [per_position(model, windows, n) if depends_on_length else curve[:n] for n in lengths]
    return [math.exp(loss.mean().item()) for loss in losses], curve


def run_models(config: dict[str, Any], seed: int) -> tuple[dict[str, CausalLM], dict[str, Any]]:
    """The trained models of one seed and their metrics (see :func:`run`)."""
    corpus, windows = data(config)
    models, train_end = train_models(config, corpus, seed)
    metrics: dict[str, Any] = {f"train_end/{name}": round(loss, 5) for name, loss in train_end.items()}
    for name, model in models.items():
        perplexity, curve = evaluate(model, windows, config["eval_lengths"], depends_on_length=name == SCALED[1])
        metrics[f"perplexity/{name}"] = [round(p, 5) for p in perplexity]
        blocks = curve.view(-1, config["block"]).mean(1)  # (longest / block,): loss per block of positions
        metrics[f"loss_by_block/{name}"] = [round(v, 5) for v in blocks.tolist()]
    return models, metrics


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train every model with one seed.

    Metrics, for every name of :data:`NAMES`: ``perplexity/<name>`` (one value per length of
    ``eval_lengths``) and ``loss_by_block/<name>`` (held-out loss at the longest length, averaged
    over each block of ``block`` positions); for every name of :data:`TRAINED`, ``train_end/<name>``
    (mean training loss of the last ``average`` steps).
    """
    return run_models(config, seed)[1]
