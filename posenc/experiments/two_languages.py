"""Does the best encoding depend on the language? Python code and English prose, five encodings.

Two "languages" available offline: Python source (modules of the running interpreter's standard
library, :func:`posenc.models.stdlib_corpus`) and English prose (the help texts of
``pydoc_data.topics``, without their code examples and grammar rules). On each, one two-layer
causal character-level :class:`posenc.models.CausalLM` is trained per encoding on ``train_len``
-character windows and scored on held-out characters in windows of ``train_len`` and of
``factor * train_len``. Both languages get the same number of training and held-out characters.
Only ``position`` and the text change between runs. Page: "Does the best encoding depend on the
language?".
"""

from __future__ import annotations

import re
from typing import Any

import pydoc_data.topics
import torch

from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, token_losses, train

LANGUAGES = ("python", "english")
ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
TRAIN_MODULES = ["argparse", "difflib", "configparser", "inspect"]
HELD_OUT_MODULES = ["textwrap", "shlex"]
#: Every ``HELD_OUT_EVERY``-th help topic (in sorted order, from the first) is held out.
HELD_OUT_EVERY = 5
COMMON = {"train_len": 64, "factor": 4, "batch": 16, "lr": 3e-3, "warmup": 20, "heads": 4, "layers": 2,
          "train_chars": 200_000, "group": 8}
#: The page's build-time run: a tiny model (heads 8 wide, RoPE has 4 frequency pairs), one seed.
SHORT = {**COMMON, "steps": 60, "dim": 32, "eval_tokens": 4096, "seeds": [0]}
#: The recorded run: heads 32 wide, so RoPE has 16 frequency pairs.
FULL = {**COMMON, "steps": 900, "dim": 128, "eval_tokens": 16384, "seeds": [0, 1, 2, 3, 4]}


def prose(help_text: str) -> str:
    """The prose paragraphs of one help topic, one paragraph per line.

    A paragraph (lines between blank lines) is kept when it ends with a full stop (not ``...``)
    and holds no interactive session (``>>>``) and no grammar rule (``::=``): code examples and
    grammar rules do not end with a full stop. Headings (a line over an underline of ``*``, ``=``,
    ``-``, ``~`` or ``^``) are dropped with their underline, and each paragraph's lines are joined
    with single spaces.
    """
    kept = []
    for paragraph in re.split(r"\n\s*\n", help_text):
        lines = [line.strip() for line in paragraph.strip("\n").split("\n")]
        underlines = {i for i, line in enumerate(lines) if i > 0 and re.fullmatch(r"([*=\-~^])\1+", line)}
        headings = {i - 1 for i in underlines}
        lines = [line for i, line in enumerate(lines) if line and i not in headings | underlines]
        text = " ".join(lines)
        if text.endswith(".") and not text.endswith("...") and ">>>" not in text and "::=" not in text:
            kept.append(text)
    return "\n".join(kept)


def english_texts() -> tuple[str, str]:
    """Training and held-out English prose: the help topics, every ``HELD_OUT_EVERY``-th held out."""
    topics = sorted(pydoc_data.topics.topics)
    texts = [prose(pydoc_data.topics.topics[topic]) for topic in topics]
    held_out = [text for i, text in enumerate(texts) if i % HELD_OUT_EVERY == 0]
    kept = [text for i, text in enumerate(texts) if i % HELD_OUT_EVERY != 0]
    return "\n".join(kept), "\n".join(held_out)


def corpora(config: dict[str, Any]) -> dict[str, CharCorpus]:
    """Both languages' corpora, cut to ``train_chars`` training and ``eval_tokens + 1`` held-out ids."""
    full = {"python": stdlib_corpus(TRAIN_MODULES, HELD_OUT_MODULES), "english": CharCorpus.from_text(*english_texts())}
    return {language: CharCorpus(data.chars, data.train[: config["train_chars"]],
                                 data.held_out[: config["eval_tokens"] + 1]) for language, data in full.items()}


def make_model(config: dict[str, Any], vocab_size: int, position: str, seed: int) -> CausalLM:
    """An untrained model; a ``"learned"`` table long enough for the longest evaluation."""
    torch.manual_seed(seed)
    return CausalLM(TransformerConfig(vocab_size=vocab_size, dim=config["dim"], num_heads=config["heads"],
                                      num_layers=config["layers"], max_len=config["factor"] * config["train_len"],
                                      position=position, causal=True))


def train_model(config: dict[str, Any], data: CharCorpus, position: str, seed: int) -> tuple[CausalLM, list[float]]:
    """One model trained with ``seed`` on ``data`` (in eval mode) and its training losses."""
    model = make_model(config, data.vocab_size, position, seed)
    log = train(model, next_token_loss, data.windows(config["train_len"], config["batch"]), steps=config["steps"],
                lr=config["lr"], seed=seed, warmup=config["warmup"])
    return model, log.losses


def evaluate(config: dict[str, Any], data: CharCorpus, model: CausalLM) -> dict[str, Any]:
    """``loss``: held-out loss in windows of ``train_len`` and of ``factor * train_len``; ``curve``: the
    loss in the long windows by position, averaged over windows and groups of ``group`` positions."""
    with torch.no_grad():  # (eval_tokens // n, n) for each window length n
        short, long = (token_losses(model, data.held_out_windows(n, config["eval_tokens"]))
                       for n in (config["train_len"], config["factor"] * config["train_len"]))
    by_position = long.mean(dim=0)  # (factor * train_len,)
    return {"loss": [short.mean().item(), long.mean().item()],
            "curve": by_position.view(-1, config["group"]).mean(dim=1).tolist()}  # (factor * train_len / group,)


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train every encoding on both languages with one seed. Metrics per language and encoding:
    ``loss/<language>/<encoding>`` (two values: windows of ``train_len`` and of ``factor * train_len``),
    ``curve/<language>/<encoding>`` and ``train_loss/<language>/<encoding>`` (mean of the last 20 steps)."""
    metrics: dict[str, Any] = {}
    for language, data in corpora(config).items():
        for position in ENCODINGS:
            model, losses = train_model(config, data, position, seed)
            metrics[f"train_loss/{language}/{position}"] = sum(losses[-20:]) / len(losses[-20:])
            metrics.update({f"{key}/{language}/{position}": value
                            for key, value in evaluate(config, data, model).items()})
    return metrics
