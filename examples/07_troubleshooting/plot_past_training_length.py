"""
Perplexity explodes past the training length
============================================

A language model trained on sequences of 64 tokens is asked to read 256. On the first 64
positions nothing changes; further in, the loss climbs, and the perplexity (the exponential of
the loss) multiplies. With a learned position table the model may instead
refuse to run. We reproduce both on tiny character-level models, see what each encoding does
with positions it never saw, and measure the fixes: RoPE scaling swapped in after training,
ALiBi, and training on longer sequences.
"""

# %%
# What you see
# ------------
# * The model was evaluated at its training length and looked fine. On longer inputs the loss
#   on held-out text rises past the training length, at once or some way after it.
# * A model with a learned position table of ``max_len`` rows raises an error on a longer input.
#   Built with a larger table than the training data ever filled, it runs, and its loss rises
#   past the longest training sequence all the same.
# * Nothing warns: a sinusoidal or rotary encoding is defined at every position, so the model
#   runs at any length.
#
# Reproduce it
# ------------
# Three small causal language models (:class:`posenc.models.CausalLM`: two layers, four heads,
# width 64) that differ only in their position encoding — a learned table, the sinusoidal table,
# RoPE — are trained with :func:`posenc.models.train` on windows of 64 characters of a few
# modules of Python's standard library. The learned model gets a table of 256 rows, of which
# training only ever reaches the first 64. Held-out text comes from another module. The default
# run takes a few seconds per model on two cores; set the environment variable
# ``POSENC_FULL=1`` for a run four times longer.
import copy
import math
import os

import matplotlib.pyplot as plt
import torch
from torch.nn import functional as F

import posenc
from posenc.models import CausalLM, TransformerConfig, next_token_loss, stdlib_corpus, train

STEPS = 800 if os.environ.get("POSENC_FULL") == "1" else 200
TRAIN_LENGTH, BATCH, EVAL_LENGTHS = 64, 32, (64, 128, 256)

corpus = stdlib_corpus(["argparse", "textwrap", "dataclasses", "inspect"], ["pathlib"])
train_data, held_out, unknown = corpus.train, corpus.held_out, corpus.unknown
print(f"training text {len(train_data)} characters, held-out {len(held_out)}, vocabulary {unknown + 1}")

# %%
# Training, with everything but the position encoding fixed (same seed, same data, same steps):


def new_model(position, max_len=TRAIN_LENGTH):
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=unknown + 1, dim=64, num_heads=4, num_layers=2,
                               max_len=max_len, position=position, causal=True)
    return CausalLM(config)


models = {
    "learned": new_model("learned", max_len=256),
    "sinusoidal": new_model("sinusoidal"),
    "RoPE": new_model("rope"),
}
initial_table = models["learned"].transformer.position.table.weight.detach().clone()
for name, model in models.items():
    log = train(model, next_token_loss, corpus.windows(TRAIN_LENGTH, BATCH), steps=STEPS, lr=3e-3,
                warmup=20, seed=0, threads=1)
    print(f"{name:>10}: training loss, last 20 steps {sum(log.losses[-20:]) / 20:.3f}")

# %%
# The same 128 held-out windows are read at lengths 64, 128 and 256. ``per_position`` keeps the
# loss of every position, averaged over the windows; the table shows the perplexity of each
# length, the exponential of the mean loss over its positions. In a causal model whose encoding
# does not depend on the input's length, position :math:`t` sees only the tokens up to
# :math:`t`, so the first 64 positions of the 256-character pass *are* the 64-character pass
# (checked below, once); the other lengths are read off the long pass.
generator = torch.Generator().manual_seed(1)
starts = torch.randint(0, len(held_out) - max(EVAL_LENGTHS) - 1, (128,), generator=generator)
windows = torch.stack([held_out[s: s + max(EVAL_LENGTHS) + 1] for s in starts.tolist()])


@torch.no_grad()
def per_position(model, length):
    tokens = windows[:, : length + 1]
    logits = model(tokens[:, :-1])  # (batch, length, vocab)
    return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)


