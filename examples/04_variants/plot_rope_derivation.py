"""
RoPE: rotating queries and keys makes the score depend on m − n
===============================================================

Rotary position embedding (RoPE; Su et al., RoFormer, 2021) adds nothing to the token vectors.
It rotates each query and each key by an angle proportional to its position, and the dot product
of a query at position :math:`m` with a key at position :math:`n` then sees the positions only
through :math:`m - n`. We derive this with complex numbers, as Su Jianlin does, write the
complex form in a few lines of PyTorch and check it against :func:`posenc.apply_rope`, measure
the relative property in float64 and float32, and then test RoFormer's second claim, the
"long-term decay" of the score with distance — which holds for a bound, and only under
conditions for the score itself.
"""

# %%
# Pairs of channels as complex numbers
# ------------------------------------
# Split a query :math:`q \in \mathbb{R}^d` into :math:`d/2` pairs and read pair :math:`i` as
# one complex number, :math:`\tilde q_i = q_{2i} + \mathrm{i}\, q_{2i+1}`. RoPE multiplies
# pair :math:`i` of the query at position :math:`m` by :math:`e^{\mathrm{i} m\theta_i}`, with the
# sinusoidal frequencies :math:`\theta_i = 10000^{-2i/d}`; a multiplication by a unit complex
# number is a rotation of the pair in its plane. For two pairs read as complex numbers
# :math:`a` and :math:`b`, the real dot product is :math:`\operatorname{Re}(a\,\bar b)`, so
#
# .. math::
#
#     \langle f(q, m), f(k, n) \rangle
#     = \operatorname{Re} \sum_{i=0}^{d/2-1} \tilde q_i e^{\mathrm{i} m\theta_i}\,
#       \overline{\tilde k_i e^{\mathrm{i} n\theta_i}}
#     = \operatorname{Re} \sum_{i=0}^{d/2-1} \tilde q_i\, \overline{\tilde k_i}\,
#       e^{\mathrm{i} (m-n)\theta_i}.
#
# The two positions meet only in :math:`e^{\mathrm{i}(m-n)\theta_i}`. In real matrices: the
# rotation :math:`R_m` is block-diagonal with one :math:`2 \times 2` rotation per pair, and
# :math:`R_m^\top R_n = R_{n-m}`, so :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m}\, k`.
#
# Meta's original Llama code computes RoPE exactly like this: ``torch.view_as_complex`` turns
# consecutive channels into complex numbers and ``torch.polar`` builds :math:`e^{\mathrm{i}
# p\theta_i}`. Here is that form, with the frequencies taken from :func:`posenc.rope_inv_freq`;
# it computes the angles in the dtype of ``inv_freq``.
import math

import matplotlib.pyplot as plt
import torch

import posenc

torch.manual_seed(0)


def rotate_complex(x, positions, inv_freq):
    """RoPE in complex form: pair (x[2i], x[2i+1]) times exp(i * position * theta_i)."""
    angles = positions.to(inv_freq.dtype)[:, None] * inv_freq  # (seq, d/2)
    turns = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * turns).flatten(-2)


# %%
# :func:`posenc.apply_rope` with ``layout="interleaved"`` pairs the channels the same way,
# :math:`2i` with :math:`2i+1` (the other layout has a page of its own:
# :ref:`sphx_glr_auto_examples_04_variants_plot_rope_layouts.py`). The two agree:
dim, length = 64, 50
inv_freq, _ = posenc.rope_inv_freq(dim)  # float64
positions = torch.arange(length)
x = torch.randn(length, dim, dtype=torch.float64)
for dtype in (torch.float64, torch.float32):
    cos, sin = posenc.rope_cos_sin(positions, dim, layout="interleaved", dtype=dtype)
    library = posenc.apply_rope(x.to(dtype), cos, sin, layout="interleaved")
    complex_form = rotate_complex(x.to(dtype), positions, inv_freq.to(dtype))
    print(f"{str(dtype):>13}: complex form vs apply_rope, max difference "
          f"{(complex_form - library).abs().max().item():.1e}")
    if dtype == torch.float64:
        assert torch.allclose(complex_form, library, rtol=0, atol=1e-12)

# %%
# In float64 the two differ by rounding only. In float32 they differ more, for a reason the
# next section comes back to: the float32 complex form computes the angles
# :math:`p\theta_i` in float32, :func:`posenc.rope_cos_sin` computes them in float64 and rounds
# only the cosines and sines.
#
# Hugging Face's Llama (transformers 5.24) writes the same rotation with ``rotate_half``, for the
# channel layout that pairs :math:`i` with :math:`i + d/2`. Written out, it gives the same bits as
# :func:`posenc.apply_rope` with its default ``layout="half"``:


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


