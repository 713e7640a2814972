"""
Partial and proportional rotary mixed up: what changes in scores and logits?
============================================================================

:ref:`sphx_glr_auto_examples_08_todays_models_plot_partial_rotary.py` reads which channels carry
position under the two conventions: *partial* rotary turns the first :math:`r` channels as a RoPE
head of that width, frequencies :math:`\\mathrm{base}^{-2i/r}`; Gemma 4's *proportional* RoPE keeps
the pairs and frequencies :math:`\\mathrm{base}^{-2i/d}` of the whole head width :math:`d`, of which
only the fastest turn. It also describes the two ways of mixing them up, the width in the exponent
and the pairing of the channels, and measures the first on frequencies. This page measures both on
attention scores and on the logits of small models built with transformers' own family code, and
ends with a checklist for engine authors.
"""

# %%
# The two heads
# -------------
# As on the previous page, :func:`posenc.rope_report` reads Phi-2's stored ``config.json`` and a
# Gemma 4 text config written in the family's shape, whose RoPE settings are those of transformers
# 5.24's ``Gemma4TextConfig`` for the global layers. ``pair_frequencies`` returns the rotated pairs'
# frequencies with the exponent over the rotated width or over the whole head, from
# :func:`posenc.rope_inv_freq`.
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers
from transformers import Gemma4ForCausalLM, Gemma4TextConfig, PhiForCausalLM

import posenc

CONFIGS = Path("../../tests/data/configs")
GEMMA4 = {"model_type": "gemma4_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 2,
          "num_hidden_layers": 12, "vocab_size": 1024, "vocab_size_per_layer_input": 1024}
MODELS = {}
for name, source in {"Phi-2": CONFIGS / "phi-2.json", "Gemma 4 (global)": GEMMA4}.items():
    report = posenc.rope_report(source)
    scheme = report.scheme  # the global layers' setting where there are several
    # Proportional RoPE keeps one frequency per pair of the whole head (0 for those that do not turn).
    head = 2 * scheme.inv_freq.numel() if scheme.rope_type == "proportional" else report.head_dim
    MODELS[name] = dict(head=head, rotated=scheme.rotary_dim, base=scheme.base, kind=scheme.rope_type,
                        p=scheme.parameters["partial_rotary_factor"])
    print(f"{name:>17}: {scheme.rope_type}, head {head}, {scheme.rotary_dim} rotated, base {scheme.base:.0e}")
assert [(m["head"], m["rotated"], m["base"]) for m in MODELS.values()] == [(80, 32, 1e4), (512, 128, 1e6)]


def pair_frequencies(model, exponent):
    """The rotated pairs' frequencies, exponent over the rotated width or the whole head: (pairs,)."""
    m = MODELS[model]
    if exponent == "rotated":
        return posenc.rope_inv_freq(m["head"], base=m["base"], scaling={"partial_rotary_factor": m["p"]})[0]
    theta, _ = posenc.rope_inv_freq(m["head"], base=m["base"],
                                    scaling={"rope_type": "proportional", "partial_rotary_factor": m["p"]})
    return theta[theta > 0]


# %%
# Both mistakes, measured on attention scores
# -------------------------------------------
# Random queries and keys (4 heads, 512 positions, float64) of a Phi-2 head (80 wide, 32 rotated,
# base :math:`10^4`) and of a Gemma 4 global head (512 wide, 128 rotated, base :math:`10^6`), scored
# :math:`q_i\cdot k_j/\sqrt{d}` after the right rotation and after each mistake: the wrong width
# in the exponent, the wrong pairing, and both, which is reading one convention as the other. The
# tables for every combination are assembled from posenc's own (the per-pair cos/sin of either
# exponent, laid out in either pairing); the two right combinations rebuild posenc's tables bit for
# bit.
SEQ = 512


