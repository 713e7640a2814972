"""
Does the rotation make attention scores relative?
=================================================

The sinusoidal encoding moves by a fixed rotation, :math:`PE_{pos+k} = PE_{pos} M(k)`, derived
and checked on :doc:`/properties/relative_rotation`. This page
asks whether that makes attention scores depend on the offset :math:`j - i` only, once learned
projections :math:`W_Q, W_K` come between, and compares RoPE, which rotates after the projections.
"""

# %%
# What this says about attention
# ------------------------------
# The usual conclusion is that this property makes it easy for the model to attend by relative
# position. A Transformer never multiplies an encoding by :math:`M(k)`, though. With the encoding
# added to the token vectors :math:`x`, the score of query :math:`i` and key :math:`j` is
#
# .. math::
#
#     s_{ij} = (x_i + PE_i)\, A\, (x_j + PE_j)^\top, \qquad A = W_Q W_K^\top / \sqrt{d_k},
#
# four terms: content–content, two content–position cross terms, and the position–position term
# :math:`PE_i A PE_j^\top`. Substituting :math:`PE_i = PE_0 M(i)`,
#
# .. math::
#
#     PE_i A PE_j^\top = PE_0\, M(i)\, A\, M(j)^\top PE_0^\top .
#
# If :math:`A` commutes with every :math:`M(k)`, this is :math:`PE_0 A M(i-j) PE_0^\top`, a
# function of the offset only. That is true for :math:`A = I` (the plain dot product
# :math:`PE_i \cdot PE_j`), and for any :math:`A` made of 2×2 *scaled rotations*
# :math:`\begin{pmatrix} a & -b \\ b & a \end{pmatrix}` on the diagonal, which give
# :math:`\sum_i a_i \cos((j-i)\omega_i) + b_i \sin((j-i)\omega_i)`. Any other part of :math:`A`
# (entries between different frequencies, or the rest of each 2×2 block) brings in
# :math:`i + j` or mixed frequencies, i.e. absolute positions.
#
# A function of :math:`j - i` is constant along each diagonal of the score matrix (a Toeplitz
# matrix). We measure, over all diagonals of a 64×64 matrix, the largest spread (max − min)
# along one diagonal, relative to the largest score, for :math:`d = 64` and random projections
# to a head of width 16:
import math

import matplotlib.pyplot as plt
import torch

import posenc

torch.manual_seed(0)
d_attn, d_head, n = 64, 16, 64
pe = posenc.sinusoidal_table(n, d_attn, dtype=torch.float64)
w_q = torch.randn(d_attn, d_head, dtype=torch.float64) / math.sqrt(d_attn)
w_k = torch.randn(d_attn, d_head, dtype=torch.float64) / math.sqrt(d_attn)
a_random = w_q @ w_k.T / math.sqrt(d_head)


def diagonal_spread(scores):
    """Largest (max - min) along a diagonal j - i = const, relative to the largest |score|."""
    size = scores.shape[0]
    spread = max((scores.diagonal(k).max() - scores.diagonal(k).min()).item() for k in range(1 - size, size))
    return spread / scores.abs().max().item()


def scaled_rotation_part(a):
    """Keep only the scaled-rotation part of each 2x2 diagonal block of ``a``; zero the rest."""
    kept = torch.zeros_like(a)
    for i in range(0, a.shape[0], 2):
        p, q, r, s = a[i, i], a[i, i + 1], a[i + 1, i], a[i + 1, i + 1]
        c, b = (p + s) / 2, (r - q) / 2
        kept[i:i + 2, i:i + 2] = torch.stack([torch.stack([c, -b]), torch.stack([b, c])])
    return kept


a_relative = scaled_rotation_part(a_random)
pe_scores = {
    "PE PE^T (A = I)": pe @ pe.T,
    "PE A PE^T, random W_Q, W_K": pe @ a_random @ pe.T,
    "PE A PE^T, scaled-rotation part of A": pe @ a_relative @ pe.T,
}
spreads = {}
for name, scores in pe_scores.items():
    spreads[name] = diagonal_spread(scores)
    print(f"{name:<38} spread along diagonals: {spreads[name]:.1e}")
share = (a_relative.norm() / a_random.norm()).item() ** 2
print(f"share of the random A (squared Frobenius norm) in its scaled-rotation part: {share:.3f}")

