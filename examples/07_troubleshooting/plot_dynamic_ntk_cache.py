"""
Cached decoding drifts under dynamic NTK scaling
================================================

With ``rope_type="dynamic"``, RoPE's frequencies change with the sequence length once it passes
``max_position_embeddings``, while a KV cache keeps every key rotated with the frequencies of the
step that stored it. Does cached decoding still give what decoding without a cache gives, and
how far apart do they drift? Wrong positions and ALiBi's bias row, the other ways a cache
disagrees with the full pass, are on
:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_cached_decoding.py`.
"""

# %%
# What you see
# ------------
# * With ``rope_type="dynamic"``, cached and uncached decoding agree up to the trained length
#   (``max_position_embeddings``) and drift apart after it.
#
# Reproduce it
# ------------
# A decoding loop feeds the prompt, then one token per call, with the same
# :class:`posenc.models.KVCache`; the model continues the positions from the cache. The model is
# a random float64 causal :class:`posenc.models.CausalLM` with RoPE and two layers (no training
# needed), run on a prompt of 8 tokens followed by 24 decoded ones.
import math

import matplotlib.pyplot as plt
import torch

import posenc
from posenc.models import CausalLM, TransformerConfig

torch.manual_seed(0)
VOCAB, PROMPT, LENGTH = 50, 8, 32
tokens = torch.randint(0, VOCAB, (1, LENGTH))


def model_for(position, **options):
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=32, num_heads=4, num_layers=2, max_len=64,
                               position=position, causal=True, **options)
    return CausalLM(config).double().eval()


STEPS = [PROMPT] + [1] * (LENGTH - PROMPT)  # the prompt in one call, then one token per call


# %%
# **Dynamic NTK.** With ``rope_scaling={"rope_type": "dynamic", ...}`` RoPE's base grows with
# the sequence length :math:`L` once :math:`L` passes ``max_position_embeddings``. We take the
# RoPE model above with factor 4 and a threshold of 16 tokens (so that the 32-token sequence
# crosses it), decode with the cache and the default positions, and compare every step with a
# forward pass over the prefix up to that step — what decoding without a cache computes.
scaling = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 16}
dynamic = model_for("rope", rope_scaling=scaling)
with torch.no_grad():
    cached = dynamic.logits_in_chunks(tokens, STEPS)[0]
    uncached = torch.stack([dynamic(tokens[:, : t + 1])[0, -1] for t in range(LENGTH)])
dynamic_difference = (cached - uncached).abs().amax(dim=-1)
threshold = scaling["max_position_embeddings"]
print(f"max |logit difference|, steps up to length {threshold}: "
      f"{dynamic_difference[:threshold].max().item():.1e}; "
      f"past it: {dynamic_difference[threshold:].max().item():.1e}")

# %%
# Why
# ---
# **Dynamic NTK.** A cached key was rotated once, when it was new, with the frequencies of the
# length the sequence had then. Past the threshold, every step computes new frequencies for
# the new length: the new query is rotated with them, the cached keys are not. A forward pass
# over the prefix rotates all keys with the current frequencies. The two agree until the
# sequence crosses the threshold and differ after it. To see the size of the effect, we follow
# one head of width 32, with random queries and keys, as the sequence grows from 1 to 256 tokens
# under ``factor`` 4 and a threshold of 64: at each length, the largest difference between the
# scores of the newest query with the cached keys (each rotated at its own step) and with the
# keys rotated at the current length. :func:`posenc.rope_cos_sin` takes the length from the
# positions it is given (``max(positions) + 1``), so rotating key :math:`j` alone reproduces the
# angles it got when it was the newest token.
rope_dim, threshold_64, longest = 32, 64, 256
ntk = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": threshold_64}
q_grow = torch.randn(longest, rope_dim, dtype=torch.float64)
k_grow = torch.randn(longest, rope_dim, dtype=torch.float64)

# Key j, rotated when it was the newest token (sequence length j + 1):
cached_keys = torch.cat([
    posenc.apply_rope(k_grow[j: j + 1], *posenc.rope_cos_sin(torch.tensor([j]), rope_dim, scaling=ntk,
                                                             dtype=torch.float64))
    for j in range(longest)])
lengths = torch.arange(1, longest + 1)
score_drift, lowest_frequency = [], []
for length in lengths.tolist():
    cos, sin = posenc.rope_cos_sin(length, rope_dim, scaling=ntk, dtype=torch.float64)  # length L
    query = posenc.apply_rope(q_grow[length - 1: length], cos[-1:], sin[-1:])
    current_keys = posenc.apply_rope(k_grow[:length], cos, sin)
    drift = (query @ cached_keys[:length].T - query @ current_keys.T).abs().max() / math.sqrt(rope_dim)
    score_drift.append(drift.item())
    inv_freq, _ = posenc.rope_inv_freq(rope_dim, scaling=ntk, seq_len=length)
    lowest_frequency.append(inv_freq[-1].item())
