"""
Why order matters: 猫追老鼠 vs 老鼠追猫
=============================================

"The cat chases the mouse" (猫追老鼠) and "the mouse chases the cat" (老鼠追猫) use the same
three words; so do "I don't like him" (我不喜欢他) and "he doesn't like me" (他不喜欢我). Does a
Transformer encoder layer see any difference between the two sentences of a pair? We feed both
through one layer, with and without a sinusoidal positional encoding, and measure.
"""

# %%
# Setup
# -----
# A word-level vocabulary, a token embedding scaled by :math:`\sqrt{d}`, the sinusoidal encoding
# of the original paper, and one standard PyTorch encoder layer. The weights start random: the
# first half of the argument holds for any weights; the second half trains them.
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc

pairs = [(["猫", "追", "老鼠"], ["老鼠", "追", "猫"]), (["我", "不喜欢", "他"], ["他", "不喜欢", "我"])]
vocab = {word: i for i, word in enumerate(sorted({w for pair in pairs for s in pair for w in s}))}
dim, heads = 64, 4


def encode(words, embed, layer, position):
    """Hidden states of one sentence: (len(words), dim)."""
    tokens = torch.tensor([[vocab[w] for w in words]])
    x = embed(tokens)
    if position is not None:
        x = position(x)
    return layer(x)[0]


def build(seed):
    torch.manual_seed(seed)
    embed = posenc.TokenEmbedding(len(vocab), dim)
    layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0, batch_first=True)
    return embed.eval(), layer.eval()


# %%
# Without a positional encoding, each word gets the same vector in both sentences
# -----------------------------------------------------------------------------------
# Self-attention compares every token with every other one, and nothing in it depends on where a
# token stands. Reordering the input only reorders the output (*permutation equivariance*), so
# "猫" leaves the layer with exactly the same vector in both sentences.
embed, layer = build(seed=0)
position = posenc.SinusoidalPositionalEncoding(dim).eval()

with torch.no_grad():
    for a, b in pairs:
        out_a, out_b = encode(a, embed, layer, None), encode(b, embed, layer, None)
        permuted = torch.stack([out_b[b.index(w)] for w in a])
        print(f"{''.join(a)} vs {''.join(b)}: largest difference per word without PE = "
              f"{(out_a - permuted).abs().max():.2e}")

# %%
# Any summary of the sentence that does not look at positions — mean pooling, as a sentence
# classifier would use — is then identical too: cosine similarity 1 up to float rounding.
# A model built this way cannot tell who chases whom.
cos = nn.functional.cosine_similarity


def pooled_similarity(a, b, embed, layer, position):
    return cos(encode(a, embed, layer, position).mean(0), encode(b, embed, layer, position).mean(0), dim=0)


with torch.no_grad():
    for a, b in pairs:
        print(f"{''.join(a)} vs {''.join(b)}: pooled cosine similarity "
              f"without PE = {pooled_similarity(a, b, embed, layer, None):.6f}, "
              f"with PE = {pooled_similarity(a, b, embed, layer, position):.6f}")

# %%
# Word by word
# ------------
# The similarity of every output vector of one sentence with every output vector of the other.
# Without a positional encoding the matrix is a permutation of the identity's pattern: each word
# matches itself perfectly wherever it stands. With the encoding added, a word that moved (猫,
# 老鼠) is a different input and loses its perfect match; 追, at the same position in both
# sentences, still matches itself almost perfectly, since only its neighbours moved.
a, b = pairs[0]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
with torch.no_grad():
    for ax, (label, pe) in zip(axes, [("without PE", None), ("with PE", position)]):
        out_a, out_b = encode(a, embed, layer, pe), encode(b, embed, layer, pe)
        sim = cos(out_a[:, None, :], out_b[None, :, :], dim=-1)
        im = ax.imshow(sim, vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(len(b)), b)
        ax.set_yticks(range(len(a)), a)
        ax.set_xlabel("".join(b))
        ax.set_ylabel("".join(a))
        ax.set_title(label)
        for i in range(len(a)):
            for j in range(len(b)):
                color = "white" if abs(sim[i, j]) > 0.6 else "black"  # readable on dark cells
                ax.text(j, i, f"{sim[i, j]:.2f}", ha="center", va="center", fontsize=9, color=color)
fig.colorbar(im, ax=axes, label="cosine similarity")
fig.suptitle("Output similarity, word by word")
plt.show()
# The text above relies on this (``sim`` is the matrix with the encoding): the moved words lose
# their perfect match, the word that stayed keeps almost all of it.
same_word = {w: sim[a.index(w), b.index(w)].item() for w in a}
assert max(same_word["猫"], same_word["老鼠"]) < 0.99 < same_word["追"]

# %%
# A random layer barely separates them
# -------------------------------------
# Put a ``[CLS]`` token in front of each sentence and read the sentence off its output, as BERT
# does. Without an encoding, ``[CLS]`` attends to the same set of vectors in both sentences, so
# its output is identical. With the encoding it differs — but in an untrained layer only a
# little, because the residual connection carries the ``[CLS]`` input (the same in both
# sentences) straight through. A claim one meets in tutorials, "similarity about 0.98 without
# positional encoding, below 0.3 with it", is not what one layer does before training: we measure
# exactly 1 without and values very close to 1 with.
vocab = {"[CLS]": len(vocab), **vocab}
sentences = [s for pair in pairs for s in pair]
tokens = torch.tensor([[vocab[w] for w in ["[CLS]", *s]] for s in sentences])


