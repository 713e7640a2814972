"""
Using a sinusoidal encoding in practice: offsets and precision
==============================================================

The formula is the easy part. During step-by-step decoding, and with inputs in another dtype than
the table, two choices change the answer without any error: the position given to each new token,
and the precision in which the table is computed and stored. Each section below shows what
:class:`posenc.SinusoidalPositionalEncoding` does, and the last compares it with the code of the
seed articles and of the PyTorch tutorial.
"""

# %%
# Offsets for step-by-step decoding
# ---------------------------------
# A decoder that generates one token at a time feeds the model a sequence of length 1 at every
# step. That token is at position :math:`t`, not 0; ``forward(x, offset=t)`` adds the row of
# position :math:`t`. Encoding the tokens one by one with their offsets gives exactly the full
# pass; forgetting the offset gives every token the encoding of position 0.
import math

import matplotlib.pyplot as plt
import torch

import posenc

torch.manual_seed(0)
d = 16
steps = 10
tokens = torch.randn(1, steps, d)
encoding = posenc.SinusoidalPositionalEncoding(d)
full = encoding(tokens)
with_offset = torch.cat([encoding(tokens[:, t : t + 1], offset=t) for t in range(steps)], dim=1)
without_offset = torch.cat([encoding(tokens[:, t : t + 1]) for t in range(steps)], dim=1)
assert torch.equal(with_offset, full)
assert ((without_offset - tokens - posenc.sinusoidal_table(1, d)).norm(dim=-1) < 1e-6).all()  # PE(0) everywhere
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
# The same errors row by row: the float32 angles drift up with the position, the float64 ones stay
# at the rounding of the result.
fig, ax = plt.subplots(figsize=(7, 3.8))
for name, error in errors.items():
    ax.semilogy(error.clamp(min=2**-40).numpy(), linewidth=0.8, label=name)
ax.axhline(2**-25, color="gray", linestyle="--", linewidth=0.8, label="half a float32 ulp of 1")
ax.set_xlabel("position")
ax.set_ylabel("largest error in the row")
ax.set_title("Error of a float32 sinusoidal table, by where its angles are computed")
ax.legend(fontsize=8)
plt.show()

# %%
# What this shows
# ---------------
# * Offsets during decoding and half-precision inputs each have a defined behaviour, printed
#   above.
# * Angles computed in float32, as in the seed's and the tutorial's code, are off by more the larger
#   the position; computed in float64, as posenc does, every entry stays within half a float32 ulp
#   (the asserts above).
