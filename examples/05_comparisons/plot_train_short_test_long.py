"""
Train short, test long: which encodings extrapolate?
====================================================

A language model is trained on sequences of one length and then asked to read longer ones. Does
its held-out loss stay where it was, improve with the extra context, or fall apart? We train one
small character-level Transformer seven times — no position information (NoPE), sinusoidal,
learned, T5 buckets, RoPE, ALiBi and CoPE, nothing else changed — on 32-character windows of
Python source, and evaluate each at 1, 2, 4 and 8 times that length: with two seeds while this
page is built, and with five in a recorded, longer and wider run.

Where in a long window the loss rises, and which of the ALiBi paper's comparisons hold on the
recorded run, is on :ref:`sphx_glr_auto_examples_05_comparisons_plot_alibi_paper_ordering.py`.
"""

# %%
# The data: Python's own source code
# ----------------------------------
# The text is the standard library of the interpreter that runs this page, read as characters:
# six modules for training, two others held out for evaluation. Every ASCII character of the
# training text gets an id; anything else maps to one extra "unknown" id. Nothing is downloaded,
# so the numbers below depend only on the Python version (printed) and the seeds.
import sys

import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc
from posenc.experiments import build_run, load_record
from posenc.experiments import train_short_test_long as experiment

SHORT, FULL = experiment.SHORT, experiment.FULL
corpus = experiment.corpus()  # the experiment's data: posenc.experiments.train_short_test_long
print(f"Python {sys.version.split()[0]}: {len(corpus.train):,} training characters "
      f"({', '.join(experiment.TRAIN_MODULES)}), {len(corpus.held_out):,} held-out characters "
      f"({', '.join(experiment.HELD_OUT_MODULES)}), vocabulary of {corpus.vocab_size}")

# %%
# One model, seven encodings
# --------------------------
# A two-layer causal Transformer from :mod:`posenc.models` (four heads), trained with
# :func:`posenc.models.train` on random windows of ``train_len = 32`` characters. Only
# ``position`` changes between runs; with the same seed every shared weight starts equal.
#
# * ``"learned"`` gets a table of ``8 * train_len`` rows so that it can be evaluated at all; the
#   rows past ``train_len - 1`` never receive a gradient (checked below).
# * T5's bias has 32 buckets whose logarithmic part ends at distance ``train_len`` (the library's
#   default is 128), so that longer distances share the last bucket, as in T5 itself (trained on
#   512 tokens, buckets ending at distance 128). Which buckets do the training distances reach?
train_len, factors = SHORT["train_len"], SHORT["factors"]
t5 = experiment.model_config(SHORT, corpus.vocab_size, "t5")
bucket = posenc.t5_relative_position_bucket(-torch.arange(max(factors) * train_len), bidirectional=False,
                                            num_buckets=t5.t5_num_buckets, max_distance=t5.t5_max_distance)
never = sorted(set(range(t5.t5_num_buckets)) - set(bucket[:train_len].tolist()))
print(f"bucket of distance 0-{train_len - 1}:", bucket[:train_len].tolist(), "; never reached:", never)
print(f"buckets of distances {train_len - 1}-{len(bucket) - 1}:", bucket[train_len - 1 :].unique().tolist())
assert never and bucket[train_len - 1 :].unique().tolist() == [t5.t5_num_buckets - 1]

# %%
# So not every bucket is trained: a logarithmic step can be wider than one distance, and the
# printed bucket falls between two training distances. Its bias keeps its initial value (checked
# below), but no evaluation distance falls into it either; every distance from ``train_len - 1``
# on shares the last bucket, which training reaches, so the model meets no untrained bias.
#
# Training
# --------
# Batches of 16 windows, learning rate 0.003. Two sizes of the same experiment
# (:mod:`posenc.experiments.train_short_test_long`): the *build run*, small enough to run while
# this page is built, and the *recorded run*, made once with ``python -m posenc.experiments run
# train_short_test_long`` and stored with the site. The verdicts use the recorded run.
for name, config in (("build run", SHORT), ("recorded run", FULL)):
    print(f"{name:>12}: width {config['dim']} (RoPE: {config['dim'] // config['heads'] // 2} frequency pairs "
          f"per head), {config['steps']} steps, seeds {config['seeds']}")