results, curves = {}, {}  # perplexity per length; loss per position at length 256


def show(name):
    print(f"{name:>26}: " + "   ".join(f"{results[name][length]:6.2f}" for length in EVAL_LENGTHS))


def evaluate(name, model, depends_on_length=False):
    curves[name] = per_position(model, max(EVAL_LENGTHS))
    losses = {length: per_position(model, length) if depends_on_length else curves[name][:length]
              for length in EVAL_LENGTHS}
    results[name] = {length: math.exp(loss.mean().item()) for length, loss in losses.items()}
    show(name)


def header():
    print(f"{'perplexity at length':>26}: " + "   ".join(f"{length:>6}" for length in EVAL_LENGTHS))


header()
for name, model in models.items():
    evaluate(name, model)
assert torch.allclose(per_position(models["RoPE"], 64), curves["RoPE"][:64], atol=1e-5)

# %%
# Loss by position, for the windows read at length 256, averaged over blocks of 8 positions.
# Position :math:`t` predicts character :math:`t + 1` from the characters up to :math:`t`.
BLOCK = 8
centres = torch.arange(max(EVAL_LENGTHS)).view(-1, BLOCK).double().mean(1).numpy()


def plot_curves(ax, names, **styles):
    for name in names:
        ax.plot(centres, curves[name].view(-1, BLOCK).mean(1).numpy(), label=name, **styles.get(name, {}))
    ax.axvline(TRAIN_LENGTH, color="gray", linestyle="--", label="training length")
    ax.set_xlabel("position")
    ax.set_ylabel("held-out loss (nats)")


fig, ax = plt.subplots(figsize=(7, 4))
plot_curves(ax, models)
ax.set_title("Loss by position, trained on 64 characters")
ax.legend()
plt.show()

# %%
# The learned table with 64 rows
# ------------------------------
# The same trained weights in a model whose table has only the 64 rows that training used
# (``max_len=64``, the natural setting for 64-character training) refuse the longer input, with
# a message that names the limit:
short = new_model("learned", max_len=TRAIN_LENGTH)
state = models["learned"].state_dict()
state["transformer.position.table.weight"] = state["transformer.position.table.weight"][:TRAIN_LENGTH]
short.load_state_dict(state)
print(f"length 64: perplexity {math.exp(per_position(short, 64).mean().item()):.2f}")
try:
    per_position(short, 256)
except ValueError as error:
    learned_error = error
    print(f"length 256: ValueError: {error}")

# %%
# Why
# ---
# Each encoding fails for its own reason.
#
# **Learned.** Rows 64-255 of the table never took part in a forward pass, so they never got a
# gradient and AdamW never moved them: they are still the random numbers they were initialised
# with, far smaller than the trained rows: past position 63 the model gets a small random
# vector instead of a position it knows.
unused = models["learned"].transformer.position.table.weight.detach()[TRAIN_LENGTH:]
assert torch.equal(unused, initial_table[TRAIN_LENGTH:])
trained = models["learned"].transformer.position.table.weight.detach()[:TRAIN_LENGTH]
print(f"rows 64-255 equal their initial values: {torch.equal(unused, initial_table[TRAIN_LENGTH:])}")
print(f"mean norm of a row: rows 0-63 {trained.norm(dim=1).mean().item():.3f}, "
      f"rows 64-255 {unused.norm(dim=1).mean().item():.3f}")

# %%
# **Sinusoidal.** Rows past 63 are exact values of the formula, but they are inputs the model
# never saw: in the slow columns they take values outside the range of the first 64 rows (the
# extrapolation page, :ref:`sphx_glr_auto_examples_02_properties_plot_extrapolation.py`,
# measures this at a larger scale). Nothing in training constrained what the model does with
# them. Counted on this model's table of width 64:
table = posenc.sinusoidal_table(256, 64)
seen_low, seen_high = table[:TRAIN_LENGTH].amin(0), table[:TRAIN_LENGTH].amax(0)
outside = ((table[TRAIN_LENGTH:] < seen_low - 0.1) | (table[TRAIN_LENGTH:] > seen_high + 0.1)).any(0)
print(f"{int(outside.sum())} of 64 columns leave the range of rows 0-63 by more than 0.1 in rows 64-255")

