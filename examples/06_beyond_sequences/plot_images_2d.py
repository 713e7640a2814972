"""
2-D sinusoidal encodings for image patches: MAE's and timm's orders
===================================================================

A Vision Transformer cuts an image into a grid of patches and reads them as one sequence. The
fixed 2-D sine-cosine encoding gives every patch a vector built from its row and its column.
MAE and timm (1.0.31) both ship one; do they compute the same encoding, which channels hold the
row, and what happens when height and width are passed the wrong way round?
"""

# %%
# Half the channels for the row, half for the column
# ---------------------------------------------------
# An image of :math:`H \times W` patches becomes :math:`HW` tokens in row-major order: token
# :math:`t` is the patch at row :math:`r = \lfloor t / W \rfloor` and column :math:`c = t \bmod W`
# (what ``x.flatten(2).transpose(1, 2)`` does to a ``(batch, dim, H, W)`` feature map). The 2-D
# encoding of width :math:`d` is two 1-D sinusoidal encodings of width :math:`d/2` side by side,
# one of :math:`r` and one of :math:`c`, each with :math:`d/4` frequencies
#
# .. math::
#
#     \omega_i = 10000^{-4i/d}, \qquad i = 0, \dots, d/4 - 1,
#
# and one sine and one cosine per frequency: four blocks of :math:`d/4` channels,
# :math:`\sin r\omega`, :math:`\cos r\omega`, :math:`\sin c\omega`, :math:`\cos c\omega`.
# Implementations agree on these four blocks and disagree on their order.
# :func:`posenc.sinusoidal_2d` computes both orders in use (``style="mae"`` and ``style="timm"``).
# First, the claim that each half is a 1-D table: the column half of the MAE order is
# :func:`posenc.sinusoidal_table` of the column index, at width :math:`d/2`, sines first.
import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc
from posenc.diagnostics import min_pairwise_distance, similarity_matrix

