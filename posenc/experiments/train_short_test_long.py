"""Train short, test long: held-out loss of a character model at 1, 2, 4 and 8 times its training length.

A two-layer causal :class:`posenc.models.CausalLM` is trained on ``train_len``-character windows
of Python's standard library (:func:`posenc.models.stdlib_corpus`), once per encoding, and scored
on the same held-out characters cut into windows of each evaluation length. Only ``position``
changes between runs. Page: "Train short, test long: which encodings extrapolate?".
"""

from __future__ import annotations

from typing import Any

import torch

from posenc.models import CausalLM, CharCorpus, TransformerConfig, next_token_loss, stdlib_corpus, token_losses, train

ENCODINGS = ("none", "sinusoidal", "learned", "t5", "rope", "alibi", "cope")
TRAIN_MODULES = ["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"]
HELD_OUT_MODULES = ["textwrap", "shutil"]
COMMON = {"train_len": 32, "factors": [1, 2, 4, 8], "batch": 16, "lr": 3e-3, "warmup": 20, "heads": 4, "layers": 2,
          "eval_tokens": 8192, "group": 8}
#: The page's build-time run: RoPE's heads are 16 wide (8 frequency pairs).
SHORT = {**COMMON, "steps": 200, "dim": 64, "seeds": [0, 1]}
#: The recorded run: heads 32 wide, so RoPE has 16 frequency pairs.
FULL = {**COMMON, "steps": 1200, "dim": 128, "seeds": [0, 1, 2, 3, 4]}


def corpus() -> CharCorpus:
    """The training and held-out characters (the running Python's standard library)."""
    return stdlib_corpus(TRAIN_MODULES, HELD_OUT_MODULES)


def model_config(config: dict[str, Any], vocab_size: int, position: str) -> TransformerConfig:
    """The model with encoding ``position``: a learned table long enough for the longest evaluation,
    T5's buckets ending at the training length."""
    return TransformerConfig(vocab_size=vocab_size, dim=config["dim"], num_heads=config["heads"],
                             num_layers=config["layers"], max_len=max(config["factors"]) * config["train_len"],
                             position=position, causal=True, t5_max_distance=config["train_len"])


def position_table(model: CausalLM, position: str) -> torch.Tensor:
    """The ``"learned"`` encoding's table ``(max_len, dim)``, or the ``"t5"`` bias ``(buckets, heads)``."""
    encoding = model.transformer.position
    return (encoding.table if position == "learned" else encoding.t5.relative_attention_bias).weight.detach().clone()


def train_model(config: dict[str, Any], data: CharCorpus, position: str, seed: int) -> tuple[CausalLM, float]:
    """One model trained with ``seed`` (in eval mode) and its mean training loss over the last 20 steps."""
    torch.manual_seed(seed)
    model = CausalLM(model_config(config, data.vocab_size, position))
    log = train(model, next_token_loss, data.windows(config["train_len"], config["batch"]), steps=config["steps"],
                lr=config["lr"], seed=seed, warmup=config["warmup"])
    return model, sum(log.losses[-20:]) / len(log.losses[-20:])


def evaluate(config: dict[str, Any], data: CharCorpus, model: CausalLM) -> dict[str, Any]:
    """Loss at each factor, and how the longest windows change each character's loss.

    The change of a character's loss from the windows of ``train_len`` to the longest ones is
    averaged over the windows, by position in the long window ``(n_long,)``. ``loss``: one value
    per factor; ``change_curve``: the change by position, averaged over groups of ``group``
    positions; ``just_past`` and ``farthest``: its mean over the ``train_len`` positions
    just past the training length and over the last ``train_len``; ``same_context_gap``: the largest
    change over the first ``train_len`` positions (same context in both evaluations, so rounding).
    """
    train_len, longest = config["train_len"], max(config["factors"])
    with torch.no_grad():  # each held-out character's loss in text order, (eval_tokens,) per factor
        losses = {f: token_losses(model, data.held_out_windows(f * train_len, config["eval_tokens"])).flatten()
                  for f in config["factors"]}
    diff = (losses[longest] - losses[1]).view(-1, longest * train_len)  # (windows, n_long)
    change = diff.mean(dim=0)  # (n_long,)
    return {"loss": [losses[f].mean().item() for f in config["factors"]],
            "change_curve": change.view(-1, config["group"]).mean(dim=1).tolist(),  # (n_long / group,)
            "just_past": change[train_len : 2 * train_len].mean().item(),
            "farthest": change[-train_len:].mean().item(),
            "same_context_gap": diff[:, :train_len].abs().max().item()}


def table_metrics(config: dict[str, Any], model: CausalLM, position: str, before: torch.Tensor) -> dict[str, Any]:
    """What training did to a learned table (row norms, change of the rows past ``train_len``) or to
    T5's bias (largest change of each bucket's row)."""
    after, train_len = position_table(model, position), config["train_len"]
    moved = (after - before).abs().amax(dim=1)  # (rows,)
    if position == "t5":
        return {"bucket_change": moved.tolist()}
    rows = after.norm(dim=1)  # (max_len,)
    with torch.no_grad():  # the token vectors as the model scales them: (vocab, dim)
        tokens = model.transformer.embed(torch.arange(model.transformer.embed.embedding.num_embeddings))
    return {"trained_row_norm": rows[:train_len].mean().item(), "untrained_row_norm": rows[train_len:].mean().item(),
            "token_norm": tokens.norm(dim=1).mean().item(), "trained_row_change": moved[:train_len].max().item(),
            "untrained_row_change": moved[train_len:].max().item()}


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train every encoding with one seed. Metrics per encoding: ``train_loss/<e>``, ``loss/<e>`` (one
    value per factor), ``change_curve/<e>``, ``just_past/<e>``, ``farthest/<e>``, ``same_context_gap/<e>``;
    ``learned/...`` (row norms and changes) and ``t5/bucket_change``."""
    data, metrics = corpus(), {}
    for position in ENCODINGS:
        torch.manual_seed(seed)  # the initial weights of train_model
        initial = CausalLM(model_config(config, data.vocab_size, position))
        before = position_table(initial, position) if position in ("learned", "t5") else None
        model, metrics[f"train_loss/{position}"] = train_model(config, data, position, seed)
        metrics.update({f"{key}/{position}": value for key, value in evaluate(config, data, model).items()})
        if before is not None:
            tables = table_metrics(config, model, position, before)
            metrics.update({f"{position}/{key}": value for key, value in tables.items()})
    return metrics
