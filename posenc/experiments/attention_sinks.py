"""Attention sinks: does keeping a stream's first tokens recover what a rolling window loses?

Causal RoPE character models are trained on windows of ``train_length`` characters of Python
standard-library modules, in two ways that differ only in the data: windows cut anywhere in the
text (``"random windows"``), and the same windows after a start token, the way large models always
see a beginning-of-sequence token first (``"start token"``). Each model then reads held-out streams
far longer than its cache, one token at a time (teacher forcing), three ways:

* ``"window only"``: a cache of the ``window`` most recent tokens;
* ``"sinks + window"``: the stream's first ``sinks`` tokens and the most recent ones, ``window`` in
  all (StreamingLLM; positions counted within the cache);
* ``"recompute"``: each token predicted by a fresh pass over the ``window + 1`` most recent tokens
  (for start-token models, the start token and the ``window`` most recent), the reference.

Page: "Attention sinks: when does keeping the first tokens help?".

References
----------
Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from posenc.models import CausalLM, CharCorpus, KVCache, TransformerConfig, next_token_loss, stdlib_corpus, train

#: The two training data sets.
TRAINING = ("random windows", "start token")
#: The three ways of reading a stream longer than the cache.
METHODS = ("window only", "sinks + window", "recompute")
COMMON = {"train_modules": ["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"],
          "held_out_modules": ["textwrap", "shutil"], "train_length": 128, "batch": 16, "lr": 3e-3, "warmup": 20,
          "average": 20, "heads": 4, "layers": 2, "window": 64, "sinks": 4, "stream_length": 640, "block": 32,
          "attention_windows": 32}
#: The page's build-time run: one seed, the size of the page's other model.
SHORT = {**COMMON, "steps": 300, "dim": 64, "streams": 8, "seeds": [0]}
#: The recorded run: heads 32 wide (16 frequency pairs), trained five times longer, twice the streams.
FULL = {**COMMON, "steps": 1500, "dim": 128, "streams": 16, "seeds": [0, 1, 2, 3, 4]}


def start_token(corpus: CharCorpus) -> int:
    """The start token's id, one past the corpus's ids (models have ``corpus.vocab_size + 1`` ids)."""
    return corpus.vocab_size


def with_start(tokens: torch.Tensor, start: int) -> torch.Tensor:
    """``tokens`` ``(batch, n)`` with ``start`` put first and the last column dropped, ``(batch, n)``."""
    return torch.cat([torch.full_like(tokens[:, :1], start), tokens[:, :-1]], dim=1)


def new_model(config: dict[str, Any], corpus: CharCorpus, seed: int) -> CausalLM:
    """An untrained RoPE model; for one seed both trainings start from the same weights."""
    torch.manual_seed(seed)
    return CausalLM(TransformerConfig(vocab_size=corpus.vocab_size + 1, dim=config["dim"], num_heads=config["heads"],
                                      num_layers=config["layers"], max_len=config["train_length"], position="rope",
                                      causal=True))


def batches(config: dict[str, Any], corpus: CharCorpus, training: str) -> Callable[[torch.Generator], torch.Tensor]:
    """The ``make_batch`` of ``training``: windows of ``train_length + 1`` ids, after a start token or not."""
    windows = corpus.windows(config["train_length"], config["batch"])
    if training == "random windows":
        return windows
    if training == "start token":
        return lambda generator: with_start(windows(generator), start_token(corpus))
    raise ValueError(f"unknown training {training!r}; expected one of {list(TRAINING)}")


def train_model(config: dict[str, Any], corpus: CharCorpus, training: str, seed: int) -> tuple[CausalLM, float]:
    """A model trained on the data of ``training`` with ``seed``, in eval mode, and its mean
    training loss over the last ``average`` steps."""
    model = new_model(config, corpus, seed)
    log = train(model, next_token_loss, batches(config, corpus, training), steps=config["steps"], lr=config["lr"],
                warmup=config["warmup"], seed=seed)
    tail = log.losses[-config["average"]:]
    return model, sum(tail) / len(tail)


def streams(config: dict[str, Any], corpus: CharCorpus, training: str) -> torch.Tensor:
    """``streams`` held-out streams ``(streams, stream_length + 1)``, spread evenly over the held-out
    text; for start-token models each begins with the start token."""
    length = config["stream_length"]
    starts = torch.linspace(0, len(corpus.held_out) - length - 1, config["streams"]).long()
    text = corpus.held_out[starts[:, None] + torch.arange(length + 1)]  # (streams, length + 1)
    return with_start(text, start_token(corpus)) if training == "start token" else text


def attention_windows(config: dict[str, Any], corpus: CharCorpus, training: str) -> torch.Tensor:
    """``attention_windows`` held-out windows ``(attention_windows, train_length)``, spread evenly over
    the held-out text, read as in training: for start-token models, after the start token."""
    length = config["train_length"]
    starts = torch.linspace(0, len(corpus.held_out) - length, config["attention_windows"]).long()
    windows = corpus.held_out[starts[:, None] + torch.arange(length)]  # (attention_windows, train_length)
    return with_start(windows, start_token(corpus)) if training == "start token" else windows


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (batch, seq)


# The readings below run without gradients; `with torch.no_grad()` rather than the decorator,
# whose functions mutation testing skips (docs/dev/mutation-testing.md).


def streamed_losses(model: CausalLM, stream: torch.Tensor, window: int, sinks: int) -> torch.Tensor:
    """Loss of each prediction ``(streams, length)`` of ``stream`` ``(streams, length + 1)``, read one
    token at a time with :meth:`~posenc.models.Transformer.stream_cache` after each step."""
    cache, losses = KVCache(), []
    with torch.no_grad():
        for t in range(stream.shape[1] - 1):
            losses.append(_loss(model(stream[:, t: t + 1], cache=cache), stream[:, t + 1: t + 2]))
            model.transformer.stream_cache(cache, window=window, sinks=sinks)
    return torch.cat(losses, dim=1)


def recomputed_losses(model: CausalLM, stream: torch.Tensor, window: int, start: int | None = None) -> torch.Tensor:
    """Loss of each prediction ``(streams, length)`` when each is a fresh pass over the ``window + 1``
    most recent tokens (all of them while there are fewer); with ``start``, the first of those
    tokens is replaced by the start token, which every pass of a start-token model begins with."""
    inputs, targets = stream[:, :-1], stream[:, 1:]
    if inputs.shape[1] <= window + 1:  # no token has more than window + 1 before it
        with torch.no_grad():
            return _loss(model(inputs), targets)
    contexts = inputs.unfold(1, window + 1, 1)[:, 1:]  # (streams, n, window + 1): the windows ending after `window`
    if start is not None:
        contexts = torch.cat([torch.full_like(contexts[..., :1], start), contexts[..., 1:]], dim=-1)
    rows = contexts.reshape(-1, window + 1)  # (streams * n, window + 1)
    with torch.no_grad():
        first = model(inputs[:, : window + 1])  # (streams, window + 1, vocab): every token has all its past
        later = torch.cat([model(chunk)[:, -1] for chunk in rows.split(512)])  # (streams * n, vocab)
    logits = torch.cat([first, later.view(stream.shape[0], -1, first.shape[-1])], dim=1)  # (streams, length, vocab)
    return _loss(logits, targets)


def first_key_attention(model: CausalLM, windows: torch.Tensor, since: int) -> torch.Tensor:
    """Mean attention weight ``(layers, heads)`` that queries at positions ``since`` and later give the
    first key, in plain forward passes over ``windows`` ``(n, seq)``."""
    found = []

    def hook(attn: nn.Module, args: tuple[Any, ...], output: Any) -> None:  # args: normalised input, context
        weights = attn.scores(args[0], args[1])[0].softmax(dim=-1)  # (batch, heads, seq, seq)
        found.append(weights[:, :, since:, 0].mean(dim=(0, 2)))  # (heads,)

    handles = [block.attn.register_forward_hook(hook) for block in model.transformer.blocks]
    try:
        with torch.no_grad():
            model(windows)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(found)


def uniform_first_key_weight(length: int, since: int) -> float:
    """The weight of the first key under uniform causal attention, averaged over queries ``since … length - 1``."""
    return (1 / torch.arange(since + 1, length + 1, dtype=torch.float64)).mean().item()


def read(config: dict[str, Any], corpus: CharCorpus, model: CausalLM, training: str) -> dict[str, torch.Tensor]:
    """Each method's loss of every prediction ``(streams, stream_length)`` of the held-out streams."""
    stream = streams(config, corpus, training)
    start = start_token(corpus) if training == "start token" else None
    return {"window only": streamed_losses(model, stream, config["window"], 0),
            "sinks + window": streamed_losses(model, stream, config["window"], config["sinks"]),
            "recompute": recomputed_losses(model, stream, config["window"], start)}


