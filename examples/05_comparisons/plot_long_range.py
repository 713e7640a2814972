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
import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc
from posenc.experiments import compare, load_record
from posenc.experiments import long_range as experiment
from posenc.models import TransformerConfig

SHORT, FULL = experiment.SHORT, experiment.FULL
vocab, length = SHORT["vocab"], SHORT["length"]
distances = torch.tensor(SHORT["distances"])
make_batch = experiment.batches(SHORT)  # the experiment's streams: posenc.experiments.long_range

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
#   :doc:`/properties/relative_rotation`), a learned table has to
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
# Every model is trained with :func:`posenc.models.train` on batches of 16 streams, learning rate
# 0.006, and scored on 1000 held-out streams. Two sizes of the same experiment
# (:mod:`posenc.experiments.long_range`): the *build run*, small enough to run while this page is
# built, and the *recorded run*, made once with ``python -m posenc.experiments run long_range`` and
# stored with the site. In the build run the model is 32 wide, so RoPE's heads are 8 wide (4
# frequency pairs); in the recorded run it is 128 wide (heads of 32, 16 frequency pairs). The
# verdicts use the recorded run.
encodings = list(experiment.ENCODINGS)
names = {"sinusoidal": "sinusoidal", "learned": "learned", "shaw": "Shaw", "t5": "T5 bias",
         "rope": "RoPE", "alibi": "ALiBi"}
for name, config in (("build run", SHORT), ("recorded run", FULL)):
    print(f"{name:>12}: width {config['dim']}, {config['steps']} steps, seeds {config['seeds']}")
test_tokens, test_targets = experiment.test_set(SHORT)
accuracy, models = {}, {}  # accuracy[position]: (seeds, distances)
for position in encodings:
    per_seed = []
    for seed in SHORT["seeds"]:
        models[position, seed] = experiment.train_model(SHORT, position, seed)
        per_seed.append(experiment.accuracy(models[position, seed], test_tokens, test_targets))
    accuracy[position] = np.array(per_seed)
record = load_record("long_range")
recorded = {position: np.array(record.values(f"accuracy/{position}")) for position in encodings}
print("record:", record.provenance())

for run_name, table in (("build run", accuracy), ("recorded run", recorded)):
    print(f"{run_name}: accuracy, mean over seeds (min-max)")
    print(f"{'':>11}" + "".join(f"{f'D = {d}':>18}" for d in distances.tolist()))
    for position, acc in table.items():
        cells = [f"{acc[:, i].mean():>8.3f} ({acc[:, i].min():.2f}-{acc[:, i].max():.2f})"
                 for i in range(len(distances))]
        print(f"{names[position]:>11}" + "".join(cells))

# The reading of the build run below relies on these (chance is 1 / 16).
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
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
markers = ["o", "s", "^", "v", "D", "P"]
for ax, (run_name, table) in zip(axes, (("build run", accuracy), ("recorded run", recorded))):
    for marker, (position, acc) in zip(markers, table.items()):
        mean = acc.mean(0)
        ax.errorbar(distances, mean, yerr=[mean - acc.min(0), acc.max(0) - mean], marker=marker,
                    capsize=3, label=names[position])
    ax.axhline(1 / vocab, color="gray", linestyle="--", label="chance (1/16)")
    ax.axvline(defaults.max_relative_position, color="gray", linestyle=":",
               label="Shaw's clip, end of T5's exact buckets")
    ax.set_xticks(distances.tolist())
    ax.set_xlabel("distance $D$ to the token to copy")
    ax.set_ylim(0, 1.05)
    ax.set_title(run_name)
