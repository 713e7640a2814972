"""
Raising ``max_position_embeddings``: the feared double scaling
==============================================================

A linear ``rope_scaling`` factor extends a model's context: should ``max_position_embeddings`` be
raised to the new length along with it, or does the model then scale its frequencies twice? We
compute the frequencies for both settings, with :func:`posenc.rope_inv_freq` and
:func:`posenc.rope_cos_sin` and with the rotary module of Hugging Face ``transformers`` 5.24, for
linear scaling and for dynamic NTK. The mistakes in the scaling block itself are on
:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_rope_scaling_errors.py`.
"""

# %%
# What you see
# ------------
# * After raising ``max_position_embeddings`` to the new context length along with a linear
#   ``factor``, users ask whether the model now scales twice (for instance in `LLaMA-Factory
#   issue 1298 <https://github.com/hiyouga/LlamaFactory/issues/1298>`__), and the
#   ``transformers`` documentation once advised against raising it (as quoted in `axolotl pull
#   request 343 <https://github.com/axolotl-ai-cloud/axolotl/pull/343>`__).
#
# The configs on this page have the shape of a Llama 2 model (head width 128, base 10000) trained
# on 4096 tokens and extended four times, to 16 384. Nothing is downloaded: the configs are
# written here, and for each one ``transformers`` builds its ``LlamaConfig`` and the rotary
# module ``LlamaRotaryEmbedding`` (its inverse frequencies only; no model weights).
#
# Reproduce it
# ------------
# ``hugging_face_rope(config)`` builds the rotary module that ``transformers`` makes of a config.
import copy

import matplotlib.pyplot as plt
import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import posenc

print(f"transformers {transformers.__version__}")


def hugging_face_rope(config):
    return LlamaRotaryEmbedding(LlamaConfig(**copy.deepcopy(config)))  # transformers edits what it is given


HEAD_DIM, BASE, TRAINED, TARGET = 128, 10000.0, 4096, 16384
llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": BASE,
          "max_position_embeddings": TARGET}
linear = {"rope_type": "linear", "factor": 4.0}
PROBE = 8192
unscaled = posenc.rope_inv_freq(HEAD_DIM, base=BASE)[0]

# %%
# Why
# ---
# Linear scaling divides every frequency by ``factor`` and never reads
# ``max_position_embeddings``; raising it to the new context length changes nothing. Dynamic
# NTK is the opposite: it reads ``max_position_embeddings`` as the *trained* length and changes
# the frequencies only for longer inputs, so raising it postpones the scaling. Both, computed
# with :func:`posenc.rope_inv_freq` and :func:`posenc.rope_cos_sin`, and by ``transformers``'
# rotary module on inputs of each length (its dynamic module recomputes the frequencies for a
# longer input):
dynamic = {"rope_type": "dynamic", "factor": 4.0}
linear_tables = [posenc.rope_cos_sin(TARGET, HEAD_DIM, base=BASE,
                                     scaling={**linear, "max_position_embeddings": max_len})
                 for max_len in (TRAINED, TARGET)]
assert all(torch.equal(a, b) for a, b in zip(*linear_tables))
print(f"linear, cos/sin of {TARGET} positions: identical for max_position_embeddings {TRAINED} and {TARGET}")
lengths = [round(2 ** (10 + k / 4)) for k in range(25)]  # 1024 ... 65536
shown = [n for n in lengths if n & (n - 1) == 0]  # the powers of two, for printing
slow_down, hf_slow_down = {}, {}
for kind in (linear, dynamic):
    for max_len in (TRAINED, TARGET):
        key = f"{kind['rope_type']}, max_position_embeddings = {max_len}"
        scaling = {**kind, "max_position_embeddings": max_len}
        slow_down[key] = [unscaled[-1].item() / posenc.rope_inv_freq(
            HEAD_DIM, base=BASE, scaling=scaling, seq_len=n)[0][-1].item() for n in lengths]
        rope = hugging_face_rope({**llama2, "max_position_embeddings": max_len, "rope_parameters": kind})
        hf_slow_down[key] = []
        for n in lengths:  # growing inputs: transformers' dynamic module recomputes as they grow
            rope(torch.zeros(1, 1, HEAD_DIM), torch.arange(n)[None])
            hf_slow_down[key].append((unscaled[-1] / rope.inv_freq[-1].double()).item())
        print(f"{key:>38}: slowest pair slowed by "
              + ", ".join(f"{v:.3g}" for n, v in zip(lengths, slow_down[key]) if n in shown))
