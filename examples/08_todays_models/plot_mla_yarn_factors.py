"""
MLA and YaRN: where the attention factor goes
=============================================

DeepSeek-V2 and V3 extend their context with YaRN, whose temperature multiplies the attention
logits, while their multi-head latent attention (MLA) rotates only a small decoupled part of each
head (:ref:`sphx_glr_auto_examples_08_todays_models_plot_mla_rope.py`). This page answers where
YaRN's two factors go in MLA: it reads them from DeepSeek's configs and transformers, measures on a
small DeepSeek-V3 model what changes when an implementation puts the temperature twice, once or
nowhere, and compares YaRN's attention factor across implementations.
"""

# %%
# Where YaRN's factors go
# -----------------------
# YaRN changes RoPE's frequencies and multiplies the logits by a temperature :math:`m(\mu) =
# 0.1\,\mu \ln f + 1` (transformers' ``yarn_get_mscale``). DeepSeek's configs give two
# :math:`\mu`: ``mscale`` and ``mscale_all_dim``. transformers 5.24 multiplies cos/sin, hence only
# the 64 rotated channels, by :math:`a = m(\mu)/m(\mu_{all})`, and the softmax scale, hence all 192
# channels, by :math:`S = m(\mu_{all})^2`. Both DeepSeek configs set the two equal: cos/sin carry
# nothing and the whole temperature sits in the softmax scale. Read from the modules built from the
# real configs (attention modules on the ``meta`` device: only ``scaling`` is read) and from posenc
# (:func:`posenc.yarn_mscale` is :math:`m`):
import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Attention, DeepseekV2RotaryEmbedding
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention, Qwen2RotaryEmbedding

import posenc

CONFIGS = Path("../../tests/data/configs")
RAW = {name: json.loads((CONFIGS / f"{name.lower()}.json").read_text(encoding="utf-8"))
       for name in ("DeepSeek-V3", "DeepSeek-V2-Lite")}
reports = {name: posenc.rope_report(raw) for name, raw in RAW.items()}
yarn = posenc.yarn_mscale

hf, MODULES = {}, {"DeepSeek-V3": (DeepseekV3Attention, DeepseekV3RotaryEmbedding),
                   "DeepSeek-V2-Lite": (DeepseekV2Attention, DeepseekV2RotaryEmbedding)}
for name, (attention_class, rotary_class) in MODULES.items():
    config = transformers.AutoConfig.for_model(**RAW[name])
    with torch.device("meta"):
        attention = attention_class(config, 0)
    p, d = config.rope_parameters, attention.qk_head_dim
    hf[name] = dict(a=rotary_class(config).attention_scaling, S=attention.scaling / d**-0.5, p=p)
    ours = (posenc.rope_inv_freq(64, base=p["rope_theta"], scaling=p)[1],  # (inv_freq, attention factor)
            posenc.mla_softmax_scale(d, scaling=p) / d**-0.5)
    print(f"{name:>16}: factor {p['factor']}, mscale {p['mscale']}, mscale_all_dim {p['mscale_all_dim']}: cos/sin x "
          f"{hf[name]['a']} (posenc {ours[0]}), softmax x {hf[name]['S']:.6f} (posenc {ours[1]:.6f}, "
          f"m(mu_all)^2 = {yarn(p['factor'], p['mscale_all_dim']) ** 2:.6f})")
    assert hf[name]["a"] == ours[0] == 1.0 and math.isclose(hf[name]["S"], ours[1], rel_tol=1e-12)
    assert math.isclose(hf[name]["S"], yarn(p["factor"], p["mscale_all_dim"]) ** 2, rel_tol=1e-12)
v3 = reports["DeepSeek-V3"].scheme
print(f"DeepSeek-V3's 32 rotated pairs: {v3.unchanged} unchanged, {v3.interpolated} divided by the factor, "
      f"{v3.in_between} in between; the 128 nope channels do not rotate, so YaRN's frequencies do not reach them")

# %%
# The temperature twice, once or dropped
# --------------------------------------
# Other YaRN models have one place for the temperature, cos/sin. Three readings of DeepSeek's
# config, each a pair :math:`(a, S)`, multiply the rotated part of the logits by :math:`a^2 S`
# (cos/sin reach both :math:`q^{pe}` and :math:`k^{pe}`) and the nope part by :math:`S`:
# **twice**, :math:`a = m(\mu)` (no ratio) with DeepSeek's :math:`S = m(\mu_{all})^2`; **once, on
# cos/sin**, :math:`a = m(\mu)` and :math:`S = 1`, right for the rotated part only; **dropped**,
# DeepSeek's ratio (1 here) and :math:`S = 1`.
READINGS = {"transformers 5.24": lambda p, h: (h["a"], h["S"]),
            "twice": lambda p, h: (yarn(p["factor"], p["mscale"]), yarn(p["factor"], p["mscale_all_dim"]) ** 2),
            "once, on cos/sin": lambda p, h: (yarn(p["factor"], p["mscale"]), 1.0),
            "dropped": lambda p, h: (yarn(p["factor"], p["mscale"]) / yarn(p["factor"], p["mscale_all_dim"]), 1.0)}
