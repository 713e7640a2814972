"""
Two slips that raise: an odd width and an input longer than the table
=====================================================================

Two small mistakes stop a model with an error message that does not name them: an odd model
width, and a sequence longer than the precomputed table. Each section below starts from what
you see, reproduces it in a few lines, names the cause, applies the fix, and checks it with an
assertion that runs with the page. Three other slips raise nothing and give wrong positions:
:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_common_slips.py`.
"""

# %%
# A shape error when the table is built
# -------------------------------------
# **What you see.** Building the encoding fails before the model sees any data, with a message
# about sizes 3 and 4.
#
# **Reproduce it.** PyTorch's language-modelling tutorial builds its table like this, here with an
# odd width:
import math

import torch
from torch import nn

import posenc


def tutorial_table(d_model, max_len=5000):
    """The (max_len, 1, d) table of PyTorch's language-modelling tutorial, built as its module does."""
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, 1, d_model)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return pe


d_odd = 7
try:
    tutorial_table(d_odd)
except RuntimeError as error:
    print(f"RuntimeError: {error}")
else:
    raise AssertionError("expected a shape error")

# %%
# **Why.** ``arange(0, d, 2)`` has :math:`\lceil d/2 \rceil` entries, one frequency per even
# column. With :math:`d = 7` there are four even columns but only three odd ones, so the cosines
# do not fit.
#
# **The fix.** Use an even width, which every common model does, or a function that defines the
# odd case: :func:`posenc.sinusoidal_table` gives the last column the sine of one more frequency,
# without its cosine. Rotary encodings need pairs of channels, and there an odd width is refused
# with a message (:func:`posenc.rope_cos_sin`).
#
# **Check.**
odd = posenc.sinusoidal_table(10, d_odd, dtype=torch.float64)
last_frequency = posenc.sinusoidal_frequencies(d_odd)[-1]
assert odd.shape == (10, d_odd)
assert torch.equal(odd[:, -1], torch.sin(torch.arange(10, dtype=torch.float64) * last_frequency))
try:
    posenc.rope_cos_sin(10, d_odd)
except ValueError as error:
    print(f"rope_cos_sin(10, {d_odd}): ValueError: {error}")
else:
    raise AssertionError("an odd rotary width must be refused")
print(f"sinusoidal_table(10, {d_odd}): shape {tuple(odd.shape)}")

# %%
# A longer input fails
# --------------------
# **What you see.** A model that worked on the training data fails on a longer document, with a
# message about tensor sizes, or about ``max_len``.
#
# **Reproduce it.** The module printed in the seed articles adds ``self.pe[:x.size(1)]`` to a
# ``(max_len, d)`` table (its table is taken from posenc here; only the forward pass matters);
# posenc's learned table checks the length first. Both get 12 tokens with ``max_len = 8``:


class SeedPositionalEncoding(nn.Module):
    """The seed articles' module: a (max_len, d) table, added as x + pe[:x.size(1)]."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        self.register_buffer("pe", posenc.sinusoidal_table(max_len, d_model))

    def forward(self, x):
        return x + self.pe[: x.size(1)]


d = 16
long_input = torch.zeros(2, 12, d)
failures = {}
for module in (SeedPositionalEncoding(d, max_len=8), posenc.LearnedPositionalEncoding(d, max_len=8)):
    try:
        module(long_input)
    except (RuntimeError, ValueError) as error:
        failures[type(module).__name__] = error
        print(f"{type(module).__name__}: {type(error).__name__}: {error}")

# %%
# **Why.** A precomputed table has ``max_len`` rows. Slicing past the end returns the rows that
# exist, and adding 8 rows to 12 tokens is a shape error; a learned table has no vectors beyond
# its rows at all.
#
# **The fix.** For a sinusoidal table, compute the missing rows: the formula holds at every
# position, and :class:`posenc.SinusoidalPositionalEncoding` does it, so its ``max_len`` is only
# a cache size. A learned table cannot be extended this way: train at the length you need or
# choose a relative encoding. Whether a model *trained* on short inputs then reads long ones
# well is another question, answered on
# :ref:`sphx_glr_auto_examples_07_troubleshooting_plot_past_training_length.py`.
#
# **Check.**
assert isinstance(failures["SeedPositionalEncoding"], RuntimeError)
assert "max_len=8" in str(failures["LearnedPositionalEncoding"])
grown = posenc.SinusoidalPositionalEncoding(d, max_len=8)(long_input)
assert torch.equal(grown[0], posenc.sinusoidal_table(12, d))
print(f"SinusoidalPositionalEncoding(max_len=8): output {tuple(grown.shape)}")

# %%
# What this shows
# ---------------
# * Both errors come from the table, not from the model: the tutorial's table cannot hold an odd
#   width, and a precomputed table has no rows past ``max_len``.
# * A sinusoidal table can be computed for any width and any position, so both errors have a fix
#   in the encoding itself; a learned table past its length has none.