print(f"{'(input lengths':>38}  " + ", ".join(str(n) for n in shown) + ")")
largest_gap = max(abs(a / b - 1) for key in slow_down for a, b in zip(slow_down[key], hf_slow_down[key]))
print(f"largest relative difference from transformers: {largest_gap:.1e}")

# %%
# The slow-down of the slowest pair against the input length. The two linear lines coincide;
# the dynamic ones start at their own ``max_position_embeddings`` (dots: ``transformers``).
fig, ax = plt.subplots(figsize=(7, 4))
styles = {f"linear, max_position_embeddings = {TRAINED}": {"linewidth": 4, "alpha": 0.4},
          f"linear, max_position_embeddings = {TARGET}": {"linestyle": "--"}}
for key, values in slow_down.items():
    line, = ax.plot(lengths, values, label=key, **styles.get(key, {}))
    ax.plot(lengths, hf_slow_down[key], "o", color=line.get_color(), markersize=3)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("input length")
ax.set_ylabel("slow-down of the slowest pair")
ax.set_title("Linear ignores max_position_embeddings, dynamic NTK starts there")
ax.legend(fontsize=8)
plt.show()

# %%
# The fix
# -------
# So with linear scaling, set ``max_position_embeddings`` to the new length without fear (other
# code, serving frameworks for instance, reads it as the model's context length). With dynamic
# NTK, leave it at the trained length, or the scaling starts late: raised to 16 384, it lets
# inputs of 4097 to 16 384 tokens run unscaled, past the length the model was trained on. Note
# also that dynamic NTK's ``factor`` is not the slow-down it applies: the slowest pair is slowed
# by more than the factor once the input is four times the trained length (the printed values).
#
# Check
# -----
# The statements of this page, as assertions that run with it.
linear_keys = [key for key in slow_down if key.startswith("linear")]
assert hf_slow_down[linear_keys[0]] == hf_slow_down[linear_keys[1]]  # transformers: no double scaling
assert largest_gap < 1e-5  # transformers and posenc agree on every point of the figure
at_probe = {key: values[lengths.index(PROBE)] for key, values in slow_down.items()}
assert at_probe[f"dynamic, max_position_embeddings = {TARGET}"] == 1.0
assert at_probe[f"dynamic, max_position_embeddings = {TRAINED}"] > 1.0
four_times = slow_down[f"dynamic, max_position_embeddings = {TRAINED}"][lengths.index(4 * TRAINED)]
assert four_times > dynamic["factor"]  # dynamic NTK's factor is not its slow-down
print("all checks passed")

# %%
# What this shows
# ---------------
# * Raising ``max_position_embeddings`` never scales linear RoPE twice; for dynamic NTK it moves
#   the point where scaling starts.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
linear_at_probe = [hf_slow_down[key][lengths.index(PROBE)] for key in linear_keys]
claims = [
    {
        "claim": "Raising max_position_embeddings together with a linear rope_scaling factor applies "
        "the scaling twice.",
        "source": "user questions (LLaMA-Factory issue 1298, axolotl pull request 343)",
        "measured": f"linear x4, max_position_embeddings {TRAINED} vs {TARGET}: identical cos/sin (posenc); "
        f"transformers slows the slowest pair by {linear_at_probe[0]:g} and {linear_at_probe[1]:g}",
        "verdict": "does not hold",
    },
]
