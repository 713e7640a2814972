"""
Using a sinusoidal encoding in practice: shapes, lengths, offsets, dtypes
=========================================================================

The formula is the easy part. Adding the table to a batch of embeddings involves choices that
either fail loudly or, worse, give a wrong answer without any error: how long the table is, which
axis of the input holds the positions, an odd model width, the position of a token during
step-by-step decoding, half-precision inputs, and the width and scale of the embeddings. Each
section below runs the code of the seed articles or of the PyTorch tutorial into one of these
cases, then shows what :class:`posenc.SinusoidalPositionalEncoding` does.
"""

# %%
# Variable lengths and ``max_len``
# --------------------------------
# A module precomputes the table for positions ``0 … max_len - 1``. A batch of sequences of
# length :math:`n` uses its first :math:`n` rows, the same rows for every sequence of the batch.
# Here with a tiny table, so the rows can be compared with :func:`posenc.sinusoidal_table`:
import math
import warnings

import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc

torch.manual_seed(0)
d = 16
encoding = posenc.SinusoidalPositionalEncoding(d, max_len=8)
for n in (3, 8):
    out = encoding(torch.zeros(2, n, d))  # a zero input shows exactly what was added
    assert torch.equal(out[0], posenc.sinusoidal_table(n, d)) and torch.equal(out[1], out[0])
    print(f"batch of length {n}: output {tuple(out.shape)}, rows 0..{n - 1} of the table added")

# %%
# What happens past ``max_len`` depends on the code. The module printed in both seed articles
# returns ``x + self.pe[:x.size(1)]``; its table is taken from posenc here, since only the forward
# pass matters. The first article's version for variable lengths (its section 6.1) warns first
# when the sequence is too long. Both get a sequence of 12 tokens with ``max_len = 8``:


class SeedPositionalEncoding(nn.Module):
    """The seed article's module: a (max_len, d) table, added as ``x + pe[:x.size(1)]``."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        self.register_buffer("pe", posenc.sinusoidal_table(max_len, d_model))

    def forward(self, x):
        return x + self.pe[:x.size(1)]


class SeedWarningPositionalEncoding(SeedPositionalEncoding):
    """The seed article's variant that warns when the sequence is longer than the table."""

    def forward(self, x):
        seq_len = x.size(1)
        if seq_len > self.pe.size(0):
            warnings.warn(f"Sequence length {seq_len} > max_len {self.pe.size(0)}")
        return x + self.pe[:seq_len]


long_batch = torch.zeros(2, 12, d)
for module in (SeedPositionalEncoding(d, max_len=8), SeedWarningPositionalEncoding(d, max_len=8)):
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module(long_batch)
        except RuntimeError as error:
            failure = error  # kept for the claims table
    assert failure is not None, "expected a shape error"
    print(f"{type(module).__name__}:")
    for warning in caught:
        print(f"  UserWarning: {warning.message}")
    print(f"  RuntimeError: {failure}")

# %%
# The warning only announces the crash that follows: the slice returns the 8 rows that exist, and
# adding 8 rows to 12 tokens is a shape error. For a sinusoidal table there is no reason to stop:
# the formula holds at every position. posenc's module computes the missing rows and keeps them,
# so its ``max_len`` is only the size of a cache. It grows to twice its length or to the sequence
# length, whichever is more, so that decoding one token at a time does not rebuild it at every
# step. A *learned* table is different: it has no vectors past its length, and
# :class:`posenc.LearnedPositionalEncoding` refuses with a message that names both numbers.
rows_before = encoding.pe.shape[0]
out = encoding(long_batch)
assert torch.equal(out[0], posenc.sinusoidal_table(12, d))
rows_after = encoding.pe.shape[0]
print(f"posenc: output {tuple(out.shape)}, table grew from {rows_before} to {rows_after} rows")
try:
    posenc.LearnedPositionalEncoding(d, max_len=8)(long_batch)
except ValueError as error:
    learned_error = error
    print(f"LearnedPositionalEncoding: ValueError: {error}")