multiplier = {}
print(f"{'':>16} {'reading':>18} {'cos/sin a':>10} {'softmax S':>10} {'rope part':>10} {'nope part':>10}")
for name, h in hf.items():
    for reading, rule in READINGS.items():
        a, s = rule(h["p"], h)
        multiplier[name, reading] = (a * a * s, s)
        print(f"{name:>16} {reading:>18} {a:>10.4f} {s:>10.4f} {a * a * s:>10.4f} {s:>10.4f}")
m_v3 = yarn(40, 1.0)
assert math.isclose(multiplier["DeepSeek-V3", "twice"][0], m_v3**4) and multiplier["DeepSeek-V3", "dropped"] == (1, 1)
assert (round(m_v3**4, 2), round(m_v3**2, 2)) == (3.51, 1.87)  # the values the next paragraph names

# %%
# On DeepSeek-V3, twice multiplies the rotated part by :math:`m^4 \approx 3.51` instead of
# :math:`m^2 \approx 1.87`; dropped leaves everything at 1.
#
# Measured on a small DeepSeek-V3 model
# -------------------------------------
# transformers 5.24's ``DeepseekV3ForCausalLM`` with DeepSeek-V3's head shape (query heads of
# 128 + 64, values 128, latent 512) and YaRN settings, but 4 heads, ``q_lora_rank`` 256, 2 dense
# layers, width 512 and 1024 tokens of vocabulary; seeded random weights, eval mode, float32, eager
# attention. Each reading is set through the rotary module's ``attention_scaling`` and each
# attention module's ``scaling`` and compared, on 384 random tokens, with transformers' own: the
# relative change of the next-token logits, the positions whose top-1 token stays, the mean
# attention entropy. Random weights at transformers' default ``initializer_range`` 0.02 attend
# almost uniformly, unlike trained models; with 0.05 they attend more sharply. The numbers say how
# far the computation moves, not what a trained model would lose.
LENGTH = 384
rope = {**RAW["DeepSeek-V3"]["rope_scaling"], "rope_theta": RAW["DeepSeek-V3"]["rope_theta"]}
rope["rope_type"] = rope.pop("type")
tokens = torch.randint(0, 1024, (1, LENGTH), generator=torch.Generator().manual_seed(1))
uniform = float(torch.log(torch.arange(1, LENGTH + 1, dtype=torch.float64)).mean())
moved, kept, entropy = {}, {}, {}
for init in (0.02, 0.05):
    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(DeepseekV3Config(
        vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, first_k_dense_replace=2,
        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=256, kv_lora_rank=512, qk_nope_head_dim=128,
        qk_rope_head_dim=64, v_head_dim=128, rope_parameters=rope, max_position_embeddings=163840,
        initializer_range=init, attn_implementation="eager")).eval()
    rotary, layers = model.model.rotary_emb, [layer.self_attn for layer in model.model.layers]
    assert rotary.attention_scaling == 1.0 and layers[0].scaling == posenc.mla_softmax_scale(192, scaling=rope)
    for reading, rule in READINGS.items():
        rotary.attention_scaling, s = rule(rope, hf["DeepSeek-V3"])
        for attention in layers:
            attention.scaling = s * 192**-0.5
        with torch.no_grad():
            out = model(tokens, output_attentions=True, use_cache=True)
        weights = torch.stack(out.attentions)  # (layers, 1, heads, LENGTH, LENGTH)
        entropy[init, reading] = float(-(weights * weights.clamp_min(1e-30).log()).sum(-1).mean())
        logits = out.logits[0].double()  # (LENGTH, vocab)
        if reading == "transformers 5.24":
            right, cached = logits, out.cache.layers[0]
        moved[init, reading] = ((logits - right).norm(dim=-1) / right.norm(dim=-1)).numpy()
        kept[init, reading] = float((logits.argmax(-1) == right.argmax(-1)).double().mean())
    print(f"initializer_range {init}: mean attention entropy {entropy[init, 'transformers 5.24']:.2f} nats "
          f"(uniform over the causal keys: {uniform:.2f}); cached per token and layer: latent "
          f"{cached.keys.shape[-1]} + k_pe {cached.values.shape[-1]}")
    for reading in list(READINGS)[1:]:
        print(f"  {reading:>16}: logits move {moved[init, reading][1:].mean():.3f} (mean, positions 1-{LENGTH - 1}; "
              f"position 0: {moved[init, reading][0]}), same top-1 at {kept[init, reading]:.0%}, entropy "
              f"{entropy[init, reading] - entropy[init, 'transformers 5.24']:+.3f} nats")