def run(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train both models with one seed and read the streams.

    Metrics, for each training of :data:`TRAINING`: ``train_end/<training>`` (mean training loss
    of the last ``average`` steps); ``first_key_attention/<training>`` (the largest, over layers
    and heads, mean weight on the first key of queries from ``window`` on, in passes over
    ``attention_windows`` held-out windows of ``train_length``); and for each method of
    :data:`METHODS`, ``loss/<training>/<method>`` (mean loss after the first eviction: the
    predictions from token ``window + 1`` on, over every stream) and
    ``loss_by_block/<training>/<method>`` (the loss averaged over streams and blocks of ``block``
    tokens).
    """
    corpus = stdlib_corpus(config["train_modules"], config["held_out_modules"])
    window = config["window"]
    metrics: dict[str, Any] = {}
    for training in TRAINING:
        model, train_end = train_model(config, corpus, training, seed)
        metrics[f"train_end/{training}"] = round(train_end, 5)
        weights = first_key_attention(model, attention_windows(config, corpus, training), window)
        metrics[f"first_key_attention/{training}"] = round(weights.max().item(), 5)
        for method, losses in read(config, corpus, model, training).items():
            metrics[f"loss/{training}/{method}"] = round(losses[:, window + 1:].mean().item(), 5)
            blocks = losses.mean(0).view(-1, config["block"]).mean(1)  # (stream_length / block,)
            metrics[f"loss_by_block/{training}/{method}"] = [round(v, 5) for v in blocks.tolist()]
    return metrics
