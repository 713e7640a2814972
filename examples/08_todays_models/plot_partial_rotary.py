"""
Partial and proportional rotary: which channels turn, and how fast?
===================================================================

Many models rotate only some channels of each attention head and leave the others without any
position: GPT-NeoX and Pythia, Phi-2, StableLM, Qwen3.5, and the global layers of Gemma 4. There
are two conventions. *Partial* rotary (``partial_rotary_factor``, GPT-NeoX's ``rotary_pct``)
rotates the first ``rotary_dim`` channels as a small RoPE head of its own: pairs
:math:`(i, i + r/2)` and frequencies :math:`\\mathrm{base}^{-2i/r}` over the rotated width
:math:`r`. Gemma 4's *proportional* RoPE keeps the whole head's geometry: pairs
:math:`(i, i + d/2)` and frequencies :math:`\\mathrm{base}^{-2i/d}` over the head width :math:`d`,
of which only the first (fastest) ones turn. This page reads which channels carry position in
real configs, describes the two ways of mixing the conventions up (the width in the exponent, and
the pairing of the channels) and measures the first on frequencies. The next page,
:ref:`sphx_glr_auto_examples_08_todays_models_plot_partial_rotary_mistakes.py`, measures both on
attention scores and on the logits of small models built with transformers' own family code.
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
    ax.set_title(f"{model}: grey channels pass through", fontsize=10)
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

# %%
# What this shows
# ---------------
# * Partial rotary is a narrow RoPE head inside the head: the first ``rotary_dim`` channels carry
#   position over the whole range of wavelengths, the rest carry none. Proportional RoPE spreads its
#   turning pairs across the head and keeps only the fastest frequencies of a full-width head.
# * The width in the exponent changes the slow pairs' frequencies by orders of magnitude (Pythia's
#   slowest pair 649 times too fast, Qwen3.5's over 100 000 times, Gemma 4's about 27 000 times too
#   slow) and leaves the fastest pair as it was. What this and the pairing do to attention scores
#   and logits is measured on
#   :ref:`sphx_glr_auto_examples_08_todays_models_plot_partial_rotary_mistakes.py`.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger. transformers' rotary modules are built from the real configs.
from transformers import Gemma4TextConfig  # noqa: E402
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding  # noqa: E402
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
gemma_hf = Gemma4TextRotaryEmbedding(config=Gemma4TextConfig(**GEMMA4)).full_attention_inv_freq.double()
gemma_pairs = int((gemma_hf > 0).sum())
gemma_vs_head = float(((gemma_hf[:gemma_pairs] - pair_frequencies("Gemma 4 (global)", "head"))
                       / pair_frequencies("Gemma 4 (global)", "head")).abs().max())
gemma_vs_rotated = float(((gemma_hf[:gemma_pairs] - pair_frequencies("Gemma 4 (global)", "rotated"))
                          / pair_frequencies("Gemma 4 (global)", "rotated")).abs().max())
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
]
