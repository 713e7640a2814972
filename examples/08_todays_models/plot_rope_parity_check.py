"""
Which porting bug is it?
========================

When a converted model drifts from the original, its RoPE can be checked on its own, before any
logits: dump what the engine computes for a few dozen positions, and compare it with the config.
``python -m posenc rope-parity`` does that, and when the numbers differ it recomputes them under
each known porting bug and says which one they match. This page runs it on an engine with each
bug reproduced in it: the RoPE of mlx-lm 0.32.2 (on mlx 0.32.4).
"""

# %%
# Dump, then compare
# ------------------
# The check needs the config, a query (or key) tensor before RoPE as the reference model computes
# it, and the same tensor after the engine's RoPE, with the positions of its rows. Here the engine is
# mlx-lm's RoPE for a Llama 3.1 config (head width 128, base 500 000, ``llama3`` scaling by 8 from an
# original context of 8192), rotating a prefill of 48 tokens at cache offset 8180, so that the rows
# cross the original context. Two heads of random queries stand in for the reference model's.
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import mlx.core as mx
import numpy as np
import torch
from mlx_lm.models import rope_utils

import posenc
from posenc.__main__ import main as posenc_command

LLAMA31 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
OFFSET, ROWS, HEAD = 8180, 48, 128
queries = torch.randn(2, ROWS, HEAD, generator=torch.Generator().manual_seed(0))  # (heads, seq, head_dim)


def engine_rotates(rope, x: torch.Tensor, offset: int) -> torch.Tensor:
    """The engine's RoPE on (heads, seq, dim) at a cache offset, as a float32 torch tensor."""
    return torch.from_numpy(np.array(rope(mx.array(x[None].numpy()), offset=offset)[0]))


right = rope_utils.initialize_rope(HEAD, 500000.0, False, LLAMA31["rope_scaling"], 131072)
folder = Path(tempfile.mkdtemp())
(folder / "config.json").write_text(json.dumps(LLAMA31))
np.save(folder / "q.npy", queries.numpy())
np.save(folder / "q_rotated.npy", engine_rotates(right, queries, OFFSET).numpy())

# %%
# The command reads ``.npy`` or ``.safetensors`` files. Its exit status is 0 for a match, 1 for a
# mismatch and 2 for bad input, so a conversion script can stop on it:
status = posenc_command(["rope-parity", str(folder / "config.json"), "--reference", str(folder / "q.npy"),
                         "--rotated", str(folder / "q_rotated.npy"), "--offset", str(OFFSET)])
print("exit status", status)
assert status == 0

# %%
# The largest difference from the config's values is the engine's float32 arithmetic. The tolerance
# allows for it: four float32 roundings of the largest angle (here about 8200 radians) times the
# largest input value. Every other candidate, each a porting bug recomputed in float64, is far off.
#
# Each bug, reproduced
# --------------------
# The same engine, misbuilt as ports misbuild it: from a misread config (``rope_theta`` defaulted,
# the ``llama3`` rule dropped, or both, which is what mlx-lm builds from a config saved by
# transformers 5.24), rotating the other pairing of channels (``traditional=True`` on a checkpoint in
# the half layout: the Q/K permutation skipped), with YaRN's attention factor squared or dropped (a
# Qwen2.5-style YaRN config: factor 4 from 32 768, base 1 000 000), and, on a partial-rotary config
# (Phi-2's: 32 of 80 channels turn, base 10 000), with the exponents divided by the head width.
# :func:`posenc.rope_parity` is the command's library form.
YARN = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
        "rope_theta": 1000000.0, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                  "original_max_position_embeddings": 32768}}
PARTIAL = {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "max_position_embeddings": 2048,
           "rope_theta": 10000.0, "partial_rotary_factor": 0.4}


def yarn_with_factor(power: int):
    rope = rope_utils.initialize_rope(HEAD, 1000000.0, False, YARN["rope_scaling"], 131072)
    rope.mscale = rope.mscale**power  # mlx-lm multiplies queries and keys by it
    return rope


def partial_with(inv_freq: torch.Tensor):
    periods = mx.array((1.0 / inv_freq).numpy().astype(np.float32))  # mx.fast.rope takes periods
    return lambda x, offset: mx.fast.rope(x, 32, traditional=False, base=None, scale=1.0, offset=offset, freqs=periods)


CASES = {  # name: (config, engine's RoPE, head width, cache offset)
    "Llama 3.1, right": (LLAMA31, right, HEAD, OFFSET),
    "Q/K permutation skipped": (LLAMA31, rope_utils.initialize_rope(HEAD, 500000.0, True, LLAMA31["rope_scaling"], 131072),
                                HEAD, OFFSET),
    "rope_theta defaulted": (LLAMA31, rope_utils.initialize_rope(HEAD, 10000.0, False, LLAMA31["rope_scaling"], 131072),
                             HEAD, OFFSET),
    "llama3 rule dropped": (LLAMA31, rope_utils.initialize_rope(HEAD, 500000.0, False, None, 131072), HEAD, OFFSET),
    "transformers 5 config": (LLAMA31, rope_utils.initialize_rope(HEAD, 10000.0, False, None, 131072), HEAD, OFFSET),
    "YaRN, right": (YARN, yarn_with_factor(1), HEAD, 40000),
    "YaRN factor twice": (YARN, yarn_with_factor(2), HEAD, 40000),
    "YaRN factor dropped": (YARN, yarn_with_factor(0), HEAD, 40000),
    "partial rotary, right": (PARTIAL, partial_with(posenc.rope_inv_freq(32)[0]), 80, 1000),
    "partial: head width": (PARTIAL, partial_with(posenc.rope_inv_freq(80)[0][:16]), 80, 1000),
}
results = {}
print(f"{'engine':>24}  {'verdict':<18} {'from config':>11} {'from verdict':>12} {'tolerance':>9}")
for name, (config, rope, width, offset) in CASES.items():
    x = torch.randn(2, ROWS, width, generator=torch.Generator().manual_seed(1))
    result = results[name] = posenc.rope_parity(config, reference=x, rotated=engine_rotates(rope, x, offset),
                                                positions=offset + torch.arange(ROWS))
    verdict = "match" if result.matches else result.diagnosis or "unexplained"
    print(f"{name:>24}  {verdict:<18} {result.errors['config']:>11.2e} "
          f"{result.errors['config' if result.matches else verdict]:>12.2e} {result.tolerance:>9.1e}")
