"""
Using a sinusoidal encoding in practice: width and scale
========================================================

The formula is the easy part. Adding the table to a batch of embeddings ties it to the
embeddings' width and sets its scale against theirs. Each section below checks what the seed
articles say about width, ``max_len`` and scale, with :class:`posenc.SinusoidalPositionalEncoding`
and with the module printed in both seed articles, which returns ``x + self.pe[:x.size(1)]``.
"""

# %%
# Width, dimension and ``max_len``
# --------------------------------
# The encoding is *added* to the token embeddings, so it must have their width, and the sum keeps
# it: the model's width does not change. (Concatenating the encoding instead, another possible
# design, would widen every vector.) A width mismatch is an error in both modules, with a
# clearer message from posenc:
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc

torch.manual_seed(0)
d_model = 512
embeddings = torch.randn(2, 10, d_model)
summed = posenc.SinusoidalPositionalEncoding(d_model)(embeddings)
print(f"embeddings {tuple(embeddings.shape)} + encoding -> {tuple(summed.shape)}")
try:
    posenc.SinusoidalPositionalEncoding(256)(embeddings)
except ValueError as error:
    width_error = error
    print(f"posenc, dim=256:      ValueError: {error}")
try:
    embeddings + posenc.sinusoidal_table(5000, 256)[:embeddings.size(1)]  # the seed module, d=256
except RuntimeError as error:
    print(f"seed module, d=256:   RuntimeError: {error}")

# %%
# The seed article advises increasing ``max_len`` for long-sequence tasks. For its own module that
# is required (the shape error on the lengths-and-layouts page,
# :ref:`sphx_glr_auto_examples_03_implementations_plot_lengths_and_layouts.py`);
# for posenc's, ``max_len`` is only how many rows are computed up front. In both, the table costs
# ``max_len * d`` numbers of 4 bytes in float32:
for max_len, width in ((512, 512), (5000, 512), (8192, 4096), (131072, 4096)):
    print(f"max_len {max_len:>6}, d {width:>4}: {max_len * width * 4 / 2**20:8.1f} MiB")
buffer = posenc.SinusoidalPositionalEncoding(512, max_len=5000).pe
assert buffer.nelement() * buffer.element_size() == 5000 * 512 * 4

# %%
# Is 512 the standard width?
# --------------------------
# One seed article says Transformer models usually take 512 dimensions as the standard
# configuration. 512 is the width of the base model of Vaswani et al. (2017); their big model used
# 1024. Other models chose otherwise. The default configurations of a few Hugging Face model
# classes (transformers 5.24; class defaults, built locally, nothing is downloaded), each the size
# of one model of its family:
from transformers import BartConfig, BertConfig, GPT2Config, LlamaConfig, T5Config, ViTConfig

widths = {
    "BertConfig().hidden_size": BertConfig().hidden_size,
    "GPT2Config().n_embd": GPT2Config().n_embd,
    "T5Config().d_model": T5Config().d_model,
    "BartConfig().d_model": BartConfig().d_model,
    "ViTConfig().hidden_size": ViTConfig().hidden_size,
    "LlamaConfig().hidden_size": LlamaConfig().hidden_size,
}
for name, width in widths.items():
    print(f"{name:>26} = {width}")

# %%
# Matching the scales
# -------------------
# The seed article's debugging advice includes checking that the encoding and the embeddings have
# matching scales. Every row of a sinusoidal table with an even width has the same norm,
# :math:`\sqrt{d/2}`, since each pair contributes :math:`\sin^2 + \cos^2 = 1`. The norm of an
# embedding row depends on how the embeddings were initialised, and Vaswani et al. multiply the
# embeddings by :math:`\sqrt{d}` before adding the encoding. The ratio of the two norms, for a few
# common choices (the token-embedding page,
# :ref:`sphx_glr_auto_examples_01_foundations_plot_token_embeddings.py`, measures it for a
# pretrained model):
pe_norms = posenc.sinusoidal_table(1000, d_model).norm(dim=1)
print(f"sinusoidal rows, d = {d_model}: norm {pe_norms.min().item():.4f} to {pe_norms.max().item():.4f}, "
      f"sqrt(d/2) = {math.sqrt(d_model / 2):.4f}")