assert (cached.keys.shape[-1], cached.values.shape[-1]) == (512, 64)
WRONG = [(i, r) for i in (0.02, 0.05) for r in list(READINGS)[1:]]
assert all(moved[k][0] == 0 and moved[k][1:].min() > 0 for k in WRONG)
assert all(entropy[i, "twice"] < entropy[i, "transformers 5.24"] < entropy[i, "once, on cos/sin"]
           < entropy[i, "dropped"] for i in (0.02, 0.05))
assert all(0.05 < moved[0.02, r][1:].mean() < 0.15 and kept[0.02, r] > 0.8 for _, r in WRONG)
assert all(moved[0.05, r][1:].mean() > 0.5 and kept[0.05, r] < 0.3 for _, r in WRONG)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
for ax, init in zip(axes, (0.02, 0.05)):
    for reading in list(READINGS)[1:]:
        ax.plot(np.arange(1, LENGTH), moved[init, reading][1:], linewidth=1, label=reading)
    ax.set_xscale("log")
    ax.set_xlabel("position (0 is exactly unchanged, not drawn)")
    ax.set_title(f"initializer_range {init}", fontsize=10)
axes[0].set_ylabel("|logit change| / |logits|")
axes[0].legend(fontsize=8)
fig.suptitle("Next-token logits under each reading (random weights, 2 layers)")
plt.show()

# %%
# Position 0 is bit-identical under every reading: with one key, any scale gives it weight 1. From
# position 1 on every reading moves the logits: by 8 to 10 % with the default initialisation (the
# top-1 token kept at over 80 % of positions), by 0.7 to 0.8 of their size with the sharper one
# (kept at under 30 %). Twice sharpens attention, dropped flattens it, and once on cos/sin, which
# only loses the nope part's factor, flattens it less.
#
# YaRN's attention factor across implementations
# ----------------------------------------------
# For other models transformers 5.24 puts YaRN's factor on cos/sin only: an explicit
# ``attention_factor`` if the config has one, else the ``mscale``/``mscale_all_dim`` ratio if both
# are set, else :math:`0.1 \ln f + 1`. Two other readings: ignoring the keys and always using
# :math:`0.1 \ln f + 1` (vLLM #46280 describes a config's ``attention_factor`` dropped this way),
# and taking ``attention_factor`` as a multiplier of one's own :math:`0.1 \ln f + 1` (sglang #33558
# describes the scale squared this way). Configs: Qwen2.5-7B-Instruct with the YaRN settings of its
# model card (factor 4, original context 32 768), the same with factor 64 and an explicit
# ``attention_factor`` 1.0 (written here), and DeepSeek-V3. transformers' value is its rotary
# module's ``attention_scaling``; the last two columns are what each reading does to the rotated
# logits relative to transformers, :math:`(a/a_{hf})^2`.
qwen = json.loads((CONFIGS / "qwen2.5-7b-instruct.json").read_text(encoding="utf-8"))
YARNS = {"Qwen2.5, factor 4": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
         "factor 64, attention_factor 1": {"type": "yarn", "factor": 64.0, "attention_factor": 1.0,
                                           "original_max_position_embeddings": 32768}, "DeepSeek-V3": None}
factors = {}
print(f"{'config':>30} {'transformers':>13} {'posenc':>8} {'0.1 ln f + 1':>13} {'multiplied':>11}  logits x: "
      "ignored, multiplied")
