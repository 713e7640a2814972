"""Stretching a trained RoPE model past its training length, without and with a short fine-tune.

A causal :class:`posenc.models.CausalLM` with RoPE is trained on ``train_len``-character windows of
Python's standard-library source. Its rotary embedding is then replaced by one of four long-context
methods that target ``s`` times the training length (linear position interpolation, NTK-aware,
dynamic NTK, YaRN), or left as it is; the weights stay. Each variant is evaluated on held-out text
at 1, 2, 4 and 8 times the training length, then fine-tuned for ``ft_steps`` steps on windows of
the target length and evaluated again. A control fine-tunes the unscaled model for as many steps on
training-length windows. Page: "Stretching RoPE without retraining, and with a little".
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import torch

from posenc import RotaryEmbedding
from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, token_losses, train

#: The rotary embeddings compared; each is a ``(base, rope_parameters)`` rule of :func:`methods`.
METHODS = ("no scaling", "linear", "NTK-aware", "dynamic NTK", "YaRN")
#: The name of the control, the unscaled model fine-tuned on training-length windows.
CONTROL = "no scaling, tuned at train_len"
COMMON = {"train_modules": ["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"],
          "held_out_modules": ["textwrap", "shutil"], "train_len": 32, "factors": [1, 2, 4, 8], "s": 4,
          "base": 10000.0, "heads": 4, "layers": 2, "tokens_per_step": 512, "lr": 3e-3, "warmup": 20,
          "ft_steps": 100, "ft_lr": 1e-3, "ft_warmup": 10, "eval_tokens": 8192}
#: The page's build-time run: heads 16 wide (8 frequency pairs).
SHORT = {**COMMON, "dim": 64, "steps": 600, "seeds": [0, 1]}
#: The recorded run: heads 32 wide (16 frequency pairs), base models trained five times longer.
FULL = {**COMMON, "dim": 128, "steps": 3000, "seeds": [0, 1, 2, 3, 4]}


@lru_cache(maxsize=2)
def _corpus(train_modules: tuple[str, ...], held_out_modules: tuple[str, ...]) -> CharCorpus:
    return stdlib_corpus(list(train_modules), list(held_out_modules))


def corpus(config: dict[str, Any]) -> CharCorpus:
    """The training and held-out text (read once per process)."""
    return _corpus(tuple(config["train_modules"]), tuple(config["held_out_modules"]))


def model_config(config: dict[str, Any]) -> TransformerConfig:
    """The base model: RoPE with ``base``, room for 8 training lengths."""
    return TransformerConfig(vocab_size=corpus(config).vocab_size, dim=config["dim"], num_heads=config["heads"],
                             num_layers=config["layers"], max_len=8 * config["train_len"], position="rope",
                             rope_base=config["base"], causal=True)


def methods(config: dict[str, Any]) -> dict[str, tuple[float, dict[str, Any] | None]]:
    """Each method's base and Hugging Face ``rope_parameters`` (``None``: no scaling), for factor ``s``.

    NTK-aware scaling is a change of base, :math:`b\\,s^{d/(d-2)}` with head width :math:`d`.
    """
    base, s, train_len = config["base"], config["s"], config["train_len"]
    head_dim = config["dim"] // config["heads"]
    return {
        "no scaling": (base, None),
        "linear": (base, {"rope_type": "linear", "factor": s}),
        "NTK-aware": (base * s ** (head_dim / (head_dim - 2)), None),
        "dynamic NTK": (base, {"rope_type": "dynamic", "factor": s, "max_position_embeddings": train_len}),
        "YaRN": (base, {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": train_len}),
    }


def with_rope(model: CausalLM, config: dict[str, Any], method: str) -> CausalLM:
    """A copy of ``model`` whose rotary embedding is ``method``'s; the same weights."""
    method_base, scaling = methods(config)[method]
    stretched = copy.deepcopy(model)
    stretched.transformer.position.rope = RotaryEmbedding(config["dim"] // config["heads"], base=method_base,
                                                          scaling=scaling, max_len=8 * config["train_len"])
    return stretched


def batches(config: dict[str, Any], length: int):
    """Random training windows of ``length`` characters, ``tokens_per_step`` characters a step."""
    return corpus(config).windows(length, config["tokens_per_step"] // length)


@torch.no_grad()
def held_out_loss(model: CausalLM, config: dict[str, Any], length: int) -> float:
    """Mean cross-entropy (nats per character) of the first ``eval_tokens`` held-out characters,
    read in non-overlapping windows of ``length``: the same characters at every length."""
    return token_losses(model, corpus(config).held_out_windows(length, config["eval_tokens"])).mean().item()


def train_base(config: dict[str, Any], seed: int) -> tuple[CausalLM, float]:
    """The base model trained with ``seed``, and its training loss (mean of the last 20 steps)."""
    torch.manual_seed(seed)
    model = CausalLM(model_config(config))
    log = train(model, next_token_loss, batches(config, config["train_len"]), steps=config["steps"], lr=config["lr"],
                seed=seed, warmup=config["warmup"])
    last = log.losses[-20:]  # fewer than 20 in a run shorter than 20 steps
    return model, sum(last) / len(last)


def fine_tune(model: CausalLM, config: dict[str, Any], length: int, seed: int) -> CausalLM:
    """``model`` after ``ft_steps`` steps on windows of ``length`` (changed in place and returned)."""
    train(model, next_token_loss, batches(config, length), steps=config["ft_steps"], lr=config["ft_lr"],
          seed=100 + seed, warmup=config["ft_warmup"])
    return model


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """One base model, every method, before and after the fine-tune.

    Metrics: ``train_loss``; ``untuned/<method>`` and ``tuned/<method>`` (held-out loss at each of
    ``factors`` times ``train_len``), for every method of :data:`METHODS` and, tuned only, the
    :data:`CONTROL`.
    """
    base_model, train_loss = train_base(config, seed)
    lengths = [factor * config["train_len"] for factor in config["factors"]]
    metrics: dict[str, Any] = {"train_loss": train_loss}
    for method in METHODS:
        model = with_rope(base_model, config, method)
        metrics[f"untuned/{method}"] = [held_out_loss(model, config, n) for n in lengths]
        fine_tune(model, config, config["s"] * config["train_len"], seed)
        metrics[f"tuned/{method}"] = [held_out_loss(model, config, n) for n in lengths]
    control = fine_tune(with_rope(base_model, config, "no scaling"), config, config["train_len"], seed)
    metrics[f"tuned/{CONTROL}"] = [held_out_loss(control, config, n) for n in lengths]
    return metrics
