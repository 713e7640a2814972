"""
What does the sinusoidal table look like past the training length?
==================================================================

One of the seed articles lists among the strengths of the sinusoidal encoding that it handles
sequences longer than those seen in training, and its author reports having tested sequences of
length 5000 and found them "still effective". Two different statements hide in that sentence.
One is about the table: the formula gives a row for every position, with no ``max_len``. The
other is about a trained model: whether what it learned on short sequences still works on rows
and distances it never saw. This page measures the first, for a model that would have been
trained on 512 positions, and shows exactly what is new to such a model at positions 5000 and
beyond. The second needs a trained model; part 5 of the site (Comparisons) trains models on short
sequences and tests them on long ones.
"""

# %%
# The same formula, further along
# -------------------------------
# We take width :math:`d = 128`, a training length of 512 positions, and the 512 positions that
# start at 5000. :func:`posenc.sinusoidal_table` computes any range of positions through its
# ``offset`` argument; :class:`posenc.SinusoidalPositionalEncoding` computes the missing rows when
# a sequence longer than its ``max_len`` arrives, so a module built with ``max_len=512`` accepts
# a 5512-token input. (The PyTorch module in the seed articles precomputes ``max_len = 5000``
# rows, so 5000 tokens is the longest input it accepts.)
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc
from posenc.diagnostics import (
    check_table,
    dot_product_by_offset,
    min_pairwise_distance,
    relative_rotation,
    similarity_matrix,
)

d, train_length, start = 128, 512, 5000
seen = posenc.sinusoidal_table(train_length, d, dtype=torch.float64)  # positions 0 ... 511
unseen = posenc.sinusoidal_table(train_length, d, offset=start, dtype=torch.float64)  # 5000 ...

module = posenc.SinusoidalPositionalEncoding(d, max_len=train_length).double()
added = module(torch.zeros(1, start + train_length, d, dtype=torch.float64))[0]
assert torch.allclose(added[:train_length], seen, rtol=0, atol=1e-12)
assert torch.allclose(added[start:], unseen, rtol=0, atol=1e-12)
print(f"module built with max_len={train_length}, input of {added.shape[0]} positions: "
      f"table now has {module.pe.shape[0]} rows")

fig, axes = plt.subplots(1, 2, figsize=(8, 4.4), sharey=False)
for ax, table, first, title in ((axes[0], seen, 0, "positions 0-511 (training)"),
                                (axes[1], unseen, start, "positions 5000-5511")):
    extent = (-0.5, d - 0.5, first + train_length - 0.5, first - 0.5)
    im = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, extent=extent,
                   interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("column $j$")
axes[0].set_ylabel("position $p$")
fig.colorbar(im, ax=axes, label="$PE(p, j)$", shrink=0.9)
fig.suptitle("Sinusoidal table, d = 128: inside and far past the training length")
plt.show()

# %%
# On the left, the right half of the columns barely changes over 512 positions: their
# wavelengths are much longer than the window, so their sines stay near 0 (white) and their
# cosines near 1 (dark red). On the right, the fast columns look like the training window (they
# have turned many times either way), while many slow columns hold other colours, negative values
# among them, that they never showed in training; only the very slowest have moved little, and
# even they have left the range they showed in training (measured below).
#
# Bounded and distinct
# --------------------
# Every entry is a sine or a cosine, and every row has norm :math:`\sqrt{d/2}`, whatever the
# position (derived on :doc:`/properties/boundedness`). Rows also stay apart: the
# distance between rows :math:`k` positions apart depends on :math:`k` only (derived on
# :ref:`sphx_glr_auto_examples_02_properties_plot_uniqueness.py`), so the closest pair in the far
# window is as far apart as in the training window. We check with
# :func:`posenc.diagnostics.check_table` and :func:`posenc.diagnostics.min_pairwise_distance`,
# also on all 5512 positions at once.
everything = posenc.sinusoidal_table(start + train_length, d, dtype=torch.float64)
windows = (("positions 0-511", seen), ("positions 5000-5511", unseen), ("positions 0-5511", everything))
closest = {}
for name, table in windows:
    report = check_table(table)
    norms = table.norm(dim=1)
    closest[name] = min_pairwise_distance(table).distance
    print(f"{name:>20}: values in [{report.min:+.4f}, {report.max:+.4f}], row norms "
          f"{norms.min():.6f} ... {norms.max():.6f}, duplicate rows {report.duplicate_rows}, "
          f"closest pair {closest[name]:.4f}")
print(f"sqrt(d/2) = {math.sqrt(d / 2):.6f}")
bounded_max = everything.abs().max().item()