# %%
# Batch-first or sequence-first
# -----------------------------
# PyTorch's language-modelling tutorial stores its table as ``(max_len, 1, d)`` and adds
# ``pe[:x.size(0)]``: it expects sequence-first input, ``(seq, batch, d)``, the layout that
# ``nn.Transformer`` expects unless it is given ``batch_first=True``. Much code today, Hugging Face
# models included, is batch-first, ``(batch, seq, d)``. Given a batch-first tensor, ``x.size(0)``
# is the batch size: the module takes one row per *sample*, and the extra axis of size 1
# broadcasts each of them over the sequence. Every token of sample :math:`b` gets the encoding of
# position :math:`b`. The shapes are compatible, so there is no error. The seed's module has the
# mirror-image problem: given sequence-first input, ``x.size(1)`` is the batch size.


class TutorialPositionalEncoding(nn.Module):
    """The PyTorch tutorial's module: a (max_len, 1, d) table, added as ``x + pe[:x.size(0)]``."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        self.register_buffer("pe", posenc.sinusoidal_table(max_len, d_model).unsqueeze(1))

    def forward(self, x):
        return x + self.pe[:x.size(0)]


table = posenc.sinusoidal_table(64, d)


def added_positions(added):
    """For each vector of ``added`` (..., d), the position whose table row it is."""
    distance = torch.cdist(added.reshape(-1, d), table, compute_mode="donot_use_mm_for_euclid_dist")
    assert (distance.min(dim=1).values < 1e-6).all(), "not a row of the table"
    return distance.argmin(dim=1).reshape(added.shape[:-1])


batch, seq = 3, 6
batch_first = torch.zeros(batch, seq, d)
seq_first = torch.zeros(seq, batch, d)
cases = {  # each result as a (batch, token) grid of the positions that were added
    "posenc, batch_first=True": added_positions(posenc.SinusoidalPositionalEncoding(d)(batch_first)),
    "posenc, batch_first=False": added_positions(
        posenc.SinusoidalPositionalEncoding(d, batch_first=False)(seq_first)).T,
    "tutorial module, batch-first input": added_positions(TutorialPositionalEncoding(d)(batch_first)),
    "seed module, sequence-first input": added_positions(SeedPositionalEncoding(d)(seq_first)).T,
}
for name, positions in cases.items():
    print(f"{name}: position added to each token (one row per sample)")
    print(positions)

# %%
# The picture of the grids, for the correct case and the two silent errors:
shown = [name for name in cases if name != "posenc, batch_first=False"]
fig, axes = plt.subplots(1, 3, figsize=(10, 2.9), sharey=True)
for ax, name in zip(axes, shown):
    image = ax.imshow(cases[name].numpy(), cmap="viridis", vmin=0, vmax=seq - 1)
    for b in range(batch):
        for t in range(seq):
            value = int(cases[name][b, t])
            ax.text(t, b, str(value), ha="center", va="center", color="black" if value > 3 else "white")
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("token")
axes[0].set_ylabel("sample in batch")
fig.colorbar(image, ax=axes, label="position added", shrink=0.8)
fig.suptitle("Which position each token receives")
plt.show()

# %%
# posenc cannot tell the two layouts apart either: a ``(seq, batch, d)`` tensor is also a valid
# ``(batch, seq, d)`` tensor. What it offers is an explicit ``batch_first`` argument (``True`` by
# default) instead of a layout hidden in the shape of a buffer. If the flag
# does not describe the tensor, the result is wrong in the same silent way:
wrong_flag = added_positions(posenc.SinusoidalPositionalEncoding(d)(seq_first)).T
print("posenc, batch_first=True on a (seq, batch, d) tensor:")
print(wrong_flag)

# %%
# An odd ``d_model``
# ------------------
# The usual construction computes one frequency per pair of columns, ``arange(0, d, 2)``, which has
# :math:`\lceil d/2 \rceil` entries, and writes the sines into the even columns and the cosines into
# the odd ones. With an odd :math:`d` there is one more even column than odd: the sines fit, the
# cosines do not.
d_odd = 7
position = torch.arange(4).unsqueeze(1)
div_term = torch.exp(torch.arange(0, d_odd, 2) * (-math.log(10000.0) / d_odd))
pe = torch.zeros(4, d_odd)
pe[:, 0::2] = torch.sin(position * div_term)  # 4 columns, 4 frequencies
try:
    pe[:, 1::2] = torch.cos(position * div_term)  # 3 columns, 4 frequencies
except RuntimeError as error:
    print(f"RuntimeError: {error}")
else:
    raise AssertionError("expected a shape error")

# %%
# posenc accepts an odd width: the last column is the sine of one more frequency, without its
# cosine (:func:`posenc.sinusoidal_table`). Rotary encodings really do need pairs, and there an odd
# width is refused (:func:`posenc.rope_cos_sin`).
odd = posenc.sinusoidal_table(4, d_odd, dtype=torch.float64)
freqs = posenc.sinusoidal_frequencies(d_odd)
assert torch.equal(odd[:, -1], torch.sin(torch.arange(4, dtype=torch.float64) * freqs[-1]))
print(f"sinusoidal_table(4, {d_odd}): shape {tuple(odd.shape)}, {len(freqs)} frequencies, "
      "last column = sin(p * last frequency)")
try:
    posenc.rope_cos_sin(4, d_odd)
except ValueError as error:
    print(f"rope_cos_sin(4, {d_odd}): ValueError: {error}")
else:
    raise AssertionError("expected a ValueError")

# %%
# Offsets for step-by-step decoding
# ---------------------------------
# A decoder that generates one token at a time feeds the model a sequence of length 1 at every
# step. That token is at position :math:`t`, not 0; ``forward(x, offset=t)`` adds the row of
# position :math:`t`. Encoding the tokens one by one with their offsets gives exactly the full
# pass; forgetting the offset gives every token the encoding of position 0.
steps = 10
tokens = torch.randn(1, steps, d)
encoding = posenc.SinusoidalPositionalEncoding(d)
full = encoding(tokens)
with_offset = torch.cat([encoding(tokens[:, t : t + 1], offset=t) for t in range(steps)], dim=1)
without_offset = torch.cat([encoding(tokens[:, t : t + 1]) for t in range(steps)], dim=1)
assert torch.equal(with_offset, full)
assert (added_positions(without_offset - tokens) == 0).all()  # PE(0) everywhere
gap = (without_offset - full).norm(dim=-1)[0]
print("offset=t, largest difference from the full pass:", (with_offset - full).abs().max().item())
print("offset forgotten, |output - full pass| per step:", " ".join(f"{g:.2f}" for g in gap.tolist()))
print(f"norm of one encoding, sqrt(d/2) = {math.sqrt(d / 2):.2f}")

# %%
# The difference is zero at the first step, where position 0 is right, and of the order of the
# encoding's own norm from then on: the model sees every new token at the start of the text.
# :class:`posenc.RotaryEmbedding` takes the same ``offset`` argument (or explicit positions).
#
# dtypes
# ------
# The table is a buffer in the default dtype (float32). ``forward`` casts the rows it needs to the
# dtype of ``x``, so the output has the dtype of the input:
encoding = posenc.SinusoidalPositionalEncoding(d)
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    print(f"input {str(dtype):>14} -> output {encoding(torch.zeros(1, 4, d, dtype=dtype)).dtype}, "
          f"table buffer {encoding.pe.dtype}")

# %%
# The buffer keeps its own precision. With float64 input the output is float64, but the encoding
# in it still has float32's rounding. Casting the module (``.double()``, ``.half()``,
# ``.to(dtype)``) recomputes the table in the new dtype, rounded once, rather than casting the
# float32 values.
d_model = 512
exact = posenc.sinusoidal_table(1000, d_model, dtype=torch.float64)
x64 = torch.zeros(1, 1000, d_model, dtype=torch.float64)
encoding = posenc.SinusoidalPositionalEncoding(d_model)


def float64_error():
    return (encoding(x64)[0] - exact).abs().max().item()


print(f"{'float64 input, float32 buffer':>30}: error {float64_error():.1e}")
assert float64_error() > 0
encoding.double()
print(f"{'after .double()':>30}: error {float64_error():.1e}")
assert float64_error() == 0

# %%
# With half-precision input, the float32 rows are rounded to float16 or bfloat16, and the sum is
# rounded again. Below, the error of the table itself (its entries lie in :math:`[-1, 1]`, so it
# stays within half of the format's machine epsilon, printed as ``eps``), then the error of
# ``x + PE`` against the exact sum of the same half-precision ``x`` and the float64 table, next to
# the error of the best possible answer: that exact sum rounded once. Casting the float32 buffer
# is a double rounding (float64 to float32 to half), which differs from rounding once in the last
# place of a few entries, counted on the last line of each block; ``encoding.half()`` would give
# the table rounded once.
encoding = posenc.SinusoidalPositionalEncoding(d_model)
x = torch.randn(1, 1000, d_model)
for dtype in (torch.float16, torch.bfloat16):
    x_half = x.to(dtype)
    exact_sum = x_half.double() + exact
    out_error = (encoding(x_half).double() - exact_sum).abs().max().item()
    table_error = (encoding.pe[:1000].to(dtype).double() - exact).abs().max().item()
    best_error = (exact_sum.to(dtype).double() - exact_sum).abs().max().item()
    once = posenc.sinusoidal_table(1000, d_model, dtype=dtype)
    differ = (encoding.pe[:1000].to(dtype) != once).sum().item()
    assert table_error <= torch.finfo(dtype).eps / 2
    print(f"{str(dtype)}: eps {torch.finfo(dtype).eps:.1e}")
    print(f"  table rows:             largest error {table_error:.1e}")
    print(f"  x + PE:                 largest error {out_error:.1e}")
    print(f"  exact sum rounded once: largest error {best_error:.1e}")
    print(f"  entries where the cast float32 table differs from rounding once: {differ} of {once.numel()}")

# %%
# Where the angles are computed matters too. The seed's and the tutorial's code compute
# ``position * div_term`` in float32, whose relative precision is :math:`2^{-24}`: an angle of
# size :math:`p` is off by an amount proportional to :math:`p`, so the error of the sines and
# cosines grows with the position. posenc computes the angles in float64 and rounds only the
# finished sines and cosines to float32. The largest error in the first and in the last hundred
# rows of a 5000-row table, both ways (the page on log-space frequencies,
# :ref:`sphx_glr_auto_examples_03_implementations_plot_log_space_stability.py`, follows this error
# up to position 100 000 and finds where it comes from):
length = 5000
position = torch.arange(0, length, dtype=torch.float).unsqueeze(1)
div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
float32_angles = torch.zeros(length, d_model)
float32_angles[:, 0::2] = torch.sin(position * div_term)
float32_angles[:, 1::2] = torch.cos(position * div_term)
exact = posenc.sinusoidal_table(length, d_model, dtype=torch.float64)
posenc_float32 = posenc.sinusoidal_table(length, d_model)
errors = {
    "angles in float32 (seed, tutorial)": (float32_angles.double() - exact).abs().amax(dim=1),
    "angles in float64 (posenc)": (posenc_float32.double() - exact).abs().amax(dim=1),
}
for name, error in errors.items():
    print(f"{name:>35}: largest error, positions < 100: {error[:100].max().item():.1e}, "
          f"positions {length - 100}-{length - 1}: {error[-100:].max().item():.1e}")
float32_error = errors["angles in float32 (seed, tutorial)"]
assert float32_error[-100:].max() > 10 * float32_error[:100].max()  # grows with the position
assert errors["angles in float64 (posenc)"].max() <= 2**-25  # half a float32 ulp of values in [-1, 1]

# %%
# Width, dimension and ``max_len``
# --------------------------------
# The encoding is *added* to the token embeddings, so it must have their width, and the sum keeps
# it: the model's width does not change. (Concatenating the encoding instead, another possible
# design, would widen every vector.) A width mismatch is an error in both modules, with a
# clearer message from posenc:
embeddings = torch.randn(2, 10, d_model)
summed = posenc.SinusoidalPositionalEncoding(d_model)(embeddings)
print(f"embeddings {tuple(embeddings.shape)} + encoding -> {tuple(summed.shape)}")
try:
    posenc.SinusoidalPositionalEncoding(256)(embeddings)
except ValueError as error:
    width_error = error
    print(f"posenc, dim=256:      ValueError: {error}")
try:
    SeedPositionalEncoding(256)(embeddings)
except RuntimeError as error:
    print(f"seed module, d=256:   RuntimeError: {error}")

# %%
# The seed article advises increasing ``max_len`` for long-sequence tasks. For its own module that
# is required (the shape error above); for posenc's, ``max_len`` is only how many rows are computed
# up front. In both, the table costs ``max_len * d`` numbers of 4 bytes in float32:
for max_len, width in ((512, 512), (5000, 512), (8192, 4096), (131072, 4096)):
    print(f"max_len {max_len:>6}, d {width:>4}: {max_len * width * 4 / 2**20:8.1f} MiB")
buffer = posenc.SinusoidalPositionalEncoding(512, max_len=5000).pe
assert buffer.nelement() * buffer.element_size() == 5000 * 512 * 4

# %%
# Is 512 the standard width?
# --------------------------
# One seed article says Transformer models usually take 512 dimensions as the standard
# configuration. 512 is the width of the base model of Vaswani et al. (2017); their big model used
# 1024. Other models chose otherwise. The default configurations of a few Hugging Face model
# classes (class defaults, built locally; nothing is downloaded), each the size of one model of its
# family:
from transformers import BartConfig, BertConfig, GPT2Config, LlamaConfig, T5Config, ViTConfig

widths = {
    "BertConfig().hidden_size": BertConfig().hidden_size,
    "GPT2Config().n_embd": GPT2Config().n_embd,
    "T5Config().d_model": T5Config().d_model,
    "BartConfig().d_model": BartConfig().d_model,
    "ViTConfig().hidden_size": ViTConfig().hidden_size,
    "LlamaConfig().hidden_size": LlamaConfig().hidden_size,
}
for name, width in widths.items():
    print(f"{name:>26} = {width}")

# %%
# Matching the scales
# -------------------
# The seed article's debugging advice includes checking that the encoding and the embeddings have
# matching scales. Every row of a sinusoidal table with an even width has the same norm,
# :math:`\sqrt{d/2}`, since each pair contributes :math:`\sin^2 + \cos^2 = 1`. The norm of an
# embedding row depends on how the embeddings were initialised, and Vaswani et al. multiply the
# embeddings by :math:`\sqrt{d}` before adding the encoding. The ratio of the two norms, for a few
# common choices (the token-embedding page,
# :ref:`sphx_glr_auto_examples_01_foundations_plot_token_embeddings.py`, measures it for a
# pretrained model):
pe_norms = posenc.sinusoidal_table(1000, d_model).norm(dim=1)
print(f"sinusoidal rows, d = {d_model}: norm {pe_norms.min().item():.4f} to {pe_norms.max().item():.4f}, "
      f"sqrt(d/2) = {math.sqrt(d_model / 2):.4f}")
ids = torch.arange(1000)
default = nn.Embedding(1000, d_model)
std = BertConfig().initializer_range  # BERT's and GPT-2's initialisation of their embeddings
assert std == GPT2Config().initializer_range
small = nn.Embedding(1000, d_model)
nn.init.normal_(small.weight, std=std)
inits = {
    "nn.Embedding, default N(0, 1)": default(ids),
    "nn.Embedding, times sqrt(d)": default(ids) * math.sqrt(d_model),
    f"normal, std {std} (BERT, GPT-2)": small(ids),
    "posenc.TokenEmbedding, scale=True": posenc.TokenEmbedding(1000, d_model, scale=True)(ids),
}
ratios = {}
with torch.no_grad():
    for name, rows in inits.items():
        norm = rows.norm(dim=1).mean().item()
        ratios[name] = pe_norms.mean().item() / norm
        print(f"{name:>34}: mean row norm {norm:8.3f}, |PE| / |embedding| = {ratios[name]:7.3f}")

# %%
# Depending on the initialisation, the encoding is either a comparable signal, a small
# perturbation the tokens drown out, or the larger part of every input vector. PyTorch's default
# initialisation combined with the :math:`\sqrt{d}` factor hides the positions; embeddings drawn
# with BERT's and GPT-2's standard deviation (those two models learn their positions instead)
# would be dominated by a sinusoidal table. The :math:`\sqrt{d}` factor suits embeddings
# initialised with standard deviation :math:`1/\sqrt{d}`, as in :class:`posenc.TokenEmbedding`.
# Printing the two norms once is a cheap check.
assert ratios["nn.Embedding, times sqrt(d)"] < 0.1 and ratios[f"normal, std {std} (BERT, GPT-2)"] > 10

# %%
# What this shows
# ---------------
# * The two usual slicing bugs are ``pe[:x.size(0)]`` on batch-first input and ``pe[:x.size(1)]``
#   on sequence-first input: both give every token of sample :math:`b` the encoding of position
#   :math:`b`, without any error. An explicit layout flag, checked against the tensor you pass,
#   avoids them.
# * A sinusoidal table needs no length limit: past ``max_len`` the seed's module fails with a shape
#   error (after a warning, in its second version), while posenc computes the missing rows. Odd
#   widths, offsets during decoding and half-precision inputs each have a defined behaviour,
#   printed above.
# * The encoding must have the embeddings' width, and the sum keeps that width. Whether their
#   scales match depends on the embeddings' initialisation, over a wide range.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
tutorial_wrong = cases["tutorial module, batch-first input"]
assert (tutorial_wrong == tutorial_wrong[:, :1]).all()  # one position per sample, for every token
claims = [
    {
        "claim": "Adding the positional encoding does not change the dimension of the vectors.",
        "source": "seed article",
        "measured": f"embeddings {tuple(embeddings.shape)} + encoding -> {tuple(summed.shape)}",
        "verdict": "holds",
    },
    {
        "claim": "Transformer models typically use 512 dimensions as the standard configuration.",
        "source": "seed article",
        "measured": "class defaults: "
        + ", ".join(f"{name.split('Config')[0]} {width}" for name, width in widths.items())
        + "; the original Transformer's base model, which the seed describes: 512 (Vaswani et al., "
        "2017, Table 3)",
        # rule: "holds" if most class defaults are 512 ("typically"); otherwise "holds with
        # conditions": it holds for the model the seed describes, not for models in general
        "verdict": "holds" if 2 * sum(w == 512 for w in widths.values()) > len(widths) else "holds with conditions",
    },
    {
        "claim": "Keep the encoding's width equal to the embedding's, and check that their scales match.",
        "source": "seed article",
        "measured": f"another width is an error ({type(width_error).__name__}); |PE| / |embedding| from "
        f"{min(ratios.values()):.2f} to {max(ratios.values()):.1f} over {len(ratios)} initialisations",
        "verdict": "holds",
    },
    {
        "claim": "For long-sequence tasks, increase max_len.",
        "source": "seed article",
        "measured": f"seed module past max_len: {type(failure).__name__}; posenc: table grew from "
        f"{rows_before} to {rows_after} rows; learned table: {type(learned_error).__name__}",
        "verdict": "holds with conditions",
    },
    {
        "claim": "x + pe[:x.size(0)] adds the right positions whatever the layout of the input.",
        "source": "common tutorial code (PyTorch tutorial)",
        "measured": f"batch-first input ({batch}, {seq}, {d}): positions added per sample "
        f"{tutorial_wrong[:, 0].tolist()}, the same for every token; no error",
        "verdict": "does not hold",
    },
]