ids = torch.arange(1000)
default = nn.Embedding(1000, d_model)
std = BertConfig().initializer_range  # BERT's and GPT-2's initialisation of their embeddings
assert std == GPT2Config().initializer_range
small = nn.Embedding(1000, d_model)
nn.init.normal_(small.weight, std=std)
inits = {
    "nn.Embedding, default N(0, 1)": default(ids),
    "nn.Embedding, times sqrt(d)": default(ids) * math.sqrt(d_model),
    f"normal, std {std} (BERT, GPT-2)": small(ids),
    "posenc.TokenEmbedding, scale=True": posenc.TokenEmbedding(1000, d_model, scale=True)(ids),
}
ratios = {}
with torch.no_grad():
    for name, rows in inits.items():
        norm = rows.norm(dim=1).mean().item()
        ratios[name] = pe_norms.mean().item() / norm
        print(f"{name:>34}: mean row norm {norm:8.3f}, |PE| / |embedding| = {ratios[name]:7.3f}")

# %%
# Depending on the initialisation, the encoding is either a comparable signal, a small
# perturbation the tokens drown out, or the larger part of every input vector. PyTorch's default
# initialisation (torch 2.13) combined with the :math:`\sqrt{d}` factor hides the positions;
# embeddings drawn with BERT's and GPT-2's standard deviation (transformers 5.24; those two
# models learn their positions instead)
# would be dominated by a sinusoidal table. The :math:`\sqrt{d}` factor suits embeddings
# initialised with standard deviation :math:`1/\sqrt{d}`, as in :class:`posenc.TokenEmbedding`.
# Printing the two norms once is a cheap check.
assert ratios["nn.Embedding, times sqrt(d)"] < 0.1 and ratios[f"normal, std {std} (BERT, GPT-2)"] > 10

fig, ax = plt.subplots(figsize=(7, 3.6))
ax.barh(list(ratios), list(ratios.values()), color="C0")
ax.set_xscale("log")
ax.axvline(1, color="gray", linestyle="--", linewidth=0.8)
ax.set_xlabel("|PE| / |embedding| (mean row norms)")
ax.set_title("Size of the encoding against the embeddings, by initialisation")
plt.show()

# %%
# Large encodings and vanishing gradients
# ---------------------------------------
# The same debugging advice says to make sure the encoding values are not too large, under the
# heading of vanishing gradients. A gradient *vanishes* when it reaches some weights so much
# weakened that a training step barely moves what they compute. To test this, we multiply the
# sinusoidal table of a small :class:`posenc.models.CausalLM` (two pre-norm layers, width 64,
# unit-scale token embeddings from :class:`posenc.TokenEmbedding`) by an amplitude :math:`a`, and
# take the gradient of the next-character loss at initialisation, on one batch of 16 windows of 32
# characters of Python source, for 5 seeds.
# The output projection is not tied to the embeddings, so the embeddings' gradient comes only
# through the input. Forward hooks on the attention dropouts (probability 0) record the attention
# weights.
from posenc.experiments import compare
from posenc.models import CausalLM, TransformerConfig, next_token_loss, stdlib_corpus, train

corpus = stdlib_corpus(["textwrap"], ["shlex"])
config = TransformerConfig(vocab_size=corpus.vocab_size, dim=64, num_heads=4, num_layers=2, causal=True)
make_batch = corpus.windows(32, 16)
batch = make_batch(torch.Generator().manual_seed(0))  # (16, 33): 32 inputs, 32 targets
amplitudes, seeds = (1, 10, 100), range(5)


def model_with_amplitude(a: float, seed: int) -> CausalLM:
    torch.manual_seed(seed)
    model = CausalLM(config, tie_weights=False)
    with torch.no_grad():
        model.transformer.position.table.pe.mul_(a)  # the (max_len, 64) sinusoidal table, times a
    return model