def tables(model, exponent, pairing):
    """cos/sin for SEQ positions: exponent over the "rotated" or "head" width, pairs within the
    rotated channels ("rotated", table r wide) or across the whole head ("head", d wide)."""
    m = MODELS[model]
    kind = {"rope_type": "proportional"} if exponent == "head" else {}
    cos, sin = posenc.rope_cos_sin(SEQ, m["head"], base=m["base"], dtype=torch.float64,
                                   scaling={**kind, "partial_rotary_factor": m["p"]})
    k = m["rotated"] // 2
    cos, sin = cos[:, :k], sin[:, :k]  # (SEQ, k): one column per rotated pair (half layout: cat(f, f))
    if pairing == "rotated":
        return torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # (SEQ, r)
    idle = m["head"] // 2 - k  # pairs that do not turn: cos 1, sin 0
    ones, zeros = torch.ones(SEQ, idle, dtype=torch.float64), torch.zeros(SEQ, idle, dtype=torch.float64)
    return torch.cat((cos, ones, cos, ones), -1), torch.cat((sin, zeros, sin, zeros), -1)  # (SEQ, d)


HEADS = {"Phi-2": "rotated", "Gemma 4 (global)": "head"}  # the right exponent and pairing of each
for model, right in HEADS.items():
    m = MODELS[model]
    kind = {"rope_type": "proportional"} if m["kind"] == "proportional" else {}
    reference = posenc.rope_cos_sin(SEQ, m["head"], base=m["base"], dtype=torch.float64,
                                    scaling={**kind, "partial_rotary_factor": m["p"]})
    assert all(torch.equal(a, b) for a, b in zip(tables(model, right, right), reference))

