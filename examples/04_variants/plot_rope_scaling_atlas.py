"""
The RoPE scaling atlas: which frequencies each method changes
=============================================================

A RoPE model trained on a context of :math:`L_0` tokens is run on longer inputs by changing its
rotation frequencies. Linear position interpolation, NTK-aware and dynamic NTK scaling, YaRN,
Llama 3's rule and LongRoPE all do this, each in its own way. Drawn on one set of axes, which
frequencies does each method slow down, which does it leave alone, and what else does it change?
"""

# %%
# One model, five methods
# -----------------------
# A Llama-2-shaped head: :math:`d = 128`, base 10 000, trained on :math:`L_0 = 4096` tokens,
# extended by a factor :math:`s = 4` (to 16 384). Each method is a Hugging Face ``rope_parameters``
# dictionary; :func:`posenc.rope_inv_freq` turns it into the 64 inverse frequencies
# :math:`\theta_i` (the same numbers as ``ROPE_INIT_FUNCTIONS`` of ``transformers`` 5.24, checked
# in the library's tests) and the attention factor that multiplies cos and sin.
#
# LongRoPE's per-frequency factors come from a search and are part of each model's config; the
# lists below are made up for this page, in the shape of published ones (1 for the fast
# frequencies, rising towards the slow ones), not taken from any model.
import math

import matplotlib.pyplot as plt
import torch

import posenc

dim, base, original, factor = 128, 10000.0, 4096, 4.0
pairs = dim // 2
long_factor = [factor ** (i / (pairs - 1)) for i in range(pairs)]  # illustrative, see above
methods = {
    "linear (PI)": {"rope_type": "linear", "factor": factor},
    "YaRN": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original},
    "Llama 3": {
        "rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": original,
    },
    "LongRoPE (long)": {
        "rope_type": "longrope", "factor": factor, "original_max_position_embeddings": original,
        "short_factor": [1.0] * pairs, "long_factor": long_factor,
    },
}
unscaled, _ = posenc.rope_inv_freq(dim, base=base)
wavelength = 2 * math.pi / unscaled  # positions per full turn of each pair

scales, temperatures = {}, {}
for name, scaling in methods.items():
    # LongRoPE uses its long factors only past the original context: ask for a longer sequence.
    inv_freq, attention = posenc.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=4 * original)
    scales[name] = unscaled / inv_freq  # > 1: that pair turns more slowly (interpolated)
    temperatures[name] = attention

print(f"{'method':<16} {'unchanged pairs':>15} {'scaled by s':>12} {'attention factor':>17}")
for name, scale in scales.items():
    unchanged = int((scale == 1).sum())
    full = int(torch.isclose(scale, torch.tensor(factor, dtype=scale.dtype)).sum())
    print(f"{name:<16} {unchanged:>15} {full:>12} {temperatures[name]:>17.4f}")

# %%
# The atlas
# ---------
# The horizontal axis is each pair's wavelength divided by the training context: left of 1 the
# pair turned at least once within :math:`L_0` positions during training, right of 1 it never
# completed a turn. The vertical axis is how much slower the pair turns after scaling.
fig, ax = plt.subplots(figsize=(7, 4.2))
for name, scale in scales.items():
    ax.plot(wavelength / original, scale, ".-", markersize=4, label=name)
ax.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
ax.text(1.1, 3.3, "one turn per\ntraining context", color="grey")
ax.set_xscale("log")
ax.set_xlabel("wavelength / training context")
ax.set_ylabel("slow-down of the pair")
ax.set_title("Which frequencies each method interpolates (s = 4)")
ax.legend(loc="center left")
plt.show()

# %%
# Reading the atlas:
#
# * **Linear** interpolation divides every frequency by :math:`s`: the fast pairs, which were
#   well trained and carry local order, are slowed down as much as the slow ones.
# * **YaRN** leaves the pairs that turn more than ``beta_fast = 32`` times within :math:`L_0`
#   alone, interpolates those that turn less than ``beta_slow = 1`` times fully, and ramps
#   linearly in between. It also sharpens the attention: cos and sin are multiplied by
#   :math:`0.1 \ln s + 1` (printed above), so the logits grow by its square, a softmax
#   temperature below 1.
# * **Llama 3** does the same with wavelength thresholds (:math:`L_0/4` and :math:`L_0`) and a
#   smooth blend, and keeps the attention factor at 1.
# * **LongRoPE** applies its own factor to each pair; its attention factor is
#   :math:`\sqrt{1 + \ln s / \ln L_0}`.