for name, scaling in YARNS.items():
    raw, rotary_class = (RAW[name], DeepseekV3RotaryEmbedding) if scaling is None else (
        {**qwen, "rope_scaling": scaling}, Qwen2RotaryEmbedding)
    config = transformers.AutoConfig.for_model(**raw)
    if scaling is not None:  # plain YaRN: nothing in the softmax scale
        with torch.device("meta"):
            assert Qwen2Attention(config, 0).scaling == (config.hidden_size // config.num_attention_heads) ** -0.5
    p = config.rope_parameters
    a_hf, generic = rotary_class(config).attention_scaling, yarn(p["factor"], 1.0)
    factors[name] = (a_hf, posenc.rope_inv_freq(64, base=p["rope_theta"], scaling=p)[1], generic, a_hf * generic)
    print(f"{name:>30} " + " ".join(f"{v:>{w}.4f}" for v, w in zip(factors[name], (13, 8, 13, 11)))
          + f"  {(generic / a_hf) ** 2:>9.3f} {generic**2:>11.3f}")  # (a / a_hf)^2 of each reading
assert all(math.isclose(f[0], f[1], rel_tol=1e-12) for f in factors.values())
qwen_hf, _, qwen_ignored, qwen_multiplied = factors["Qwen2.5, factor 4"]
assert math.isclose(qwen_ignored, qwen_hf) and math.isclose(qwen_hf, yarn(4.0))
assert math.isclose(qwen_multiplied, qwen_hf**2)
print(f"sglang #33558's example, factor 128: {yarn(128, 1.0):.4f} -> {yarn(128, 1.0) ** 2:.4f}")
explicit_ignored = factors["factor 64, attention_factor 1"][2]
assert (round(explicit_ignored, 4), round(explicit_ignored**2, 3), round(m_v3, 4)) == (1.4159, 2.005, 1.3689)

# %%
# Without the keys, ignoring them changes nothing (Qwen2.5); an explicit ``attention_factor`` 1.0
# ignored becomes 1.4159, and the rotated logits grow by its square, 2.005. Taking the factor as a
# multiplier squares it whenever it is the default. On DeepSeek-V3 both readings put 1.3689 on
# cos/sin where transformers puts 1: the cos/sin of the "twice" or the "once" reading above,
# depending on whether the softmax factor is applied as well.

# %%
# What this shows
# ---------------
# * With ``mscale = mscale_all_dim``, DeepSeek's YaRN temperature goes entirely into the softmax
#   scale (:math:`m^2`, all channels) and cos/sin get 1. Applying it twice, only on cos/sin, or not
#   at all leaves the first token untouched and moves every later logit.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
deepseek_rule = all(h["a"] == 1.0 and math.isclose(h["S"], yarn(h["p"]["factor"], h["p"]["mscale_all_dim"]) ** 2,
                                                   rel_tol=1e-12) for h in hf.values())
first, later = max(moved[k][0] for k in WRONG), min(float(moved[k][1:].mean()) for k in WRONG)
explicit = factors["factor 64, attention_factor 1"]
claims = [
    {
        "claim": "With mscale = mscale_all_dim, DeepSeek's YaRN leaves cos/sin unscaled and multiplies the "
        "softmax scale by the square of YaRN's temperature, 0.1 mscale_all_dim ln(factor) + 1.",
        "source": "transformers 5.24 DeepseekV3Attention, DeepseekV2Attention and their rotary modules",
        "measured": f"DeepSeek-V3: cos/sin x {hf['DeepSeek-V3']['a']}, softmax x {hf['DeepSeek-V3']['S']:.5f} "
        f"= {m_v3:.5f}^2; DeepSeek-V2-Lite: x {hf['DeepSeek-V2-Lite']['a']}, x {hf['DeepSeek-V2-Lite']['S']:.5f}",
        # rule: "holds" if both configs have a == 1 and S == m(mscale_all_dim)^2 within 1e-12
        "verdict": "holds" if deepseek_rule else "does not hold",
    },
    {
        "claim": "YaRN's attention temperature matters only for long inputs, so misplacing DeepSeek's factor is "
        "harmless on short prompts.",
        "source": "common assumption",
        "measured": f"random DeepSeek-V3-shaped transformers models, 384 tokens (original context 4096): "
        f"position 0 change {first}; mean relative logit change over positions 1-{LENGTH - 1} at least "
        f"{later:.3f}, top-1 kept at {min(kept[k] for k in WRONG):.0%}-{max(kept[k] for k in WRONG):.0%}",
        # rule: "does not hold" if every reading moves the logits by > 1e-3 on average inside the original
        # context; "holds" otherwise
        "verdict": "does not hold" if later > 1e-3 else "holds",
    },
    {
        "claim": "transformers applies an explicit YaRN attention_factor as the final cos/sin factor, in place of "
        "0.1 ln f + 1; an engine may ignore the explicit factor, or multiply the two.",
        "source": "transformers 5.24 _compute_yarn_parameters; vLLM #46280, sglang #33558",
        "measured": f"factor 64, attention_factor 1: attention_scaling {explicit[0]} (0.1 ln 64 + 1 = "
        f"{explicit[2]:.4f}); Qwen2.5 factor 4, no key: {qwen_hf:.4f} = 0.1 ln 4 + 1",
        # rule: "holds" if the explicit config gives exactly 1.0 and the one without keys 0.1 ln 4 + 1
        "verdict": "holds" if explicit[0] == 1.0 and math.isclose(qwen_hf, yarn(4.0))
        else "does not hold",
    },
]