# %%
# The same geometry inside the window
# -----------------------------------
# The far window is the training window turned by one fixed rotation: with the block-rotation
# matrix :math:`M(k)` of :func:`posenc.diagnostics.relative_rotation` (derived on
# :doc:`/properties/relative_rotation`),
# :math:`PE(p + 5000) = PE(p)\,M(5000)` for every :math:`p`. A rotation keeps lengths, distances
# and dot products, so every comparison *between* rows of the far window equals the same
# comparison in the training window:
#
# .. math::
#
#     PE(p) \cdot PE(p + k) = \sum_{i=0}^{d/2-1} \cos(k\,\omega_i),
#
# which does not depend on :math:`p`. Checked with :func:`posenc.diagnostics.similarity_matrix`:
rotation = relative_rotation(start, d, dtype=torch.float64)
rotation_error = (seen @ rotation - unseen).abs().max().item()
dot_seen, dot_unseen = similarity_matrix(seen, "dot"), similarity_matrix(unseen, "dot")
dot_error = (dot_seen - dot_unseen).abs().max().item()
print(f"largest |PE(p) M(5000) - PE(p + 5000)|:                  {rotation_error:.1e}")
print(f"largest difference of the 512 x 512 dot-product matrices: {dot_error:.1e}")
# The summary relies on these: bounded, distinct rows, the same offset structure far away.
assert bounded_max <= 1.0 and closest["positions 5000-5511"] > 0 and dot_error < 1e-9

# %%
# Both differences are float64 rounding of angles near 5000 radians. A model that used the
# encoding only through dot products of rows at most 511 apart would see nothing new in the far
# window. But a Transformer with additive encodings does not only compare rows: it adds each
# row to a token embedding and feeds the sum through learned weights.
#
# What is new: the values themselves
# ----------------------------------
# Which values did the training window show, column by column, and do the far positions stay
# inside that range? A fast column runs through all its values within 512 positions, and the far
# window repeats them. A slow column covers only an arc of its cycle in training (the angles
# :math:`0 \dots 511\,\omega_i`), and the far window sits elsewhere on the circle. Two counts per
# column: the fraction of far positions whose *value* lies outside the column's training range,
# and the fraction whose *angle* (taken modulo :math:`2\pi`) lies outside the arc the pair swept
# in training. The second is the stricter test: a sine can return to a value it took in training
# while its cosine partner has not.
low, high = seen.min(dim=0).values, seen.max(dim=0).values
value_new = ((unseen < low) | (unseen > high)).double().mean(dim=0)  # per column

omega = posenc.sinusoidal_frequencies(d)
swept = torch.clamp((train_length - 1) * omega, max=2 * math.pi)  # arc of each pair in training
far_angles = torch.outer(torch.arange(start, start + train_length, dtype=torch.float64), omega)
angle_new = (far_angles % (2 * math.pi) > swept).double().mean(dim=0)  # per pair
angle_new_columns = angle_new.repeat_interleave(2)  # interleaved: sine and cosine of pair i

wavelength = 2 * math.pi / omega
first_slow = int(torch.nonzero(wavelength > train_length - 1)[0])  # first pair that turns < once
fast_columns = slice(0, 2 * first_slow)
print(f"pairs 0-{first_slow - 1} (columns 0-{2 * first_slow - 1}) turn at least once in training; "
      f"pairs {first_slow}-{d // 2 - 1} do not")
print(f"fast columns: largest fraction of far values outside the training range "
      f"{value_new[fast_columns].max():.3f}; of far angles outside the swept arc "
      f"{angle_new_columns[fast_columns].max():.3f}")
print(f"slow columns: {int((value_new[2 * first_slow:] > 0.5).sum())} of {d - 2 * first_slow} have "
      f"most far values outside the training range; "
      f"{int((angle_new[first_slow:] == 1).sum())} of {d // 2 - first_slow} pairs have all far angles new")

# %%
# The small non-zero fractions among the fast columns are sampling: 512 integer positions never
# hit the exact top of a sine, and a far position comes a little closer. Among the slow columns
# the far values are mostly, and for the slowest all, outside what training showed.
fig, ax = plt.subplots(figsize=(7, 4))
columns = np.arange(d)
ax.step(columns, angle_new_columns.numpy(), where="mid", color="C1",
        label="angle outside the arc swept in training")
