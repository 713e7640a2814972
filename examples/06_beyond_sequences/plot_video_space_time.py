"""
Positions of video patches: frame, patch and space-time encodings
=================================================================

Once the frames of a video are cut into patch tokens, each token has a frame, a row and a column.
Should it get the encoding of its frame alone, its frame plus its patch position in the same
channels, or separate channel blocks for frame, row and column, and what does each let attention
tell apart? Adding a 1-D table to the raw pixels of each frame instead, and why that ties
``d_model`` to the resolution, is on
:ref:`sphx_glr_auto_examples_06_beyond_sequences_plot_video.py`.
"""

# %%
# Patches and features
# --------------------
# A ViT-style video Transformer does not add encodings to raw pixels: it cuts each frame into
# patches, projects every patch to a token of width ``dim`` (here a linear layer on the patch
# pixels) and adds the encodings to the tokens. ``dim`` is then the model width, chosen freely, and
# the frame encoding is a ``(frames, dim)`` table whatever the resolution. With ``spatial=True`` the
# module also adds the 2-D encoding of each patch's place in the grid (:func:`posenc.sinusoidal_2d`,
# the subject of :ref:`sphx_glr_auto_examples_06_beyond_sequences_plot_images_2d.py`), so a token
# carries its frame and its patch position in the same channels. Clips of 64 × 64 and
# 128 × 128 pixels, 8 × 8 patches, ``dim`` = 96:
import matplotlib.pyplot as plt
import torch
from positional_encodings.torch_encodings import PositionalEncoding3D
from torch import nn

import posenc

torch.manual_seed(0)
channels = 3
dim, patch, clip_frames = 96, 8, 8
embed = nn.Linear(patch * patch * channels, dim)
video_pe = posenc.VideoPositionalEncoding(dim, spatial=True).eval()


def patch_tokens(video):
    """(batch, frames, H, W, 3) pixels -> (batch, frames, H/patch, W/patch, dim) tokens."""
    b, t, h, w, c = video.shape
    patches = video.view(b, t, h // patch, patch, w // patch, patch, c).transpose(3, 4)
    return embed(patches.flatten(-3))


with torch.no_grad():
    for side in (64, 128):
        tokens = patch_tokens(torch.rand(1, clip_frames, side, side, channels))
        added = video_pe(tokens) - tokens
        grid = tokens.shape[2]
        expected = (posenc.sinusoidal_table(clip_frames, dim)[:, None, :]
                    + posenc.sinusoidal_2d(grid, grid, dim)[None, :, :])
        assert torch.allclose(added[0].flatten(1, 2), expected, atol=1e-5)
        print(f"{side} x {side} clip: tokens {tuple(tokens.shape)}, "
              "addition = frame row + patch row")

# %%
# Space-time encodings
# --------------------
# Adding a frame encoding and a patch encoding puts both in the same channels. The other common
# design gives each axis its own block of channels: :func:`posenc.sinusoidal_nd` with the shape
# ``(frames, height, width)`` fills a first block of :math:`2 \lceil d/6 \rceil` channels with the
# sinusoids of the frame index, the next block with those of the row, the last with those of the
# column. It is
# the layout of the ``positional-encodings`` package, whose ``PositionalEncoding3D`` gives the same
# numbers:
grid = 8
space_time = posenc.sinusoidal_nd((clip_frames, grid, grid), dim)
reference = PositionalEncoding3D(dim)(torch.zeros(1, clip_frames, grid, grid, dim))[0]
package_error = (space_time - reference).abs().max().item()
assert package_error < 2e-5
print(f"sinusoidal_nd {tuple(space_time.shape)} vs PositionalEncoding3D: "
      f"largest difference {package_error:.1e}")

# %%
# The similarity of one token to all the others shows what each design lets attention see. The
# reference token sits in frame 3 at patch (3, 3); each small map is one frame of the 8 × 8 patch
# grid. With the frame encoding alone, every token of a frame has the same encoding; adding the
# patch encoding makes tokens differ within the frame too; in the space-time blocks, the frame
# and the patch position are separate parts of the vector.
zeros_tokens = torch.zeros(1, clip_frames, grid, grid, dim)
with torch.no_grad():
    tables = {
        "frame": posenc.VideoPositionalEncoding(dim)(zeros_tokens)[0],
        "frame + patch": video_pe(zeros_tokens)[0],
        "space-time": space_time,
    }
ref_t, ref_h, ref_w = 3, 3, 3
ref_index = (ref_t * grid + ref_h) * grid + ref_w
similarity = {
    name: posenc.diagnostics.similarity_matrix(table.reshape(-1, dim))[ref_index].view_as(table[..., 0])
    for name, table in tables.items()
}
assert torch.allclose(similarity["frame"][ref_t], torch.ones(grid, grid, dtype=torch.float64))
for name, sim in similarity.items():
    print(f"{name:>13}: next patch, same frame {sim[ref_t, ref_h, ref_w + 1]:.3f}; "
          f"same patch, next frame {sim[ref_t + 1, ref_h, ref_w]:.3f}; "
          f"least similar token {sim.min():.3f}")

low = min(sim.min().item() for sim in similarity.values())
fig, axes = plt.subplots(len(similarity), clip_frames, figsize=(9, 3.9), sharex=True, sharey=True)
for row, (name, sim) in enumerate(similarity.items()):
    for t in range(clip_frames):
        im = axes[row, t].imshow(sim[t].numpy(), cmap="viridis", vmin=low, vmax=1, interpolation="nearest")
        axes[row, t].set_xticks([])
        axes[row, t].set_yticks([])
        if row == 0:
            axes[row, t].set_title(f"frame {t}", fontsize=9)
    axes[row, 0].set_ylabel(name, fontsize=9)
axes[0, ref_t].plot(ref_w, ref_h, marker="x", color="white")
fig.colorbar(im, ax=axes, shrink=0.8, label="cosine similarity")
fig.suptitle("Similarity to the token in frame 3, patch (3, 3), d = 96")
plt.show()

# %%
# The printed numbers compare the two kinds of neighbour: for each design, how similar the
# reference token is to the next patch of its frame and to the same patch one frame later. Which
# design suits a task is a question for training; the encodings only decide what the model can
# tell apart before it learns anything.
#
# What this shows
# ---------------
# * :class:`posenc.VideoPositionalEncoding` encodes the frame with a ``(frames, dim)`` table
#   broadcast over the frame, for any resolution, optionally adding the patch position;
#   :func:`posenc.sinusoidal_nd` gives the frame, row and column separate channel blocks and equals
#   ``positional-encodings``' ``PositionalEncoding3D``.
