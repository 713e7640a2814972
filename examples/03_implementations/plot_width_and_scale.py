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
# classes (class defaults, built locally; nothing is downloaded), each the size of one model of its
# family:
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
# initialisation combined with the :math:`\sqrt{d}` factor hides the positions; embeddings drawn
# with BERT's and GPT-2's standard deviation (those two models learn their positions instead)
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
# What this shows
# ---------------
# * The encoding must have the embeddings' width, and the sum keeps that width. Whether their
#   scales match depends on the embeddings' initialisation, over a wide range.

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
]
