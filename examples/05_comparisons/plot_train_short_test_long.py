"""
Train short, test long: which encodings extrapolate?
====================================================

A language model is trained on sequences of one length and then asked to read longer ones. Does
its held-out loss stay where it was, improve with the extra context, or fall apart? We train one
small character-level Transformer seven times — no position information (NoPE), sinusoidal,
learned, T5 buckets, RoPE, ALiBi and CoPE, nothing else changed — on 32-character windows of
Python source, and evaluate each at 1, 2, 4 and 8 times that length.
"""

# %%
# The data: Python's own source code
# ----------------------------------
# The text is the standard library of the interpreter that runs this page, read as characters:
# six modules for training, two others held out for evaluation. Every ASCII character of the
# training text gets an id; anything else maps to one extra "unknown" id. Nothing is downloaded,
# so the numbers below depend only on the Python version (printed) and the seeds.
import os
import sys

import matplotlib.pyplot as plt
import torch
from torch import nn

from posenc.models import CausalLM, TransformerConfig, next_token_loss, stdlib_corpus, train

train_modules = ["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"]
held_out_modules = ["textwrap", "shutil"]
corpus = stdlib_corpus(train_modules, held_out_modules)
train_ids, held_out_ids, unknown = corpus.train, corpus.held_out, corpus.unknown
print(f"Python {sys.version.split()[0]}: {len(train_ids):,} training characters, "
      f"{len(held_out_ids):,} held-out characters, vocabulary of {unknown + 1}")

# %%
# One model, seven encodings
# --------------------------
# A two-layer causal Transformer from :mod:`posenc.models` (width 64, four heads), trained with
# :func:`posenc.models.train` on random windows of ``train_len = 32`` characters. Only
# ``position`` changes between runs; with the same seed every shared weight starts equal. Two
# settings need a word:
#
# * ``"learned"`` gets a table of ``8 * train_len`` rows so that it can be evaluated at all. Rows
#   past ``train_len - 1`` never receive a gradient: at test time they are still their random
#   initial values (checked below).
# * T5's bias uses 32 buckets that end at distance ``train_len``, so that every bucket is trained
#   and longer distances share the last one, as in T5 itself (trained on 512 tokens, buckets
#   ending at distance 128). With the default ``max_distance`` of 128, distances past this
#   page's training length would fall into buckets the model never saw.
#
# Seven encodings times two seeds is what fits the page's time budget on a two-core machine;
# the conclusions below hold in each seed separately (checked where they are drawn), and the
# figures show both seeds. Set the environment variable ``POSENC_FULL=1`` before building to
# train five times longer with three seeds.
FULL = os.environ.get("POSENC_FULL") == "1"
train_len, factors = 32, (1, 2, 4, 8)
steps, seeds = (1000, (0, 1, 2)) if FULL else (200, (0, 1))
batch_size, lr, warmup = 16, 3e-3, 20
encodings = ["none", "sinusoidal", "learned", "t5", "rope", "alibi", "cope"]
names = {"none": "NoPE", "sinusoidal": "sinusoidal", "learned": "learned", "t5": "T5 bias",
         "rope": "RoPE", "alibi": "ALiBi", "cope": "CoPE"}


def make_config(position):
    return TransformerConfig(
        vocab_size=unknown + 1, dim=64, num_heads=4, num_layers=2, max_len=8 * train_len,
        position=position, causal=True, t5_max_distance=train_len,
    )


make_batch = corpus.windows(train_len, batch_size)  # inputs and their next characters


models, final_loss = {}, {}
for position in encodings:
    for seed in seeds:
        torch.manual_seed(seed)
        model = CausalLM(make_config(position))
        if position == "learned":
            initial_table = model.transformer.position.table.weight.detach().clone()
        log = train(model, next_token_loss, make_batch, steps=steps, lr=lr, seed=seed, warmup=warmup)
        models[position, seed] = model
        final_loss[position, seed] = sum(log.losses[-20:]) / 20
        if position == "learned":
            table = model.transformer.position.table.weight.detach()
            assert torch.equal(table[train_len:], initial_table[train_len:])  # never trained
            assert not torch.equal(table[:train_len], initial_table[:train_len])
    print(f"{names[position]:>10}: training loss (last 20 steps) "
          + ", ".join(f"{final_loss[position, seed]:.3f}" for seed in seeds))

