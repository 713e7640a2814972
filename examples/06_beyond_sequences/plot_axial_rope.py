"""
Axial RoPE for images: rotating by row and by column
====================================================

RoPE rotates the channel pairs of a query or key by angles proportional to its position in a
sequence. An image patch has two coordinates. Axial RoPE rotates half of the pairs by the row
and half by the column. Does attention then depend only on the 2-D offset between two patches,
what do timm 1.0.31 and rotary-embedding-torch 0.9.1 compute, and what happens when height and
width are exchanged?
"""

# %%
# The angles: the row's, then the column's
# ----------------------------------------
# In 1-D RoPE with head width :math:`d`, pair :math:`i` at position :math:`p` turns by
# :math:`p\,\theta_i` (see :doc:`/variants/rope_derivation`).
# For the patch at row :math:`r`, column :math:`c` of an :math:`H \times W` grid, axial RoPE
# uses the frequencies of a 1-D RoPE of width :math:`d/2` twice, once per coordinate:
#
# .. math::
#
#     \text{angles}(r, c) = [\, r\omega_0, \dots, r\omega_{d/4-1},\;
#                             c\omega_0, \dots, c\omega_{d/4-1} \,],
#     \qquad \omega_i = 10000^{-4i/d}.
#
# :func:`posenc.axial_rope_cos_sin` returns the cosines and sines of these :math:`d/2` angles
# for the row-major tokens of the grid, laid out like :func:`posenc.rope_cos_sin`; rotate queries
# and keys with :func:`posenc.apply_rope`. Su Jianlin derived this form for 2-D positions in
# "Transformer升级之路：4、二维位置的旋转式位置编码" (2021): some channel pairs rotated by one
# coordinate and the others by the second, half of the channels for each. In the interleaved layout
# the result is literally two 1-D RoPE tables side by side, the row's and the column's:
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

import posenc

