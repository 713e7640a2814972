"""
Reading a model's RoPE config
=============================

A Hugging Face ``config.json`` states a model's rotary settings in a handful of keys, and their
meaning depends on the model family: which length is "original", which channels rotate, whether
local and global layers share a base, what scales the softmax. What do the configs of models people
run actually say? :func:`posenc.rope_report` reads a config as ``transformers`` 5.24 does and
explains it; ``python -m posenc rope config.json`` (or a model directory) prints the same report,
and ``--json`` gives it to tools.
"""

# %%
# Real configs
# ------------
# The configs on this page are the published ``config.json`` files of public models, stored
# unedited in the repository under ``tests/data/configs`` (its README gives each file's source).
# The test suite compares every report with what ``transformers`` computes from the same file:
# frequencies, attention factor, softmax scale, rotated width and each layer's setting.
import json
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import transformers
from transformers import AutoConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

import posenc

CONFIGS = Path("../../tests/data/configs")


def read(name):
    """A stored config as a dict."""
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


# %%
# Llama 3.1: one setting, scaled by a rule
# ----------------------------------------
# Meta's Llama 3.1 8B config, printed as the report reads it:
print(posenc.rope_report(CONFIGS / "llama-3.1-8b-instruct.json"))

# %%
# The factor is 8 while the context grows from 8192 to 131 072, sixteen times. That is not a
# mistake: the ``llama3`` rule uses the factor for the pairs whose wavelength exceeds the
# original context divided by ``low_freq_factor``, keeps the pairs shorter than the original
# context divided by ``high_freq_factor``, and blends in between. The context the model claims
# is a separate statement, and the report has no warning.
llama_report = posenc.rope_report(CONFIGS / "llama-3.1-8b-instruct.json")
llama = llama_report.scheme
assert llama.factor == 8 and llama.target_context / llama.original_context == 16 and llama_report.warnings == []
print(f"{llama.interpolated} pairs divided by 8, {llama.unchanged} kept, {llama.in_between} blended")

