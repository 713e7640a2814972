"""
Long-range dependencies: absolute vs relative encodings
=======================================================

Relative position encodings are often credited with better long-range dependencies: one of the
source articles reports that they improved a dialogue system's capture of long-range
dependencies by 15 %. What does "long range" ask of an encoding, and which encodings deliver it?
We train one small Transformer, six times with six encodings, to copy the token exactly
:math:`D` positions back, and measure its accuracy as :math:`D` grows.
"""

# %%
# The task: copy the token :math:`D` back
# ---------------------------------------
# The input is a stream of 40 random tokens from a vocabulary of 16. At every position :math:`t`
# the model has four outputs, one for each distance :math:`D \in \{1, 4, 12, 24\}`, and output
# :math:`D` must name the token at position :math:`t - D` (positions with :math:`t < D` are
# not scored). The tokens are random, so content gives no clue: the only way to the answer is to
# attend to the key exactly :math:`D` positions back. Guessing gives :math:`1/16`.
#
# The model is :class:`posenc.models.Transformer` (causal, one layer, width 32, four heads: as
# many as there are distances) with one linear read-out per distance. Only ``position`` changes
# between runs: absolute encodings added to the input (``"sinusoidal"``, ``"learned"``) and
# relative ones inside attention (``"shaw"``, ``"t5"``, ``"rope"``, ``"alibi"``), each with the
# library's defaults.
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

import posenc
from posenc.models import Transformer, TransformerConfig, train

vocab, length = 16, 40
distances = torch.tensor([1, 4, 12, 24])


def make_batch(generator, size=16):
    """Random tokens (size, length) and targets (size, length, 4): the token D back, or -100."""
    tokens = torch.randint(0, vocab, (size, length), generator=generator)
    source = torch.arange(length)[None, :, None] - distances  # (1, length, 4): position t - D
    copied = tokens[:, :, None].expand(-1, -1, len(distances))
    targets = copied.gather(1, source.clamp(min=0).expand(size, -1, -1))
    return tokens, torch.where(source >= 0, targets, -100)


class Lookup(nn.Module):
    """A causal Transformer and one linear read-out per distance."""

    def __init__(self, config):
        super().__init__()
        self.readout = nn.Linear(config.dim, len(distances) * vocab)
        self.transformer = Transformer(config)

    def forward(self, tokens):
        hidden = self.transformer(tokens)  # (batch, length, dim)
        return self.readout(hidden).view(*tokens.shape, len(distances), vocab)


def loss_fn(model, batch):
    tokens, targets = batch
    return nn.functional.cross_entropy(model(tokens).flatten(0, 2), targets.flatten(), ignore_index=-100)


tokens, targets = make_batch(torch.Generator().manual_seed(1000), size=4)
print("tokens:           ", tokens[0, 20:30].tolist())
for column, d in enumerate(distances.tolist()):
    print(f"targets for D = {d:2d}:", targets[0, 20:30, column].tolist())

# %%
# What each encoding can express
# ------------------------------
# Attending to "exactly :math:`D` back" needs a score that peaks at distance :math:`D`.
#
# * Shaw et al. learn one vector per relative distance, clipped at :math:`K` (16 by default):
#   every distance from :math:`K` on shares one vector, so no head can prefer 24 over 25.
# * T5 learns one scalar per bucket and head; a causal model's 32 buckets are exact for distances
#   below 16 and logarithmic beyond, where neighbouring distances share a bucket.
# * ALiBi subtracts a multiple of the distance from every score. The penalty only grows with
#   distance, so by position alone a head prefers the nearest tokens; nothing in it peaks at
#   :math:`D`.
# * RoPE's score :math:`q^\top R_{D}\, k` can peak at any distance, if training finds the
#   right rotation.
# * The absolute encodings must learn "position :math:`t` attends to :math:`t - D`" for every
#   :math:`t`; sinusoids make that a rotation too (see
#   :ref:`sphx_glr_auto_examples_02_properties_plot_relative_rotation.py`), a learned table has to
#   discover it position by position.
#
# The rows of Shaw's table and T5's buckets by distance, with the defaults of
# :class:`posenc.models.TransformerConfig`:
defaults = TransformerConfig(vocab_size=vocab)
shaw_rows = posenc.relative_position_indices(length, length, defaults.max_relative_position)
shaw_rows = shaw_rows[-1].flip(0)  # last query; index = distance 0, 1, ...
t5_buckets = posenc.t5_relative_position_bucket(-torch.arange(length), bidirectional=False,
                                                num_buckets=defaults.t5_num_buckets,
                                                max_distance=defaults.t5_max_distance)
print("distance:   ", list(range(10, 30)))
print("Shaw row:   ", shaw_rows[10:30].tolist())
print("T5 bucket:  ", t5_buckets[10:30].tolist())
print("ALiBi slopes of the four heads:", [f"{s:.4f}" for s in posenc.alibi_slopes(4).tolist()])