# %%
#
# **RoPE.** Only distances matter, but a query at position 200 meets keys up to 200 positions
# away, while training showed distances up to 63. Pair :math:`i` of a head turns by
# :math:`\theta_i` per position; where its wavelength :math:`2\pi/\theta_i` exceeds 64, the
# angles of the longer distances were never seen in training. For a head of width 16 (this
# model's) with base 10000, from :func:`posenc.rope_inv_freq`:
head_dim = models["RoPE"].transformer.config.head_dim
inv_freq, _ = posenc.rope_inv_freq(head_dim)
wavelength = 2 * math.pi / inv_freq
new_angles = int((wavelength > TRAIN_LENGTH).sum())
print("wavelengths:", ", ".join(f"{w:.0f}" for w in wavelength.tolist()))
print(f"{new_angles} of {len(inv_freq)} pairs do not complete a turn in {TRAIN_LENGTH} positions")

# %%
# The figure shows that this model tolerates the first new angles: its loss stays near the
# training level for a while past 64 and climbs further on.

# %%
# The fix
# -------
# A learned table has nothing to offer past its trained rows; the only fixes are to train at
# the length you need or to use another encoding. For RoPE, *scaling* changes the frequencies
# so that long distances map onto angles the model knows. Here it is swapped into the trained
# model, without any further training, by replacing its rotary module with a
# :class:`posenc.RotaryEmbedding` of another ``scaling``:
#
# * linear position interpolation, factor 4: every frequency divided by 4, so positions
#   0-255 turn like positions 0-64;
# * dynamic NTK, factor 4, trained length 64: the base grows with the input length, only past 64.
#
# The scaling atlas, :ref:`sphx_glr_auto_examples_04_variants_plot_rope_scaling_atlas.py`, shows
# which frequencies each method changes.
rope = models["RoPE"]
scalings = {
    "RoPE + linear x4": {"rope_type": "linear", "factor": 4.0},
    "RoPE + dynamic NTK x4": {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 64},
}
fixes = {}
for name, scaling in scalings.items():
    scaled = copy.deepcopy(rope)
    scaled.transformer.position.rope = posenc.RotaryEmbedding(head_dim, scaling=scaling, max_len=256)
    fixes[name] = scaled

# %%
# Two more fixes need training. ALiBi (:ref:`sphx_glr_auto_examples_04_variants_plot_alibi.py`)
# puts no vector anywhere: it subtracts a penalty proportional to the distance from every
# attention score, a rule that reads the same at distance 200 as at distance 20. Its model is
# trained like the others, on 64 characters. And the plain fix: continue training the RoPE model
# on 256-character windows, here for a tenth of its training steps (eight windows per step, the
# same number of characters as before).
fixes["ALiBi"] = new_model("alibi")
train(fixes["ALiBi"], next_token_loss, corpus.windows(TRAIN_LENGTH, BATCH), steps=STEPS, lr=3e-3,
      warmup=20, seed=0, threads=1)
fixes["RoPE, trained on 256 more"] = copy.deepcopy(rope)
train(fixes["RoPE, trained on 256 more"], next_token_loss, corpus.windows(256, 8), steps=STEPS // 10,
      lr=1e-3, seed=1, threads=1)
header()
show("RoPE")
for name, model in fixes.items():
    evaluate(name, model, depends_on_length=name == "RoPE + dynamic NTK x4")

# %%
# The same fixes position by position, with the unscaled RoPE model for reference:
fig, ax = plt.subplots(figsize=(7, 4))
plot_curves(ax, ["RoPE", *fixes], RoPE={"color": "black", "linewidth": 2})
ax.set_title("Fixes for long inputs, position by position")
fig.legend(loc="outside lower center", ncol=3, fontsize=8)
plt.show()

