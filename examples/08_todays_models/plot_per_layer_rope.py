"""
Which mask and which RoPE does each layer get?
==============================================

Gemma 2 and 3, Llama 4, GPT-OSS and Cohere's Command R7B mix two kinds of layer: *local* ones that
attend through a sliding window (or, in Llama 4, within fixed chunks) and *global* ones that see the
whole context. The position encoding can differ between them too: Gemma 3 gives the two kinds their
own RoPE base and scales only the global one; Llama 4 and Command R7B rotate only the local layers
and leave the global ones without positions (NoPE). An engine must therefore read, for every layer,
which mask and which rotation it gets. This page reads five released configs and shows what each
kind of layer can see;
:ref:`sphx_glr_auto_examples_08_todays_models_plot_per_layer_rope_misreadings.py` measures on small
trained models what four misreadings do — testing the common description of such bugs, "fine under
the window, wrong beyond it".
"""

# %%
# Five released layer patterns
# ----------------------------
# :func:`posenc.rope_report` reads a Hugging Face config as transformers 5.24 does and lists which
# layers use which attention and which RoPE setting (``report.layers``, ``report.schemes``). The
# configs are the stored copies of the released ones (Llama 4 and Gemma 3 nest them in
# ``text_config``).
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

import posenc
from posenc.models import CausalLM, TransformerConfig

CONFIGS = Path("../../tests/data/configs")
MODELS = {"Gemma 2 9B": "gemma-2-9b", "Gemma 3 27B": "gemma-3-27b-it",
          "Llama 4 Scout": "llama-4-scout-17b-16e-instruct",
          "Llama 4 Maverick": "llama-4-maverick-17b-128e-instruct-fp8", "GPT-OSS 20B": "gpt-oss-20b"}
KINDS = ["local layer (sliding or chunked), RoPE", "full layer, same RoPE as the local ones",
         "full layer, its own RoPE base or scaling", "full layer, no RoPE (NoPE)"]


def describe(scheme):
    """One RoPE setting in a few words, or NoPE."""
    if scheme is None:
        return "NoPE"
    factor = f" x{scheme.factor:g}" if scheme.factor else ""
    return f"base {scheme.base:g}, {scheme.rope_type}{factor}"


reports = {name: posenc.rope_report(CONFIGS / f"{stem}.json") for name, stem in MODELS.items()}
pattern, groups_of = {}, {}
print(f"{'':>17} {'layers':>6}  {'attention':<18} {'window':>6}  RoPE")
for name, report in reports.items():
    groups = {g.attention: g for g in report.layers}
    groups_of[name] = groups
    local = next(g for g in report.layers if g.attention != "full_attention")
    kind = np.empty(sum(len(g.layers) for g in report.layers), dtype=int)
    for g in report.layers:
        scheme = report.schemes.get(g.scheme) if g.scheme else None
        print(f"{name:>17} {len(g.layers):>6}  {g.attention:<18} {g.window or '-':>6}  {describe(scheme)}")
        kind[list(g.layers)] = (0 if g is local else 3 if g.scheme is None
                                else 1 if g.scheme == local.scheme else 2)
    pattern[name] = kind
full = {name: [i for i, k in enumerate(kinds) if k > 0] for name, kinds in pattern.items()}
assert full["Gemma 2 9B"] == list(range(1, 42, 2)) and full["GPT-OSS 20B"] == list(range(1, 24, 2))
assert full["Gemma 3 27B"] == [i for i in range(62) if (i + 1) % 6 == 0]
assert all(full[m] == [i for i in range(48) if (i + 1) % 4 == 0] and set(pattern[m][full[m]]) == {3}
           for m in ("Llama 4 Scout", "Llama 4 Maverick"))
windows = {name: [(g.attention, g.window) for g in groups.values() if g.attention != "full_attention"]
           for name, groups in groups_of.items()}
assert windows == {"Gemma 2 9B": [("sliding_attention", 4096)], "Gemma 3 27B": [("sliding_attention", 1024)],
                   "Llama 4 Scout": [("chunked_attention", 8192)], "Llama 4 Maverick": [("chunked_attention", 8192)],
                   "GPT-OSS 20B": [("sliding_attention", 128)]}
assert all(set(pattern[m][full[m]]) == {1} for m in ("Gemma 2 9B", "GPT-OSS 20B"))  # one RoPE for all
assert reports["GPT-OSS 20B"].schemes["all"].rope_type == "yarn"
gemma3 = reports["Gemma 3 27B"].schemes
assert (gemma3["sliding_attention"].base, gemma3["sliding_attention"].rope_type) == (10000, "default")
assert (gemma3["full_attention"].base, gemma3["full_attention"].rope_type,
        gemma3["full_attention"].factor) == (1e6, "linear", 8)

longest = max(len(k) for k in pattern.values())
grid = np.ma.masked_all((len(pattern), longest))
for row, kinds in enumerate(pattern.values()):
    grid[row, :len(kinds)] = kinds
fig, ax = plt.subplots(figsize=(9.5, 3.6))
colours = ["#9ecae1", "#fd8d3c", "#d62728", "#252525"]
ax.imshow(grid, cmap=ListedColormap(colours), vmin=-0.5, vmax=3.5, aspect="auto", interpolation="nearest")
ax.set_yticks(range(len(pattern)), [f"{n} ({len(k)})" for n, k in pattern.items()])
ax.set_xlabel("layer index")
ax.set_ylabel("model (number of layers)")
ax.set_title("Which layers attend locally and how each layer rotates (five released configs)")
fig.legend(handles=[Patch(color=c, label=k) for c, k in zip(colours, KINDS)], loc="outside lower center", ncol=2,
           fontsize=8)
