"""
Three silent slips: wrong positions without an error
====================================================

Three small mistakes give a model wrong positions and raise no error: the batch axis taken as
the sequence, positions held in half precision, and height and width swapped in a 2-D encoding.
Each section below starts from what you see, reproduces it in a few lines, names the cause,
applies the fix, and checks it with an assertion that runs with the page. The slips that do
raise an error, an odd width and an input longer than the table, are on
:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_slips_that_raise.py`.
"""

# %%
# Sequences change with their place in the batch
# ----------------------------------------------
# **What you see.** The same sentence gives a different output depending on where it sits in the
# batch, and within a sentence every token receives the same position, so the encoding carries
# no word order at all.
#
# **Reproduce it.** PyTorch's language-modelling tutorial stores its table as
# ``(max_len, 1, d)`` and adds ``pe[:x.size(0)]``: it expects sequence-first input,
# ``(seq, batch, d)``. Below, it receives a batch-first tensor, ``(batch, seq, d)``, holding the
# same sequence three times.
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc

torch.manual_seed(0)


class TutorialPositionalEncoding(nn.Module):
    """PyTorch's tutorial module (without dropout): a (max_len, 1, d) table, added as x + pe[:x.size(0)]."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(0)]


d = 16
table = posenc.sinusoidal_table(64, d)
assert torch.allclose(TutorialPositionalEncoding(d, max_len=64).pe[:, 0], table, atol=1e-6)


def positions_added(out, x):
    """For every token, the row of the sinusoidal table that was added to it."""
    added = (out - x).reshape(-1, d)
    distance = torch.cdist(added, table, compute_mode="donot_use_mm_for_euclid_dist")
    assert distance.min(dim=1).values.max() < 1e-4  # every addition is a row of the table
    return distance.argmin(dim=1).reshape(out.shape[:-1])


batch = torch.randn(1, 5, d).expand(3, 5, d)  # (batch, seq, d): one sequence, three times
out = TutorialPositionalEncoding(d)(batch)
print("positions added (one row per sample):")
print(positions_added(out, batch))
print(f"largest difference between sample 0 and sample 1: {(out[0] - out[1]).abs().max().item():.2f}")

# %%
# **Why.** ``x.size(0)`` is the batch size here, so ``pe[:3]`` has shape ``(3, 1, d)``; the axis
# of size 1 broadcasts over the tokens. Sample :math:`b` gets the encoding of position :math:`b`
# on every token. The shapes are compatible, so nothing fails.
#
# **The fix.** Say which layout the tensor has. :class:`posenc.SinusoidalPositionalEncoding`
# takes ``batch_first`` (``True`` by default); with the tutorial's module, transpose to
# sequence-first before the call and back after it. The lengths-and-layouts page,
# :ref:`sphx_glr_auto_examples_03_implementations_plot_lengths_and_layouts.py`, shows the mirror-image
# slip and the other layout choices. (If outputs differ only in batches padded to one length,
# the cause is the position ids of the padded sequences, the subject of another page of this
# part.)
#
# **Check.**
fixed = posenc.SinusoidalPositionalEncoding(d, batch_first=True)(batch)
transposed = TutorialPositionalEncoding(d)(batch.transpose(0, 1)).transpose(0, 1)
for result in (fixed, transposed):
    assert (positions_added(result, batch) == torch.arange(5)).all()  # token t gets row t
    assert torch.allclose(result[0], result[1], atol=1e-6)  # the place in the batch no longer matters
print("token t gets position t in every sample:", positions_added(fixed, batch)[0].tolist())

# %%
# Neighbouring tokens look alike in bfloat16
# ------------------------------------------
# **What you see.** A RoPE model is fine in float32 and worse on long inputs once it runs in
# bfloat16 (or float16), although the weights are the same.
#
# **Reproduce it.** A rotary cache in a pattern that was common until 2024: the positions are
# created with the dtype of ``inv_freq``, ``torch.arange(n).type_as(inv_freq)`` (reported for
# GPT-NeoX in `issue 1003 <https://github.com/EleutherAI/gpt-neox/issues/1003>`__; Hugging Face
# transformers has computed the angles in float32 since `pull request 29285
# <https://github.com/huggingface/transformers/pull/29285>`__: in 4.x with autocast switched off
# around them, in the pinned 5.24 with ``.float()`` on the positions and
# ``.to(dtype=torch.float)`` on ``inv_freq``, without an autocast block). ``inv_freq`` is a
# buffer, so ``model.to(torch.bfloat16)`` casts it, and the positions follow.


class TypeAsRotary(nn.Module):
    """A rotary cos/sin cache whose positions take the dtype of ``inv_freq``."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, seq_len):
        t = torch.arange(seq_len).type_as(self.inv_freq)
        angles = torch.outer(t, self.inv_freq)
        emb = torch.cat((angles, angles), dim=-1)  # half layout
        return emb.cos(), emb.sin()


head_dim, length = 64, 4096
exact_cos, exact_sin = posenc.rope_cos_sin(length, head_dim, dtype=torch.float64)
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    rotary = TypeAsRotary(head_dim).to(dtype)
    cos, sin = rotary(length)
    distinct = torch.arange(length).type_as(rotary.inv_freq).unique().numel()
    report = posenc.diagnostics.check_table(torch.cat((cos, sin), dim=-1))
    error = (cos.double() - exact_cos).abs().max().item()
    print(f"{str(dtype):>14}: {distinct} distinct positions of {length}, "
          f"{report.duplicate_rows} duplicate rows, largest error of cos {error:.2g}")

