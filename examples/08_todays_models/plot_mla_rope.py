"""
MLA's decoupled RoPE
====================

DeepSeek-V2 and V3 use multi-head latent attention (MLA): each token caches one small latent
vector instead of the keys and values of every head, and the projection that rebuilds the keys
from it can be folded into the queries. RoPE breaks that folding, so MLA adds a small rotated
part beside the latent. This page shows why numerically and reads the rotated part and its
interleaved weights from real configs. Where YaRN's two factors go in MLA, and what happens when an
implementation puts them elsewhere, is on
:ref:`sphx_glr_auto_examples_08_todays_models_plot_mla_yarn_factors.py`.
"""

# %%
# Why RoPE does not fold into the latent
# --------------------------------------
# One head of a tiny MLA layer (float64, random weights): a hidden state :math:`x` gives a query
# :math:`q = W^Q x` and a latent :math:`c = W^{DKV} x`, all that is cached; the key is :math:`k_n =
# W^{UK} c_n`. Without RoPE, :math:`q_m \cdot k_n = (W^{UK\top} q_m) \cdot c_n`: the up-projection
# folds into the query, and the cached latents are scored directly. With RoPE, :math:`q_m \cdot k_n
# = q_m^\top R_{n-m} W^{UK} c_n`: the rotation depends on the offset and sits between the two
# projections, so no fixed matrix folds in; the best query-side vector for each query, fitted by
# least squares to its scores against all 64 cached latents (16 wide), checks that no vector does.
# MLA's answer is a *decoupled* part: extra query channels :math:`q^{pe}` per head and one key part
# :math:`k^{pe}`, shared by all heads, projected from :math:`x` and cached beside the latent. Only
# these rotate (:func:`posenc.mla_rope`); the rest of the head folds as before.
import json
from pathlib import Path

import matplotlib.pyplot as plt
import torch

import posenc

D, LATENT, NOPE, ROPE, SEQ = 64, 16, 32, 16, 64
generator = torch.Generator().manual_seed(0)
x = torch.randn(SEQ, D, generator=generator, dtype=torch.float64)  # hidden states
w_q = torch.randn(NOPE + ROPE, D, generator=generator, dtype=torch.float64) / D**0.5  # nope rows, then rope rows
w_kv_a = torch.randn(LATENT + ROPE, D, generator=generator, dtype=torch.float64) / D**0.5  # latent, then k_pe
w_uk = torch.randn(NOPE, LATENT, generator=generator, dtype=torch.float64) / LATENT**0.5  # the head's key rows
q = x @ w_q.T  # (SEQ, NOPE + ROPE)
latent, k_pe = (x @ w_kv_a.T).split([LATENT, ROPE], dim=-1)  # (SEQ, LATENT), (SEQ, ROPE): the cache
q_nope, k_nope = q[:, :NOPE], latent @ w_uk.T  # (SEQ, NOPE) each; k_nope is decompressed


def rel(a, b):
    return float((a - b).norm() / b.norm())


cos, sin = posenc.rope_cos_sin(SEQ, NOPE, dtype=torch.float64)  # RoPE on the nope channels, as a test
rq, rk = posenc.apply_rope(q_nope, cos, sin), posenc.apply_rope(k_nope, cos, sin)
cos_pe, sin_pe = posenc.rope_cos_sin(SEQ, ROPE, dtype=torch.float64)
q_rot, k_pe_rot = (t[0] for t in posenc.mla_rope(q[None], k_pe[None], cos_pe, sin_pe))  # interleaved weights
pe_scores = q_rot[:, NOPE:] @ k_pe_rot.T  # (SEQ, SEQ): the decoupled part's share
CASES = {  # decompressed scores, scores from the cached latent (and k_pe): (SEQ, SEQ) each
    "no RoPE": (q_nope @ k_nope.T, (q_nope @ w_uk) @ latent.T),
    "RoPE on the nope part": (rq @ rk.T, (rq @ w_uk) @ latent.T),
    "decoupled RoPE (MLA)": (q_rot @ torch.cat((k_nope, k_pe_rot), -1).T,
                             (q_rot[:, :NOPE] @ w_uk) @ latent.T + pe_scores)}
absorb, best = {}, {}
for case, (full, folded) in CASES.items():
    absorb[case] = rel(folded, full)
    target = full - pe_scores if case.startswith("decoupled") else full  # what the latent must give
    fit = torch.linalg.lstsq(latent, target.T).solution  # (LATENT, SEQ): the best vector for each query
    best[case] = rel(latent @ fit, target.T)
    print(f"{case:>22}: folded vs decompressed {absorb[case]:.2g}; best vector per query misses by {best[case]:.2g}")
assert absorb["no RoPE"] < 1e-14 and absorb["decoupled RoPE (MLA)"] < 1e-14
assert absorb["RoPE on the nope part"] > 0.5 and best["RoPE on the nope part"] > 0.5
fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), sharex=True, sharey=True)
causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
for ax, (case, (full, folded)) in zip(axes, CASES.items()):
    ax.scatter(full[causal].numpy(), folded[causal].numpy(), s=3)
    # The measured differences are printed above; the title says which side of rounding they are.
    verdict = "equal to rounding" if absorb[case] < 1e-12 else "not equal"
    ax.set_title(f"{case}\n{verdict}", fontsize=9)
    ax.set_xlabel("score with decompressed keys")
axes[0].set_ylabel("score from the cached latent")
fig.suptitle("Folding W_UK into the query: one head, 64 tokens, float64")
plt.show()

