"""
Cached decoding differs from the full forward pass
==================================================

A language model that decodes with a key/value cache should give, at every step, the logits of
a forward pass over the whole sequence: the cache only saves recomputing the keys and values of
earlier tokens. When the two disagree, the position of the new token is usually to blame. Three
ways it goes wrong: the new token gets the wrong position, ALiBi's bias is built for the wrong
query, or dynamic NTK scaling changes RoPE's frequencies under keys that were rotated with the
old ones.
"""

# %%
# What you see
# ------------
# * Decoding with the cache gives other logits, and so possibly other tokens, than decoding
#   without it (running the model on the whole prefix at every step). The logits of the prompt
#   agree; those of every decoded token differ.
# * With ALiBi, the cached model attends to the wrong tokens: by content alone, as if all keys
#   were at distance 0, or towards the start of the sequence.
# * With ``rope_type="dynamic"``, cached and uncached decoding agree up to the trained length
#   (``max_position_embeddings``) and drift apart after it.
#
# Reproduce it
# ------------
# **The wrong offset.** A decoding loop feeds the prompt, then one token per call, with the same
# :class:`posenc.models.KVCache`. The mistake is to compute the position ids of each call from
# the new tokens alone — ``torch.arange(new.shape[1])``, position 0 for a single token — instead
# of continuing from the number of cached tokens. We run it for every encoding of
# :class:`posenc.models.TransformerConfig` (random float64 causal models with two layers; no
# training needed) on a prompt of 8 tokens followed by 24 decoded ones, and compare with one
# forward pass over all 32.
import math

import matplotlib.pyplot as plt
import torch

import posenc
from posenc.models import POSITIONS, CausalLM, KVCache, TransformerConfig

torch.manual_seed(0)
VOCAB, PROMPT, LENGTH = 50, 8, 32
tokens = torch.randint(0, VOCAB, (1, LENGTH))


def model_for(position, **options):
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=32, num_heads=4, num_layers=2, max_len=64,
                               position=position, causal=True, **options)
    return CausalLM(config).double().eval()


def decode(model, restart_positions):
    """Logits of the prompt (one call) and of each later token (one call each), with a cache."""
    cache = KVCache()
    logits = [model(tokens[:, :PROMPT], cache=cache)]
    for t in range(PROMPT, LENGTH):
        new = tokens[:, t: t + 1]
        if restart_positions:  # the bug: positions counted from the new tokens only
            logits.append(model(new, cache=cache, position_ids=torch.arange(new.shape[1])[None]))
        else:  # the model's default: positions continue from len(cache)
            logits.append(model(new, cache=cache))
    return torch.cat(logits, dim=1)


per_step, offset_results = {}, {}
with torch.no_grad():
    for position in POSITIONS:
        model = model_for(position)
        full = model(tokens)
        for restart in (True, False):
            step_difference = (decode(model, restart) - full).abs().amax(dim=-1)[0]  # (LENGTH,)
            per_step[position, restart] = step_difference
        offset_results[position] = (per_step[position, True][:PROMPT].max().item(),
                                    per_step[position, True][PROMPT:].max().item(),
                                    per_step[position, False].max().item())

print("max |logit difference| from the full pass")
print(f"{'':>10} {'prompt':>9} {'decoded, positions from 0':>26} {'decoded, default':>17}")
for position, (prompt, wrong, right) in offset_results.items():
    print(f"{position:>10} {prompt:>9.1e} {wrong:>26.1e} {right:>17.1e}")

# %%
# Every encoding that reads positions goes wrong, relative ones included; only ``none`` (no
# positions) and ``cope`` (positions counted from the gates, not read from the position ids)
# are unaffected. The prompt is always right: it ran with the default positions. For three of
# the encodings, the difference at every step:
fig, ax = plt.subplots(figsize=(7, 4))
steps = range(LENGTH)  # an exact 0 is drawn at 1e-17
for position, colour in (("sinusoidal", "C0"), ("learned", "C1"), ("rope", "C2")):
    ax.plot(steps, per_step[position, True].clamp_min(1e-17), color=colour,
            label=f"{position}, positions from 0")
    ax.plot(steps, per_step[position, False].clamp_min(1e-17), color=colour, linestyle=":",
            label=f"{position}, positions from the cache")
ax.axvline(PROMPT - 0.5, color="grey", linewidth=0.8)
ax.set_yscale("log")
ax.set_xlabel("token position (prompt left of the grey line)")
ax.set_ylabel("max |logit difference| from the full pass")
ax.set_title("Cached decoding with wrong and right positions")
fig.legend(loc="outside lower center", ncol=2)
plt.show()