# %%
# **Why.** bfloat16 has 8 significant bits: above 256 it holds only every second integer, above
# 512 every fourth, and so on; float16, with 11, starts skipping above 2048. Rounded positions give
# neighbouring tokens the same angles (the duplicate rows counted by
# :func:`posenc.diagnostics.check_table`). The angles themselves are then multiplied and rounded
# in the low precision, so even distinct positions get cosines far from the exact ones (the
# printed errors: a cosine lies in :math:`[-1, 1]`).
# The uniqueness page, :ref:`sphx_glr_auto_examples_02_properties_plot_uniqueness.py`, measures
# where rounding makes encodings collide.
#
# **The fix.** Keep positions as integers, compute the angles in float32 or better, and round only
# the finished cosines and sines to the model's dtype. :func:`posenc.rope_cos_sin` computes the
# angles in float64, refuses positions held in a half-precision dtype, and
# :class:`posenc.RotaryEmbedding` recomputes its cache this way when the module is cast.
#
# **Check.**
cos, sin = posenc.rope_cos_sin(length, head_dim, dtype=torch.bfloat16)
assert posenc.diagnostics.check_table(torch.cat((cos, sin), dim=-1)).duplicate_rows == 0
assert (cos.double() - exact_cos).abs().max() <= torch.finfo(torch.bfloat16).eps / 2  # one rounding
module = posenc.RotaryEmbedding(head_dim, max_len=length).to(torch.bfloat16)
assert torch.equal(module.cos_cached, cos)
try:
    posenc.rope_cos_sin(torch.arange(length, dtype=torch.bfloat16), head_dim)
except TypeError as error:
    print(f"TypeError: {error}")
else:
    raise AssertionError("bfloat16 positions must be refused")
print(f"posenc, bfloat16: {posenc.diagnostics.check_table(torch.cat((cos, sin), dim=-1)).duplicate_rows} "
      f"duplicate rows, largest error of cos {(cos.double() - exact_cos).abs().max().item():.2g}")

# %%
# An image model confuses rows and columns
# ----------------------------------------
# **What you see.** A vision model with a fixed 2-D encoding works on square images and
# misbehaves on others. There is no error.
#
# **Reproduce it.** An image of 3 × 5 patches, flattened row by row as ``x.flatten(1, 2)``
# orders a ``(batch, height, width, dim)`` tensor. :func:`posenc.sinusoidal_2d` takes
# ``(height, width, dim)``; the slip passes ``(width, height, dim)``, which has the same number of
# rows. ``encoded_coordinates`` reads back the (row, column) that each token's vector encodes, by
# finding it in the encoding of a larger grid.
height, width, dim2 = 3, 5, 16
correct = posenc.sinusoidal_2d(height, width, dim2)
swapped = posenc.sinusoidal_2d(width, height, dim2)
print(f"shapes: correct {tuple(correct.shape)}, swapped {tuple(swapped.shape)}")
side = max(height, width)
reference = posenc.sinusoidal_2d(side, side, dim2)


def encoded_coordinates(pe):
    """(row, column) encoded by each row of ``pe``, shaped as the height x width grid of patches."""
    index = torch.cdist(pe, reference, compute_mode="donot_use_mm_for_euclid_dist").argmin(dim=1)
    return (index // side).reshape(height, width), (index % side).reshape(height, width)


# %%
# The row and column each patch receives, both ways: with the arguments swapped, the patches of
# the first image row get rows 0 and 1 and columns 0 to 2, and so on.
fig, axes = plt.subplots(1, 2, figsize=(8, 2.6))
for ax, pe, title in ((axes[0], correct, "sinusoidal_2d(height, width, dim)"),
                      (axes[1], swapped, "sinusoidal_2d(width, height, dim)")):
    rows, cols = encoded_coordinates(pe)
    image = ax.imshow(rows.numpy(), cmap="viridis", vmin=0, vmax=side - 1)
    for r in range(height):
        for c in range(width):
            ax.text(c, r, f"{rows[r, c]},{cols[r, c]}", ha="center", va="center",
                    color="black" if rows[r, c] >= 3 else "white")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("patch column")
    ax.set_xticks(range(width))
    ax.set_yticks(range(height))
axes[0].set_ylabel("patch row")
fig.colorbar(image, ax=axes, label="encoded row", shrink=0.8)
fig.suptitle("Encoded (row, column) of each patch")
plt.show()

# %%
# **Why.** Both calls return ``height * width`` rows, so every shape check passes; the table
# simply describes a 5 × 3 grid read row by row, laid over a 3 × 5 one. On a square grid the two
# orders coincide, which is why the slip survives tests on square images.
#
# **The fix.** Pass the grid in the order the tokens were flattened: ``(height, width)`` for
# ``flatten(1, 2)`` of ``(batch, height, width, dim)``. A test on a non-square grid that decodes
# the coordinates, like the check below, catches it.
#
# **Check.**
rows, cols = encoded_coordinates(correct)
patch_rows, patch_cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
assert torch.equal(rows, patch_rows) and torch.equal(cols, patch_cols)
wrong_rows, wrong_cols = encoded_coordinates(swapped)
misplaced = int(((wrong_rows != patch_rows) | (wrong_cols != patch_cols)).sum())
assert misplaced > 0
print(f"swapped arguments: {misplaced} of {height * width} patches encoded at another place")

# %%
# What this shows
# ---------------
# * The three slips pass every shape check. Tests that read back the position each token
#   received (on a batch of identical sequences, a non-square grid) or count duplicate rows in
#   the dtype the model runs in catch them.
