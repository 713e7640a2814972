"""
The sinusoidal table as a picture
=================================

The sinusoidal encoding is a table: one row per position, one column per dimension. Drawn as an
image, what does it look like, and how far does the popular picture of it — "a binary counter
written with sines" — actually hold?
"""

# %%
# The table as an image
# ---------------------
# :func:`posenc.sinusoidal_table` returns the rows for positions :math:`0 \dots L-1`. We draw
# 256 positions of a table of width :math:`d = 64`, one pixel per entry. The worked formula,
# column by column, is on the page :ref:`sphx_glr_auto_examples_01_foundations_plot_sinusoidal_formula.py`.
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc

length, d = 256, 64
table = posenc.sinusoidal_table(length, d, dtype=torch.float64).numpy()
wavelengths = (2 * math.pi / posenc.sinusoidal_frequencies(d)).numpy()  # one per pair i = j // 2
print(f"table shape = {table.shape}, values in [{table.min():+.3f}, {table.max():+.3f}]")

fig, ax = plt.subplots(figsize=(7, 4.6))
im = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
ax.set_xlabel("column $j$")
ax.set_ylabel("position $p$")
ax.set_title("Sinusoidal table, d = 64, 256 positions")
fig.colorbar(im, ax=ax, label="$PE(p, j)$")
plt.show()

# %%
# Left to right, the stripes get wider: the first columns change sign every few rows, the last
# ones hardly change over 256 positions, so their sine columns stay near 0 and their
# cosine columns near 1 (the white and dark red bands at the right).

