"""
Using a sinusoidal encoding in practice: lengths, layouts, odd widths
=====================================================================

The formula is the easy part. Adding the table to a batch of embeddings involves choices that
either fail loudly or, worse, give a wrong answer without any error: how long the table is, which
axis of the input holds the positions, and an odd model width. Each section below runs the code of
the seed articles or of the PyTorch tutorial into one of these cases, then shows what
:class:`posenc.SinusoidalPositionalEncoding` does.
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
# ``nn.Transformer`` (torch 2.13) expects unless it is given ``batch_first=True``. Much code today,
# Hugging Face models included, is batch-first, ``(batch, seq, d)``. Given a batch-first tensor,
# ``x.size(0)`` is the batch size: the module takes one row per *sample*, and the extra axis of
# size 1 broadcasts each of them over the sequence. Every token of sample :math:`b` gets the
# encoding of position :math:`b`. The shapes are compatible, so there is no error. The seed's
# module has the mirror-image problem: given sequence-first input, ``x.size(1)`` is the batch size.


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
# What this shows
# ---------------
# * The two usual slicing bugs are ``pe[:x.size(0)]`` on batch-first input and ``pe[:x.size(1)]``
#   on sequence-first input: both give every token of sample :math:`b` the encoding of position
#   :math:`b`, without any error. An explicit layout flag, checked against the tensor you pass,
#   avoids them.
# * A sinusoidal table needs no length limit: past ``max_len`` the seed's module fails with a shape
#   error (after a warning, in its second version), while posenc computes the missing rows. Odd
#   widths have a defined behaviour, printed above.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
tutorial_wrong = cases["tutorial module, batch-first input"]
assert (tutorial_wrong == tutorial_wrong[:, :1]).all()  # one position per sample, for every token
claims = [
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