expected = {"Q/K permutation skipped": "permutation", "rope_theta defaulted": "base", "llama3 rule dropped": "scaling",
            "transformers 5 config": "base and scaling", "YaRN factor twice": "factor twice",
            "YaRN factor dropped": "factor dropped", "partial: head width": "denominator"}
assert all(results[name].matches == (name not in expected) for name in CASES)
assert all(results[name].diagnosis == bug for name, bug in expected.items())

# %%
# Every reproduced bug is named, and every right engine matches. The picture shows why the verdicts
# are not close calls: for each engine (row), how far its output is from each candidate (column), in
# units of the tolerance. A cell below 1 is a match; blank cells are bugs that cannot apply to that
# config (no attention factor without YaRN, no denominator without partial rotary).
candidates = ["config", "permutation", "base", "scaling", "base and scaling", "factor twice", "factor dropped",
              "denominator"]
ratio = np.array([[results[name].errors.get(c, np.nan) / results[name].tolerance for c in candidates]
                  for name in CASES])
fig, ax = plt.subplots(figsize=(8.2, 4.8))
image = ax.imshow(np.log10(ratio), cmap="RdBu_r", vmin=-4, vmax=4, aspect="auto")
for (row, column), value in np.ndenumerate(ratio):
    if value < 1:
        ax.text(column, row, "match", ha="center", va="center", fontsize=7)
ax.set_xticks(range(len(candidates)), candidates, rotation=30, ha="right")
ax.set_yticks(range(len(CASES)), list(CASES))
ax.set_xlabel("candidate the engine's output is compared with")
ax.set_title("Largest difference from each candidate, in units of the tolerance")
fig.colorbar(image, ax=ax, label="log10(difference / tolerance)")
plt.show()

# %%
# What the check cannot tell
# --------------------------
# * **Position 0.** Every angle is 0 there, so every candidate without an attention factor gives the
#   same rotation. The report lists the candidates it cannot tell apart at the positions it was given:
first_row = posenc.rope_parity(LLAMA31, reference=queries[:, :1], rotated=engine_rotates(right, queries[:, :1], 0),
                               positions=torch.zeros(1))
print(first_row)
assert first_row.matches and "base" in first_row.also_within_tolerance

# %%
# * **A difference no known bug explains.** mlx-lm's LongRoPE uses the long factors at every
#   length, while transformers 5.24 uses the short ones within the original context (the
#   conventions table's mlx-lm row). That is not one of the bugs the check knows, and it says so
#   rather than guess. A Phi-3-style config with LongRoPE factors from 1 to 2 (short) and from 1 to
#   4 (long), original context 4096:
pairs = 48
LONGROPE = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
            "rope_scaling": {"type": "longrope", "short_factor": [1 + i / pairs for i in range(pairs)],
                             "long_factor": [1 + 3 * i / pairs for i in range(pairs)]}}
longrope = rope_utils.initialize_rope(96, 10000.0, False, {**LONGROPE["rope_scaling"], "rope_type": "longrope",
                                                           "original_max_position_embeddings": 4096}, 131072)
x = torch.randn(2, ROWS, 96, generator=torch.Generator().manual_seed(2))
unexplained = posenc.rope_parity(LONGROPE, reference=x, rotated=engine_rotates(longrope, x, 100),
                                 positions=100 + torch.arange(ROWS))
print(unexplained)
assert not unexplained.matches and unexplained.diagnosis is None

# %%
# * **The permutation, from cos/sin alone.** A cos/sin table does not say which channels the engine
#   pairs; compare rotated queries or keys for that, as above.
# * **The attention factor in the softmax scale.** Some engines leave YaRN's factor out of cos and sin
#   and scale the scores instead (DeepSeek's MLA in transformers 5.24 does, with its released
#   configs). The check expects it on cos and sin, so such an engine reads as "factor dropped":
#   look at its softmax scale before calling it a bug.
#
# llama.cpp is checked the same way, on the GGUF side: the conventions table's llama.cpp row says what
# its converter writes and what it reads back, each backed by a test that converts a transformers
# checkpoint with the ``gguf`` package and judges the result with :func:`posenc.rope_parity`.
#
# What this shows
# ---------------
# * A RoPE port can be checked on a few dozen positions of one query tensor, before any logits, and a
#   wrong one named: each of the seven reproduced bugs got its own diagnosis, far from the others.
# * The check needs positions away from 0, and past the original context for scaled configs.
# * A difference it cannot explain is reported as such, with its size.
