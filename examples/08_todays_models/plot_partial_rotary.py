"""
Partial and proportional rotary
===============================

Many models rotate only some channels of each attention head and leave the others without any
position: GPT-NeoX and Pythia, Phi-2, StableLM, Qwen3.5, and the global layers of Gemma 4. There
are two conventions. *Partial* rotary (``partial_rotary_factor``, GPT-NeoX's ``rotary_pct``)
rotates the first ``rotary_dim`` channels as a small RoPE head of its own: pairs
:math:`(i, i + r/2)` and frequencies :math:`\\mathrm{base}^{-2i/r}` over the rotated width
:math:`r`. Gemma 4's *proportional* RoPE keeps the whole head's geometry: pairs
:math:`(i, i + d/2)` and frequencies :math:`\\mathrm{base}^{-2i/d}` over the head width :math:`d`,
of which only the first (fastest) ones turn. This page reads which channels carry position in
real configs, reproduces the two ways of mixing the conventions up (the width in the exponent, and
the pairing of the channels) and measures them on frequencies, on attention scores and on the
logits of small models built with transformers' own family code.
"""

# %%
# Which channels carry position
# -----------------------------
# :func:`posenc.rope_report` reads the real ``config.json`` files stored under
# ``tests/data/configs`` (their README gives each file's source) as transformers 5.24 reads them.
# No Gemma 4 config is stored: its row is a config written in the family's shape, whose RoPE
# settings are the family's defaults, those of transformers 5.24's ``Gemma4TextConfig`` (global
# layers: head width 512, ``rope_type="proportional"``, ``partial_rotary_factor`` 0.25, base
# :math:`10^6`). The last column is measured, not read: the width :math:`w` in the exponent of
# :math:`\theta_i = \mathrm{base}^{-2i/w}`, recovered from the first two frequencies as
# :math:`w = 2\ln\mathrm{base} / \ln(\theta_0/\theta_1)`.
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
SOURCES = {"Pythia-1.4B": CONFIGS / "pythia-1.4b.json", "Phi-2": CONFIGS / "phi-2.json",
           "StableLM-3B-4E1T": CONFIGS / "stablelm-3b-4e1t.json", "Qwen3.5-27B": CONFIGS / "qwen3.5-27b.json",
           "Gemma 4 (global)": GEMMA4}
MODELS = {}
print(f"{'model':>17} {'rope_type':>13} {'head':>5} {'rotated':>8} {'p':>5} {'base':>6} {'exponent width':>15}")
for name, source in SOURCES.items():
    report = posenc.rope_report(source)
    scheme, theta = report.scheme, report.scheme.inv_freq  # the global layers' setting where there are several
    # Proportional RoPE keeps one frequency per pair of the whole head (0 for those that do not turn).
    head = 2 * theta.numel() if scheme.rope_type == "proportional" else report.head_dim
    width = 2 * math.log(scheme.base) / math.log(float(theta[0] / theta[1]))
    MODELS[name] = dict(head=head, rotated=scheme.rotary_dim, base=scheme.base, kind=scheme.rope_type,
                        p=scheme.parameters["partial_rotary_factor"], context=scheme.target_context,
                        exponent=round(width))
    assert abs(width - round(width)) < 1e-9
    print(f"{name:>17} {scheme.rope_type:>13} {head:>5} {scheme.rotary_dim:>8} {MODELS[name]['p']:>5} "
          f"{scheme.base:>6.0e} {width:>15.6f}")
assert all(m["exponent"] == (m["head"] if m["kind"] == "proportional" else m["rotated"]) for m in MODELS.values())

# %%
# Every partial model divides the exponent by its rotated width; Gemma 4's global layers divide by
# their whole head width, 512, although they rotate 128 channels. Which channels are those? The
# helper below asks :func:`posenc.apply_rope` directly: it rotates one unit vector per channel to
# position 1 and reads which channels moved and by what angle. With ``partial_rotary_factor`` the
# cos/sin tables are only ``rotary_dim`` wide, and ``apply_rope`` passes the channels beyond them
# through; with ``"proportional"`` the tables span the whole head and the pairs that do not turn
# have angle 0.