build = build_run("train_short_test_long").arrays()  # metric: (seeds, ...)
record = load_record("train_short_test_long")
recorded = record.arrays()
runs = {"build run": build, "recorded run": recorded}
print("record:", record.provenance())
encodings = list(experiment.ENCODINGS)
names = {"none": "NoPE", "sinusoidal": "sinusoidal", "learned": "learned", "t5": "T5 bias", "rope": "RoPE",
         "alibi": "ALiBi", "cope": "CoPE"}
ratio = {name: run["learned/trained_row_norm"] / run["learned/token_norm"] for name, run in runs.items()}
for name, run in runs.items():
    assert (run["learned/untrained_row_change"] == 0).all() and (run["learned/trained_row_change"] > 0).all()
    assert (run["t5/bucket_change"][:, never] == 0).all() and (np.delete(run["t5/bucket_change"], never, 1) > 0).all()
    print(f"{name}: learned table, mean norm of trained rows {run['learned/trained_row_norm'].mean():.2f}, untrained "
          f"rows {run['learned/untrained_row_norm'].mean():.2f}, token vectors {run['learned/token_norm'].mean():.1f} "
          f"(mean of the seeds); trained rows / token vectors " + ", ".join(f"{r:.3f}" for r in ratio[name]))

# %%
# The learned table's rows start small (standard deviation 0.02, as in BERT and GPT-2 in transformers 5.24), the token
# vectors with unit-variance entries scaled by the square root of the width. In both runs the
# untrained rows and the unreached T5 bucket have not moved at all, while every other bucket and
# the trained rows have (checked above); the trained rows stay under a tenth of the token
# vectors' length in the build run and reach about a fifth in the recorded run.
assert (ratio["build run"] < 0.1).all() and ((0.1 < ratio["recorded run"]) & (ratio["recorded run"] < 0.3)).all()

# %%
# Evaluation on the same characters at every length
# -------------------------------------------------
# As in the ALiBi paper, the held-out text is cut into non-overlapping windows of the evaluation
# length :math:`n` and every character of the window is predicted from the ones before it in the
# window. The predicted characters are the same 8192 for every :math:`n`; only how much context
# each one gets changes. A model that extrapolates perfectly should only gain from longer windows.
# The loss is the mean cross-entropy in nats per character.
for name, run in runs.items():
    print(f"{name}: held-out loss, mean of {len(run['loss/none'])} seeds (min-max)")
    print(f"{'':>10}" + "".join(f"{f'{f}x = {f * train_len}':>20}" for f in factors))
    for position in encodings:
        loss = run[f"loss/{position}"]  # (seeds, factors)
        print(f"{names[position]:>10}" + "".join(f"{m:>8.3f} ({lo:.3f}-{hi:.3f})" for m, lo, hi
                                               in zip(loss.mean(0), loss.min(0), loss.max(0))))

# %%
# The picture: loss against evaluation length, one line per encoding (mean of the seeds), one
# dot per seed. A flat or falling line extrapolates; a rising line gets worse as it sees
# positions or distances it was never trained on.
lengths = [f * train_len for f in factors]
colors = {"none": "k", "sinusoidal": "C0", "learned": "C1", "t5": "C2", "rope": "C3", "alibi": "C4", "cope": "C5"}
fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True, layout="constrained")
for ax, (name, run) in zip(axes, runs.items()):
    for position in encodings:
        loss = run[f"loss/{position}"]
        ax.plot(lengths, loss.mean(0), color=colors[position], marker="o",
                linestyle="--" if position == "none" else "-", label=names[position])
        ax.plot(np.tile(lengths, len(loss)), loss.ravel(), ".", color=colors[position], alpha=0.4)
    ax.axvline(train_len, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set(xlabel="evaluation length (characters)", title=name)
axes[0].set_ylabel("held-out loss (nats per character)")
axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
fig.suptitle("Trained on 32 characters, evaluated on longer windows")
plt.show()