torch.manual_seed(0)
height, width, dim = 6, 10, 32
rows = torch.arange(height * width) // width
cols = torch.arange(height * width) % width
cos_i, sin_i = posenc.axial_rope_cos_sin(height, width, dim, layout="interleaved", dtype=torch.float64)
cos_row, sin_row = posenc.rope_cos_sin(rows, dim // 2, layout="interleaved", dtype=torch.float64)
cos_col, sin_col = posenc.rope_cos_sin(cols, dim // 2, layout="interleaved", dtype=torch.float64)
assert torch.allclose(cos_i, torch.cat([cos_row, cos_col], dim=1), rtol=0, atol=1e-15)
assert torch.allclose(sin_i, torch.cat([sin_row, sin_col], dim=1), rtol=0, atol=1e-15)
omega, _ = posenc.rope_inv_freq(dim // 2)
print(f"{height} x {width} patches, d = {dim}: cos/sin of shape {tuple(cos_i.shape)}")
print("omega_i:", np.array2string(omega.numpy(), precision=4))

# %%
# Which channels turn with the row and which with the column depends on the layout. The figure
# marks each channel of :math:`d = 32` with the coordinate that rotates it and the index
# :math:`i` of its frequency. In the ``"half"`` layout channel :math:`j` pairs with
# :math:`j + d/2`; in the ``"interleaved"`` layout with its neighbour. (How the two layouts
# relate is the subject of :ref:`sphx_glr_auto_examples_04_variants_plot_rope_layouts.py`.)
quarter = dim // 4
angle_index = {
    "half": torch.arange(dim) % (dim // 2),  # channel j uses angle j mod d/2
    "interleaved": torch.arange(dim) // 2,  # channel j uses angle j // 2
}
# Check the map against the tables: a patch on row 1, column 0 has angle 0 in the column pairs.
probe = 1 * width + 0
for layout, index in angle_index.items():
    cos_l, sin_l = posenc.axial_rope_cos_sin(height, width, dim, layout=layout, dtype=torch.float64)
    turned_by_row = sin_l[probe] != 0
    assert torch.equal(turned_by_row, index < quarter)
colours = {False: "#9bb8e6", True: "#f0a58c"}  # rotated by the row / by the column
fig, axes = plt.subplots(2, 1, figsize=(9, 2.8), sharex=True)
for ax, (layout, index) in zip(axes, angle_index.items()):
    for j in range(dim):
        ax.add_patch(Rectangle((j - 0.5, -0.5), 1, 1, facecolor=colours[bool(index[j] >= quarter)],
                               edgecolor="white"))
        ax.text(j, 0, str(int(index[j] % quarter)), ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.5, dim - 0.5)
    ax.set_ylim(-0.5, 0.5)
    ax.set_yticks([0], [layout])
axes[-1].set_xlabel("channel $j$ (number in a cell: frequency index $i$)")
handles = [Patch(facecolor=colours[False], label="rotated by the row"),
           Patch(facecolor=colours[True], label="rotated by the column")]
fig.legend(handles=handles, loc="outside lower center", ncol=2)
fig.suptitle("Axial RoPE, d = 32: which coordinate rotates each channel")
plt.show()

# %%
# The same numbers as rotary-embedding-torch and timm
# ---------------------------------------------------
# rotary-embedding-torch builds axial RoPE for a head of width :math:`d` with
# ``RotaryEmbedding(dim=d // 2).get_axial_freqs(H, W)``: one 1-D table of width :math:`d/2` per
# axis, concatenated row then column, interleaved.
# Its angles, and its rotation (``apply_rotary_emb``) of a random ``(batch, H, W, d)`` tensor,
# against posenc:
import rotary_embedding_torch as ret  # noqa: E402

freqs = ret.RotaryEmbedding(dim=dim // 2).get_axial_freqs(height, width)  # (H, W, d) angles
cos_32, sin_32 = posenc.axial_rope_cos_sin(height, width, dim, layout="interleaved", dtype=torch.float32)
x = torch.randn(2, height, width, dim)
theirs = ret.apply_rotary_emb(freqs, x).flatten(1, 2)
ours = posenc.apply_rope(x.flatten(1, 2), cos_32, sin_32, layout="interleaved")
ret_gap = max((cos_32 - freqs.cos().flatten(0, 1)).abs().max().item(),
              (sin_32 - freqs.sin().flatten(0, 1)).abs().max().item())
ret_rotation_gap = (ours - theirs).abs().max().item()
assert ret_gap < 1e-5 and ret_rotation_gap < 1e-5
print(f"rotary-embedding-torch (float32): cos/sin differ by {ret_gap:.1e}, "
      f"rotated tensors by {ret_rotation_gap:.1e}")

# %%
# timm's ``build_rotary_pos_embed`` (``timm/layers/pos_embed_sincos.py``) serves its EVA-style
# models. Importing timm pulls in torchvision, which this build does not install, so the page
# transcribes the lines that run with ``in_pixels=False`` (integer patch coordinates, the
# ``temperature`` frequencies) and the default ``ij`` grid; the site's conformance tests check
# posenc against the installed timm function. Its ``rotate_half`` switch chooses the layout.


def timm_rotary(feat_shape, dim, temperature=10000.0, rotate_half=False):
    num_bands = dim // 4
    bands = 1.0 / temperature ** (torch.arange(num_bands).float() / num_bands)
    axes = [torch.arange(s).float() for s in feat_shape]
    grid = torch.stack(torch.meshgrid(axes, indexing="ij"), dim=-1).unsqueeze(-1)  # (H, W, 2, 1)
    pos = grid * bands
    sin_emb, cos_emb = pos.sin().flatten(-2).flatten(0, -2), pos.cos().flatten(-2).flatten(0, -2)
    if rotate_half:
        return torch.cat([sin_emb, sin_emb], -1), torch.cat([cos_emb, cos_emb], -1)
    return sin_emb.repeat_interleave(2, -1), cos_emb.repeat_interleave(2, -1)


timm_gap = {}
for layout in ("interleaved", "half"):
    sin_t, cos_t = timm_rotary([height, width], dim, rotate_half=layout == "half")
    cos_p, sin_p = posenc.axial_rope_cos_sin(height, width, dim, layout=layout, dtype=torch.float32)
    timm_gap[layout] = max((cos_p - cos_t).abs().max().item(), (sin_p - sin_t).abs().max().item())
    assert timm_gap[layout] < 1e-5
    print(f"timm, rotate_half={layout == 'half'} vs posenc layout={layout!r}: "
          f"max difference {timm_gap[layout]:.1e}")

# %%
# Not every axial RoPE uses these angles. timm's ``RotaryEmbedding`` class defaults to
# ``in_pixels=True``, and rotary-embedding-torch offers ``freqs_for="pixel"``: both place the
# patches on coordinates from -1 to 1 along each axis and use frequencies that are multiples of
# :math:`\pi` (timm: log-spaced up to ``max_res / 2``; rotary-embedding-torch: linear up to
# ``max_freq / 2``). The angle of one step then depends on the number of patches along that axis,
# so on a non-square grid a step down and a step right turn by different angles, and the same
# offset means a different angle on a larger image. Measured with rotary-embedding-torch's pixel
# mode (first frequency):
pixel = ret.RotaryEmbedding(dim=dim // 2, freqs_for="pixel")
for grid in ((height, width), (2 * height, 2 * width)):
    angles = pixel.get_axial_freqs(*grid)  # (H, W, d), interleaved: row pairs first
    step_down = (angles[1, 0, 0] - angles[0, 0, 0]).item()
    step_right = (angles[0, 1, dim // 2] - angles[0, 0, dim // 2]).item()
    print(f"pixel mode, {grid[0]} x {grid[1]} patches: one step down {step_down:.3f} rad, "
          f"one step right {step_right:.3f} rad")

# %%
# Scores depend on the 2-D offset only
# ------------------------------------
# Rotate a query :math:`q` placed at :math:`(r_1, c_1)` and a key :math:`k` at
# :math:`(r_2, c_2)`. Each pair contributes a term that depends on the difference of its two
# angles, and the difference of the angles is :math:`(r_2 - r_1)\,\omega_i` for a row pair and
# :math:`(c_2 - c_1)\,\omega_i` for a column pair. So
#
# .. math::
#
#     \langle R(r_1, c_1)\,q,\; R(r_2, c_2)\,k \rangle = g(q, k;\; r_2 - r_1,\; c_2 - c_1).
#
# Check: put the same :math:`q` at every patch and the same :math:`k` at every patch, compute all
# query-key scores, then move both patches by the same 2-D offset :math:`(a, b)` and compare, for
# every offset that keeps both inside the grid (float64).
q = torch.randn(dim, dtype=torch.float64)
k = torch.randn(dim, dtype=torch.float64)


def all_scores(built_for, q, k):
    """scores[r1, c1, r2, c2]: q at patch (r1, c1), k at (r2, c2) of the height x width image.

    The cos/sin tables are built for the grid ``built_for``, normally (height, width).
    """
    cos, sin = posenc.axial_rope_cos_sin(*built_for, dim, dtype=torch.float64)
    n = cos.shape[0]
    queries = posenc.apply_rope(q.expand(n, dim), cos, sin)
    keys = posenc.apply_rope(k.expand(n, dim), cos, sin)
    return (queries @ keys.T).view(height, width, height, width)


def shift_gap(scores):
    """Largest change of a score when query and key move by the same 2-D offset."""
    gap = 0.0
    for a in range(height):
        for b in range(-(width - 1), width):
            if b >= 0:
                lo, hi = slice(0, width - b), slice(b, width)
            else:
                lo, hi = slice(-b, width), slice(0, width + b)
            moved = scores[a:, hi, a:, hi]
            base = scores[: height - a, lo, : height - a, lo]
            gap = max(gap, (moved - base).abs().max().item())
    return gap


scores = all_scores((height, width), q, k)
relative_gap = shift_gap(scores)
assert relative_gap < 1e-12
print(f"largest change of a score under a common 2-D shift: {relative_gap:.1e} "
      f"(scores range {scores.min().item():.2f} to {scores.max().item():.2f})")

# %%
# The two layouts give the same scores once the query and key channels are reordered with
# :func:`posenc.interleaved_to_half`, as in 1-D:
cos_h, sin_h = posenc.axial_rope_cos_sin(height, width, dim, layout="half", dtype=torch.float64)
xq = torch.randn(height * width, dim, dtype=torch.float64)
layout_gap = (posenc.apply_rope(posenc.interleaved_to_half(xq), cos_h, sin_h, layout="half")
              - posenc.interleaved_to_half(posenc.apply_rope(xq, cos_i, sin_i, layout="interleaved"))
              ).abs().max().item()
assert layout_gap < 1e-12
print(f"half layout on reordered channels vs interleaved layout: max difference {layout_gap:.1e}")

# %%
# One query against every key
# ---------------------------
# With :math:`q = k` = all ones, each pair contributes :math:`2\cos(\Delta\,\omega_i)`, so the
# score is a sum of a row term and a column term:
#
# .. math::
#
#     s(\Delta r, \Delta c) = 2\sum_i \cos(\Delta r\,\omega_i) + 2\sum_i \cos(\Delta c\,\omega_i).
#
# Seen from a query in the middle of a 12 x 20 grid (:math:`d = 64`), the score falls off in both
# directions, but as a sum, not as a function of the distance: a key in the query's own row keeps
# the whole row term however many columns away it is, which draws a cross. (RoPE-Mixed, Heo et
# al. 2024, learns frequencies that mix the two axes to reach diagonal directions.)
#
# The second panel is the same grid with height and width exchanged when the tables are built,
# ``axial_rope_cos_sin(20, 12, ...)`` for a 12 x 20 grid. As with the 2-D sinusoidal table, the
# shapes match (240 tokens either way) and nothing fails; patch :math:`t` is rotated as if it sat
# at :math:`(\lfloor t/12 \rfloor, t \bmod 12)`.
height, width, dim = 12, 20, 64
ones = torch.ones(dim, dtype=torch.float64)
query = (height // 2, width // 2)
maps = {}
for name, grid in (("correct", (height, width)), ("height and width swapped", (width, height))):
    maps[name] = all_scores(grid, ones, ones)[query]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
low = min(m.min().item() for m in maps.values())
for ax, (name, score_map) in zip(axes, maps.items()):
    im = ax.imshow(score_map, cmap="viridis", vmin=low, vmax=dim, interpolation="nearest")
    ax.plot(query[1], query[0], marker="x", color="red", markersize=9, linestyle="none")
    ax.set_title(name)
    ax.set_xlabel("key column")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
axes[0].set_ylabel("key row")
fig.colorbar(im, ax=axes, label="score $q \\cdot k$, $q = k$ = ones")
fig.suptitle("Axial RoPE scores of the query at (6, 10), 12 x 20 patches, d = 64")
plt.show()
row_cut = maps["correct"][query[0]]
column_cut = maps["correct"][:, query[1]]
print(f"correct: score at the query {maps['correct'][query].item():.1f}; "
      f"lowest along its row {row_cut.min().item():.1f}, along its column {column_cut.min().item():.1f}, "
      f"anywhere {maps['correct'].min().item():.1f}")

# %%
# With the swap, keys far from the query score as high as its neighbours, and the scores stop
# being relative: the same shift test as above, with a random :math:`q` and :math:`k` of width 64.
q = torch.randn(dim, dtype=torch.float64)
k = torch.randn(dim, dtype=torch.float64)
swapped_gap = shift_gap(all_scores((width, height), q, k))
correct_gap = shift_gap(all_scores((height, width), q, k))
print(f"12 x 20 grid, largest change of a score under a common 2-D shift: "
      f"correct {correct_gap:.1e}, height and width swapped {swapped_gap:.2f}")

# %%
# On a square grid the exchange is the same call and changes nothing. Exchanging the roles of
# the coordinates instead (rows into the column pairs) still gives relative scores, but with the
# row and column offsets exchanged: harmless when training from scratch, wrong for weights
# trained with the other convention.
#
# What this shows
# ---------------
# * Axial RoPE is two 1-D RoPEs of width :math:`d/2`, one on the row and one on the column;
#   posenc, rotary-embedding-torch (``get_axial_freqs``) and timm (``in_pixels=False``) compute
#   the same angles, in the interleaved or, with timm's ``rotate_half``, the half layout. The
#   pixel modes of both libraries use other angles, which depend on the grid size.
# * Scores depend only on the 2-D offset between query and key (the printed shift test), and for
#   identical :math:`q, k` they are a row term plus a column term, not a function of distance.
# * Building the tables for (width, height) on a non-square grid raises no error but makes the
#   scores depend on absolute positions.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "RoPE extends to 2-D by rotating half the channels by the row and half by the "
        "column, keeping attention scores relative in both axes.",
        "source": "Su Jianlin, 'Transformer升级之路：4、二维位置的旋转式位置编码' (kexue.fm, 2021); "
        "Heo et al., 'Rotary Position Embedding for Vision Transformer' (2024)",
        "measured": f"12 x 20 patches, d = 64: largest change of a score under a common 2-D "
        f"shift {correct_gap:.1e} (float64); with height and width swapped {swapped_gap:.2f}",
        "verdict": "holds",
    },
    {
        "claim": "timm's and rotary-embedding-torch's axial RoPE are the same encoding.",
        "source": "common assumption",
        "measured": f"integer coordinates: equal to posenc within {max(ret_gap, *timm_gap.values()):.1e} "
        f"(float32); pixel modes use other angles",
        "verdict": "holds with conditions",
    },
]