def channel_angles(model):
    """Angle by which each channel turns per position (0: passes through), read off apply_rope."""
    m = MODELS[model]
    kind = {"rope_type": "proportional"} if m["kind"] == "proportional" else {}
    cos, sin = posenc.rope_cos_sin(torch.tensor([1]), m["head"], base=m["base"], dtype=torch.float64,
                                   scaling={**kind, "partial_rotary_factor": m["p"]})  # (1, table width)
    basis = torch.eye(m["head"], dtype=torch.float64)[:, None, :]  # (head, 1, head): one unit vector per channel
    turned = posenc.apply_rope(basis, cos, sin)[:, 0, :]  # (head, head): row c is channel c's vector, turned
    along = turned.diagonal()
    across = (turned - torch.diag_embed(along)).norm(dim=-1)  # the part that left channel c
    return torch.atan2(across, along)  # (head,), exactly 0 for channels that pass through


def runs(channels):
    """Consecutive runs in a sorted list of channels, as (first, last) pairs."""
    present = set(channels)
    return [(c, next(e for e in range(c, channels[-1] + 1) if e + 1 not in present))
            for c in channels if c - 1 not in present]


PICTURED = ["Pythia-1.4B", "Phi-2", "Gemma 4 (global)"]
angles = {model: channel_angles(model) for model in PICTURED}
for model, angle in angles.items():
    turning = torch.nonzero(angle).flatten().tolist()
    wavelength = 2 * math.pi / angle[angle > 0]
    print(f"{model:>17}: channels {', '.join(f'{a}-{b}' for a, b in runs(turning))} of "
          f"0-{MODELS[model]['head'] - 1} turn; "
          f"wavelengths {float(wavelength.min()):.3g} to {float(wavelength.max()):.4g} positions "
          f"(context {MODELS[model]['context']})")
assert torch.nonzero(angles["Phi-2"]).flatten().tolist() == list(range(32))
gemma_turning = torch.nonzero(angles["Gemma 4 (global)"]).flatten().tolist()
assert gemma_turning == list(range(64)) + list(range(256, 320))
assert MODELS["Gemma 4 (global)"]["head"] - len(gemma_turning) == 384
assert float(2 * math.pi / angles["Gemma 4 (global)"][63]) < 200  # the slowest pair that turns
assert round(float(2 * math.pi / angles["Pythia-1.4B"][15])) == round(float(2 * math.pi / angles["Phi-2"][15])) == 35333
fig, axes = plt.subplots(len(PICTURED), 1, figsize=(9, 7.2))
for ax, model in zip(axes, PICTURED):
    angle, head = angles[model].numpy(), MODELS[model]["head"]
    still = angle == 0
    ax.scatter(np.arange(head)[~still], 2 * math.pi / angle[~still], s=8, color="C0", label="turns")
    for first, last in runs(np.flatnonzero(still).tolist()):
        ax.axvspan(first - 0.5, last + 0.5, color="0.88", linewidth=0, zorder=0)
    ax.axhline(MODELS[model]["context"], color="C3", linestyle="--", linewidth=1, label="context length")
    ax.set_yscale("log")
    ax.set_xlim(-0.5, head - 0.5)
    ax.set_ylabel("wavelength\n(positions)")
    ax.set_title(f"{model}: head {head}, {int((~still).sum())} channels turn, grey channels pass through",
                 fontsize=10)
axes[0].legend(loc="center right", fontsize=8)
axes[-1].set_xlabel("channel index in the head")
fig.suptitle("Which channels carry position: wavelength of each channel's rotation")
plt.show()

# %%
# A partial head is an ordinary RoPE head ``rotary_dim`` wide: its rotated pairs span the whole
# range of wavelengths, from :math:`2\pi` up to :math:`2\pi\,\mathrm{base}^{1-2/r}` (35 333
# positions for Pythia and Phi-2, longer than their 2048-token context). Proportional RoPE takes
# the fastest 64 of the 256 pairs a fully rotated 512-wide head would have, in their places
# :math:`(i, i + 256)`: Gemma 4's global layers carry position only in channels whose wavelength is
# below 200 positions, and the other 384 channels do no positional work at all.
#
# Two ways to mix the conventions up
# ----------------------------------
# An engine can get either half of the convention wrong:
#
# * **the width in the exponent**: a partial model's frequencies computed over the head width
#   (:math:`\mathrm{base}^{-2i/d}`; pie-project/pie issue #602 reports it, together with the
#   pairing below, for Qwen3.6), or a proportional model's over the rotated width
#   (:math:`\mathrm{base}^{-2i/r}`, ordinary partial rotary; pegainfer-project/pegainfer issue #820
#   notes that its engine held both widths in one parameter, which cannot express Gemma 4);
# * **the pairing**: a partial model rotated across the whole head, pairs :math:`(i, i + d/2)`
#   (labscommunity/cascadia PR #69 caught this in its own port), or a proportional model's pairs
#   packed into the first :math:`r` channels, :math:`(i, i + r/2)` (NVIDIA-NeMo/Megatron-Bridge
#   issue #4195 for Gemma 4, with the right frequency values).
#
# The per-pair frequencies of both widths come from :func:`posenc.rope_inv_freq`: ordinary partial
# with ``partial_rotary_factor``, the head-width exponent with ``rope_type="proportional"`` (its
# non-zero entries). Each mistake multiplies frequency :math:`i` by
# :math:`\mathrm{base}^{\pm 2i\,(1/r - 1/d)}`: exactly 1 for the fastest pair, and far from 1 for
# the slow ones.