height, width, dim = 3, 4, 32
mae = posenc.sinusoidal_2d(height, width, dim, style="mae", dtype=torch.float64)
timm = posenc.sinusoidal_2d(height, width, dim, style="timm", dtype=torch.float64)
rows = torch.arange(height * width) // width
cols = torch.arange(height * width) % width
column_table = posenc.sinusoidal_table(width, dim // 2, style="concat", dtype=torch.float64)
row_table = posenc.sinusoidal_table(height, dim // 2, style="concat", dtype=torch.float64)
assert torch.allclose(mae[:, : dim // 2], column_table[cols], rtol=0, atol=1e-15)
assert torch.allclose(mae[:, dim // 2 :], row_table[rows], rtol=0, atol=1e-15)
print(f"{height} x {width} patches, d = {dim}: table of shape {tuple(mae.shape)}")
print("MAE order: first half = 1-D table of the column, second half = 1-D table of the row")

# %%
# MAE's code, as the reference
# ----------------------------
# MAE (He et al., 2022) builds the table in NumPy with ``get_2d_sincos_pos_embed`` in
# ``util/pos_embed.py``. The lines below follow its logic: a grid from
# ``np.meshgrid(grid_w, grid_h)``, then half the width from ``grid[0]`` and half from
# ``grid[1]``. MAE's function takes one ``grid_size`` for a square grid; like its later forks,
# this version takes ``(h, w)``. MAE also prepends a zero row for the class token, left out here
# as in :func:`posenc.sinusoidal_2d`. Its comment "use half of dimensions to encode grid_h" is
# kept as it stands; a later section tests it.


def mae_1d(embed_dim, pos):
    omega = np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0)
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_2d(embed_dim, h, w):
    grid_h = np.arange(h, dtype=np.float32)
    grid_w = np.arange(w, dtype=np.float32)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0)  # here w goes first
    # use half of dimensions to encode grid_h
    emb_h = mae_1d(embed_dim // 2, grid[0])
    emb_w = mae_1d(embed_dim // 2, grid[1])
    return np.concatenate([emb_h, emb_w], axis=1)


mae_reference = torch.from_numpy(mae_2d(dim, height, width))
print(f"posenc style='mae' vs MAE's logic: max difference "
      f"{(mae - mae_reference).abs().max().item():.1e}")

# %%
# timm's code, as the reference
# -----------------------------
# timm's ``build_sincos2d_pos_embed`` (``timm/layers/pos_embed_sincos.py``, a helper of timm's
# layers library) does it in PyTorch and float32, with an ``ij`` grid (row first)
# and, by default, all sines before all cosines. Importing timm pulls in torchvision, which this
# build does not install, so the page transcribes the few lines that run with the default
# arguments; the site's conformance tests compare :func:`posenc.sinusoidal_2d` with the
# installed timm function itself.


def timm_sincos2d(feat_shape, dim, temperature=10000.0):
    pos_dim = dim // 4
    bands = 1.0 / temperature ** (torch.arange(pos_dim).float() / pos_dim)
    axes = [torch.arange(s).float() for s in feat_shape]
    grid = torch.stack(torch.meshgrid(axes, indexing="ij")).flatten(1).transpose(0, 1)
    pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)  # (tokens, 2 axes, pos_dim)
    return torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=1).flatten(1)


timm_reference = timm_sincos2d([height, width], dim)
timm32 = posenc.sinusoidal_2d(height, width, dim, style="timm", dtype=torch.float32)
print(f"posenc style='timm' vs timm's logic (float32): max difference "
      f"{(timm32 - timm_reference).abs().max().item():.1e}")

# %%
# The two tables side by side. Each row of a heat map is one patch, each column one channel;
# the lines separate the four blocks. In the MAE order the first two blocks repeat every
# :math:`W` tokens (they follow the column) and the last two are constant over runs of
# :math:`W` tokens (they follow the row); in timm's order row and column blocks alternate.
block = dim // 4
block_names = {
    "mae": ["sin col", "cos col", "sin row", "cos row"],
    "timm": ["sin row", "sin col", "cos row", "cos col"],
}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
for ax, (style, table) in zip(axes, (("mae", mae), ("timm", timm))):
    im = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    for edge in range(1, 4):
        ax.axvline(edge * block - 0.5, color="black", linewidth=1)
    ax.set_xticks([k * block + (block - 1) / 2 for k in range(4)], block_names[style])
    ax.set_xlabel("channel block")
axes[0].set_title("MAE order")
axes[1].set_title("timm order")
axes[0].set_ylabel("token $t$ (row-major)")
fig.colorbar(im, ax=axes, label="encoding value")
fig.suptitle("2-D sinusoidal tables, 3 x 4 patches, d = 32")
plt.show()

# %%
# Same numbers, permuted channels
# -------------------------------
# Every column of the timm table is exactly one column of the MAE table. Matching them gives the
# channel permutation ``perm`` with ``timm == mae[:, perm]``:
matches = (timm[:, :, None] == mae[:, None, :]).all(dim=0)  # (timm channel, MAE channel)
assert (matches.sum(dim=1) == 1).all()  # each timm channel equals exactly one MAE channel
perm = matches.float().argmax(dim=1)
assert torch.equal(mae[:, perm], timm)
print("perm:", perm.tolist())
print("timm block k is MAE block", (perm[::block] // block).tolist())

# %%
# A channel permutation changes no length and no angle: every distance and every dot product
# between two patches is the same in both tables, so any similarity picture of one is the
# similarity picture of the other. A layer that reads the channels is another matter: patch by
# patch, the two vectors differ.
gram_gap = (mae @ mae.T - timm @ timm.T).abs().max().item()
table_gap = (mae - timm).abs().max().item()
same_patch_cos = torch.nn.functional.cosine_similarity(mae, timm, dim=1)
print(f"max difference of the dot products between patches: {gram_gap:.1e}")
print(f"max difference of the tables themselves: {table_gap:.2f}")
print(f"cosine similarity of a patch's MAE and timm vectors: "
      f"{same_patch_cos.min().item():.2f} to {same_patch_cos.max().item():.2f}")

# %%
# So the two are the same encoding up to the order of the channels: a model trained with one
# order and fed a table computed in the other order sees other inputs. This matters when the
# table is recomputed rather than loaded. MAE keeps its table in the checkpoint (a parameter
# with ``requires_grad=False``), so code that loads that table along with the weights is safe;
# code that loads MAE's weights and then rebuilds the table in timm's order is not.
#
# Which half encodes the row?
# ---------------------------
# MAE's comment says the first half encodes ``grid_h``, the height coordinate. But
# ``np.meshgrid(grid_w, grid_h)`` returns the varying-along-width grid first, so ``grid[0]``
# holds the column. Measured on the table: move one patch down (same column, next row) or one
# patch right (same row, next column), and see which channels change.
mae_grid = mae.view(height, width, dim)
timm_grid = timm.view(height, width, dim)
half = dim // 2
for name, grid, parts in (
    ("MAE", mae_grid, [("first half", slice(0, half)), ("second half", slice(half, dim))]),
    ("timm", timm_grid, [(f"block {k} ({block_names['timm'][k]})", slice(k * block, (k + 1) * block))
                         for k in range(4)]),
):
    for label, channels in parts:
        down = (grid[1:, :, channels] - grid[:-1, :, channels]).abs().max().item()
        right = (grid[:, 1:, channels] - grid[:, :-1, channels]).abs().max().item()
        print(f"{name:>4} {label:<22} one row down: {down:.2f}   one column right: {right:.2f}")
mae_first_half_down = (mae_grid[1:, :, :half] - mae_grid[:-1, :, :half]).abs().max().item()
mae_first_half_right = (mae_grid[:, 1:, :half] - mae_grid[:, :-1, :half]).abs().max().item()
assert mae_first_half_down == 0.0 and mae_first_half_right > 0.5

# %%
# The first half of MAE's table does not change from one row to the next: it encodes the
# column, whatever the comment says. Nothing breaks because of it (the four blocks are
# symmetric, and MAE's grids are square), but code that slices "the row half" out of MAE's
# table, or generalises the function to rectangles by trusting the names, gets the axes
# exchanged.
#
# Height and width swapped
# ------------------------
# The classic mistake with a non-square grid is passing ``(width, height)`` where
# ``(height, width)`` is expected, for example from an image size given as (width, height).
# Nothing fails: :math:`W \times H` and :math:`H \times W` tables have the same number of rows,
# so the addition to the patch embeddings runs. Take 6 x 10 patches and :math:`d = 64`:
height, width, dim = 6, 10, 64
n = height * width
correct = posenc.sinusoidal_2d(height, width, dim, dtype=torch.float64)
swapped = posenc.sinusoidal_2d(width, height, dim, dtype=torch.float64)
print(f"correct table {tuple(correct.shape)}, swapped table {tuple(swapped.shape)}")

# %%
# Which position does each patch receive? Decode every vector by finding the entry it equals in a
# table large enough to hold both grids.
side = max(height, width)
lookup = posenc.sinusoidal_2d(side, side, dim, dtype=torch.float64)


def decode(table):
    distance, index = torch.cdist(table, lookup, compute_mode="donot_use_mm_for_euclid_dist").min(dim=1)
    assert distance.max() < 1e-9  # every vector is some (row, col) of the lookup table
    return (index // side).view(height, width), (index % side).view(height, width)


decoded = {"correct": decode(correct), "swapped": decode(swapped)}
true_rows = torch.arange(height)[:, None].expand(height, width)
true_cols = torch.arange(width)[None, :].expand(height, width)
for name, (dec_rows, dec_cols) in decoded.items():
    right = ((dec_rows == true_rows) & (dec_cols == true_cols)).sum().item()
    print(f"{name:>8}: {right} of {n} patches get the encoding of their own (row, col)")
print("swapped, patch (1, 0) is encoded as", (decoded["swapped"][0][1, 0].item(),
                                               decoded["swapped"][1][1, 0].item()))

# %%
# The swapped table reads the tokens with a row length of 6 instead of 10: patch :math:`t` gets
# the encoding of :math:`(\lfloor t/6 \rfloor, t \bmod 6)`. Drawn on the true 6 x 10 grid:
fig, axes = plt.subplots(2, 2, figsize=(9, 5.6), sharex=True, sharey=True)
for i, name in enumerate(("correct", "swapped")):
    for j, (values, what) in enumerate(zip(decoded[name], ("row", "column"))):
        ax = axes[i, j]
        ax.imshow(values, cmap="viridis", vmin=0, vmax=side - 1, interpolation="nearest")
        for r in range(height):
            for c in range(width):
                v = int(values[r, c])
                ax.text(c, r, str(v), ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 * (side - 1) else "white")
        ax.set_title(f"{name} table: encoded {what}")
for ax in axes[1]:
    ax.set_xlabel("patch column")
for ax in axes[:, 0]:
    ax.set_ylabel("patch row")
fig.suptitle("Position encoded for each patch of a 6 x 10 grid")
plt.show()

# %%
# Every patch still has its own vector: the swapped table is a valid encoding of a 10 x 6 grid,
# so a uniqueness check passes. What is lost is the geometry. With the correct table, the nearest
# other vector to each patch's vector belongs to a patch next to it in the image (up, down, left
# or right); the image neighbours are all one step apart in the encoding. The swapped table
# tears that apart.
adjacent = ((true_rows.reshape(-1)[:, None] - true_rows.reshape(-1)[None, :]).abs()
            + (true_cols.reshape(-1)[:, None] - true_cols.reshape(-1)[None, :]).abs()) == 1
geometry = {}
for name, table in (("correct", correct), ("swapped", swapped)):
    distances = similarity_matrix(table, "euclidean").fill_diagonal_(float("inf"))
    nearest_is_neighbour = adjacent[torch.arange(n), distances.argmin(dim=1)].sum().item()
    farthest_neighbour = distances[adjacent].max().item()
    closest = min_pairwise_distance(table)
    geometry[name] = (nearest_is_neighbour, farthest_neighbour, closest.distance)
    print(f"{name:>8}: closest pair of vectors {closest.distance:.3f} apart; nearest vector is an "
          f"image neighbour for {nearest_is_neighbour} of {n} patches; image neighbours up to "
          f"{farthest_neighbour:.3f} apart")

# %%
# The same in the picture ViT papers draw: the cosine similarity of one patch's vector to every
# patch's vector, laid out on the image grid. All values are high, because the low-frequency
# channels hardly change across ten patches, so the colour scale starts at the smallest value
# shown. With the correct table the similarity is largest at the patch and falls off in every
# direction, most slowly along the patch's own row and column (where one half still matches
# exactly). With the swapped table, patches far from the query are among the most similar and
# some of its image neighbours are not.
query = (2, 3)
q_index = query[0] * width + query[1]
maps = {name: similarity_matrix(table)[q_index].view(height, width)
        for name, table in (("correct", correct), ("swapped", swapped))}
low = min(m.min().item() for m in maps.values())  # one colour scale for both panels
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, (name, similarity) in zip(axes, maps.items()):
    im = ax.imshow(similarity, cmap="viridis", vmin=low, vmax=1, interpolation="nearest")
    ax.plot(query[1], query[0], marker="x", color="red", markersize=10, linestyle="none")
    ax.set_title(f"{name} table")
    ax.set_xlabel("patch column")
axes[0].set_ylabel("patch row")
fig.colorbar(im, ax=axes, label="cosine similarity to patch (2, 3)")
fig.suptitle("Similarity of one patch's encoding to all patches, 6 x 10 grid")
plt.show()

# %%
# On a square grid the swap is silent
# -----------------------------------
# With :math:`H = W` the swapped call is the same call, so this mistake has no effect there and
# no test on square images finds it; it appears the day the grid stops being square. The
# related mistake that does change a square grid is the transposed table, where the row
# channels receive the column and the other way round (tokens flattened column-major, or
# coordinates stacked as :math:`(x, y)` where :math:`(r, c)` was meant). On 8 x 8 patches:
side = 8
square = posenc.sinusoidal_2d(side, side, dim, dtype=torch.float64)
transposed = square.view(side, side, dim).transpose(0, 1).reshape(side * side, dim)
sq_rows = torch.arange(side * side) // side
sq_cols = torch.arange(side * side) % side
sq_adjacent = ((sq_rows[:, None] - sq_rows[None, :]).abs() + (sq_cols[:, None] - sq_cols[None, :]).abs()) == 1
for name, table in (("square", square), ("transposed", transposed)):
    distances = similarity_matrix(table, "euclidean").fill_diagonal_(float("inf"))
    ok = sq_adjacent[torch.arange(side * side), distances.argmin(dim=1)].sum().item()
    print(f"{name:>10}: closest pair {min_pairwise_distance(table).distance:.3f} apart; nearest "
          f"vector is an image neighbour for {ok} of {side * side} patches")
moved = (transposed != square).any(dim=1).sum().item()
assert moved == side * side - side  # every patch off the diagonal
print(f"transposed: {moved} of {side * side} patches get another patch's vector; "
      f"patch (1, 5) gets the vector of (5, 1):",
      torch.equal(transposed[1 * side + 5], square[5 * side + 1]))

# %%
# The transposed table is as good an encoding as the original: same distances, same
# neighbours. A model trained from scratch with it learns just as well, since nothing in training
# says which half is "the row". With a pretrained model or a table shared between two code
# bases it is wrong in a way no check of shapes or values catches: the model sees every image's
# positions mirrored across the diagonal, as if the picture were transposed while its content
# is not.
#
# What this shows
# ---------------
# * The 2-D sinusoidal encoding is two 1-D encodings, of the row and of the column, each on half
#   the channels; MAE's and timm's functions compute the same numbers in different channel
#   orders (the printed permutation), so their tables have identical similarity structure but
#   are not interchangeable as inputs to trained weights.
# * In MAE's table, the half its comment assigns to ``grid_h`` changes along the columns, not
#   the rows.
# * Passing (width, height) for a non-square grid raises no error and keeps every patch
#   distinct, but gives patches the wrong positions and breaks the neighbourhood structure; on a
#   square grid the same mistake changes nothing and so goes unnoticed.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "Positional encoding carries over to images as a spatial position encoding "
        "(图像处理中的空间位置编码).",
        "source": "seed article",
        "measured": f"6 x 10 patches, d = 64: closest two patches {geometry['correct'][2]:.3f} "
        f"apart; nearest vector is an image neighbour for {geometry['correct'][0]} of {n}",
        "verdict": "holds",
    },
    {
        "claim": "MAE's and timm's 2-D sin-cos position embeddings are the same encoding.",
        "source": "common assumption",
        "measured": f"equal after a channel permutation (dot products differ by {gram_gap:.1e}); "
        f"without it the tables differ by up to {table_gap:.2f}",
        "verdict": "holds with conditions",
    },
    {
        "claim": "In MAE's get_2d_sincos_pos_embed, the first half of the channels encodes "
        "grid_h (the row).",
        "source": "comment in MAE's util/pos_embed.py",
        "measured": f"first half changes by {mae_first_half_down:.2f} one row down and by "
        f"{mae_first_half_right:.2f} one column right",
        "verdict": "does not hold",
    },
]