plt.show()

# %%
# Gemma 2 alternates sliding (window 4096) and full layers with one RoPE; GPT-OSS
# does the same with a window of 128, both kinds sharing one YaRN-scaled RoPE. Gemma 3 has five
# sliding layers (window 1024, base 10 000, unscaled) to one full layer (base 1 000 000, linear
# scaling by 8); in transformers 5.24 a legacy ``rope_scaling`` of a Gemma 3 config is written into
# ``rope_parameters["full_attention"]`` only. Llama 4 has three layers of chunked attention (each
# query sees the keys of its own 8192-token chunk) with RoPE to one full layer without it, every
# fourth layer. (The layer indices, windows, bases and scalings above are asserted from the reports.)
# Cohere's Command R7B is described by the transformers documentation of ``cohere2`` as three
# sliding-window RoPE layers to one global layer without positional
# embeddings; transformers 5.24's ``Cohere2Attention`` rotates only when the layer slides. Command A
# is not drawn: no config of it is stored here.
#
# What each layer can see
# -----------------------
# Each layer's rotation only ever meets the distances its mask lets through. We measure the mask of
# one sliding layer (``sliding_window=8``) and one full layer on 24 tokens, as in
# :ref:`sphx_glr_auto_examples_08_todays_models_plot_chunked_prefill_and_windows.py`: change one
# token at a time in a random one-layer model and record which outputs move.
N, W = 24, 8
tokens = torch.randint(0, 50, (1, N), generator=torch.Generator().manual_seed(0))
query, key = torch.arange(N)[:, None], torch.arange(N)[None]


def one_layer(**options):
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=50, dim=32, num_heads=4, num_layers=1, max_len=N, position="rope",
                               causal=True, **options)
    return CausalLM(config).double().eval()


def dependence(model):
    """(N, N) bool: True where output i changes when token j changes."""
    base = model(tokens)[0]
    moved = torch.zeros(N, N, dtype=torch.bool)
    for j in range(N):
        changed = tokens.clone()
        changed[0, j] = (changed[0, j] + 1) % 50
        moved[:, j] = (model(changed)[0] - base).abs().amax(dim=-1) > 1e-9
    return moved


with torch.no_grad():
    seen = {"sliding": dependence(one_layer(sliding_window=W)), "full": dependence(one_layer())}
assert torch.equal(seen["sliding"], (key <= query) & (query - key < W))
assert torch.equal(seen["full"], key <= query)
assert torch.equal(seen["sliding"][:W], seen["full"][:W])  # the first W queries see the same keys
fig, axes = plt.subplots(1, 2, figsize=(9, 4.4), sharey=True)
TITLES = {"sliding": "sliding layer: distances 0 to 7", "full": "full layer: distances 0 to 23"}
for ax, (name, mask) in zip(axes, seen.items()):
    distance = np.where(mask.numpy(), (query - key).numpy(), np.nan)
    assert int(np.nanmax(distance)) == {"sliding": W - 1, "full": N - 1}[name]  # the distances in TITLES
    image = ax.imshow(distance, cmap="viridis", vmin=0, vmax=N - 1)
    ax.axhline(W - 0.5, color="red", linewidth=1)
    ax.set_title(TITLES[name])
    ax.set_xlabel("key position j")
axes[0].set_ylabel("query position i (below the red line: i >= W = 8)")
fig.colorbar(image, ax=axes, label="distance i - j of a visible key (blank: hidden)")
fig.suptitle("What one layer sees, measured on 24 tokens (sliding window W = 8)")
plt.show()

# %%
# Above the red line the two layers see the same keys: a query at position :math:`i < W` has only
# :math:`i + 1` keys, all inside the window. So a mistake in *which* layers slide cannot change any
# output before position :math:`W`. A mistake in *how* a layer rotates is different. A sliding
# layer meets the distances :math:`0 \dots W-1`, and every one of them already occurs under the
# window (at query :math:`W-1`); a full layer meets the same distances under the window, and larger
# ones only beyond it.
# RoPE turns a pair of channels by distance times frequency, so a wrong frequency already changes
# distance 1. Whether the change *matters* under the window is what
# :ref:`sphx_glr_auto_examples_08_todays_models_plot_per_layer_rope_misreadings.py` measures.
#
# What this shows
# ---------------
# * Released models set the mask and the rotation per layer: local and global layers with one RoPE
#   (Gemma 2, GPT-OSS), with two RoPE settings (Gemma 3), or with NoPE global layers (Llama 4, whose
#   local layers attend in chunks; Command R7B as documented). An engine has to get both right for
#   every layer.
# * Checklist for engine authors, with the transformers 5.24 key that says it:
#   ``layer_types`` (one entry per layer: ``sliding_attention``, ``full_attention``,
#   ``chunked_attention``); when it is absent, ``sliding_window_pattern`` (Gemma 3 default 6,
#   Cohere2 default 4: layer :math:`i` is full when :math:`i + 1` is a multiple of it);
#   ``rope_parameters`` keyed by layer type (Gemma 3; the legacy ``rope_local_base_freq`` gives the
#   sliding layers' base, and a legacy ``rope_scaling`` goes to the full layers only);
#   ``no_rope_layers`` (Llama 4: one entry per layer, **1 means the layer uses RoPE**, despite the
#   name; default from ``no_rope_layer_interval=4``). Compare logits layer kind by layer kind on a
#   prompt longer than the window, not only generated text.