# %%
# Training
# --------
# Every model is trained with :func:`posenc.models.train` for the same number of steps, batches
# of 16 streams, learning rate 0.006, three seeds, and scored on 1000 held-out streams. This
# default run is small, so that the page builds in well under a minute on two cores; set the
# environment variable ``POSENC_FULL=1`` for width 64 and 1500 steps instead of 200.
FULL = os.environ.get("POSENC_FULL") == "1"
steps, dim, seeds = (1500, 64, range(3)) if FULL else (200, 32, range(3))
encodings = ["sinusoidal", "learned", "shaw", "t5", "rope", "alibi"]
names = {"sinusoidal": "sinusoidal", "learned": "learned", "shaw": "Shaw", "t5": "T5 bias",
         "rope": "RoPE", "alibi": "ALiBi"}
test_tokens, test_targets = make_batch(torch.Generator().manual_seed(2000), size=1000)
scored = test_targets >= 0


def make_model(position, seed):
    torch.manual_seed(seed)
    config = TransformerConfig(vocab_size=vocab, dim=dim, num_heads=len(distances), num_layers=1,
                               max_len=length, position=position, causal=True)
    return Lookup(config)


accuracy, models = {}, {}  # accuracy[position]: (seeds, distances)
for position in encodings:
    per_seed = []
    for seed in seeds:
        model = make_model(position, seed)
        train(model, loss_fn, make_batch, steps=steps, lr=6e-3, seed=seed, warmup=20)
        with torch.no_grad():
            correct = (model(test_tokens).argmax(-1) == test_targets) & scored
        per_seed.append((correct.sum((0, 1)) / scored.sum((0, 1))).numpy())
        models[position, seed] = model
    accuracy[position] = np.stack(per_seed)

print("accuracy, mean over seeds (min-max)")
print(f"{'':>11}" + "".join(f"{f'D = {d}':>18}" for d in distances.tolist()))
for position, acc in accuracy.items():
    cells = [f"{acc[:, i].mean():>8.3f} ({acc[:, i].min():.2f}-{acc[:, i].max():.2f})"
             for i in range(len(distances))]
    print(f"{names[position]:>11}" + "".join(cells))

# The reading of the results below relies on these (chance is 1 / 16).
mean_acc = {position: acc.mean(0) for position, acc in accuracy.items()}  # by distance: D = 1, 4, 12, 24
assert (mean_acc["shaw"][:3] > 0.95).all() and (mean_acc["t5"][:3] > 0.95).all()
assert mean_acc["shaw"][3] < 0.1 and 0.1 < mean_acc["t5"][3] < 0.9
assert (mean_acc["rope"][:2] > 0.95).all() and (mean_acc["rope"][2:] < 0.1).all()
assert mean_acc["sinusoidal"][0] > 0.9 and mean_acc["sinusoidal"][1] > 0.1
assert (mean_acc["learned"][:2] < mean_acc["sinusoidal"][:2]).all()
assert mean_acc["alibi"].max() < 0.9 and mean_acc["alibi"].min() > 1 / 16 + 0.03

# %%
# Accuracy against distance
# -------------------------
# One line per encoding (mean of the seeds, bars from the lowest to the highest seed), with the
# end of the exact range of Shaw's and T5's tables marked.
fig, ax = plt.subplots(figsize=(7, 4.2))
markers = ["o", "s", "^", "v", "D", "P"]
for marker, (position, acc) in zip(markers, accuracy.items()):
    mean = acc.mean(0)
    ax.errorbar(distances, mean, yerr=[mean - acc.min(0), acc.max(0) - mean], marker=marker,
                capsize=3, label=names[position])
ax.axhline(1 / vocab, color="gray", linestyle="--", label="chance (1/16)")
ax.axvline(defaults.max_relative_position, color="gray", linestyle=":",
           label="Shaw's clip, end of T5's exact buckets")
ax.set_xticks(distances.tolist())
ax.set_xlabel("distance $D$ to the token to copy")
ax.set_ylabel("held-out accuracy")
ax.set_ylim(0, 1.05)
ax.set_title("Copying the token $D$ positions back")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
plt.show()

# %%
# Where the heads look
# --------------------
# The attention weights of the trained models (seed 0), averaged over the last ten queries of
# the test streams, as a function of the distance to the key. We read them with a forward hook
# on the attention's dropout, which receives the softmax weights.


def attention_by_distance(model):
    """Mean attention weight of each head at distances 0..30, queries 30..39: (heads, 31)."""
    captured = []
    hook = model.transformer.blocks[0].attn.drop.register_forward_hook(
        lambda module, inputs, output: captured.append(output))
    with torch.no_grad():
        model(test_tokens[:200])
    hook.remove()
    weights = captured[0].mean(0)  # (heads, query, key)
    queries = torch.arange(30, length)
    keys = queries[:, None] - torch.arange(31)  # (10 queries, 31 distances)
    return weights[:, queries[:, None], keys].mean(1)