# %%
# Read the table and the curves together. Linear interpolation without training removes the
# climb but costs loss at every position, the short ones included: the fast pairs, which carry
# the short-range patterns, now turn four times slower than the model learned; Chen et al.
# (2023), who proposed it, fine-tune the model afterwards. Dynamic NTK leaves the fast pairs
# almost alone and slows the slow ones: it changes nothing for inputs up to 64 characters and,
# for a longer input, changes the frequencies of the whole sequence, first positions included.
# ALiBi, trained on short windows only, reads long ones at a nearly flat loss (compare its
# perplexity at length 64 with RoPE's, too). A short run of training at the new length keeps the
# RoPE model's quality on short inputs and removes most of the climb. How dynamic NTK, ALiBi and
# further training rank at length 256 depends on the training budget (compare a run with
# ``POSENC_FULL=1``); part 5 (Comparisons) compares the encodings on longer runs.
#
# Check
# -----
# The statements above, as assertions that run with the page: the learned model refuses with a
# message naming its limit; all three models show the symptom; at length 256, dynamic NTK,
# ALiBi and further training end below the unscaled RoPE model, the two RoPE fixes removing
# most of its climb; ALiBi is nearly flat; linear interpolation is flat, below the unscaled
# model over the last 128 positions, and worse at length 64; dynamic NTK changes nothing at
# length 64.
assert "max_len=64" in str(learned_error)
for name in ("learned", "sinusoidal", "RoPE"):
    assert results[name][256] > 1.1 * results[name][64], name  # the symptom
for name in ("RoPE + dynamic NTK x4", "ALiBi", "RoPE, trained on 256 more"):
    assert results[name][256] < results["RoPE"][256], name
linear = "RoPE + linear x4"
last_half = {name: curve[128:].mean().item() for name, curve in curves.items()}
assert results[linear][256] < 1.1 * results[linear][64]  # flat
assert last_half[linear] < last_half["RoPE"]
assert results[linear][64] > results["RoPE"][64]
assert results["RoPE + dynamic NTK x4"][64] == results["RoPE"][64]
assert results["ALiBi"][256] < 1.05 * results["ALiBi"][64]  # nearly flat
climb = results["RoPE"][256] - results["RoPE"][64]
for name in ("RoPE + dynamic NTK x4", "RoPE, trained on 256 more"):
    assert results[name][256] - results["RoPE"][64] < 0.5 * climb, name  # most of the climb removed
print("mean loss over positions 128-255: "
      + ", ".join(f"{name} {last_half[name]:.3f}" for name in ("RoPE", linear)))
print("all checks passed")

# %%
# What this shows
# ---------------
# * Past the training length, a learned table has either no rows (an error) or untrained rows
#   (a small random vector); sinusoidal rows and RoPE angles exist but were never seen. All
#   three models lose accuracy past it: the learned and sinusoidal ones at once, the RoPE one
#   further on.
# * RoPE scaling can be swapped into a trained model: linear interpolation flattens the curve
#   at a cost at every length; dynamic NTK keeps short inputs unchanged and removes most of the
#   climb. ALiBi needs no change, and a short training run at the target length removes most of
#   the climb too.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "A model trained with sinusoidal encodings handles sequences longer than in training.",
        "source": "seed article",
        "measured": f"character model trained on {TRAIN_LENGTH}: perplexity {results['sinusoidal'][64]:.2f} "
        f"at length 64, {results['sinusoidal'][256]:.2f} at 256",
        "verdict": "does not hold",
    },
    {
        "claim": "Learned position embeddings do not generalise to sequence lengths not seen in training.",
        "source": "seed article",
        "measured": f"max_len={TRAIN_LENGTH}: {type(learned_error).__name__}; 256-row table trained on "
        f"{TRAIN_LENGTH}: perplexity {results['learned'][64]:.2f} at length 64, "
        f"{results['learned'][256]:.2f} at 256",
        "verdict": "holds",
    },
]