grads = {part: {a: [] for a in amplitudes} for part in ("embeddings", "blocks", "head")}
top_weight = {a: [] for a in amplitudes}  # mean largest attention weight per query, both layers
for a in amplitudes:
    for seed in seeds:
        model, weights = model_with_amplitude(a, seed), []
        hooks = [block.attn.drop.register_forward_hook(lambda m, i, out: weights.append(out.detach()))
                 for block in model.transformer.blocks]
        next_token_loss(model, batch).backward()
        for hook in hooks:
            hook.remove()
        parts = {"embeddings": [model.transformer.embed.weight], "head": [model.head.weight],
                 "blocks": list(model.transformer.blocks.parameters())}
        for part, params in parts.items():
            grads[part][a].append(torch.cat([p.grad.flatten() for p in params]).norm().item())
        top_weight[a].append(torch.stack([w.amax(dim=-1).mean() for w in weights]).mean().item())
    print(f"a = {a:>3}: gradient norm, embeddings {min(grads['embeddings'][a]):.4f} to "
          f"{max(grads['embeddings'][a]):.4f}, blocks {min(grads['blocks'][a]):.4f} to "
          f"{max(grads['blocks'][a]):.4f}, head {min(grads['head'][a]):.3f} to {max(grads['head'][a]):.3f}; "
          f"largest attention weight {min(top_weight[a]):.3f} to {max(top_weight[a]):.3f}")
uniform = sum(1 / (i + 1) for i in range(32)) / 32  # causal attention spread evenly over 32 tokens
print(f"largest attention weight if spread evenly over the causal keys: {uniform:.3f}")
ratio = {a: [g / g1 for g, g1 in zip(grads["embeddings"][a], grads["embeddings"][1])] for a in amplitudes}

# %%
# The gradient reaching the token embeddings shrinks in every seed, roughly as :math:`1/a` once the
# encoding dominates the sum: the first LayerNorm of each block and the final one divide the
# input by its norm, which grows with :math:`a`, and the token part is only a small share of it.
# The blocks' weights, also before the final LayerNorm, lose their gradient the same way; the
# output projection, after it, does not. The softmax does not saturate: each LayerNorm rescales
# the sum before the queries and keys, so the mean largest attention weight is no larger at
# :math:`a = 100` than at :math:`a = 1`, and under twice that of evenly spread attention.
assert all(g < g1 for a in amplitudes[1:] for g, g1 in zip(grads["embeddings"][a], grads["embeddings"][1]))
assert all(0.5 < 10 * r100 / r10 < 2 for r10, r100 in zip(ratio[10], ratio[100]))
assert all(b < b1 / 10 for b, b1 in zip(grads["blocks"][100], grads["blocks"][1]))
assert all(0.5 < h / h1 < 2 for h, h1 in zip(grads["head"][100], grads["head"][1]))
assert sum(top_weight[100]) <= sum(top_weight[1]) and max(top_weight[100]) < 2 * uniform

# %%
# AdamW rescales each gradient, so a small gradient alone need not slow training. Does the model
# still learn? The same models at :math:`a = 1` and :math:`a = 100`, trained for 50 steps
# (:func:`posenc.models.train`, learning rate 0.003), ending with the mean training loss of the last
# 10 steps, beside the unigram entropy of the text: the loss of predicting character frequencies
# without reading any token.
counts = torch.bincount(corpus.train, minlength=corpus.vocab_size).double()
freq = counts[counts > 0] / counts.sum()
unigram = -(freq * freq.log()).sum().item()
final = {a: [] for a in (1, 100)}
for a in final:
    for seed in seeds:
        log = train(model_with_amplitude(a, seed), next_token_loss, make_batch, steps=50, lr=3e-3, seed=seed)
        final[a].append(sum(log.losses[-10:]) / 10)
    print(f"a = {a:>3}: loss after 50 steps {min(final[a]):.3f} to {max(final[a]):.3f} (unigram entropy {unigram:.3f})")

# %%
# At :math:`a = 1` every seed ends below the unigram entropy; at :math:`a = 100` every seed ends
# closer to the unigram entropy than to the :math:`a = 1` losses: the model has barely begun to use
# the characters it reads. A small gradient means just that: a step of a given size in those
# weights changes the loss less, and AdamW's steps are about the learning rate in size.
assert max(final[1]) < unigram
assert all(abs(loss - unigram) < abs(loss - sum(final[1]) / len(final[1])) for loss in final[100])

fig, (ax_grad, ax_loss) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
for seed in seeds:
    ax_grad.plot(amplitudes, [grads["embeddings"][a][seed] for a in amplitudes], marker="o", label=f"seed {seed}")
    ax_loss.scatter(list(final), [final[a][seed] for a in final], color=f"C{seed}")
