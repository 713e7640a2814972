"""
Half-split or interleaved: two layouts of RoPE
==============================================

RoPE rotates the channels of a query or key in pairs, but codebases disagree on which channels
form a pair. Are the two conventions the same encoding? They give the same attention scores
once the query and key projection weights are permuted — which is what Hugging Face's Llama
conversion script does. Without that permutation nothing fails: the model runs, every score
still depends only on relative positions, and the attention is simply wrong.
"""

# %%
# Two ways to pair the channels
# -----------------------------
# With head width :math:`d`, RoPE turns :math:`d/2` pairs of channels, pair :math:`i` by the
# angle :math:`p\,\theta_i` at position :math:`p`. The two layouts:
#
# * **half-split** (``rotate_half``): channel :math:`i` pairs with channel :math:`i + d/2`, and
#   the cos/sin tables are the frequencies concatenated twice. GPT-NeoX and Hugging Face's
#   Llama code (and the many models written after it) use it (transformers 5.24).
# * **interleaved**: channel :math:`2i` pairs with :math:`2i + 1`, each frequency repeated twice
#   in a row. RoFormer, Meta's original Llama code (complex numbers, see
#   :doc:`/variants/rope_derivation`), GPT-J's
#   ``rotate_every_two`` (transformers 5.24) and torchtune 0.6.1's ``RotaryPositionalEmbeddings``
#   use it (torchtune's Qwen2 and Phi-3 modules use the half-split layout).
#
# :func:`posenc.rope_cos_sin` and :func:`posenc.apply_rope` take both (``layout="half"`` or
# ``"interleaved"``; the tables and the rotation must use the same one). The rotation is a
# linear map, so we can draw its matrix: rotate the columns of the identity.
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc

torch.manual_seed(0)


def rotation_matrix(dim, position, layout):
    """The matrix R with apply_rope(x) = R @ x for one position."""
    cos, sin = posenc.rope_cos_sin(torch.tensor([position]), dim, layout=layout, dtype=torch.float64)
    return posenc.apply_rope(torch.eye(dim, dtype=torch.float64), cos, sin, layout=layout).T


small = 8
rotations = {layout: rotation_matrix(small, 1, layout) for layout in ("interleaved", "half")}
for layout, matrix in rotations.items():
    print(f"{layout}: channel pairs",
          sorted({tuple(sorted(pair)) for pair in matrix.nonzero().tolist() if pair[0] != pair[1]}))

# %%
# Each non-zero entry is :math:`c_i = \cos\theta_i` or :math:`\pm s_i = \pm\sin\theta_i` of
# one pair (at position 1). The figure labels each entry with the pair it belongs to, found by
# matching its value against the :math:`d/2` angles. The third panel is the permutation
# :math:`P` of the next section.
theta, _ = posenc.rope_inv_freq(small)


def entry_label(value):
    """(pair index, label) of a non-zero rotation entry, matched against cos/sin of each angle."""
    for i, angle in enumerate(theta.tolist()):
        for label, target in (("c", math.cos(angle)), ("s", math.sin(angle)), ("-s", -math.sin(angle))):
            if abs(value - target) < 1e-12:
                return i, f"${label}_{i}$"
    raise ValueError(value)


permutation = posenc.interleaved_to_half(torch.eye(small, dtype=torch.float64))
fig, axes = plt.subplots(1, 3, figsize=(10, 3.9))
colours = plt.get_cmap("tab10", 10)
for ax, (layout, matrix) in zip(axes, rotations.items()):
    pair_of = np.full((small, small), np.nan)
    for row, col in matrix.nonzero().tolist():
        pair, label = entry_label(matrix[row, col].item())
        pair_of[row, col] = pair
        ax.text(col, row, label, ha="center", va="center", fontsize=9)
    image = ax.imshow(pair_of, cmap=colours, vmin=-0.5, vmax=9.5, alpha=0.6)
    ax.set_title({"interleaved": "interleaved", "half": "half-split"}[layout])
    ax.set_xlabel("input channel")