# %%
# Qwen2.5 with YaRN, as its model card says
# -----------------------------------------
# Qwen2.5-7B-Instruct ships without scaling. Its model card ("Processing Long Texts") tells users
# who need more than 32 768 tokens to add one block to ``config.json``: ``"rope_scaling":
# {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}``. The copy below
# adds exactly that block and changes nothing else:
qwen = read("qwen2.5-7b-instruct")
qwen_yarn = {**qwen, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
report = posenc.rope_report(qwen_yarn)
print(report)

# %%
# ``max_position_embeddings`` stays at 32 768, so the ratio of the two lengths is 1 while the
# factor is 4. YaRN computes its frequencies and its attention factor from ``factor``, so the
# recipe does what the card intends; the report says so in a note, not a warning. The legacy
# spellings (``rope_scaling``, ``type``) are notes too: ``transformers`` 5 still reads them.
assert report.warnings == [] and report.scheme.factor == 4.0
assert report.scheme.target_context == report.scheme.original_context == 32768
print(f"attention factor on cos and sin: {report.scheme.attention_factor:.6f}")

# %%
# Gemma 3: two settings and a layer pattern
# -----------------------------------------
# Gemma 3 27B is multimodal: its language model's settings sit under ``text_config``, beside a
# vision tower. Five of every six layers attend within a sliding window with base 10 000, and the
# sixth attends globally with base 1 000 000; the config's linear scaling (factor 8) applies to
# the global layers only. The config leaves most of this to ``transformers``' defaults for the
# family, and the report lists which values came from there.
gemma = posenc.rope_report(CONFIGS / "gemma-3-27b-it.json")
print(gemma)
local, glob = gemma.schemes["sliding_attention"], gemma.schemes["full_attention"]
assert (local.base, local.rope_type, glob.base, glob.rope_type, glob.factor) == (1e4, "default", 1e6, "linear", 8)
kinds = [g.attention for g in gemma.layers for _ in g.layers]
assert kinds.count("sliding_attention") == 5 * kinds.count("full_attention") + 2  # 62 layers: 52 and 10

# %%
# The softmax is scaled by ``query_pre_attn_scalar ** -0.5``, not by the head width's. A local
# layer's slowest pairs take far longer than its window for one turn, so within the window they
# barely move; the window is what the layer can see, whatever the base.
window = next(g.window for g in gemma.layers if g.attention == "sliding_attention")
print(f"local layers: window {window}, longest wavelength {local.wavelength.max():.0f} positions; "
      f"pairs that turn at least once in the window: {int((local.wavelength <= window).sum())} of {local.pairs}")

# %%
# DeepSeek-V3: a rotated part, and a softmax scale that YaRN changes
# ------------------------------------------------------------------
# DeepSeek's multi-head latent attention rotates only a 64-wide part of each query and key
# (``qk_rope_head_dim``); the other 128 channels (``qk_nope_head_dim``) carry no position. Its
# YaRN block sets ``mscale`` and ``mscale_all_dim`` equal, so the factor on cos and sin is 1,
# and the YaRN temperature goes into the softmax scale instead, squared.
deepseek = posenc.rope_report(CONFIGS / "deepseek-v3.json")
print(deepseek)

# %%
# The softmax scale is larger than the plain ``192 ** -0.5`` by ``(0.1 ln 40 + 1) ** 2``. An
# engine that also multiplies cos and sin by the temperature applies it twice; one that keeps
# the plain scale drops it.
ratio = deepseek.softmax_scale / deepseek.query_width**-0.5
assert deepseek.scheme.attention_factor == 1.0 and deepseek.scheme.rotary_dim == 64
assert deepseek.query_width - deepseek.scheme.rotary_dim == 128 and deepseek.scheme.factor == 40
print(f"softmax scale / 192**-0.5 = {ratio:.4f}")

# %%
# ``transformers`` builds the same scale: its DeepSeek-V3 attention module, created on the meta
# device from the same file (no weights are allocated), stores it as ``scaling``.
with torch.device("meta"):
    attention = DeepseekV3Attention(AutoConfig.for_model(**read("deepseek-v3")), layer_idx=0)
print(f"transformers {transformers.__version__}: DeepseekV3Attention.scaling = {attention.scaling:.6f}")
assert abs(attention.scaling - deepseek.softmax_scale) < 1e-12

# %%
# Phi-3 and Pythia: lists, and a quarter of a head
# ------------------------------------------------
# Phi-3-mini-128k uses LongRoPE: one list of per-pair factors for inputs up to the original
# context, which this family keeps at the top level of the config, and one for longer inputs.
# Pythia (GPT-NeoX) rotates only a quarter of each head; its config says so with GPT-NeoX's own
# key ``rotary_pct``, and names the base ``rotary_emb_base``.
for name in ("phi-3-mini-128k-instruct", "pythia-1.4b"):
    print(f"=== {name}")
    print(posenc.rope_report(CONFIGS / f"{name}.json"))
    print()
pythia = posenc.rope_report(CONFIGS / "pythia-1.4b.json")
assert 4 * pythia.scheme.rotary_dim == pythia.head_dim

# %%
# Every stored config, side by side
# ---------------------------------
# One row per config and RoPE setting (layers of every kind, or the full-attention and the
# sliding-window ones): the type, base, rotated channels out of the head width, and the softmax
# scale. Not one of these correct configs gets a warning.
reports = {path.stem: posenc.rope_report(path) for path in sorted(CONFIGS.glob("*.json"))}
print(f"{'config (setting)':<38} {'type':<8} {'base':>6} {'rotated':>7} {'softmax':>7}")
for name, report in reports.items():
    for scheme in report.schemes.values():
        label = name if scheme.name == "all" else f"{name} ({scheme.name.removesuffix('_attention')})"
        print(f"{label:<38} {scheme.rope_type:<8} {scheme.base:>6g} "
              f"{scheme.rotary_dim:>3}/{report.head_dim:<3} {report.softmax_scale:>7.4f}")
assert all(report.warnings == [] for report in reports.values())

# %%
# What scaling does to each pair
# ------------------------------
# For every scaled setting among the stored configs: how much slower each pair turns at the
# target context, against its wavelength divided by the original context. The Llama 3 rule and
# YaRN leave the fast pairs alone and slow the slow ones by the full factor; linear scaling slows
# every pair alike; LongRoPE's long factors follow their own list.
fig, ax = plt.subplots(figsize=(9, 4.2))
for name, report in reports.items():
    for scheme in report.schemes.values():
        if scheme.rope_type == "default":
            continue
        original = scheme.original_context or scheme.target_context / scheme.factor
        label = f"{name} ({scheme.rope_type})" if len(report.schemes) == 1 else f"{name}, global ({scheme.rope_type})"
        # Past matplotlib's ten colours, dashed lines keep the curves apart.
        style = ".-" if len(ax.lines) < 10 else ".--"
        ax.plot(scheme.wavelength / original, scheme.slow_down, style, markersize=3, label=label)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("wavelength / original context")
ax.set_ylabel("slow-down of the pair")
ax.set_title("Frequency changes in real model configs")
fig.legend(loc="outside right center", fontsize=7)
plt.show()

# %%
# Mistakes, on visibly edited copies
# ----------------------------------
# A warning means the config will be read differently from what its makers meant. Three edits of
# the Llama 3.1 config, each a mistake seen in public repositories or issue trackers:
#
# * ``rope_theta`` lost: ``transformers`` then uses its default base, 10 000, under a scaling
#   block made for 500 000;
# * ``original_max_position_embeddings`` misspelt inside the scaling block: the Llama 3 rule falls
#   back to ``max_position_embeddings`` as the trained length;
# * the base written twice, once inside the parameters and once outside, with different values.
llama_config = read("llama-3.1-8b-instruct")
lost_theta = {k: v for k, v in llama_config.items() if k != "rope_theta"}
misspelt = {**llama_config, "rope_scaling": dict(llama_config["rope_scaling"])}
misspelt["rope_scaling"]["orignal_max_position_embeddings"] = misspelt["rope_scaling"].pop(
    "original_max_position_embeddings")
two_bases = {**llama_config, "rope_scaling": {**llama_config["rope_scaling"], "rope_theta": 10000.0}}
for name, config in {"rope_theta lost": lost_theta, "misspelt key": misspelt,
                     "two bases": two_bases}.items():
    edited = posenc.rope_report(config)
    print(f"=== {name}: base {edited.scheme.base:g}, original context {edited.scheme.original_context}")
    for warning in edited.warnings:
        print(textwrap.fill(warning, 78, initial_indent="  - ", subsequent_indent="    "))
    assert edited.warnings

# %%
# What this shows
# ---------------
# * A RoPE config is read per model family: GPT-NeoX names its keys differently, DeepSeek rotates
#   a part of each head and moves YaRN's temperature into the softmax, Gemma 3 keeps two settings
#   and a layer pattern, and multimodal models nest the language model under ``text_config``.
# * The factor of ``llama3`` is the rule's own parameter, not the ratio of the two lengths, and
#   Qwen's YaRN recipe leaves ``max_position_embeddings`` unchanged on purpose: neither is a
#   mistake.
# * :func:`posenc.rope_report` warns only where a config would be read differently from what its
#   makers meant, and lists what came from defaults, so a lost ``rope_theta`` is visible.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "The factor of a Llama 3.1 rope_scaling block equals max_position_embeddings divided "
        "by original_max_position_embeddings.",
        "source": "a common reading of rope_scaling (the factor as the context-extension ratio)",
        "measured": f"Llama 3.1 8B: factor {llama.factor:g}, ratio "
        f"{llama.target_context / llama.original_context:g}; the llama3 rule reads the factor as its "
        f"own parameter",
        "verdict": "does not hold",
    },
    {
        "claim": "DeepSeek-V3's YaRN leaves cos and sin unscaled and multiplies the softmax scale by "
        "the square of its temperature.",
        "source": "DeepSeek-V3 modeling code, as in transformers 5.24 (yarn_apply_mscale)",
        "measured": f"attention factor {deepseek.scheme.attention_factor:g}; softmax scale / "
        f"192**-0.5 = {ratio:.4f}; transformers' DeepseekV3Attention.scaling {attention.scaling:.6f}, "
        f"posenc {deepseek.softmax_scale:.6f}",
        "verdict": "holds",
    },
]