def cls_similarities(model):
    """Cosine similarity of the [CLS] outputs of the two sentences of each pair."""
    with torch.no_grad():
        h = model(tokens)
    return [float(cos(h[0], h[1], dim=0)), float(cos(h[2], h[3], dim=0))]


class CLSEncoder(nn.Module):
    """Token embedding, optional positional encoding, one encoder layer; returns the [CLS] output."""

    def __init__(self, use_position: bool):
        super().__init__()
        self.embed = posenc.TokenEmbedding(len(vocab), dim)
        self.position = posenc.SinusoidalPositionalEncoding(dim) if use_position else nn.Identity()
        self.layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)

    def forward(self, tokens):
        return self.layer(self.position(self.embed(tokens)))[:, 0]


untrained = {}
for use_position in (False, True):
    torch.manual_seed(0)
    sims = untrained[use_position] = cls_similarities(CLSEncoder(use_position))
    print(f"untrained, {'with' if use_position else 'without'} PE: [CLS] similarity per pair = "
          + ", ".join(f"{v:.6f}" for v in sims))

# %%
# Training tells the difference — only with positions
# ----------------------------------------------------
# Now train the layer and a linear classifier on the ``[CLS]`` output to answer "is the first
# word the one acting?" (猫追老鼠 and 我不喜欢他: yes; 老鼠追猫 and 他不喜欢我: no). Without an
# encoding the two sentences of a pair are the same input to the model, so no training can do
# better than guessing: the loss cannot fall below :math:`\ln 2`. With it, the task is easy.
labels = torch.tensor([1, 0, 1, 0])
seeds, steps = range(5), 200
curves, finals = {}, {}
for use_position in (False, True):
    name = "with PE" if use_position else "without PE"
    curves[name], finals[name] = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        encoder, head = CLSEncoder(use_position), nn.Linear(dim, 2)
        params = [*encoder.parameters(), *head.parameters()]
        optimizer = torch.optim.Adam(params, lr=1e-3)
        losses = []
        for _ in range(steps):
            loss = nn.functional.cross_entropy(head(encoder(tokens)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        with torch.no_grad():
            accuracy = (head(encoder(tokens)).argmax(-1) == labels).float().mean().item()
        curves[name].append(losses)
        finals[name].append((losses[-1], accuracy, cls_similarities(encoder)))

for name, runs in finals.items():
    for seed, (loss, accuracy, sims) in zip(seeds, runs):
        print(f"{name:>10}, seed {seed}: final loss {loss:.4f}, accuracy {accuracy:.2f}, "
              f"[CLS] similarity per pair " + ", ".join(f"{v:+.3f}" for v in sims))

fig, ax = plt.subplots(figsize=(7, 3.4))
for color, (name, runs) in zip(("C0", "C1"), curves.items()):
    for i, losses in enumerate(runs):
        ax.plot(losses, color=color, alpha=0.7, label=name if i == 0 else None)
ax.axhline(torch.log(torch.tensor(2.0)), color="gray", linestyle="--", label=r"$\ln 2$ (guessing)")
ax.set_yscale("log")
ax.set_xlabel("training step")
ax.set_ylabel("cross-entropy loss")
ax.set_title("Who acts? 5 seeds")
ax.legend()
plt.show()

# %%
# What this shows
# ---------------
# * Without positional information an encoder layer is blind to word order: the two sentences
#   of each pair give the same set of output vectors, and any order-free readout of them
#   (``[CLS]``, mean pooling) is identical — similarity exactly 1 up to float rounding.
# * Adding the sinusoidal encoding makes the inputs depend on position. In a random layer the
#   effect on the ``[CLS]`` output is small; after a few hundred training steps the model uses it
#   and the two meanings end up far apart (printed above), while the model without positions
#   stays at chance.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger (the build collects every
# page's ``claims``).
with torch.no_grad():
    pooled = min(float(pooled_similarity(a, b, embed, layer, None)) for a, b in pairs)
untrained_with_pe = untrained[True]
trained_with_pe = [sim for _, _, sims in finals["with PE"] for sim in sims]
final_without = [loss for loss, _, _ in finals["without PE"]]
claims = [
    {
        "claim": "Without positional encoding a Transformer cannot tell 猫追老鼠 from 老鼠追猫.",
        "source": "seed article",
        "measured": f"pooled cosine similarity {pooled:.6f}; trained loss {min(final_without):.4f} "
        f"(ln 2 = {math.log(2):.4f}) for {len(final_without)} seeds",
        "verdict": "holds",
    },
    {
        "claim": "Adding a positional encoding lowers the similarity of the two sentences from about "
        "0.98 to below 0.3.",
        "source": "seed article",
        "measured": f"untrained layer with PE: [CLS] similarity {min(untrained_with_pe):.4f}; after "
        f"training: {min(trained_with_pe):+.3f} to {max(trained_with_pe):+.3f}",
        # rule: the claim is about adding the encoding, so it is graded on the untrained layer:
        # "holds" if the similarity with PE falls below 0.3 there, "does not hold" otherwise (a
        # trained classifier separating the sentences is another result)
        "verdict": "holds" if max(untrained_with_pe) < 0.3 else "does not hold",
    },
]