def pair_frequencies(model, exponent):
    """The rotated pairs' frequencies, exponent over the rotated width or the whole head: (pairs,)."""
    m = MODELS[model]
    if exponent == "rotated":
        return posenc.rope_inv_freq(m["head"], base=m["base"], scaling={"partial_rotary_factor": m["p"]})[0]
    theta, _ = posenc.rope_inv_freq(m["head"], base=m["base"],
                                    scaling={"rope_type": "proportional", "partial_rotary_factor": m["p"]})
    return theta[theta > 0]


def wrong_exponent(model):
    return "head" if MODELS[model]["kind"] != "proportional" else "rotated"


ratio = {}
print(f"{'model':>17} {'wrong width':>12} {'slowest wavelength: right':>27} {'wrong':>10} {'frequency ratio':>16}")
for model in ["Pythia-1.4B", "Phi-2", "StableLM-3B-4E1T", "Qwen3.5-27B", "Gemma 4 (global)"]:
    m = MODELS[model]
    right_exp = "rotated" if m["kind"] != "proportional" else "head"
    right, wrong = pair_frequencies(model, right_exp), pair_frequencies(model, wrong_exponent(model))
    ratio[model] = wrong / right
    i = torch.arange(right.numel(), dtype=torch.float64)
    closed_form = m["base"] ** (2 * i * (1 / m["rotated"] - 1 / m["head"]))
    closed_form = closed_form if m["kind"] != "proportional" else 1 / closed_form
    torch.testing.assert_close(ratio[model], closed_form, rtol=1e-12, atol=0)
    extreme = ratio[model].max() if m["kind"] != "proportional" else ratio[model].min()
    print(f"{model:>17} {m['head'] if wrong_exponent(model) == 'head' else m['rotated']:>12} "
          f"{2 * math.pi / float(right.min()):>27.4g} {2 * math.pi / float(wrong.min()):>10.4g} "
          f"{float(extreme):>16.3g}")
assert all(float(r[0]) == 1.0 for r in ratio.values())
assert round(float(ratio["Pythia-1.4B"].max())) == 649 and float(ratio["Qwen3.5-27B"].max()) > 1e5
assert 2 * math.pi / float(pair_frequencies("Pythia-1.4B", "head").min()) < 55
assert 26_000 < 1 / float(ratio["Gemma 4 (global)"].min()) < 28_000
fig, ax = plt.subplots(figsize=(9, 3.8))
for n, (model, r) in enumerate(ratio.items()):
    ax.plot(np.arange(r.numel()), r.numpy(), marker="o", markersize=3, linewidth=1, color=f"C{n}",
            label=f"{model}, exponent over the {'head' if wrong_exponent(model) == 'head' else 'rotated'} width")