x32 = x.float()
cos, sin = posenc.rope_cos_sin(positions, dim, layout="half", dtype=torch.float32)
hf_style = x32 * cos + rotate_half(x32) * sin
print("rotate_half form == apply_rope(layout='half'), bit for bit:",
      torch.equal(hf_style, posenc.apply_rope(x32, cos, sin, layout="half")))

# %%
# The score depends on m − n only
# -------------------------------
# Take one query and one key, put them at positions :math:`(m, n) = (7, 3)` and then at
# :math:`(7 + s, 3 + s)` for shifts :math:`s` up to a million, and compare the scores. In exact
# arithmetic they are equal; the table prints the largest difference in three settings:
# float64, float32 with the library's cos/sin (float64 angles), and float32 with the angles
# themselves computed in float32, as the complex form above and Meta's reference code do.
q, k = torch.randn(dim, dtype=torch.float64), torch.randn(dim, dtype=torch.float64)


def score(m, n, dtype=torch.float64, float32_angles=False):
    """q at position m, k at position n, both rotated (interleaved layout), then dotted."""
    where = torch.tensor([m, n])
    pair = torch.stack([q, k]).to(dtype)
    if float32_angles:
        rotated = rotate_complex(pair, where, inv_freq.float())
    else:
        cos, sin = posenc.rope_cos_sin(where, dim, layout="interleaved", dtype=dtype)
        rotated = posenc.apply_rope(pair, cos, sin, layout="interleaved")
    return (rotated[0] @ rotated[1]).item()


settings = {
    "float64": dict(dtype=torch.float64),
    "float32": dict(dtype=torch.float32),
    "float32 angles": dict(dtype=torch.float32, float32_angles=True),
}
shifts = [10**e for e in range(7)]
shift_error = {name: [] for name in settings}
print(f"{'shift s':>8}" + "".join(f"{name:>16}" for name in settings))
for s in shifts:
    for name, kwargs in settings.items():
        shift_error[name].append(abs(score(7 + s, 3 + s, **kwargs) - score(7, 3, **kwargs)))
    print(f"{s:>8}" + "".join(f"{shift_error[name][-1]:>16.1e}" for name in settings))
print(f"score(7, 3) = {score(7, 3):.4f}, score(7, 4) = {score(7, 4):.4f}")
other_offset = abs(score(7, 3) - score(7, 4))

# %%
# In float64 the differences are rounding errors; they grow with the position, but from the
# far smaller scale of float64 rounding. With float32 cos/sin rounded from float64 angles
# they stay at the level of float32 rounding of the score at every shift, because each
# cosine and sine is rounded once, whatever the position. With the angles computed in float32
# they grow with the position: :math:`p\theta_i` is a large number, and its rounding error is
# an error in the angle itself. The property is exact in mathematics; in a model it holds as
# well as the angles are computed. A different offset :math:`m - n`, on the other hand, changes
# the score by far more than any of these rounding errors (last line).
#
# The whole score matrix of one query and one key placed at every pair of positions shows the
# property as a picture: with RoPE it is constant along every diagonal (a Toeplitz matrix).
# Adding a sinusoidal encoding (:func:`posenc.sinusoidal_table`) to the same query and key
# instead gives cross terms :math:`q^\top p_n` and :math:`p_m^\top k` that depend on each
# position separately.
grid = 48
cos, sin = posenc.rope_cos_sin(grid, dim, layout="interleaved", dtype=torch.float64)
q_rot = posenc.apply_rope(q.expand(grid, dim), cos, sin, layout="interleaved")
k_rot = posenc.apply_rope(k.expand(grid, dim), cos, sin, layout="interleaved")
rope_scores = q_rot @ k_rot.T  # (query position m, key position n)
table = posenc.sinusoidal_table(grid, dim, dtype=torch.float64)
added_scores = (q + table) @ (k + table).T


def diagonal_spread(matrix):
    """Largest (max - min) along any diagonal m - n = const."""
    return max((matrix.diagonal(o).max() - matrix.diagonal(o).min()).item()
               for o in range(-grid + 1, grid))


print(f"largest spread along a diagonal: RoPE {diagonal_spread(rope_scores):.1e}, "
      f"added sinusoidal {diagonal_spread(added_scores):.2f}")