generator = torch.Generator().manual_seed(0)
causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
flip = {"rotated": "head", "head": "rotated"}
score_change, by_distance, new_top = {}, {}, {}
for model, right in HEADS.items():
    d = MODELS[model]["head"]
    q, k = torch.randn(2, 4, SEQ, d, generator=generator, dtype=torch.float64)

    def scores(exponent, pairing):
        cos, sin = tables(model, exponent, pairing)
        return posenc.apply_rope(q, cos, sin) @ posenc.apply_rope(k, cos, sin).transpose(-1, -2) / math.sqrt(d)

    correct = scores(right, right)
    size = correct[:, causal].abs().mean()
    top = correct.masked_fill(~causal, -math.inf).argmax(-1)
    for mistake, (exponent, pairing) in {"exponent width": (flip[right], right), "pairing": (right, flip[right]),
                                         "both": (flip[right], flip[right])}.items():
        broken = scores(exponent, pairing)
        delta = (broken - correct).abs()
        score_change[model, mistake] = float(delta[:, causal].mean() / size)
        # distance i - j: the mean |change| on the sub-diagonal at that offset, over heads and queries
        by_distance[model, mistake] = np.array(  # distances 0 ... SEQ/2, each over >= SEQ/2 queries
            [float(delta.diagonal(-dist, -2, -1).mean() / size) for dist in range(SEQ // 2 + 1)])
        moved_top = broken.masked_fill(~causal, -math.inf).argmax(-1) != top  # (heads, SEQ)
        new_top[model, mistake] = float(moved_top[:, 1:].double().mean())
print("mean |score change| / mean |score| over causal pairs; share of queries whose top key changes")
for (model, mistake), value in score_change.items():
    print(f"  {model:>17}, {mistake:>14}: {value:.3f}  ({new_top[model, mistake]:.0%} new top key)")
assert all(curve[0] < 1e-12 for curve in by_distance.values())  # same position: any rotation cancels
assert all(curve[1:5].mean() < curve[32:].mean() for curve in by_distance.values())
assert all(1.5 < by_distance[m, "pairing"][1] / by_distance[m, "exponent width"][1] < 3 for m in HEADS)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
for ax, model in zip(axes, HEADS):
    for n, mistake in enumerate(["exponent width", "pairing", "both"]):
        curve = by_distance[model, mistake]
        ax.plot(np.arange(1, curve.size), curve[1:], color=f"C{n}", linewidth=1, label=mistake)
    ax.set_xscale("log")
    ax.set_xlabel("distance between query and key (positions)")
    ax.set_title(f"{model} head", fontsize=10)
axes[0].set_ylabel("mean |score change| / mean |score|")
axes[0].legend(fontsize=8)
fig.suptitle("How each mistake changes attention scores with distance (random q, k, float64)")
plt.show()

# %%
# Every mistake leaves a query's score against a key at its own position unchanged (the rotation
# cancels), grows over the first tens of positions of distance and then levels off: a wrong
# frequency is a wrong angle per position, proportional to the distance until it has spread over a
# whole turn. A wrong pairing rotates channels that carried no position and freezes others that
# did, so at distance 1 it already changes the scores about twice as much as the wrong exponent
# width.
#
# The exponent width on a model
# -----------------------------
# The same mistake inside transformers 5.24's own ``PhiForCausalLM`` and ``Gemma4ForCausalLM``: the
# Phi-2 config (real width 2560, 32 heads of 80, 40 % rotated) cut to 2 layers, a 1024-token
# vocabulary and an MLP 2560 wide, and the Gemma 4 text config above (width 2560, 8 heads; global
# heads 512 wide) with 2 global layers and the same cuts; seeded random weights, eval mode,
# float32. The rotary module's ``inv_freq`` buffer (a public buffer; ``full_attention_inv_freq``
# for Gemma 4) is overwritten with the wrong width's frequencies, and the next-token logits of 384
# random tokens are compared. The weights are random, so the numbers
# say how far the computation moves, not how much a trained model would lose. Gemma 4's embeddings
# are untied here: with tied random embeddings the model predicts the token it reads at every
# position, whatever the positions, which would make top-1 agreement meaningless.
LENGTH = 384
tokens = torch.randint(3, 1024, (1, LENGTH), generator=torch.Generator().manual_seed(1))


def logits_moved(model, buffer, wrong):
    """Next-token logits with the right and the wrong frequencies in ``buffer``: (LENGTH, vocab) each."""
    with torch.no_grad():
        right = model(tokens).logits[0].double()
        keep = buffer.clone()
        buffer.copy_(wrong)
        broken = model(tokens).logits[0].double()
        buffer.copy_(keep)
    return right, broken


phi_config = json.loads((CONFIGS / "phi-2.json").read_text(encoding="utf-8"))
phi_config.update(num_hidden_layers=2, vocab_size=1024, intermediate_size=2560, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
phi = PhiForCausalLM(transformers.AutoConfig.for_model(**phi_config)).eval()
torch.manual_seed(0)
gemma = Gemma4ForCausalLM(Gemma4TextConfig(**{**GEMMA4, "num_hidden_layers": 2, "intermediate_size": 2560,
                                               "layer_types": ["full_attention"] * 2,
                                               "tie_word_embeddings": False})).eval()
phi_rotary, gemma_rotary = phi.model.rotary_emb, gemma.model.rotary_emb
# transformers builds the same right frequencies (float32) as posenc (float64)
torch.testing.assert_close(phi_rotary.inv_freq.double(), pair_frequencies("Phi-2", "rotated"), rtol=1e-6, atol=0)
gemma_right = gemma_rotary.full_attention_inv_freq.clone()
gemma_wrong = gemma_right.clone()
gemma_wrong[:64] = pair_frequencies("Gemma 4 (global)", "rotated").float()  # same 64 pairs, exponent over 128
RUNS = {"Phi-2, exponent over the head width": logits_moved(
            phi, phi_rotary.inv_freq, pair_frequencies("Phi-2", "head").float()),
        "Gemma 4, exponent over the rotated width": logits_moved(
            gemma, gemma_rotary.full_attention_inv_freq, gemma_wrong)}
moved, agree = {}, {}
for run, (right, broken) in RUNS.items():
    moved[run] = ((broken - right).norm(dim=-1) / right.norm(dim=-1)).numpy()  # (LENGTH,)
    agree[run] = float((broken.argmax(-1) == right.argmax(-1))[1:].double().mean())
    print(f"{run}: relative logit change at position 0: {moved[run][0]}; mean over positions 1-7 "
          f"{moved[run][1:8].mean():.3f}, 8-63 {moved[run][8:64].mean():.3f}, 64-{LENGTH - 1} "
          f"{moved[run][64:].mean():.3f}; same top-1 token at {agree[run]:.0%} of positions 1-{LENGTH - 1}")
assert all(curve[0] == 0 for curve in moved.values())  # position 0: every angle is 0, bit-identical
assert all(curve[1:].min() > 0 and curve[1:].mean() > 0.05 for curve in moved.values())
assert all(curve[1:8].mean() < curve[8:64].mean() for curve in moved.values())
PHI_RUN, GEMMA_RUN = RUNS
assert moved[PHI_RUN][64:].mean() < moved[PHI_RUN][8:64].mean() and moved[GEMMA_RUN][64:].mean() > 0.9
assert 0.6 < agree[PHI_RUN] < 0.75 and agree[GEMMA_RUN] < 0.15  # "about a third" changes
assert all(p.dtype == torch.float32 for net in (phi, gemma) for p in net.parameters())
fig, ax = plt.subplots(figsize=(9, 3.6))
for run, curve in moved.items():
    ax.plot(np.arange(1, LENGTH), curve[1:], linewidth=1, label=run)
ax.set_xscale("log")
ax.set_xlabel("position of the token (0 is exactly unchanged, not drawn)")
ax.set_ylabel("|logit change| / |logits|")
ax.set_title("Next-token logits with the wrong exponent width (random weights, 2 layers)")
ax.legend(fontsize=8)
plt.show()

# %%
# Position 0 is bit-identical in both models: every angle there is 0, whatever the frequencies, so
# a test on one token, or on the first token of a prompt, cannot see the mistake. From position 1
# on the logits move, more over the first tens of positions than over the first few. Past them the
# Phi-shaped model's change falls back somewhat while the Gemma-shaped model's stays near the size
# of the logits themselves; the predicted token changes at about a third of the positions in the
# first and at almost all of them in the second. (Gemma 4 scores RMS-normalised queries and keys
# with softmax scale 1, not :math:`1/\sqrt{d}`, a likely reason why its random model reacts more.)
#
# Checklist for engine authors
# ----------------------------
# * ``partial_rotary_factor`` (GPT-NeoX: ``rotary_pct``) without a ``rope_type`` of its own:
#   ``rotary_dim = int(head_dim * factor)``; rotate channels ``[:rotary_dim]`` as a head of that
#   width, pairs :math:`(i, i + r/2)`, frequencies :math:`\mathrm{base}^{-2i/r}`; pass the rest
#   through. In posenc: ``rope_cos_sin(..., scaling={"partial_rotary_factor": f})`` gives
#   ``rotary_dim``-wide tables and :func:`posenc.apply_rope` passes the remaining channels through.
# * ``rope_type: "proportional"`` (Gemma 4's global layers): frequencies over the whole head,
#   :math:`\mathrm{base}^{-2i/d}`, the first ``int(factor * head_dim // 2)`` pairs turn, pairs
#   :math:`(i, i + d/2)`, the rest get angle 0. The global layers' head width is Gemma 4's
#   ``global_head_dim`` (512), not the local ``head_dim`` (256).
# * Keep the exponent's width and the rotated width as two parameters even where they coincide,
#   and test at positions far from 0: at position 0 every convention agrees.
# * ``python -m posenc rope config.json`` prints the rotated width and, for proportional RoPE,
#   which pairs turn and which width the exponent divides by.

# %%
# What this shows
# ---------------
# * The wrong width in the exponent gives the slow pairs wrong frequencies, and the wrong pairing
#   moves position into other channels; either error vanishes at position 0 and grows with distance.
# * In small random models with the real family code, the wrong width moves the next-token logits
#   from position 1 on and changes the predicted token at many positions.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
first = min(float(curve[1:8].mean()) for curve in moved.values())
later = min(float(curve[8:].mean()) for curve in moved.values())
claims = [
    {
        "claim": "A wrong width in the exponent agrees with the right one at position 0 and differs "
        "after it.",
        "source": "pie-project/pie issue #602 (said of the exponent width and the pairing together)",
        "measured": "random Phi-2- and Gemma-4-shaped transformers models, relative logit change at position 0: "
        f"{max(float(c[0]) for c in moved.values())}; mean over positions 1-7 at least {first:.3f}, over "
        f"8-{LENGTH - 1} at least {later:.3f}; random-q/k score change at distance 0 below 1e-12",
        # rule: "holds" if position 0 is bit-identical in both models and every later mean is > 1e-3;
        # otherwise "does not hold"
        "verdict": "holds" if max(float(c[0]) for c in moved.values()) == 0 and min(first, later) > 1e-3
        else "does not hold",
    },
]