# %%
# **ALiBi's bias row.** ALiBi adds :math:`-m_h\,\lvert i - j\rvert` to the score of query
# :math:`i` and key :math:`j`. A cached step has one query, the newest token, at position
# :math:`n - 1` of :math:`n`, and :func:`posenc.alibi_bias` takes exactly that case:
# ``alibi_bias(num_heads, q_len=1, k_len=n)`` treats the queries as the *last* ``q_len`` of the
# ``k_len`` positions. Two tempting mistakes: ``alibi_bias(num_heads, 1)``, the bias of a
# one-token sequence, which broadcasts a single 0 over all keys; and the first row of the
# full bias, which places the query at position 0. We compare the attention weights of the new
# query on a small example: four heads of width 8, random queries and keys, 12 tokens.
heads, n, head_dim = 4, 12, 8
q = torch.randn(heads, n, head_dim, dtype=torch.float64)
k = torch.randn(heads, n, head_dim, dtype=torch.float64)
scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)  # (heads, n, n)
causal = torch.ones(n, n, dtype=torch.bool).tril()
full_bias = posenc.alibi_bias(heads, n, dtype=torch.float64)
full_weights = (scores + full_bias).masked_fill(~causal, float("-inf")).softmax(dim=-1)
newest = full_weights[:, -1]  # (heads, n): the last token's attention in the full pass

step_biases = {
    "alibi_bias(heads, 1, n)": posenc.alibi_bias(heads, 1, n, dtype=torch.float64),
    "alibi_bias(heads, 1)": posenc.alibi_bias(heads, 1, dtype=torch.float64),
    "first row of alibi_bias(heads, n)": full_bias[:, :1],
}
step_weights = {}
for name, bias in step_biases.items():
    # The cached step: the newest query against all n keys; no mask needed, it sees them all.
    step_weights[name] = (scores[:, -1:] + bias).softmax(dim=-1)[:, 0]
    difference = (step_weights[name] - newest).abs().max().item()
    print(f"{name:>34}: bias shape {tuple(bias.shape)}, max |weight difference| {difference:.1e}")

# %%
# The attention of the newest token in head 0 (the steepest slope) and head 3 (the flattest).
# Over 12 tokens the flattest head's bias is small, and all its rows look alike; in the steep
# head, the zero bias leaves content alone to decide, and the first row moves the weight to
# the earliest keys.
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
styles = {"alibi_bias(heads, 1, n)": ("k", "--", "o"), "alibi_bias(heads, 1)": ("C1", "-", "s"),
          "first row of alibi_bias(heads, n)": ("C3", "-", "^")}
for ax, head in zip(axes, (0, heads - 1)):
    ax.plot(range(n), newest[head], color="C0", linewidth=4, alpha=0.5, label="full pass")
    for name, weights in step_weights.items():
        colour, line, marker = styles[name]
        ax.plot(range(n), weights[head], color=colour, linestyle=line, marker=marker, markersize=4,
                label=f"cached step, {name}")
    ax.set_title(f"head {head}")
    ax.set_xlabel("key position $j$")
axes[0].set_ylabel("attention weight of the newest token")
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncol=2)
fig.suptitle("ALiBi with a cache: which bias row the new query gets")
plt.show()

# %%
# **Dynamic NTK.** With ``rope_scaling={"rope_type": "dynamic", ...}`` RoPE's base grows with
# the sequence length :math:`L` once :math:`L` passes ``max_position_embeddings``. We take the
# RoPE model above with factor 4 and a threshold of 16 tokens (so that the 32-token sequence
# crosses it), decode with the cache and the default positions, and compare every step with a
# forward pass over the prefix up to that step — what decoding without a cache computes.
scaling = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 16}
dynamic = model_for("rope", rope_scaling=scaling)
with torch.no_grad():
    cached = decode(dynamic, restart_positions=False)[0]
    uncached = torch.stack([dynamic(tokens[:, : t + 1])[0, -1] for t in range(LENGTH)])
dynamic_difference = (cached - uncached).abs().amax(dim=-1)
threshold = scaling["max_position_embeddings"]
print(f"max |logit difference|, steps up to length {threshold}: "
      f"{dynamic_difference[:threshold].max().item():.1e}; "
      f"past it: {dynamic_difference[threshold:].max().item():.1e}")