# %%
# Other settings
# --------------
# The explorer below draws the atlas for one method at a time, with its parameters on sliders:
# the slow-down of each pair against wavelength / training context (dashed lines: the context,
# and the band edges YaRN and Llama 3 use), and each pair's wavelength before (grey) and after
# (red) scaling, against the training and the extended context. LongRoPE uses the made-up lists
# of this page. The numbers are those of :func:`posenc.rope_inv_freq` (the site's tests compare
# the two at several settings of every type); the figures above stay for readers without
# JavaScript.
#
# .. posenc-explorer:: rope_scaling
#
#    - Scaling type
#    - Head width d
#    - Base
#    - Factor s
#    - Training context
#    - Sequence length
#    - attention factor
#    - pairs left unchanged
#    - Slow-down of each pair
#    - wavelength / training context
#    - slow-down
#    - Wavelengths
#    - pair index i
#    - wavelength (positions)
#    - training context
#    - extended context

# %%
# Dynamic NTK: the scale depends on the sequence
# ----------------------------------------------
# NTK-aware scaling enlarges the base instead of dividing the frequencies, so the fastest pair
# keeps its frequency and the slowest moves the most. The *dynamic* variant recomputes the base
# for the current length :math:`L`:
#
# .. math::
#
#     \text{base}' = \text{base} \cdot \left(\frac{s L}{L_0} - (s - 1)\right)^{d/(d-2)}.
#
# Up to :math:`L_0` nothing changes; past it the slow-down of the slowest pair is
# :math:`sL/L_0 - (s - 1)`, which exceeds the length ratio :math:`L/L_0` as soon as :math:`s > 1`.
lengths = (4096, 8192, 12288, 16384)
fig, ax = plt.subplots(figsize=(7, 4.2))
print(f"{'length':>7} {'L / L0':>7} {'slowest pair slowed by':>23}")
dynamic_slowest = {}
for length in lengths:
    scaling = {"rope_type": "dynamic", "factor": factor, "max_position_embeddings": original}
    inv_freq, _ = posenc.rope_inv_freq(dim, base=base, scaling=scaling, seq_len=length)
    scale = unscaled / inv_freq
    dynamic_slowest[length] = scale.max().item()
    print(f"{length:>7} {length / original:>7.1f} {dynamic_slowest[length]:>23.3f}")
    ax.plot(wavelength / original, scale, ".-", markersize=4, label=f"L = {length}")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("wavelength / training context")
ax.set_ylabel("slow-down of the pair")
ax.set_title("Dynamic NTK at growing sequence lengths (s = 4)")
ax.legend(loc="upper left")
plt.show()

# %%
# At four times the training length the slowest pair is slowed by far more than 4 (printed
# above): with :math:`s = 4`, dynamic NTK interpolates the slow frequencies more than the context
# grew.
# The factor in the config is not "how much longer the context gets" for this method.

# %%
# What this shows
# ---------------
# * Every method slows the low frequencies, whose wavelengths exceed the training context, and
#   the methods differ in what they do to the fast ones: linear interpolation slows them all,
#   YaRN and Llama 3 leave them alone, NTK-aware scaling barely touches them.
# * YaRN and LongRoPE also change the attention temperature; Llama 3 and linear do not.
# * Dynamic NTK depends on the current length, and at :math:`L = sL_0` it slows its slowest pair
#   by :math:`s^2 - s + 1`, more than the length ratio.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "With scaling factor s, the slowest RoPE frequency is slowed by s, so the context "
        "grows s times.",
        "source": "common explanation of context extension",
        "measured": f"linear, YaRN, Llama 3: slowest pair slowed by {scales['linear (PI)'][-1]:.0f}; "
        f"dynamic NTK at s·L0: by {dynamic_slowest[int(factor * original)]:.0f}",
        "verdict": "holds with conditions",
    },
]