axes[0].set_ylabel("output channel")
axes[2].imshow(permutation.numpy(), cmap="Greys", vmin=0, vmax=1)
axes[2].set_title("permutation $P$")
axes[2].set_xlabel("half-split channel")
axes[2].set_ylabel("interleaved channel")
colourbar = fig.colorbar(image, ax=axes[:2], shrink=0.8, ticks=range(small // 2))
colourbar.ax.set_ylim(-0.5, small // 2 - 0.5)
colourbar.set_label("pair index $i$")
for ax in axes:
    ax.set_xticks(range(small))
    ax.set_yticks(range(small))
fig.suptitle("RoPE's rotation at position 1 in each layout, and the permutation between them (d = 8)")
plt.show()

# %%
# One permutation converts between them
# -------------------------------------
# :func:`posenc.interleaved_to_half` moves channel :math:`2i` to :math:`i` and :math:`2i + 1`
# to :math:`i + d/2`; as a matrix acting on row vectors it is the :math:`P` above,
# :math:`x_{\text{half}} = x_{\text{int}} P`. It carries the interleaved pairs onto the half
# pairs, and the rotations onto each other:
#
# .. math::
#
#     R^{\text{half}}_p = P^\top R^{\text{int}}_p P \quad \text{for every position } p.
check_positions = [0, 1, 7, 100, 4095]
for position in check_positions:
    interleaved = rotation_matrix(small, position, "interleaved")
    half = rotation_matrix(small, position, "half")
    assert torch.allclose(half, permutation.T @ interleaved @ permutation, rtol=0, atol=1e-15)
print(f"R_half == P^T R_int P at positions {check_positions}")

# %%
# Now take a query :math:`q = W_Q x` from weights trained with the interleaved layout.
# Permuting the rows of :math:`W_Q` by :math:`P` within each head gives
# :math:`q' = P^\top q` (the same numbers, in half-split order), and
#
# .. math::
#
#     (R^{\text{half}}_m q')^\top (R^{\text{half}}_n k')
#     = (P^\top R^{\text{int}}_m q)^\top (P^\top R^{\text{int}}_n k)
#     = (R^{\text{int}}_m q)^\top (R^{\text{int}}_n k),
#
# because :math:`P P^\top = I`. The scores are the same; the value and output projections are
# not touched. This row permutation is the ``permute`` function of Hugging Face's
# ``convert_llama_weights_to_hf.py`` (read in transformers 4.x sources; the installed 5.24 package
# has no such file), applied to ``wq`` and ``wk`` of Meta's checkpoints;
# :func:`posenc.permute_for_half_layout` does it (per head, hence its ``num_heads``
# argument). We check it on a small attention layer with random weights: 64 tokens of width
# 64, two heads of width 32.
length, d_model, heads = 64, 64, 2
head_dim = d_model // heads
x = torch.randn(length, d_model, dtype=torch.float64)
w_q, w_k, w_v = (torch.randn(d_model, d_model, dtype=torch.float64) / math.sqrt(d_model) for _ in range(3))


def attention(w_q, w_k, layout, b_q=None, b_k=None, offset=0):
    """Causal multi-head attention with RoPE: (scores, probabilities, output), per head."""
    def split(t):  # (seq, heads * head_dim) -> (heads, seq, head_dim)
        return t.view(length, heads, head_dim).transpose(0, 1)

    q = x @ w_q.T + (0 if b_q is None else b_q)
    k = x @ w_k.T + (0 if b_k is None else b_k)
    cos, sin = posenc.rope_cos_sin(torch.arange(offset, offset + length), head_dim, layout=layout,
                                   dtype=torch.float64)
    q, k = (posenc.apply_rope(split(t), cos, sin, layout=layout) for t in (q, k))
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    probabilities = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    return scores.masked_fill(~causal, 0.0), probabilities, probabilities @ split(x @ w_v.T)


reference, _, _ = attention(w_q, w_k, "interleaved")
permute = posenc.permute_for_half_layout
variants = {
    "half, weights permuted": (permute(w_q, heads), permute(w_k, heads)),
    "half, weights as they are": (w_q, w_k),
    "half, permuted as one head": (permute(w_q, 1), permute(w_k, 1)),
}
score_difference = {}
print(f"interleaved reference: max |score| {reference.abs().max().item():.2f}")
for name, (wq, wk) in variants.items():
    scores, _, _ = attention(wq, wk, "half")
    score_difference[name] = (scores - reference).abs().max().item()
    print(f"{name:>27}: max score difference {score_difference[name]:.1e}")
assert score_difference["half, weights permuted"] < 1e-12

# %%
# With the permutation the scores agree to rounding. Without it, or with the permutation
# applied across the whole projection instead of head by head (the wrong ``num_heads``, or,
# in grouped-query attention, the query head count used for the key projection), they differ
# by about as much as the scores themselves.
#
# A mix-up is silent
# ------------------
# What does a model do with weights meant for the other layout? Every pair of channels is
# still rotated rigidly, so the scores still depend on :math:`m - n` only. Nothing raises, the
# attention rows are still probability distributions, and a check of the relative property
# passes. To make the error visible we give head 0 a job that needs positions: attend to the
# previous token (one half of an induction head, a circuit found in trained language models by
# Olsson et al., 2022).
# Its queries and keys get a constant part, a bias (as the q/k projections of Qwen2 have),
# written for the interleaved layout: pair :math:`i` of the key bias is 1, pair :math:`i` of
# the query bias is :math:`a\, e^{-\mathrm{i}\theta_i}`, so that, by the derivation in
# :doc:`/variants/rope_derivation`, the positional part of the
# score (before the :math:`1/\sqrt{d}` scaling) is
#
# .. math::
#
#     \operatorname{Re} \sum_i a\, e^{-\mathrm{i}\theta_i} e^{\mathrm{i}(m-n)\theta_i}
#     = a \sum_i \cos\bigl((m - n - 1)\theta_i\bigr),
#
# largest at :math:`m - n = 1`. Its content part is kept small; head 1 keeps its random
# weights. We run the layer as intended (interleaved), converted (half-split with
# :func:`posenc.permute_for_half_layout` applied to weights and biases) and mixed up
# (half-split, weights and biases as they are).
strength = 30.0
theta, _ = posenc.rope_inv_freq(head_dim)
query_pairs = strength * torch.polar(torch.ones_like(theta), -theta)  # a e^{-i theta_i}
key_pairs = torch.tensor([1.0, 0.0], dtype=torch.float64).repeat(head_dim // 2)  # 1 + 0i per pair
no_bias = torch.zeros(head_dim, dtype=torch.float64)  # head 1
b_q = torch.cat([torch.view_as_real(query_pairs).flatten(), no_bias])
b_k = torch.cat([key_pairs, no_bias])
w_q[:head_dim] *= 0.03
w_k[:head_dim] *= 0.03
runs = {
    "intended": attention(w_q, w_k, "interleaved", b_q, b_k),
    "converted": attention(permute(w_q, heads), permute(w_k, heads), "half",
                           permute(b_q, heads), permute(b_k, heads)),
    "mixed up": attention(w_q, w_k, "half", b_q, b_k),
}
_, intended_probabilities, intended_output = runs["intended"]


def previous_token_share(probabilities):
    """Mean attention of each query m >= 1 on the key m - 1."""
    return probabilities.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)


def distance_from_intended(probabilities):
    """Mean total-variation distance of each attention row from the intended one, per head."""
    return 0.5 * (probabilities - intended_probabilities).abs().sum(dim=-1).mean(dim=-1)


results = {}
print(f"{'run':>10} {'head 0 on previous':>19} {'rows vs intended: head 0':>25} {'head 1':>7} "
      f"{'output error':>13}")
for name, (_, probabilities, output) in runs.items():
    share = previous_token_share(probabilities)[0].item()
    distance = distance_from_intended(probabilities)
    error = ((output - intended_output).norm() / intended_output.norm()).item()
    results[name] = (share, distance[0].item(), distance[1].item(), error)
    print(f"{name:>10} {share:>19.3f} {distance[0].item():>25.3f} {distance[1].item():>7.3f} "
          f"{error:>13.1e}")
assert results["converted"][3] < 1e-12

# %%
# The columns: the share of head 0's attention on the previous token; the mean total-variation
# distance between each attention row and the intended one (0: the same distribution, 1: no
# overlap), for both heads; and the error of the layer's output relative to the intended output.
# Converted, the layer is the intended one to rounding. Mixed up, head 0 no longer looks at
# the previous token, and head 1, which has no positional job, attends differently too.
# Where does head 0 look instead? Its mean attention at each distance :math:`m - n`:
relative = torch.arange(length)[:, None] - torch.arange(length)[None, :]
print(f"{'m - n':>10}" + "".join(f"{r:>7}" for r in range(5)))
for name in ("intended", "mixed up"):
    head0 = runs[name][1][0]
    print(f"{name:>10}" + "".join(f"{head0[relative == r].mean().item():>7.3f}" for r in range(5)))

# %%
# In this construction the mixed-up head attends mostly to the token itself. That is specific
# to these weights; in general the mixed-up scores are another function of :math:`m - n`,
# unrelated to the trained one. The relative property itself survives the mix-up: moving the
# whole sequence to positions 1000 onwards leaves the attention unchanged in both runs, so a
# test of "scores depend only on relative position" passes on the broken model.
shifted = 1000
for name, layout, weights in (("intended", "interleaved", (w_q, w_k)), ("mixed up", "half", (w_q, w_k))):
    _, moved, _ = attention(*weights, layout, b_q, b_k, offset=shifted)
    change = (moved - runs[name][1]).abs().max().item()
    print(f"{name:>10}: attention at positions {shifted}+ vs 0+, max difference {change:.1e}")
rows_sum = runs["mixed up"][1].sum(dim=-1)
print(f"mixed up: every attention row sums to 1 (max deviation {(rows_sum - 1).abs().max().item():.1e})")

# %%
# Head 0's attention over the first positions, in the three runs:
shown = 20
fig, axes = plt.subplots(1, 3, figsize=(10, 3.7))
for ax, name in zip(axes, runs):
    image = ax.imshow(runs[name][1][0, :shown, :shown].numpy(), cmap="viridis", vmin=0, vmax=1)
    ax.set_title(name)
    ax.set_xlabel("key position $n$")
    ax.set_xticks(range(0, shown, 5))
    ax.set_yticks(range(0, shown, 5))
axes[0].set_ylabel("query position $m$")
fig.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
fig.suptitle("A previous-token head with interleaved weights, run in each layout")
plt.show()

# %%
# What this shows
# ---------------
# * The half-split and interleaved layouts are the same rotations with the channels renamed:
#   :math:`R^{\text{half}} = P^\top R^{\text{int}} P`. Weights trained for one layout work in
#   the other once the q and k projections are permuted head by head
#   (:func:`posenc.permute_for_half_layout`, Hugging Face's conversion ``permute``); the scores
#   then agree to rounding.
# * Without the permutation the model runs, its attention rows are valid distributions, and
#   its scores still depend only on relative position — but they are different scores: a
#   previous-token head stops attending to the previous token. Only a comparison with a
#   reference output catches the mistake.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "Half-split (rotate_half) and interleaved RoPE are equivalent.",
        "source": "common tutorial claim",
        "measured": f"max score difference with the q/k weight permutation "
        f"{score_difference['half, weights permuted']:.1e}, without it "
        f"{score_difference['half, weights as they are']:.2f}",
        "verdict": "holds with conditions",
    },
]