ax.plot(columns, value_new.numpy(), "o", markersize=3, color="C0", label="value outside the training range")
ax.axvline(2 * first_slow - 0.5, color="0.4", linestyle=":", label="wavelength longer than 511 positions")
ax.set_xlabel("column $j$")
ax.set_ylabel("fraction of positions 5000-5511")
ax.set_ylim(-0.03, 1.03)
ax.set_title("What positions 5000-5511 show that training did not (d = 128)")
ax.legend(loc="upper left", fontsize=9)
plt.show()

# %%
# Seen as whole vectors, every far row is new: the distance from each far row to the nearest
# training row, next to the distance between neighbouring rows.
nearest = torch.cdist(unseen, seen).min(dim=1).values
step = (seen[1] - seen[0]).norm().item()
print(f"distance from a far row to the nearest training row: {nearest.min():.3f} ... {nearest.max():.3f}")
print(f"distance between neighbouring rows:                  {step:.3f}")
nearest_in_steps = nearest.min().item() / step

# %%
# What is new in a long sequence: the distances
# ---------------------------------------------
# The seed article's test was a *sequence* of 5000 tokens, not a window far away. Such a sequence
# contains pairs of tokens up to 4999 positions apart, where training had at most 511. The dot
# product of two rows is :math:`\sum_i \cos(k\,\omega_i)` for offset :math:`k` (its shape is the
# subject of :ref:`sphx_glr_auto_examples_02_properties_plot_dot_product_by_offset.py`);
# :func:`posenc.diagnostics.dot_product_by_offset` gives it for every offset of a table:
long_sequence = 5000
by_offset = dot_product_by_offset(everything[:long_sequence])  # offsets k = 0 ... 4999
in_training, beyond = by_offset[:train_length], by_offset[train_length:]
outside = ((beyond < in_training.min()) | (beyond > in_training.max())).double().mean().item()
print(f"offsets 0-511:    dot product in [{in_training.min():.2f}, {in_training.max():.2f}]")
print(f"offsets 512-4999: dot product in [{beyond.min():.2f}, {beyond.max():.2f}]; "
      f"{outside:.1%} of these offsets fall outside the training range")

fig, ax = plt.subplots(figsize=(7, 4.4))
offsets = np.arange(by_offset.shape[0])
ax.axvspan(0, train_length - 1, color="0.9", label="offsets seen in training")
ax.axhspan(in_training.min().item(), in_training.max().item(), color="C2", alpha=0.15,
           label="dot products seen in training")
ax.plot(offsets, by_offset.numpy(), color="C0", linewidth=0.8, label="$PE(p) \\cdot PE(p+k)$")
ax.set_xlabel("offset $k$")
ax.set_ylabel("dot product")
ax.set_title("Dot product by offset in a 5000-token sequence, d = 128")
fig.legend(loc="outside lower center", ncol=3, fontsize=9)
plt.show()

# %%
# The dot product falls quickly over the first offsets and then keeps sinking slowly, with
# wiggles; past offset 511 it takes values, negative ones among them, that no pair in a 512-token
# training sequence produced (the printed fraction of offsets). In a Transformer the position
# part of an attention score passes the two rows through learned matrices rather than taking
# this plain dot product, but the point carries over: a 5000-token sequence puts rows at
# distances from each other that training never showed.
#
# The table is not the model
# --------------------------
# Everything above is about the table, and the table is fine at position 5000: defined, bounded,
# distinct, and with the same geometry between nearby rows. What a model trained on 512 positions
# does with it is another question. Its weights were fitted to rows from the training window and
# to offsets below 512; far rows are other vectors, and long sequences bring new offsets. Whether
# the network's response to them is still useful is an empirical property of the trained model,
# and nothing in the formula guarantees it. The original paper only put it as a hope (the
# sinusoids were chosen because they "may allow the model to extrapolate to sequence lengths
# longer than the ones encountered during training"); the ALiBi paper (see
# :ref:`sphx_glr_auto_examples_04_variants_plot_alibi.py`) measured language models with
# sinusoidal encodings getting worse soon past their training length. A learned table
# (:ref:`sphx_glr_auto_examples_04_variants_plot_learned_positions.py`) has no rows there at all:
# that difference is real, and it is the one the table can promise.
#
# What this shows
# ---------------
# * The sinusoidal table is defined at every position; at 5000 and beyond it stays bounded, its
#   rows stay distinct, and the far window is the training window rotated by :math:`M(5000)`, so
#   dot products between rows a given offset apart are unchanged.
# * The far rows are nonetheless new inputs: the slow columns take values (and the pairs take
#   angles) never seen in positions 0-511, and a long sequence brings offsets whose dot products
#   lie outside the training range.
# * "Still effective at length 5000" is a claim about a trained model, not about the table; this
#   page cannot test it, and part 5 measures it.
