r"""
RoPE's long-term decay: does the score shrink with distance?
============================================================

RoFormer's second claim for rotary position embedding is a "long-term decay": the score of a
query and a key shrinks as their distance :math:`|m - n|` grows. This page derives RoFormer's
bound on the score, computes it for base 10 000 and base 500 000, and measures whether the
score itself decays, for three kinds of query and key. The notation (channel pairs read as
complex numbers :math:`\tilde q_i`, frequencies :math:`\theta_i`) and the first claim, that the
score depends on :math:`m - n` only, are on
:ref:`sphx_glr_auto_examples_04_variants_plot_rope_derivation.py`.
"""

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
import math

import matplotlib.pyplot as plt
import torch

import posenc

torch.manual_seed(0)

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
# * RoFormer's relative upper bound decays with distance. The score itself decays on average
#   only for the part of the key that matches the query (identical or all-ones vectors); for
#   independent random vectors the typical score is the same at every distance.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
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