ax.axhline(1.0, color="0.5", linewidth=0.8)
ax.set_yscale("log")
ax.set_xlabel("rotated pair index i (fast to slow)")
ax.set_ylabel("wrong frequency / right frequency")
ax.set_title("The width in the exponent, mixed up: how much faster or slower each pair turns")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %%
# A partial model computed with the head width keeps only fast frequencies: Pythia's slowest pair
# turns 649 times too fast and repeats every 54 positions instead of every 35 333, and Qwen3.5's
# (base :math:`10^7`) over 100 000 times too fast. A proportional model read as ordinary partial
# gets the opposite: Gemma 4's slowest rotated pair turns about 27 000 times too slowly (ratio
# 3.7e-5). Both errors leave the fastest pair exactly as it was.
#
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
# * Partial rotary is a narrow RoPE head inside the head: the first ``rotary_dim`` channels carry
#   position over the whole range of wavelengths, the rest carry none. Proportional RoPE spreads its
#   turning pairs across the head and keeps only the fastest frequencies of a full-width head.
# * The width in the exponent changes the slow pairs' frequencies by orders of magnitude (Pythia's
#   slowest pair 649 times too fast, Qwen3.5's over 100 000 times, Gemma 4's about 27 000 times too
#   slow), and the pairing moves position into other channels; either error vanishes at position 0
#   and grows with distance.
# * In small random models with the real family code, the wrong width moves the next-token logits
#   from position 1 on and changes the predicted token at many positions.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger. transformers' rotary modules are built from the real configs.
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding  # noqa: E402
from transformers.models.phi.modeling_phi import PhiRotaryEmbedding  # noqa: E402
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding  # noqa: E402
from transformers.models.stablelm.modeling_stablelm import StableLmRotaryEmbedding  # noqa: E402

ROTARY = {"Pythia-1.4B": GPTNeoXRotaryEmbedding, "Phi-2": PhiRotaryEmbedding,
          "StableLM-3B-4E1T": StableLmRotaryEmbedding, "Qwen3.5-27B": Qwen3_5TextRotaryEmbedding}
over_rotated, over_head = {}, {}
for model, rotary_class in ROTARY.items():
    config = transformers.AutoConfig.for_model(**json.loads(SOURCES[model].read_text(encoding="utf-8")))
    hf = rotary_class(config=config.get_text_config(decoder=True)).inv_freq.double()
    ours = {exp: pair_frequencies(model, exp) for exp in ("rotated", "head")}
    over_rotated[model] = float(((hf - ours["rotated"]) / ours["rotated"]).abs().max())
    over_head[model] = float(((hf - ours["head"]) / ours["head"]).abs().max())
gemma_hf = gemma_right.double()
gemma_pairs = int((gemma_hf > 0).sum())
gemma_vs_head = float(((gemma_hf[:gemma_pairs] - pair_frequencies("Gemma 4 (global)", "head"))
                       / pair_frequencies("Gemma 4 (global)", "head")).abs().max())
gemma_vs_rotated = float(((gemma_hf[:gemma_pairs] - pair_frequencies("Gemma 4 (global)", "rotated"))
                          / pair_frequencies("Gemma 4 (global)", "rotated")).abs().max())
first = min(float(curve[1:8].mean()) for curve in moved.values())
later = min(float(curve[8:].mean()) for curve in moved.values())
claims = [
    {
        "claim": "Partial rotary's frequency exponent divides by the rotated width, not the head width "
        "(GPT-NeoX/Pythia, Phi-2, StableLM, Qwen3.5).",
        "source": "transformers 5.24 GPTNeoXRotaryEmbedding, PhiRotaryEmbedding, StableLmRotaryEmbedding, "
        "Qwen3_5TextRotaryEmbedding",
        "measured": "inv_freq of transformers' rotary module from the real configs vs base^(-2i/r): largest "
        f"relative difference {max(over_rotated.values()):.1e}; vs base^(-2i/d): at least "
        f"{min(over_head.values()):.2f}",
        # rule: "holds" if every model matches the rotated width within 1e-6 and differs from the head
        # width by more than 0.5; otherwise "does not hold"
        "verdict": "holds" if max(over_rotated.values()) < 1e-6 and min(over_head.values()) > 0.5
        else "does not hold",
    },
    {
        "claim": "Gemma 4's proportional RoPE divides its exponent by the full head width, so the rotated pairs "
        "keep the frequencies of a fully rotated head.",
        "source": "transformers 5.24 _compute_proportional_rope_parameters, Gemma4TextRotaryEmbedding",
        "measured": f"{gemma_pairs} of {gemma_hf.numel()} pairs non-zero in full_attention_inv_freq; vs "
        f"base^(-2i/512): largest relative difference {gemma_vs_head:.1e}; vs base^(-2i/128): "
        f"{gemma_vs_rotated:.3g}",
        # rule: "holds" if 64 pairs turn, they match the head width within 1e-6 and differ from the
        # rotated width by more than 0.5; otherwise "does not hold"
        "verdict": "holds" if gemma_pairs == 64 and gemma_vs_head < 1e-6 and gemma_vs_rotated > 0.5
        else "does not hold",
    },
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