fig, axes = plt.subplots(1, 2, figsize=(8, 3.9))
for ax, matrix, title in ((axes[0], rope_scores, "RoPE"), (axes[1], added_scores, "sinusoidal added")):
    limit = matrix.abs().max().item()
    image = ax.imshow(matrix.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_title(title)
    ax.set_xlabel("key position $n$")
    fig.colorbar(image, ax=ax, shrink=0.8, label="score")
axes[0].set_ylabel("query position $m$")
fig.suptitle("Score of one query and one key at every pair of positions")
plt.show()

# %%
# Long-term decay: RoFormer's bound
# ---------------------------------
# RoFormer (§3.4.3) argues that the score decays as :math:`|m - n|` grows. Write
# :math:`h_i = \tilde q_i \overline{\tilde k_i}` and :math:`r = m - n`, and set
# :math:`S_j = \sum_{l=0}^{j-1} e^{\mathrm{i} r\theta_l}` (so :math:`S_0 = 0`) and
# :math:`h_{d/2} = 0`. Summation by parts (Abel summation) moves the differences onto
# :math:`h`:
#
# .. math::
#
#     \sum_{i=0}^{d/2-1} h_i e^{\mathrm{i} r\theta_i}
#     = \sum_{i=0}^{d/2-1} h_i (S_{i+1} - S_i)
#     = -\sum_{i=0}^{d/2-1} S_{i+1} (h_{i+1} - h_i),
#
# .. math::
#
#     \Bigl|\sum_{i=0}^{d/2-1} h_i e^{\mathrm{i} r\theta_i}\Bigr|
#     \le \Bigl(\max_i |h_{i+1} - h_i|\Bigr) \sum_{j=1}^{d/2} |S_j|.
#
# The second factor depends on the distance only. RoFormer plots its average
# :math:`\frac{1}{d/2}\sum_{j=1}^{d/2} |S_j|`, the *relative upper bound*, and observes that it
# decays. We compute it for :math:`d = 128` and every distance up to 20 000, for base 10 000
# (Llama 2) and base 500 000 (Llama 3).
dim = 128
distances = torch.arange(20001)
bound = {}
for base in (10000.0, 500000.0):
    theta, _ = posenc.rope_inv_freq(dim, base=base)
    angles = distances[:, None].double() * theta
    partial_sums = torch.cumsum(torch.polar(torch.ones_like(angles), angles), dim=-1)  # S_1..S_{d/2}
    bound[base] = partial_sums.abs().mean(dim=-1)
show = [0, 1, 10, 100, 1000, 10000, 20000]
print(f"{'distance':>9}" + "".join(f"{'base ' + str(int(b)):>14}" for b in bound))
for r in show:
    print(f"{r:>9}" + "".join(f"{bound[b][r].item():>14.2f}" for b in bound))

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for base, values in bound.items():
    ax.plot(distances[1:].numpy(), values[1:].numpy(), linewidth=0.6, label=f"base {int(base)}")
ax.set_xscale("log")
ax.set_xlabel("relative distance $m - n$")
ax.set_ylabel("relative upper bound")
ax.set_title(r"RoFormer's bound $\sum_j |S_j| \,/\, (d/2)$, d = 128")
ax.legend()
plt.show()

# %%
# The bound decays, with oscillations, and more slowly for the larger base, whose slow
# frequencies barely turn over these distances. That much of the claim holds.
#
# What the bound does not say
# ---------------------------
# The bound multiplies this curve by :math:`\max_i |h_{i+1} - h_i|`, which depends on the
# query and the key. It bounds the score; it does not say that the score itself shrinks. Three
# cases, measured:
#
# * :math:`q = k = (1, \dots, 1)`: every :math:`h_i = 2`, so the score is
#   :math:`2\sum_i \cos(r\theta_i)`, the curve usually drawn to illustrate the decay.
# * :math:`q = k` drawn at random (a key identical to the query): :math:`\mathbb{E}[h_i] = 2`,
#   so the *mean* score is the same curve.
# * :math:`q` and :math:`k` drawn independently: the rotated key :math:`R_r k` has the same
#   distribution as :math:`k` (a standard Gaussian vector is rotation-invariant), so the score
#   has the same distribution at every distance, and the mean of :math:`|\text{score}|` cannot
#   decay.
#
# The score at distance :math:`r` is the query rotated by :math:`r` dotted with the key (the
# key at position 0). For the random pairs we also check the bound, pair by pair.
theta, _ = posenc.rope_inv_freq(dim)
pairs_drawn = 4000
queries = torch.randn(pairs_drawn, dim, dtype=torch.float64)
keys = torch.randn(pairs_drawn, dim, dtype=torch.float64)
ones = torch.ones(1, dim, dtype=torch.float64)
log_spaced = torch.logspace(0, math.log10(20000), 150, dtype=torch.float64).round().long()
curve_distances = torch.unique(torch.cat([log_spaced, torch.tensor(show)]))  # sorted, starts at 0
cos, sin = posenc.rope_cos_sin(curve_distances, dim, layout="interleaved", dtype=torch.float64)
all_ones, same_mean, independent_abs, independent_mean, looseness = [], [], [], [], []
h = (torch.view_as_complex(queries.reshape(-1, dim // 2, 2))
     * torch.view_as_complex(keys.reshape(-1, dim // 2, 2)).conj())
h_steps = torch.diff(h, dim=-1, append=torch.zeros(pairs_drawn, 1, dtype=h.dtype)).abs().amax(dim=-1)
for r, c, s in zip(curve_distances.tolist(), cos, sin):
    rotate = dict(cos=c[None], sin=s[None], layout="interleaved")
    all_ones.append((posenc.apply_rope(ones, **rotate) @ ones.T).item())
    rotated_queries = posenc.apply_rope(queries, **rotate)
    same_mean.append((rotated_queries * queries).sum(-1).mean().item())
    independent = (rotated_queries * keys).sum(-1)
    independent_abs.append(independent.abs().mean().item())
    independent_mean.append(independent.mean().item())
    pair_bound = h_steps * bound[10000.0][r] * (dim // 2)  # max |h_{i+1} - h_i| * sum_j |S_j|
    assert bool((independent.abs() <= pair_bound + 1e-9).all())
    looseness.append((pair_bound / independent.abs()).median().item())

print(f"{'distance':>9} {'ones':>9} {'q = k':>9} {'indep |s|':>10} {'indep s':>9} "
      f"{'bound / |s|':>12}")
for r in show:
    j = curve_distances.tolist().index(r)
    print(f"{r:>9} {all_ones[j]:>9.2f} {same_mean[j]:>9.2f} {independent_abs[j]:>10.2f} "
          f"{independent_mean[j]:>9.2f} {looseness[j]:>12.0f}")
print(f"independent pairs, mean |score| over all {len(curve_distances)} distances: between "
      f"{min(independent_abs):.2f} and {max(independent_abs):.2f}; "
      f"sqrt(2d/pi) = {math.sqrt(2 * dim / math.pi):.2f}")

# %%
# The columns: the all-ones score, the mean score of random :math:`q = k`, the mean absolute
# score and the mean score of independent random pairs (over the pairs drawn), and the median
# ratio of RoFormer's bound to the actual absolute score for those pairs. The bound holds for
# every pair (the ``assert``), but it is loose by the factor in the last column at every
# distance, so its decay says little about the score of a typical pair.
fig, ax = plt.subplots(figsize=(7, 4))
x_axis = curve_distances[1:].numpy()
ax.plot(x_axis, all_ones[1:], label="$q = k = (1, \\dots, 1)$")
ax.plot(x_axis, same_mean[1:], "--", label="random $q = k$: mean score")
ax.plot(x_axis, independent_abs[1:], label="independent random $q, k$: mean |score|")
ax.axhline(0, color="grey", linewidth=0.6)
ax.set_xscale("log")
ax.set_xlabel("relative distance $m - n$")
ax.set_ylabel("score $q^\\top R_{m-n}\\, k$")
ax.set_title("Does the RoPE score decay with distance? d = 128")
ax.legend()
plt.show()

# %%
# What this shows
# ---------------
# * Reading channel pairs as complex numbers and multiplying by :math:`e^{\mathrm{i}p\theta_i}`
#   is RoPE; the complex form (Meta's) and the ``rotate_half`` form (Hugging Face's) agree with
#   :func:`posenc.apply_rope` in their respective layouts.
# * The score of a rotated query and key depends on :math:`m - n` only: shifting both positions
#   changes it by rounding, in float64 and float32 — provided the angles are computed
#   accurately; float32 angles make the error grow with the position.
# * RoFormer's relative upper bound decays with distance. The score itself decays on average
#   only for the part of the key that matches the query (identical or all-ones vectors); for
#   independent random vectors the typical score is the same at every distance.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "RoPE makes the attention score depend only on the relative position m − n.",
        "source": "RoFormer (Su et al., 2021); Su Jianlin's blog",
        "measured": f"shifts up to {shifts[-1]}: largest score change {max(shift_error['float64']):.1e} "
        f"(float64), {max(shift_error['float32']):.1e} (float32), "
        f"{max(shift_error['float32 angles']):.1e} (float32 angles); changing m − n by 1: "
        f"{other_offset:.2f}",
        "verdict": "holds",
    },
    {
        "claim": "RoPE has long-term decay: the attention score decays as the relative distance grows.",
        "source": "RoFormer (Su et al., 2021), section 3.4.3",
        "measured": f"relative upper bound {bound[10000.0][0].item():.1f} at distance 0, "
        f"{bound[10000.0][1000].item():.1f} at 1000 (base 10000, d = {dim}); mean |score| of "
        f"independent random q, k: {min(independent_abs):.1f} to {max(independent_abs):.1f} "
        f"at every distance up to {curve_distances[-1].item()}",
        "verdict": "holds with conditions",
    },
]