# %%
# Folding is exact to float64 rounding without RoPE and with the decoupled part. With RoPE on the
# nope channels the folded query misses the key's rotation, and even the best vector per query
# misses the scores by more than half their size. Absorbing would need one matrix per offset, or
# decompressing every cached key at every step, which is what MLA exists to avoid.
#
# The rotated part, the cache and the interleaved weights
# -------------------------------------------------------
# :func:`posenc.rope_report` reads the stored configs (``tests/data/configs``) as transformers 5.24
# does: a 192-wide query head of which 64 channels rotate in both DeepSeek models (32 of 96 in
# MiniCPM3, MLA-shaped with LongRoPE and the half layout). Per token and layer MLA caches
# ``kv_lora_rank + qk_rope_head_dim`` numbers, whatever the number of heads; full keys and values
# would take ``heads x (qk_nope + qk_rope + v_head_dim)`` (MiniCPM3's ``v_head_dim`` is absent:
# transformers' default, width / heads). DeepSeek's checkpoints hold the rotated rows of
# ``q_b_proj`` (``q_proj``) and ``kv_a_proj_with_mqa`` in interleaved pairs, which transformers
# handles at run time (``rope_interleave``). Permuting the rows once with
# :func:`posenc.mla_permute_for_half_layout` and rotating in the half layout gives the same queries
# and keys, to float64 rounding; reading the interleaved weights as half-layout pairs does not.
CONFIGS = Path("../../tests/data/configs")
RAW = {name: json.loads((CONFIGS / f"{name.lower()}.json").read_text(encoding="utf-8"))
       for name in ("DeepSeek-V3", "DeepSeek-V2-Lite", "MiniCPM3-4B")}
reports, cache = {name: posenc.rope_report(raw) for name, raw in RAW.items()}, {}
print(f"{'model':>16} {'query':>6} {'rotated':>8} {'layout':>20} {'rope_type':>10} {'softmax':>9} {'MLA cache':>10} "
      f"{'full K/V':>9}")
for name, r in reports.items():
    c = RAW[name]
    v_head = c.get("v_head_dim") or c["hidden_size"] // c["num_attention_heads"]
    cache[name] = (c["kv_lora_rank"] + c["qk_rope_head_dim"], c["num_attention_heads"] * (r.query_width + v_head))
    print(f"{name:>16} {r.query_width:>6} {r.scheme.rotary_dim:>8} {r.layout.split(' (')[0]:>20} "
          f"{r.scheme.rope_type:>10} {r.softmax_scale:>9.6f} {cache[name][0]:>10} {cache[name][1]:>9} "
          f"({cache[name][1] / cache[name][0]:.1f}x)")
assert [(r.query_width, r.scheme.rotary_dim) for r in reports.values()] == [(192, 64), (192, 64), (96, 32)]
assert cache["DeepSeek-V3"] == (576, 40960)
half_q = x @ posenc.mla_permute_for_half_layout(w_q, 1, ROPE).T  # (SEQ, NOPE + ROPE)
half_k = (x @ posenc.mla_permute_for_half_layout(w_kv_a, 1, ROPE).T)[:, LATENT:]  # (SEQ, ROPE)
hq, hk = posenc.mla_rope(half_q[None], half_k[None], cos_pe, sin_pe, interleaved=False)
permuted = max(rel(hq[0], q_rot), rel(hk[0], k_pe_rot))  # BLAS may round the moved rows differently
misread_q, misread_k = posenc.mla_rope(q[None], k_pe[None], cos_pe, sin_pe, interleaved=False)
misread_pe = misread_q[0, :, NOPE:] @ misread_k[0].T  # (SEQ, SEQ)
off = causal & ~torch.eye(SEQ, dtype=torch.bool)
misread = float((misread_pe - pe_scores)[off].abs().mean() / pe_scores[off].abs().mean())
same_position = float((misread_pe - pe_scores).diagonal().abs().max())
print(f"permuted weights, half layout: queries and keys differ by {permuted:.0e} (relative); interleaved weights "
      f"read as half: rotated-part scores change by {misread:.2f} (mean, relative) off the diagonal, "
      f"{same_position:.0e} at equal positions")
assert permuted < 1e-14 and misread > 0.5 and same_position < 1e-12

# %%
# At equal positions the misread rotation still cancels (the same orthogonal map on both sides),
# so a test on one token passes; every other pair changes.

# %%
# What this shows
# ---------------
# * RoPE between the query and the key's up-projection cannot be folded into one matrix, nor into
#   any vector per query. MLA rotates only a small decoupled part (64 of 192 channels in
#   DeepSeek-V3) with one shared, cached :math:`k^{pe}`; the rest folds exactly, and the cache
#   holds 576 numbers per token and layer instead of 40 960.
# * DeepSeek's weights hold the rotated rows in interleaved pairs; permuting them once gives the
#   same queries and keys, misreading them changes every score except at equal positions.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
rope_miss = min(absorb["RoPE on the nope part"], best["RoPE on the nope part"])
exact = max(absorb["no RoPE"], absorb["decoupled RoPE (MLA)"])
claims = [
    {
        "claim": "RoPE cannot be absorbed into MLA's key up-projection; a decoupled rotated part restores it.",
        "source": "DeepSeek-V2 (DeepSeek-AI, 2024), section 2.1.3",
        "measured": f"one random MLA head, float64: folded vs decompressed scores {exact:.0e} without RoPE and "
        f"decoupled; {absorb['RoPE on the nope part']:.2f} with RoPE on the nope part, best vector per query "
        f"{best['RoPE on the nope part']:.2f}",
        # rule: "holds" if both exact cases are below 1e-12 and the rotated one misses by more than 0.1
        "verdict": "holds" if exact < 1e-12 and rope_miss > 0.1 else "does not hold",
    },
]