axes[0].set_ylabel("held-out accuracy")
axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
fig.suptitle("Copying the token $D$ positions back")
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
# A short run measures how fast an encoding learns as much as what it can express; the recorded
# run is longer and wider. For the long distances the verdicts compare each relative encoding with
# the better of the two absolute ones, by the site's rule: a difference of the mean accuracies
# larger than twice the spread (largest minus smallest) of either encoding across the seeds
# decides; anything less is inconclusive (:func:`posenc.experiments.compare`).
absolute = {d: max(("sinusoidal", "learned"), key=lambda p: recorded[p][:, i].mean())
            for i, d in enumerate(distances.tolist())}
long_range = {}
for i, d in enumerate(distances.tolist()):
    if d < 12:
        continue
    for position in ("shaw", "t5", "rope", "alibi"):
        verdict, difference, spread = compare(recorded[absolute[d]][:, i], recorded[position][:, i])
        long_range[position, d] = verdict
        readable = verdict.replace("second", names[position]).replace("first", names[absolute[d]])
        print(f"D = {d:2d}: {names[position]:>7} minus {names[absolute[d]]:<10} {difference:+.3f} "
              f"(spread {spread:.3f}): {readable}")

# %%
# So "relative" is not one thing, and "better at long range" depends on the distance, the
# encoding's design and the training budget. Tables per distance (Shaw, T5) learn fastest in the
# build run and are capped where the table stops being exact; a pure recency bias (ALiBi) gives no
# single head a way to point at one distance. The source article's 15 % came from a dialogue system
# that we cannot reproduce; its long-range dependencies are probably found mostly by content, not
# by exact offset, which is a different demand from this task's and one this page does not
# measure.
#
# What this shows
# ---------------
# * Copying from exactly :math:`D` back needs a score that can single out one distance: a
#   clipped table (Shaw) cannot beyond its clip, T5's logarithmic buckets only roughly, ALiBi's
#   monotone penalty not at all.
# * Within their exact range Shaw's and T5's tables learn fastest; RoPE and the absolute
#   encodings learn the short distances first (the build run's table).
# * Whether "relative" helps at long range is decided encoding by encoding on the recorded run, with
#   the spread of its seeds (printed above).

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
column = {d: i for i, d in enumerate(distances.tolist())}
better = sorted({f"{names[p]} at D = {d}" for (p, d), v in long_range.items() if v == "second higher"})
worse = sorted({f"{names[p]} at D = {d}" for (p, d), v in long_range.items() if v == "first higher"})
shaw_far = recorded["shaw"][:, column[24]]
claims = [
    {
        "claim": "Relative position encoding improves the capture of long-range dependencies "
        "(by 15 % in a dialogue system).",
        "source": "seed article",
        "measured": f"copy D back, recorded run ({len(record.seeds)} seeds, width {FULL['dim']}, {FULL['steps']} "
        f"steps), each relative encoding against the better absolute one at D = 12 and 24: better in "
        f"{', '.join(better) or 'none'}; worse in {', '.join(worse) or 'none'}; the rest within twice the "
        f"spread. The dialogue system's 15 % cannot be rerun here (no dialogue data; see also the page on "
        f"Shaw et al.'s encoding)",
        # rule: holds if every relative encoding is better at both distances; holds with conditions if
        # some are; does not hold if none is and some are worse; inconclusive if nothing is decided
        "verdict": "holds" if len(better) == len(long_range) else "holds with conditions" if better
        else "does not hold" if worse else "inconclusive",
    },
    {
        "claim": "A clipped relative encoding cannot tell apart distances beyond its clipping distance.",
        "source": "common description of Shaw et al. (2018)",
        "measured": f"recorded run: Shaw (K = {defaults.max_relative_position}) at D = 24: "
        f"{shaw_far.min():.3f}-{shaw_far.max():.3f} over {len(shaw_far)} seeds (chance {1 / vocab:.3f}); "
        f"at D = 12: {recorded['shaw'][:, column[12]].mean():.3f}",
        # rule: holds if every seed stays within 0.02 of chance at D = 24
        "verdict": "holds" if (shaw_far < 1 / vocab + 0.02).all() else "does not hold",
    },
]