# %%
# How much has the learned table moved? Its rows start small (standard deviation 0.02, as in
# BERT and Hugging Face's GPT-2) while the token vectors start with unit-variance entries. The
# mean length of the rows the model trained, of the rows it never saw, and of the token vectors:
for seed in seeds:
    transformer = models["learned", seed].transformer
    rows = transformer.position.table.weight.detach().norm(dim=1)
    token_vectors = transformer.embed(torch.arange(unknown + 1)).detach().norm(dim=1)
    print(f"seed {seed}: mean norm of trained position rows {rows[:train_len].mean():.3f}, "
          f"untrained rows {rows[train_len:].mean():.3f}, token vectors {token_vectors.mean():.3f}")
    assert rows[:train_len].mean() < 0.1 * token_vectors.mean()  # "still small", said below

# %%
# Evaluation on the same characters at every length
# -------------------------------------------------
# As in the ALiBi paper, the held-out text is cut into non-overlapping windows of the evaluation
# length :math:`n` and every character of the window is predicted from the ones before it in the
# window. The predicted characters are the same 8192 for every :math:`n`; only how much context
# each one gets changes. A model that extrapolates perfectly should only gain from longer windows.
# The loss is the mean cross-entropy in nats per character.
eval_tokens = 8192
inputs_all, targets_all = held_out_ids[:eval_tokens], held_out_ids[1 : eval_tokens + 1]