fig, axes = plt.subplots(2, 3, figsize=(10, 5.6), sharex=True, sharey=True)
for ax, position in zip(axes.flat, encodings):
    by_distance = attention_by_distance(models[position, 0])
    for head, row in enumerate(by_distance):
        ax.plot(row, label=f"head {head + 1}")
    for d in distances.tolist():
        ax.axvline(d, color="gray", linestyle=":", linewidth=0.8)
    ax.set_title(names[position])
for ax in axes[1]:
    ax.set_xlabel("distance to the key")
for ax in axes[:, 0]:
    ax.set_ylabel("attention weight")
axes[0, 0].legend(fontsize=8)
fig.suptitle("Attention by distance after training (dotted: the four target distances)")
plt.show()

# %%
# Reading the results
# -------------------
# Within their exact range the table-based relative encodings, Shaw's and T5's, learn every
# distance in this short run, and their heads' attention peaks at the target distances. At
# :math:`D = 24`, past that range, Shaw's model stays at chance: the distances it would have to
# tell apart share one vector, and none of its heads looks there. T5's gets part of the way,
# with attention spread evenly over the distances that share the bucket of 24 (the table of
# buckets above). RoPE, relative but without a table, learns the two short distances as quickly
# and the two long ones not at all in this run. The sinusoidal model learns :math:`D = 1` and
# starts on :math:`D = 4`; the learned table is slowest. ALiBi copies reliably at no distance,
# yet stays above chance at every one: its heads' attention falls smoothly with distance, and
# such blends of the recent tokens carry a little information about each of them.
#
# A short run measures how fast an encoding learns as much as what it can express. We also ran
# the full version (``POSENC_FULL=1``: width 64, 1500 steps, three seeds; about three minutes of
# CPU time on a two-core machine). There the differences at short range disappear: every
# encoding except ALiBi learns :math:`D = 1` and :math:`D = 4`; at :math:`D = 12` the learned
# table joins Shaw's and T5's, and the sinusoidal and RoPE models get there in some of their
# seeds. At :math:`D = 24`, Shaw's model stays at chance and T5's stays limited by its bucket,
# while the sinusoidal model copies reliably from 24 back in some of its seeds — the only
# encoding to do so. Run it to see the numbers; they are not on this page because the default
# build does not compute them.
#
# So "relative" is not one thing, and "better at long range" depends on the distance, the
# encoding's design and the training budget. Tables per distance (Shaw, T5) learn fastest and
# are capped where the table stops being exact; a pure recency bias (ALiBi) gives no single head
# a way to point at one distance. The source article's 15 % came from a dialogue system that we
# cannot reproduce; its long-range dependencies are probably found mostly by content, not by
# exact offset, which is a different demand from this task's and one this page does not
# measure.
#
# What this shows
# ---------------
# * Copying from exactly :math:`D` back needs a score that can single out one distance: a
#   clipped table (Shaw) cannot beyond its clip, T5's logarithmic buckets only roughly, ALiBi's
#   monotone penalty not at all.
# * Within their exact range Shaw's and T5's tables learn fastest; RoPE and the absolute
#   encodings learn the short distances first (the printed table).
# * "Relative encodings capture long-range dependencies better" holds here only for some relative
#   encodings, at some distances, after a short training.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
column = {d: i for i, d in enumerate(distances.tolist())}


def mean_at(position, d):
    return accuracy[position][:, column[d]].mean()


best_far = max(encodings, key=lambda position: mean_at(position, 24))

claims = [
    {
        "claim": "Relative position encoding improves the capture of long-range dependencies "
        "(by 15 % in a dialogue system).",
        "source": "seed article",
        "measured": f"copy D back, {len(seeds)} seeds, {steps} steps; D = 12: Shaw "
        f"{mean_at('shaw', 12):.2f}, T5 {mean_at('t5', 12):.2f}, RoPE {mean_at('rope', 12):.2f}, "
        f"ALiBi {mean_at('alibi', 12):.2f} vs sinusoidal {mean_at('sinusoidal', 12):.2f}, learned "
        f"{mean_at('learned', 12):.2f}; D = 24: best {names[best_far]} {mean_at(best_far, 24):.2f} "
        f"(chance {1 / vocab:.3f})",
        "verdict": "holds with conditions",
    },
    {
        "claim": "A clipped relative encoding cannot tell apart distances beyond its clipping distance.",
        "source": "common description of Shaw et al. (2018)",
        "measured": f"Shaw (K = {defaults.max_relative_position}) at D = 24: {mean_at('shaw', 24):.3f} "
        f"(chance {1 / vocab:.3f}); at D = 12: {mean_at('shaw', 12):.3f}",
        "verdict": "holds",
    },
]