# %%
# Why
# ---
# **The wrong offset.** With a cache, the model sees the new token only; its position is
# whatever the caller says. Counted from the new tokens alone, every new token is at position
# 0. An absolute encoding then adds the vector of position 0 to each of them. A relative one is
# not protected this time: the cached keys keep their true positions and the query alone moves,
# so every distance :math:`i - j` is wrong (in RoPE, the keys in the cache were rotated with
# their own angles and the new query with the angle of position 0). Compare the batch page
# (:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_batch_vs_single.py`), where padding
# shifts queries and keys together and relative encodings do not notice.
#
# **ALiBi's bias row.** The bias depends on the query's position. ``alibi_bias(heads, 1)`` has
# shape ``(heads, 1, 1)``: a single distance, 0, which broadcasting copies to every key — the new
# token sees no distances at all and attends by content only. The first row of the full bias is
# :math:`-m_h\,j`: the query at 0, so the penalty *grows* towards the newest keys and the head
# looks back to the start of the sequence. Both are legal shapes, so nothing raises. (BLOOM, in
# transformers 5.24, writes ALiBi as :math:`+m_h\,j`, which does not depend on the query at all;
# under a causal mask it differs from the row :math:`-m_h\,(i - j)` by the constant :math:`m_h\,i`,
# which the softmax ignores, so that form needs no care with a cache.)
bloom_form = (scores[:, -1:] + posenc.alibi_slopes(heads, dtype=torch.float64)[:, None, None]
              * torch.arange(n, dtype=torch.float64)).softmax(dim=-1)[:, 0]
print(f"BLOOM's m*j for the newest query vs the full pass: "
      f"max |weight difference| {(bloom_form - newest).abs().max().item():.1e}")

# %%
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
# **The wrong offset.** Continue the positions from the cache: the new tokens are at
# ``len(cache) … len(cache) + new - 1``. :class:`posenc.models.CausalLM` does this when no
# ``position_ids`` are given; with left-padded batches, pass the attention mask over cached and
# new tokens and it counts from that. When calling :class:`posenc.RotaryEmbedding` yourself,
# pass ``offset=len(cache)`` (or the positions).
#
# **ALiBi.** Build the bias of the new queries as the last rows of the full one:
# ``posenc.alibi_bias(num_heads, q_len=new, k_len=cached + new)``, or use a form that does not
# depend on the query (BLOOM's :math:`m_h\,j`).
#
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
# The checks below run during the build. With default positions, cached decoding equals the
# full pass for every encoding; the bias row ``alibi_bias(heads, 1, n)`` is exactly the last
# row of the full bias and gives the full pass's weights; re-rotating the keys at the current
# length gives the scores of :class:`posenc.RotaryEmbedding` run on the whole sequence; and a
# static scaling (``linear``) decodes with the cache exactly as without it.
assert all(right < 1e-12 for _, _, right in offset_results.values())
assert all(wrong > 1e-3 for p, (_, wrong, _) in offset_results.items() if p not in ("none", "cope"))

assert torch.equal(step_biases["alibi_bias(heads, 1, n)"], full_bias[:, -1:])
assert torch.allclose(step_weights["alibi_bias(heads, 1, n)"], newest, rtol=0, atol=1e-15)
assert torch.allclose(bloom_form, newest, rtol=0, atol=1e-15)

module = posenc.RotaryEmbedding(rope_dim, scaling=ntk).double()
whole_q, whole_k = module(q_grow[None, None], k_grow[None, None])  # all 256 positions at once
cos, sin = posenc.rope_cos_sin(longest, rope_dim, scaling=ntk, dtype=torch.float64)
rerotated = posenc.apply_rope(k_grow, cos, sin)
newest_query = whole_q[0, 0, -1]
assert torch.allclose(newest_query @ whole_k[0, 0].T, newest_query @ rerotated.T, rtol=0, atol=1e-12)
assert before < 1e-12 < score_drift[-1].item()

static = model_for("rope", rope_scaling={"rope_type": "linear", "factor": 4.0})
with torch.no_grad():
    static_difference = (decode(static, restart_positions=False) - static(tokens)).abs().max().item()
assert static_difference < 1e-12
print(f"linear scaling, cached vs full pass: max |logit difference| {static_difference:.1e}")

# %%
# What this shows
# ---------------
# * A cached step must be told where the new token is. Positions restarted at 0 break every
#   encoding that reads positions, relative ones included, because the cached keys keep their
#   true positions; positions continued from the cache make decoding exact.
# * For ALiBi the new query's bias is the last row of the full bias
#   (``alibi_bias(heads, 1, n)``); a one-token bias or the first row gives it no distances or
#   reversed ones.
# * Dynamic NTK changes RoPE's frequencies under a cache of already-rotated keys: exact below
#   the threshold, drifting above it — in ``transformers`` as in this library. Re-rotating the
#   keys, recomputing, or a length-independent scaling removes the drift.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "A KV cache is an exact optimisation: cached decoding gives the logits of a full "
        "forward pass.",
        "source": "common tutorial claim",
        "measured": f"positions continued from the cache: max difference "
        f"{max(right for _, _, right in offset_results.values()):.1e} (all encodings); positions "
        f"restarted at 0: up to {max(wrong for _, wrong, _ in offset_results.values()):.2f}; dynamic NTK "
        f"past the threshold: {dynamic_difference[threshold:].max().item():.1e}",
        "verdict": "holds with conditions",
    },
]
