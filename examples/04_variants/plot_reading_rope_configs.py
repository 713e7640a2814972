"""
Reading a model's RoPE config
=============================

A Hugging Face ``config.json`` states its rotary settings in a few keys — ``rope_theta``,
``max_position_embeddings`` and a ``rope_parameters`` (formerly ``rope_scaling``) dictionary.
What do they mean for the frequencies, and which combinations are mistakes?
:func:`posenc.rope_report` reads such a config and says; the same report is printed on the
command line by ``python -m posenc rope config.json``.
"""

# %%
# Four configs
# ------------
# The configs below are written in the shape of well-known models' (the keys that matter for
# RoPE; nothing is downloaded). The values follow the published configs as far as RoPE goes,
# except LongRoPE's factor lists, which are made up here (48 numbers each in the real file).
import matplotlib.pyplot as plt

import posenc

llama_31 = {  # Llama 3.1 8B: llama3 scaling, legacy rope_scaling dict
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
qwen2_yarn = {  # Qwen2-7B with a YaRN block added and max_position_embeddings left as it was
    "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}
phi3_longrope = {  # Phi-3-mini-128k: original context at the top level, LongRoPE lists
    "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "longrope",
        "short_factor": [1.0 + 0.02 * i for i in range(48)],
        "long_factor": [1.0 + 0.7 * i for i in range(48)],
    },
}
llama2_linear = {  # a Llama 2 fine-tune stretched 4x by position interpolation
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 16384,
    "rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 4.0},
}
configs = {
    "Llama 3.1 (llama3)": llama_31,
    "Qwen2 + YaRN": qwen2_yarn,
    "Phi-3 (LongRoPE)": phi3_longrope,
    "Llama 2, linear": llama2_linear,
}
for name, config in configs.items():
    print(f"=== {name}")
    print(posenc.rope_report(config))
    print()

# %%
# What the warnings say
# ---------------------
# * **Llama 3.1**: the factor (8) is not the ratio of ``max_position_embeddings`` to the
#   original context (16). Not a bug in the file — the frequencies use the factor, and the model
#   claims a context twice as long as the interpolation alone would suggest — but worth knowing
#   when you change either number. The config uses the legacy ``rope_scaling`` dict.
# * **Qwen2 + YaRN**: the YaRN block was added but ``max_position_embeddings`` left at the
#   original 32 768, so by the config's own numbers there is no extension at all while the
#   frequencies are interpolated by 4. It also uses the legacy ``"type"`` key, which transformers still reads.
# * **Phi-3**: ``original_max_position_embeddings`` sits at the top level of the config, where
#   transformers (and posenc) read it; the long factors apply past it.
# * **Llama 2, linear**: ``max_position_embeddings`` was raised to the new context, which users
#   sometimes fear applies the scaling twice. It does not: linear scaling divides every frequency
#   by the factor and never reads that key.
#
# The report is data as well as text: its fields can be asserted on, here for the linear config.
report = posenc.rope_report(llama2_linear)
assert report.interpolated == report.pairs and report.unchanged == 0
print(f"linear: {report.interpolated} of {report.pairs} pairs divided by {report.factor:g}")

# %%
# A typo
# ------
# A misspelt key is a costly mistake: the scaling type then uses a fallback for the key it
# misses, without an error. ``rope_report`` lists the unused key and says what the type fell
# back to.
typo = {**llama_31, "rope_scaling": dict(llama_31["rope_scaling"])}
typo["rope_scaling"]["orignal_max_position_embeddings"] = typo["rope_scaling"].pop(
    "original_max_position_embeddings"
)
for warning in posenc.rope_report(typo).warnings:
    print("-", warning)

# %%
# The four configs side by side
# -----------------------------
# The slow-down of each frequency pair at the target context (``max_position_embeddings``),
# which the report carries (computed with the frequencies of :func:`posenc.rope_inv_freq`),
# against the pair's wavelength divided by the original context.
fig, ax = plt.subplots(figsize=(7, 4.2))
for name, config in configs.items():
    report = posenc.rope_report(config)
    # Linear scaling states no original context; the trained one is the target divided by the factor.
    original = report.original_context or report.target_context / report.factor
    ax.plot(report.wavelength / original, report.slow_down, ".-", markersize=3, label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("wavelength / original context")
ax.set_ylabel("slow-down of the pair")
ax.set_title("Frequency changes in four model configs")
ax.legend()
plt.show()

# %%
# What this shows
# ---------------
# * A RoPE config is a handful of keys whose meaning depends on the scaling type: which length is
#   "original", whether ``max_position_embeddings`` enters the frequencies, and what the factor
#   divides.
# * :func:`posenc.rope_report` (or ``python -m posenc rope config.json``) spells that out and
#   flags the legacy keys, typos, missing original contexts and factor/length mismatches seen in
#   real configs.