ax_grad.set(xscale="log", yscale="log", xlabel="amplitude a of the encoding",
            ylabel="gradient norm, token embeddings", title="Gradient at initialisation")
ax_grad.legend(fontsize="small")
ax_loss.axhline(unigram, color="gray", linestyle="--", linewidth=0.8, label="unigram entropy")
ax_loss.set(xscale="log", xlabel="amplitude a of the encoding", ylabel="training loss after 50 steps",
            title="Loss after a short training")
ax_loss.legend(fontsize="small")
fig.suptitle("Scaling up the sinusoidal encoding of a small language model (one colour per seed)")
plt.show()

# %%
# The claim is read as: the token embeddings' gradient at :math:`a = 100` vanishes (falls below
# a tenth of that at :math:`a = 1` in every seed), and training is slower (the loss after 50 steps
# is higher at :math:`a = 100` by more than twice the larger seed spread, the site's rule,
# :func:`posenc.experiments.compare`). It holds if both happen; holds with conditions if only
# one does; does not hold if the gradient at :math:`a = 100` is smaller in no seed and training
# is not slower; otherwise it is inconclusive.
vanishes = all(g < g1 / 10 for g, g1 in zip(grads["embeddings"][100], grads["embeddings"][1]))
slower = compare(final[1], final[100])[0] == "second higher"
none_smaller = not any(g < g1 for g, g1 in zip(grads["embeddings"][100], grads["embeddings"][1]))
gradient_verdict = ("holds" if vanishes and slower else "holds with conditions" if vanishes or slower
                    else "does not hold" if none_smaller else "inconclusive")
print(f"vanishes: {vanishes}, slower: {slower} -> {gradient_verdict}")

# %%
# What this shows
# ---------------
# * The encoding must have the embeddings' width, and the sum keeps that width. Whether their
#   scales match depends on the embeddings' initialisation, over a wide range.
# * Scaling the encoding up starves everything before the final LayerNorm of gradient, roughly
#   as :math:`1/a`, and a short training then barely gets past character frequencies. In this
#   pre-norm model the cause is the LayerNorms' division by the norm of the sum, not a saturated
#   softmax.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "Adding the positional encoding does not change the dimension of the vectors.",
        "source": "seed article",
        "measured": f"embeddings {tuple(embeddings.shape)} + encoding -> {tuple(summed.shape)}",
        "verdict": "holds",
    },
    {
        "claim": "Transformer models typically use 512 dimensions as the standard configuration.",
        "source": "seed article",
        "measured": "class defaults: "
        + ", ".join(f"{name.split('Config')[0]} {width}" for name, width in widths.items())
        + "; the original Transformer's base model, which the seed describes: 512 (Vaswani et al., "
        "2017, Table 3)",
        # rule: "holds" if most class defaults are 512 ("typically"); otherwise "holds with
        # conditions": it holds for the model the seed describes, not for models in general
        "verdict": "holds" if 2 * sum(w == 512 for w in widths.values()) > len(widths) else "holds with conditions",
    },
    {
        "claim": "Keep the encoding's width equal to the embedding's, and check that their scales match.",
        "source": "seed article",
        "measured": f"another width is an error ({type(width_error).__name__}); |PE| / |embedding| from "
        f"{min(ratios.values()):.2f} to {max(ratios.values()):.1f} over {len(ratios)} initialisations",
        "verdict": "holds",
    },
    {
        "claim": "Keep the encoding's values small: large values cause vanishing gradients.",
        "source": "seed article",
        "measured": f"token-embedding gradient at a = 100 over a = 1: {min(ratio[100]):.3f} to "
        f"{max(ratio[100]):.3f} ({len(ratio[100])} seeds); loss after 50 steps {min(final[1]):.2f} to "
        f"{max(final[1]):.2f} at a = 1, {min(final[100]):.2f} to {max(final[100]):.2f} at a = 100 "
        f"(unigram entropy {unigram:.2f}); largest attention weight at a = 100 "
        f"{sum(top_weight[100]) / len(top_weight[100]):.3f} (evenly spread {uniform:.3f})",
        "verdict": gradient_verdict,
    },
]
