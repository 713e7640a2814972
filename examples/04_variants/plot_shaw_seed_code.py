"""
The seed's Shaw code, read against posenc's
===========================================

The seed article's "simplified implementation" of relative encoding is Shaw et al.'s learned
table of clipped distances (:ref:`sphx_glr_auto_examples_04_variants_plot_shaw_relative.py`).
This page runs the class as printed beside :class:`posenc.RelativePositionEmbedding` and asks
what differs: the sign of its distance, whether a model registers its table, and the distances it
gives a token decoded against a cache.
"""

# %%
# The seed article's class
# ------------------------
# The seed article presents a "simplified implementation" of relative encoding, introduced with
# Transformer-XL. It is in fact Shaw's scheme — a learned table indexed by a clipped distance —
# not Transformer-XL's, which projects sinusoids of the distance and adds two global vectors
# (:ref:`sphx_glr_auto_examples_04_variants_plot_transformer_xl.py`). Here it is, as printed
# there (a plain class):
import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc


class RelativePositionalEncoding:
    def __init__(self, max_rel_pos, d_model):
        self.max_rel_pos = max_rel_pos
        self.embeddings = nn.Embedding(2 * max_rel_pos + 1, d_model)

    def forward(self, q_len, k_len):
        rel_pos = torch.arange(q_len)[:, None] - torch.arange(k_len)[None, :]
        rel_pos = torch.clamp(rel_pos, -self.max_rel_pos, self.max_rel_pos)
        return self.embeddings(rel_pos + self.max_rel_pos)


# %%
# Its distance is ``arange(q_len)[:, None] - arange(k_len)[None, :]``, that is :math:`i - j`:
# query minus key, the opposite sign of the paper and of posenc. To read the seed's index from
# its own code, give it a table of width 1 whose row :math:`r` holds the number :math:`r - K`:
# its output is then the clipped distance it uses for each pair.
torch.manual_seed(0)
n, K, dim = 12, 4, 8
index = posenc.relative_position_indices(n, n, K)  # posenc: (query i, key j), values 0 .. 2K


def seed_distances(q_len, k_len):
    probe = RelativePositionalEncoding(K, 1)
    with torch.no_grad():
        probe.embeddings.weight.copy_(torch.arange(-K, K + 1, dtype=torch.float32)[:, None])
        return probe.forward(q_len, k_len)[..., 0].long()


seed_index = seed_distances(n, n) + K  # the row of the seed's table used for each pair
assert torch.equal(seed_index, index.T)
assert torch.equal(seed_index, 2 * K - index)
print("seed index = posenc index transposed:", torch.equal(seed_index, index.T))
print("seed index = 2K - posenc index:      ", torch.equal(seed_index, 2 * K - index))

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
panels = ((index - K, "posenc: $\\mathrm{clip}(j - i, -K, K)$"),
          (seed_index - K, "seed class: $\\mathrm{clip}(i - j, -K, K)$"))
for ax, (distances, title) in zip(axes, panels):
    im = ax.imshow(distances.numpy(), cmap="coolwarm", vmin=-K, vmax=K, interpolation="nearest")
    for row in range(n):
        for col in range(n):
            value = distances[row, col].item()
            ax.text(col, row, f"{value}", ha="center", va="center", fontsize=7,
                    color="white" if abs(value) >= 3 else "black")
    ax.set_xlabel("key position $j$")
    ax.set_ylabel("query position $i$")
    ax.set_title(title)
fig.colorbar(im, ax=axes, label="clipped distance")
plt.show()

# %%
# For a square matrix, then, the seed's index is posenc's transposed, equivalently :math:`2K`
# minus posenc's: its row :math:`r` means what posenc's row :math:`2K - r` means. Neither sign is
# wrong inside one model, but weights moved from one implementation to the other must be
# flipped, or every key before the query is read as a key after it.
seed = RelativePositionalEncoding(K, dim)
ours = posenc.RelativePositionEmbedding(K, dim)
with torch.no_grad():
    ours.embedding.weight.copy_(seed.embeddings.weight)
    unflipped = (ours(n, n) - seed.forward(n, n)).abs().max().item()
    ours.embedding.weight.copy_(seed.embeddings.weight.flip(0))
    flipped = (ours(n, n) - seed.forward(n, n)).abs().max().item()
print(f"seed weights copied as they are:        largest difference {unflipped:.2f}")
print(f"seed weights flipped (row r -> 2K - r): largest difference {flipped:.1e}")

# %%
# Two more differences matter in practice. The class does not inherit from ``nn.Module``, so a
# model that stores it does not register its table: the table is not trained by an optimizer
# built from ``model.parameters()``, not saved in the ``state_dict`` and not moved by
# ``model.to(device)``. And with fewer queries than keys — one new token decoding against a
# cache — it measures distances as if the query were the first token, while posenc places the
# queries at the end of the keys, where they are.


class Holder(nn.Module):
    def __init__(self, positions):
        super().__init__()
        self.positions = positions


registered = {}
for name, module in (("seed class", seed), ("posenc", ours)):
    holder = Holder(module)
    registered[name] = sum(p.numel() for p in holder.parameters())
    print(f"{name:>10}: parameters registered {registered[name]:3d}, "
          f"state_dict entries {len(holder.state_dict())}")

steps = 6
posenc_step = (posenc.relative_position_indices(1, steps, K) - K)[0]
print(f"one query, {steps} keys (a decoding step), clipped distance of each key:")
print("  posenc, j - i:                   ", posenc_step.tolist())
print("  seed class, i - j:               ", seed_distances(1, steps)[0].tolist())
print("  i - j for a query after its keys:", (-posenc_step).tolist())

# %%
# The new query comes after every cached key, so in the seed's own convention (query minus key)
# all its distances should be :math:`\ge 0`, largest for the oldest key (the last printed row).
# The class gives them with the opposite sign and in the opposite order: the newest key looks
# like the farthest one.
#
# What this shows
# ---------------
# * The seed article's class is this scheme with the opposite sign (:math:`i - j`); its weights
#   load into posenc flipped, and as printed it is neither an ``nn.Module`` nor correct for
#   cached decoding.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "The seed article's relative position class can serve as a layer of a model: its table is "
        "trained, saved and moved with the model.",
        "source": "seed article (its RelativePositionalEncoding class)",
        "measured": f"parameters an nn.Module holding it registers: seed class {registered['seed class']}, "
        f"posenc {registered['posenc']}",
        # rule: "does not hold" if the holding module registers none of the seed class's parameters
        "verdict": "does not hold" if registered["seed class"] == 0 else "holds",
    },
]