# %%
# A few columns as curves
# -----------------------
# The same table read column by column: each column is a sine or cosine of the position, and its
# wavelength :math:`\lambda_i = 2\pi \cdot 10000^{2i/d}` grows with the pair index
# :math:`i = \lfloor j/2 \rfloor`. The wavelengths of the columns drawn:
columns = (0, 10, 20, 30, 62)
for j in columns:
    cycles = length / wavelengths[j // 2]
    print(f"column {j:>2} (pair {j // 2:>2}): wavelength {wavelengths[j // 2]:9.1f}, {cycles:7.3f} cycles")

fig, axes = plt.subplots(len(columns), 1, figsize=(7, 6.2), sharex=True)
for ax, j in zip(axes, columns):
    ax.plot(table[:, j], linewidth=1)
    ax.set_ylim(-1.15, 1.15)
    ax.set_ylabel(f"$j = {j}$")
axes[0].set_title("Fast low columns, slow high columns (d = 64)")
axes[-1].set_xlabel("position $p$")
plt.show()

# %%
# Column 0 completes a cycle every :math:`2\pi` positions; column 62 covers only a small part of
# one cycle in these 256 positions (the printed count of cycles). Low columns tell neighbouring
# positions apart; high columns tell positions far apart.
#
# Other widths and bases
# ----------------------
# The explorer below draws the same table in the browser for another width :math:`d`, base or
# number of positions, in either column layout (``"interleaved"``: sine and cosine alternate;
# ``"concat"``: all sines, then all cosines), with one chosen column as a curve. Its third panel
# is the mean dot product :math:`PE(p) \cdot PE(p+k)` of rows :math:`k` positions apart, the
# subject of a later page. The numbers are those of :func:`posenc.sinusoidal_table` (the site's
# tests compare the two); the static figures above stay for readers without JavaScript.
#
# .. posenc-explorer:: sinusoidal
#
#    - Width d
#    - Base
#    - Positions
#    - Column
#    - Layout
#    - interleaved
#    - concat
#    - The table
#    - position p
#    - column j
#    - Column
#    - value
#    - Dot product by offset
#    - offset k
#    - mean PE(p)·PE(p+k)
#
# The binary-counter picture
# --------------------------
# Write the position in binary, lowest bit first. Bit :math:`k` of :math:`p` is
# :math:`\lfloor p / 2^k \rfloor \bmod 2`: bit 0 flips at every step, bit 1 every two steps,
# bit 7 every 128 steps (once in the 256 positions drawn). Drawn next to the sine columns of the table (the even columns, one per
# pair), the two pictures share the same layout: fast on the left, slow on the right.
bits = 8
positions = np.arange(length)
binary = (positions[:, None] >> np.arange(bits)[None, :]) & 1  # (256, 8), bit 0 first

fig, (ax_bits, ax_table) = plt.subplots(
    1, 2, figsize=(8, 4.8), gridspec_kw={"width_ratios": [1, 2.5]}, sharey=True
)
ax_bits.imshow(binary, aspect="auto", cmap="Greys", interpolation="nearest")
ax_bits.set_xticks(range(bits))
ax_bits.set_xlabel("bit $k$")
ax_bits.set_ylabel("position $p$")
ax_bits.set_title("Binary code of p")
im = ax_table.imshow(table[:, 0::2], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                     interpolation="nearest")
ax_table.set_xlabel("pair index $i$ (column $j = 2i$)")
ax_table.set_title("Sine columns of the table")
fig.colorbar(im, ax=ax_table, label="$\\sin(p\\,\\omega_i)$")
fig.suptitle("A binary counter and the sinusoidal table, side by side")
plt.show()

# %%
# The resemblance is real: in both pictures each column is a periodic function of the position,
# and the period grows from left to right. It is also where the resemblance ends. Three
# differences can be measured.
#
# **Periods are not powers of two.** Bit :math:`k` repeats every :math:`2^{k+1}` positions, so
# each bit is exactly twice as slow as the one before. The table's wavelengths grow by the factor
# :math:`10000^{2/d}` per pair, which depends on :math:`d` and is not 2; they start at
# :math:`2\pi`, not at 2, and no wavelength is a whole number of positions.
ratio = wavelengths[1] / wavelengths[0]
print("bit periods:      ", [2 ** (k + 1) for k in range(bits)])
print("table wavelengths:", np.round(wavelengths[:6], 2).tolist(), "...")
print(f"growth per bit = 2, growth per pair = {ratio:.4f}")
for width in (64, 512):
    factor = 10000 ** (2 / width)
    print(f"d = {width:>3}: 10000**(2/d) = {factor:.4f}, {math.log(2) / math.log(factor):5.2f} pairs per doubling")

# %%
# **Continuous, not discrete.** A bit is 0 or 1; a table entry is any value in
# :math:`[-1, 1]`, and a sine column passes through all of them. A sine column with a period close
# to that of bit :math:`k` is not a square wave but a smooth curve; the cosine column beside it
# carries the quarter-period shift that a single bit cannot express.
#
# **Every step is the same size.** Going from :math:`p` to :math:`p+1` flips one bit or many
# (from 127 to 128, all eight), so the binary code moves by an amount that depends on :math:`p`.
# In the table each sine–cosine pair turns by the same angle at every step, so the distance
# between consecutive rows does not depend on :math:`p` at all.
flips = np.abs(np.diff(binary, axis=0)).sum(axis=1)  # bits that change from p to p+1
steps = np.linalg.norm(np.diff(table, axis=0), axis=1)  # ||PE(p+1) - PE(p)||
print(f"bits flipped, p -> p+1: min {flips.min()}, max {flips.max()} (at p = {flips.argmax()})")
print(f"||PE(p+1) - PE(p)||:    min {steps.min():.12f}")
print(f"                        max {steps.max():.12f}")

fig, (ax_period, ax_step) = plt.subplots(1, 2, figsize=(8, 3.6))
ax_period.semilogy(range(bits), [2 ** (k + 1) for k in range(bits)], "s-", label="bit $k$: $2^{k+1}$")
ax_period.semilogy(range(d // 2), wavelengths, "o-", markersize=3, label=r"pair $i$: $2\pi \cdot 10000^{2i/d}$")
ax_period.set_xlabel("bit $k$ or pair index $i$")
ax_period.set_ylabel("period (positions)")
ax_period.set_title("Periods, d = 64")
ax_period.legend()
shown = 64  # the first 64 steps; the pattern repeats
ax_step.plot(positions[:shown], flips[:shown], "s", markersize=3, label="bits flipped")
ax_step.plot(positions[:shown], steps[:shown], label="$\\|PE(p+1) - PE(p)\\|$")
ax_step.set_ylim(0, 10)
ax_step.set_xlabel("position $p$")
ax_step.set_ylabel("change from $p$ to $p+1$")
ax_step.set_title("Size of one step")
ax_step.legend(loc="upper left", ncol=2)
plt.show()

# %%
# What this shows
# ---------------
# * Drawn as an image, the sinusoidal table runs from fast columns on the left to slow columns
#   on the right, like the bits of a binary counter from the lowest to the highest.
# * The analogy stops there: the table's periods grow by :math:`10000^{2/d}` per pair, not by 2,
#   its entries are continuous, and every step from :math:`p` to :math:`p+1` has the same
#   length, where a binary counter sometimes flips one bit and sometimes all of them (printed
#   above).

# %%
# Claims tested here
# ------------------
# The property page :doc:`/properties/boundedness` derives the bound; here it is measured on a
# table far longer than any above, with the norm of every row beside it.
long_table = posenc.sinusoidal_table(100_000, d, dtype=torch.float64)
largest = long_table.abs().max().item()
norm_gap = (long_table.norm(dim=1) - math.sqrt(d / 2)).abs().max().item()
print(f"100000 positions, d = {d}: max |PE| = {largest:.6f}, max | ||PE(p)|| - sqrt(d/2) | = {norm_gap:.1e}")

claims = [
    {
        "claim": "The sinusoidal encoding is bounded: its values stay in [-1, 1] however large the position.",
        "source": "seed article",
        "measured": f"max |PE| over 100000 positions: {largest:.6f}; every row has norm sqrt(d/2) "
        f"(largest gap {norm_gap:.1e})",
        "verdict": "holds",
    },
]
