"""
Do positions formed in low precision keep their rows distinct?
==============================================================

Every integer position has its own sinusoidal row, and a correct table stored in float16 or
bfloat16 repeats rows only at small widths
(:ref:`sphx_glr_auto_examples_02_properties_plot_uniqueness.py`). This page asks what happens
when the positions themselves are rounded to a low-precision format before the table is
computed: which positions survive, and how many of 100 000 rows repeat at widths from 2 to 64.
"""

# %%
# Positions formed in low precision
# ---------------------------------
# A different failure happens when the *positions* are a low-precision tensor before they are
# multiplied by the frequencies, as in ``torch.arange(max_len, dtype=torch.bfloat16)``, in a table
# built after ``torch.set_default_dtype(torch.bfloat16)`` (which torch 2.13 accepts), or under
# autocast. bfloat16 keeps 8 significant bits, so it holds every integer only up to 256 and then
# every second, fourth, … integer; float16 keeps 11 bits and its largest finite number is 65504, so
# larger positions become ``inf``. Two positions that round to the same number get the same row at
# every width. (This is why Hugging Face's Llama rotary embedding computes its angles in float32:
# transformers 4.x switched autocast off around them, citing pull request 29285 in a comment; the
# pinned 5.24 has no autocast block and casts the positions with ``.float()`` and ``inv_freq`` with
# ``.to(dtype=torch.float)``.)
#
# The page is about this naive formula, so we write it out, in the given format throughout,
# check it against :func:`posenc.sinusoidal_table` in float64, and count identical rows with
# :func:`posenc.diagnostics.check_table`.
import matplotlib.pyplot as plt
import torch

import posenc
from posenc.diagnostics import check_table

length = 100_000
dtypes = (torch.float16, torch.bfloat16, torch.float32)
names = {dt: str(dt).removeprefix("torch.") for dt in dtypes}


def table_from_positions_in(dtype, length, d):
    """The seed article's formula with positions, frequencies and angles all in ``dtype``."""
    position = torch.arange(length, dtype=torch.float64).to(dtype)[:, None]
    omega = posenc.sinusoidal_frequencies(d).to(dtype)
    pe = torch.empty(length, d, dtype=dtype)
    pe[:, 0::2] = torch.sin(position * omega)
    pe[:, 1::2] = torch.cos(position * omega)
    return pe


assert torch.equal(table_from_positions_in(torch.float64, 1000, 64),
                   posenc.sinusoidal_table(1000, 64, dtype=torch.float64))

exact_positions = torch.arange(length, dtype=torch.float64)
for dt in dtypes:
    rounded = exact_positions.to(dt).to(torch.float64)
    lost = torch.nonzero(rounded != exact_positions).flatten()
    first_lost = int(lost[0]) if lost.numel() else "none"
    finite = rounded[torch.isfinite(rounded)]
    print(f"{names[dt]:>8}: first position that does not survive: {first_lost}; "
          f"distinct finite positions among {length}: {finite.unique().numel()}; "
          f"positions that become inf: {int(torch.isinf(rounded).sum())}")

formed_widths = (2, 4, 8, 16, 64)
formed = {}
for d in formed_widths:
    for dt in dtypes:
        report = check_table(table_from_positions_in(dt, length, d))
        formed[d, dt] = report.duplicate_rows
        if d == formed_widths[-1]:
            print(f"d = {d}, positions in {names[dt]}: has NaN: {report.has_nan}")

print(f"\nrepeated rows among {length} positions, positions formed in ...")
print(f"{'d':>4}" + "".join(f" {names[dt]:>9}" for dt in dtypes))
for d in formed_widths:
    print(f"{d:>4}" + "".join(f" {formed[d, dt]:>9}" for dt in dtypes))

# %%
# With bfloat16 positions almost every row repeats an earlier one, at every width; with float16
# the positions past 65504 become ``inf``, their rows ``NaN`` (reported by
# :func:`~posenc.diagnostics.check_table`; the NaN rows count as repeats of one another), and
# the positions below it still round in steps. The count no longer falls with the width once
# :math:`d \ge 4`: width cannot separate positions that are already the same number. Positions
# formed in float32 are exact up to :math:`2^{24}`, and their rows stay distinct here. The
# library forms positions in float64 and rounds only the finished table.

# %%
# The number of distinct finite values among the first :math:`L` positions, once rounded to each
# format. Positions that round to the same value share their row at every width.
count_up_to = torch.arange(1, length + 1)  # L = 1 ... 100 000
fig, ax = plt.subplots(figsize=(7, 5))
for dt, color in zip(dtypes, ("C1", "C2", "C4")):
    rounded = exact_positions.to(dt).to(torch.float64)
    new_value = torch.ones(length, dtype=torch.bool)
    new_value[1:] = rounded[1:] != rounded[:-1]  # rounding keeps the order: equal values are adjacent
    new_value &= torch.isfinite(rounded)
    distinct = new_value.cumsum(0)
    assert distinct[-1] == rounded[torch.isfinite(rounded)].unique().numel()
    ax.plot(count_up_to, distinct, color=color, label=f"positions formed in {names[dt]}")
ax.plot(count_up_to, count_up_to, color="0.3", linestyle=":", label="every position distinct")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("number of positions $L$")
ax.set_ylabel("distinct positions among the first $L$")
ax.set_title("Positions that survive rounding to each format")
ax.legend(loc="upper left")
plt.show()

# %%
# What this shows
# ---------------
# * Forming the positions in bfloat16 or float16 breaks uniqueness at every width (almost all of
#   100 000 rows repeat); positions belong in float32 or float64.