# %%
# With :math:`A = I` the position–position scores are Toeplitz to rounding; with random
# projections they are not: the spread is of the order of the scores themselves. Keeping only
# the scaled-rotation part of the same random :math:`A` restores the Toeplitz structure — and
# that part is a small share of a generic :math:`A` (printed last: :math:`d` of the :math:`d^2`
# degrees of freedom). Learned projections *can* lie in this subspace, but nothing in the
# architecture puts them there.
#
# The cross terms have no relative structure at all. Put the same token :math:`x` at every
# position: :math:`x A PE_j^\top` depends on the key's absolute position :math:`j` alone, so it
# changes along every diagonal.
x = torch.randn(d_attn, dtype=torch.float64)
cross = (x.expand(n, d_attn) @ a_random @ pe.T)
spreads["cross term x A PE_j^T"] = diagonal_spread(cross)
print(f"{'cross term x A PE_j^T':<38} spread along diagonals: {spreads['cross term x A PE_j^T']:.1e}")

# %%
# RoPE: the rotation after the projections
# ----------------------------------------
# Rotary position embedding (RoPE) moves the rotation to where it survives: it rotates the
# *projected* query and key, :math:`q_i = x_i W_Q R(i)` and :math:`k_j = x_j W_K R(j)`, with the
# same block-rotation structure as :math:`M`, so
# :math:`q_i k_j^\top = x_i W_Q R(i) R(j)^\top W_K^\top x_j^\top = x_i W_Q R(i - j) W_K^\top x_j^\top`
# for *any* :math:`W_Q, W_K`. We check both consequences with :func:`posenc.rope_cos_sin` and
# :func:`posenc.apply_rope`: the scores of a repeated token are Toeplitz, and shifting every
# position of a random sentence by 1000 leaves all scores unchanged. For contrast, the same
# shift with the additive sinusoidal encoding and the same projections:
tokens = torch.randn(n, d_attn, dtype=torch.float64)


def rope_scores(x_rows, first_position):
    cos, sin = posenc.rope_cos_sin(torch.arange(first_position, first_position + n), d_head,
                                   dtype=torch.float64)
    q, k = posenc.apply_rope(x_rows @ w_q, cos, sin), posenc.apply_rope(x_rows @ w_k, cos, sin)
    return q @ k.T / math.sqrt(d_head)


def additive_scores(x_rows, first_position):
    rows = x_rows + posenc.sinusoidal_table(n, d_attn, offset=first_position, dtype=torch.float64)
    return rows @ a_random @ rows.T


rope_repeated = rope_scores(x.expand(n, d_attn), 0)
spreads["RoPE, repeated token"] = diagonal_spread(rope_repeated)
print(f"{'RoPE, repeated token':<38} spread along diagonals: {spreads['RoPE, repeated token']:.1e}")
shift_change = {}
for name, scores in (("RoPE", rope_scores), ("additive sinusoidal", additive_scores)):
    reference = scores(tokens, 0)
    shift_change[name] = ((scores(tokens, 1000) - reference).abs().max() / reference.abs().max()).item()
    print(f"{name:<20}: all positions + 1000 changes the scores by {shift_change[name]:.1e} "
          f"(relative to the largest score)")

# %%
# The position-only score matrices, side by side. Constant diagonals are the visible sign of a
# score that depends on :math:`j - i` only.
panels = (("$PE\\,PE^\\top$", pe_scores["PE PE^T (A = I)"]),
          ("$PE\\,A\\,PE^\\top$, random $W_Q, W_K$", pe_scores["PE A PE^T, random W_Q, W_K"]),
          ("RoPE, one token repeated", rope_repeated))
fig, axes = plt.subplots(1, 3, figsize=(11, 3.9))
for ax, (title, scores) in zip(axes, panels):
    limit = scores.abs().max().item()
    im = ax.imshow(scores.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("key position $j$")
    fig.colorbar(im, ax=ax, shrink=0.8, label="score")
axes[0].set_ylabel("query position $i$")
fig.suptitle("Position-only attention scores, d = 64")
plt.show()

# %%
# The page :ref:`sphx_glr_auto_examples_04_variants_plot_rope_scaling_atlas.py` follows RoPE's
# frequencies further; the dot products :math:`PE_i \cdot PE_j` by offset are on
# :ref:`sphx_glr_auto_examples_02_properties_plot_dot_product_by_offset.py`.

# %%
# What this shows
# ---------------
# * For attention the property is not enough by itself: the position–position score is a
#   function of :math:`j - i` only when :math:`W_Q W_K^\top` is made of scaled rotations, which
#   random projections are not, and the cross terms carry absolute position. RoPE rotates after
#   the projections, and its scores depend on :math:`j - i` for any weights.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "Because of this, the model can learn relative positions: attention can use the "
        "relative position through the trigonometric identities.",
        "source": "seed article",
        "measured": "spread along diagonals of the position-only scores: "
        f"W_Q W_K^T = I {spreads['PE PE^T (A = I)']:.0e}, "
        f"random {spreads['PE A PE^T, random W_Q, W_K']:.2f}, "
        f"RoPE {spreads['RoPE, repeated token']:.0e}",
        "verdict": "holds with conditions",
    },
]