score_drift = torch.tensor(score_drift)
before = score_drift[:threshold_64].max().item()
spread = (q_grow @ k_grow.T).std().item() / math.sqrt(rope_dim)
print(f"max score drift up to length {threshold_64}: {before:.1e}; "
      f"at length {longest}: {score_drift[-1].item():.2f} "
      f"(for scale: the unrotated scores have standard deviation {spread:.2f})")

# %%
# The lowest rotation frequency as the sequence grows, relative to the unscaled one, and the
# score drift:
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
unscaled = lowest_frequency[0]
axes[0].plot(lengths, [f / unscaled for f in lowest_frequency], color="C0")
axes[0].set_ylabel(r"lowest $\theta_i$ / unscaled")
axes[0].set_title("Lowest frequency")
axes[1].plot(lengths, score_drift.clamp_min(1e-17), color="C3")
axes[1].set_yscale("log")
axes[1].set_ylabel("max |score difference|")
axes[1].set_title("Cached keys vs re-rotated keys")
for ax in axes:
    ax.axvline(threshold_64, color="grey", linewidth=0.8)
    ax.set_xlabel("sequence length $L$ (threshold at the grey line)")
fig.suptitle("Dynamic NTK scaling as the sequence grows (d = 32, factor 4)")
plt.show()

# %%
# Hugging Face ``transformers`` 5.24 (the installed version) does what the cached run above does.
# Its ``dynamic_rope_update`` (``modeling_rope_utils.py``) recomputes ``inv_freq`` whenever
# ``max(position_ids) + 1`` exceeds the longest length seen so far, and goes back to the original
# frequencies when a sequence shorter than the threshold arrives; Llama's attention rotates the
# keys before ``cache.update`` stores them. So during generation past the threshold each new query
# gets the frequencies of the current length and the cached keys keep theirs.
# :class:`posenc.RotaryEmbedding` computes the frequencies from the current call's positions alone
# (not the longest seen), and :class:`posenc.models.KVCache` also stores rotated keys, so the
# library's model drifts the same way (the comparison above).
#
# The fix
# -------
# **Dynamic NTK.** There is no setting that makes a cache of rotated keys exact; the options:
#
# * keep the keys *unrotated* in the cache and rotate all of them with the current
#   frequencies at every step (what the "current length" keys above are): exact, at the cost
#   of rotating the whole cache per step;
# * recompute the cache (a forward pass over the prefix) when the frequencies change — past
#   the threshold that is every step, i.e. decoding without a cache;
# * use a scaling whose frequencies do not depend on the length (``linear``, ``yarn``,
#   ``llama3``, or a larger base), chosen for the longest length you will decode;
# * accept the drift, as ``transformers`` does; its size for a given model is what to measure.
#
# Check
# -----
# The checks below run during the build. Re-rotating the keys at the current length gives the
# scores of :class:`posenc.RotaryEmbedding` run on the whole sequence; and a static scaling
# (``linear``) decodes with the cache exactly as without it.
module = posenc.RotaryEmbedding(rope_dim, scaling=ntk).double()
whole_q, whole_k = module(q_grow[None, None], k_grow[None, None])  # all 256 positions at once
cos, sin = posenc.rope_cos_sin(longest, rope_dim, scaling=ntk, dtype=torch.float64)
rerotated = posenc.apply_rope(k_grow, cos, sin)
newest_query = whole_q[0, 0, -1]
assert torch.allclose(newest_query @ whole_k[0, 0].T, newest_query @ rerotated.T, rtol=0, atol=1e-12)
assert before < 1e-12 < score_drift[-1].item()

static = model_for("rope", rope_scaling={"rope_type": "linear", "factor": 4.0})
with torch.no_grad():
    static_difference = (static.logits_in_chunks(tokens, STEPS) - static(tokens)).abs().max().item()
assert static_difference < 1e-12
print(f"linear scaling, cached vs full pass: max |logit difference| {static_difference:.1e}")

# %%
# What this shows
# ---------------
# * Dynamic NTK changes RoPE's frequencies under a cache of already-rotated keys: exact below
#   the threshold, drifting above it — in ``transformers`` as in this library. Re-rotating the
#   keys, recomputing, or a length-independent scaling removes the drift.