@torch.no_grad()
def token_losses(model, n):
    """Cross-entropy of every held-out character, in text order, windows of length n."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: as fast as two for this size, and half the CPU time
    try:
        logits = model(inputs_all.view(-1, n))  # (windows, n, vocab)
    finally:
        torch.set_num_threads(previous_threads)
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets_all, reduction="none")


losses = {}  # (encoding, seed, factor) -> loss of each of the eval_tokens characters
for (position, seed), model in models.items():
    for factor in factors:
        losses[position, seed, factor] = token_losses(model, factor * train_len)


def mean_loss(position, factor):
    return sum(losses[position, seed, factor].mean().item() for seed in seeds) / len(seeds)


print(f"held-out loss (mean of {len(seeds)} seeds), training length {train_len}")
print(f"{'':>10} " + " ".join(f"{f'{f}x = {f * train_len}':>10}" for f in factors) + f" {'8x - 1x':>8}")
for position in encodings:
    row = [mean_loss(position, f) for f in factors]
    print(f"{names[position]:>10} " + " ".join(f"{v:>10.3f}" for v in row) + f" {row[-1] - row[0]:>+8.3f}")

# %%
# The picture: loss against evaluation length, one line per encoding (mean of the seeds), one
# dot per seed. A flat or falling line extrapolates; a rising line gets worse as it sees
# positions or distances it was never trained on.
lengths = [f * train_len for f in factors]
colors = {"none": "k", "sinusoidal": "C0", "learned": "C1", "t5": "C2", "rope": "C3", "alibi": "C4",
          "cope": "C5"}
fig, ax = plt.subplots(figsize=(7, 4.8))
for position in encodings:
    ax.plot(lengths, [mean_loss(position, f) for f in factors], color=colors[position], marker="o",
            linestyle="--" if position == "none" else "-", label=names[position])
    for seed in seeds:
        ax.plot(lengths, [losses[position, seed, f].mean().item() for f in factors], color=colors[position],
                marker=".", linestyle="none", alpha=0.4)
ax.axvline(train_len, color="grey", linewidth=0.8)
ax.set_xscale("log", base=2)
ax.set_xticks(lengths, [str(n) for n in lengths])
ax.set_xlabel("evaluation length (characters)")
ax.set_ylabel("held-out loss (nats per character)")
ax.set_title(f"Trained on {train_len} characters, evaluated on longer windows")
fig.legend(loc="outside lower center", ncols=4)
plt.show()

# %%
# Where the loss goes up
# ----------------------
# The mean over a window hides where the errors are. Take the longest windows
# (:math:`8 \times 32 = 256` characters) and compare each character's loss there with its loss
# in the training-length evaluation, where it was predicted from at most 31 characters of
# context: the difference isolates what the longer window did to that character. It is zero, up
# to rounding, for the first ``train_len`` positions, where both evaluations see the same window
# start (checked below). Past them a negative difference means the extra context helped; a positive
# one means the unseen positions, or distances, hurt. The curves average over windows, seeds and
# groups of 8 neighbouring positions.
n_long = factors[-1] * train_len
seed_change = {}  # (encoding, seed) -> (n_long,) mean change of loss at each position
for (position, seed), model in models.items():
    diff = (losses[position, seed, factors[-1]] - losses[position, seed, 1]).view(-1, n_long)
    assert diff[:, :train_len].abs().max() < 1e-4  # same context: same loss
    seed_change[position, seed] = diff.mean(dim=0)  # mean over the windows
change = {p: torch.stack([seed_change[p, seed] for seed in seeds]).mean(dim=0) for p in encodings}

group = 8
fig, ax = plt.subplots(figsize=(7, 4.8))
for position in encodings:
    curve = change[position].view(-1, group).mean(dim=1)  # (n_long / group,)
    centres = torch.arange(len(curve)) * group + (group - 1) / 2
    ax.plot(centres, curve, color=colors[position], linestyle="--" if position == "none" else "-",
            label=names[position])
ax.axhline(0, color="grey", linewidth=0.8)
ax.axvline(train_len, color="grey", linewidth=0.8)
ax.set_xlabel("position in the window")
ax.set_ylabel(f"loss change vs. windows of {train_len} (nats)")
ax.set_title(f"Loss by position in windows of {n_long} characters")
fig.legend(loc="outside lower center", ncols=4)
plt.show()

# %%
# The same in numbers: the mean change over the ``train_len`` positions just past the training
# length and over the last ``train_len`` positions of the long windows, the farthest from
# anything seen in training.
just_past = {p: change[p][train_len : 2 * train_len].mean().item() for p in encodings}
farthest = {p: change[p][-train_len:].mean().item() for p in encodings}
print(f"{'':>10} {f'positions {train_len}-{2 * train_len - 1}':>16} "
      f"{f'positions {n_long - train_len}-{n_long - 1}':>18}")
for position in sorted(encodings, key=farthest.get):
    print(f"{names[position]:>10} {just_past[position]:>+16.3f} {farthest[position]:>+18.3f}")

# %%
# Set beside the ALiBi paper
# --------------------------
# Press, Smith and Lewis (ICLR 2022, "Train Short, Test Long", figure 1) trained much larger
# word-level models and reported this ordering past the training length: the sinusoidal and
# rotary models degrade quickly, the T5 bias degrades more slowly, and ALiBi stays flat. The
# increase of the held-out loss from 1x to 8x in this run, per seed and sorted by its mean:
increase = {(p, seed): (losses[p, seed, factors[-1]].mean() - losses[p, seed, 1].mean()).item()
            for p in encodings for seed in seeds}
mean_increase = {p: sum(increase[p, seed] for seed in seeds) / len(seeds) for p in encodings}
for position in sorted(encodings, key=mean_increase.get):
    per_seed = ", ".join(f"{increase[position, seed]:+.3f}" for seed in seeds)
    print(f"{names[position]:>10}: 8x - 1x = {per_seed} (mean {mean_increase[position]:+.3f})")

# %%
# The paper's ordering holds in every seed; the checks below fail the build if a run ever
# disagrees. ALiBi's loss rises the least of all seven; sinusoidal and RoPE rise more than T5's
# bucketed bias, CoPE and NoPE. The middle ranks change from seed to seed (printed below).
# The learned table is left out of these checks: where it falls depends on how long it was
# trained (see *The full run* below).
for seed in seeds:
    ranked = sorted(encodings, key=lambda p: increase[p, seed])
    assert ranked[0] == "alibi" and "cope" in ranked[:3]
    assert min(increase["sinusoidal", seed], increase["rope", seed]) > max(
        increase[p, seed] for p in ("t5", "cope", "none")
    )
for p in encodings:
    ranks = [sorted(encodings, key=lambda q: increase[q, seed]).index(p) + 1 for seed in seeds]
    print(f"{names[p]:>10}: rank by increase in each seed " + ", ".join(map(str, ranks)))

# %%
# What the paper's figure does not show, and this small run adds:
#
# * **Flat is not free.** At the training length ALiBi's loss is above those of RoPE, T5 and
#   CoPE, and RoPE starts below ALiBi and ends above it (first table). Which encoding is best
#   depends on how far past the training length the model will be used.
# * **Flat is not better either.** ALiBi's per-position change stays near zero (second figure):
#   its loss does not get worse, but this model gets nothing out of the extra context.
# * **NoPE sits in the middle.** A causal model without any encoding still infers positions
#   from its mask (:ref:`sphx_glr_auto_examples_04_variants_plot_nope.py`); past the training
#   length that inference meets counts it never saw.
# * **CoPE**, which the ALiBi paper predates, is among the three that rise least; its positions
#   are counts of open gates rather than token indices
#   (:ref:`sphx_glr_auto_examples_04_variants_plot_cope.py`).
# * **The sinusoidal model** is hurt at once: just past the training length its loss change is
#   already larger than RoPE's. **RoPE** degrades gradually, as more and more of each query's
#   keys sit at distances it never saw: its change over the farthest positions is larger than
#   just past the training length.
for seed in seeds:
    at = {(p, f): losses[p, seed, f].mean().item() for p in encodings for f in factors}
    assert at["alibi", 1] > max(at[p, 1] for p in ("rope", "t5", "cope"))
    assert at["rope", 1] < at["alibi", 1] and at["rope", 8] > at["alibi", 8]
    assert seed_change["alibi", seed][train_len:].mean().abs() < 0.05
    early = {p: seed_change[p, seed][train_len : 2 * train_len].mean() for p in ("sinusoidal", "rope")}
    assert early["sinusoidal"] > early["rope"]
    assert seed_change["rope", seed][-train_len:].mean() > early["rope"]

# %%
# The full run
# ------------
# In this default run the learned table is still small beside the token vectors (norms printed
# above), and the learned model's loss is close to NoPE's at every length (first
# table): it has not yet learned to use positions, so its untrained rows do little harm.
#
# We ran the page once with ``POSENC_FULL=1`` while writing it, on the same shared two-core
# machine (about three and a half minutes of CPU time). Longer training changes that one
# result: the trained rows grow several times longer than here, the learned model beats NoPE at
# the training length, and past it, where its rows are untrained, it degrades about as much as
# the sinusoidal and RoPE models. Everything else stated above holds there too. The checks below
# hold each version of the learned table's story to the run it describes.
for seed in seeds:
    learned = [losses["learned", seed, f].mean().item() for f in factors]
    nope = [losses["none", seed, f].mean().item() for f in factors]
    if FULL:
        assert learned[0] < nope[0]
        assert increase["learned", seed] > max(increase[p, seed] for p in ("t5", "cope", "none"))
    else:
        assert all(abs(a - b) < 0.05 for a, b in zip(learned, nope))

# %%
# This is one tiny model (two layers, width 64), one character-level corpus and a few hundred
# training steps; the paper's models were far larger and trained far longer. The ordering
# agrees; the sizes of the gaps are not comparable.
#
# What this shows
# ---------------
# * Trained on 32 characters, the sinusoidal and RoPE models get clearly worse on longer
#   windows of held-out text, ALiBi's loss does not move, and T5's bias, CoPE and NoPE are in
#   between: the qualitative ordering of the ALiBi paper, in every seed of this run.
# * A table that is defined at every position is not a model that generalises to every
#   position: at 8 times its training length the sinusoidal model is worse than the model with
#   no encoding at all.
# * ALiBi's stability costs loss at the training length, and this small model does not use the
#   extra context it is given.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
for seed in seeds:
    assert losses["sinusoidal", seed, 8].mean() > losses["none", seed, 8].mean()
    assert losses["sinusoidal", seed, 8].mean() > losses["sinusoidal", seed, 1].mean()
claims = [
    {
        "claim": "The sinusoidal encoding lets a model handle sequences longer than those it was trained "
        "on (\"tested at length 5000, still effective\").",
        "source": "seed article",
        "measured": f"trained at {train_len}: held-out loss {mean_loss('sinusoidal', 1):.3f} at "
        f"{train_len}, {mean_loss('sinusoidal', 8):.3f} at {8 * train_len} "
        f"(no encoding: {mean_loss('none', 8):.3f} at {8 * train_len}; {len(seeds)} seeds); the table itself "
        f"stays bounded and distinct at 5000-5511 (page: extrapolation of the sinusoidal table)",
        "verdict": "does not hold",
    },
    {
        "claim": "ALiBi extrapolates better than sinusoidal and rotary position encodings.",
        "source": "Press, Smith and Lewis, ICLR 2022",
        "measured": f"held-out loss change from {train_len} to {8 * train_len} characters: ALiBi "
        f"{mean_increase['alibi']:+.3f}, sinusoidal {mean_increase['sinusoidal']:+.3f}, "
        f"RoPE {mean_increase['rope']:+.3f} (mean of {len(seeds)} seeds)",
        "verdict": "holds",
    },
]
