"""
M-RoPE: three positions per token
=================================

Qwen2-VL, Qwen2.5-VL and Qwen3-VL give every token three positions, (time, height, width): multimodal
RoPE, or M-RoPE. This page builds the positions of a realistic prompt, shows how the two released
layouts share the rotary frequencies between the axes, and measures, with attention scores, what two
implementation mistakes reported in inference engines change.
"""

# %%
# Positions of a prompt with an image and a video
# -----------------------------------------------
# A chat prompt: 20 tokens of text, one image, 12 tokens of text, a short video, 8 tokens of text.
# The vision encoder cuts the image into 28 x 40 patches and merges 2 x 2 of them into one token
# (``spatial_merge_size=2`` in the released models): the language model sees 14 x 20 tokens. The
# video has 4 frames (after the encoder's merge of frame pairs) of 16 x 16 patches, 8 x 8 tokens
# each. :func:`posenc.mrope_position_ids` takes the type of each token (0 text, 1 image, 2 video)
# and the patch grids, like ``get_rope_index`` of Qwen2-VL and Qwen2.5-VL in transformers 5.24;
# frames are one position apart, as in Qwen2-VL (Qwen2.5-VL spaces them by the seconds between
# frames).
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import posenc

MERGE, DIM = 2, 128
image_grid, video_grid = torch.tensor([[1, 28, 40]]), torch.tensor([[4, 16, 16]])
SPANS = [("text", 0, 20), ("image", 1, 14 * 20), ("text", 0, 12), ("video", 2, 4 * 8 * 8), ("text", 0, 8)]
types = torch.cat([torch.full((n,), kind) for _, kind, n in SPANS])[None]  # (1, seq)
span = torch.cat([torch.full((n,), i) for i, (_, _, n) in enumerate(SPANS)])  # span of each token
starts = np.cumsum([0] + [n for *_, n in SPANS])
position_ids, deltas = posenc.mrope_position_ids(types, image_grid, video_grid, spatial_merge_size=MERGE)
pos, seq = position_ids[:, 0], types.shape[1]  # (3, seq)
print(f"{seq} tokens; span, tokens, then (first, last) position on the time, height and width axes")
for i, (name, _, n) in enumerate(SPANS):
    axes = [(int(pos[a, span == i].min()), int(pos[a, span == i].max())) for a in range(3)]
    print(f"  {name:>5} {n:>4} tokens  t {axes[0]}  h {axes[1]}  w {axes[2]}")
print("triplets (t, h, w) around the image:")
for index in [18, 19, 20, 21, 39, 40, starts[2] - 1, starts[2], starts[2] + 1]:
    print(f"  token {index:>3} ({SPANS[int(span[index])][0]:>5}): {tuple(pos[:, index].tolist())}")

# %%
# Text counts up on all three axes at once. The image starts at the position :math:`s` the next text
# token would have had: all its tokens have time :math:`s` and count their row and column from
# :math:`s`. The largest position it uses is therefore :math:`s + \max(h, w) - 1`, and the text
# after it resumes at :math:`s + \max(h, w)` (transformers 5.24: ``current_pos += max(grid_thw[1],
# grid_thw[2]) // spatial_merge_size``): a picture takes as many positions as its longer side, not
# as many as its tokens.
s, h, w = int(starts[1]), 28 // MERGE, 40 // MERGE
assert int(pos[0, starts[2]]) == s + max(h, w) == int(pos[:, span == 1].max()) + 1
assert int(pos[0, starts[4]]) == int(pos[:, span == 3].max()) + 1  # the same after the video
fig, ax = plt.subplots(figsize=(9, 3.8))
for a, (name, style) in enumerate([("time", "-"), ("height", "--"), ("width", ":")]):
    ax.plot(np.arange(seq), pos[a].numpy(), style, linewidth=1.2, label=name)
for i, (name, _, _) in enumerate(SPANS):
    if name != "text":
        ax.axvspan(starts[i] - 0.5, starts[i + 1] - 0.5, color="0.9", zorder=0)
        ax.text((starts[i] + starts[i + 1]) / 2, float(pos.max()), name, ha="center", va="top")
ax.set_xlabel("token index in the prompt")
ax.set_ylabel("position")
ax.set_title("M-RoPE positions of a prompt: text, image (14 x 20), text, video (4 x 8 x 8), text")
ax.legend(loc="upper left")
plt.show()

# %%
# Decoding continues after the largest position
# ---------------------------------------------
# The prompt uses far fewer positions than it has tokens. A decoder that continues by the cache
# length would put the first generated token far beyond the prompt's positions, so the prompt's
# ``delta`` = largest position + 1 - number of tokens (negative with pictures) is kept
# (transformers 5.24 stores it as ``rope_deltas``) and the token generated after ``cache_length``
# cached tokens gets ``cache_length + delta`` on all three axes.
next_position = seq + int(deltas[0, 0])  # cache_length = seq after the prompt
print(f"delta {int(deltas[0, 0])}: first generated token at {next_position} on every axis; largest prompt "
      f"position {int(pos.max())}; the cache length alone would give {seq}")
assert int(deltas[0, 0]) < 0 and next_position == int(pos.max()) + 1 == int(pos[0, -1]) + 1

# %%
# "Largest position + 1" equals "last token's position + 1" here, but not always. A video whose
# frames outnumber its rows and columns (here 32 frames of 8 x 8 tokens, one position apart) has
# time positions beyond :math:`s + \max(h, w)`; in transformers 5.24 the text after it still
# resumes at :math:`s + \max(h, w)`, below the video's last frames, while ``delta`` still follows the
# largest position, so decoding jumps. (The code that added Qwen2.5-VL, transformers PR #35569,
# described the text after a video as starting at the largest vision position + 1.)
long_types = torch.tensor([[0] * 5 + [2] * (32 * 8 * 8) + [0] * 3])
long_pos, long_delta = posenc.mrope_position_ids(long_types, None, torch.tensor([[32, 16, 16]]),
                                                 spatial_merge_size=MERGE)
last_frame, after = int(long_pos[0, 0, -4]), long_pos[0, 0, -3:].tolist()
long_next = long_types.shape[1] + int(long_delta[0, 0])
print(f"long video: last frame at time {last_frame}, text after it at {after}, next token at {long_next}")
assert after[0] < last_frame and long_next > after[-1] + 1

# %%
# For text alone, M-RoPE is RoPE
# ------------------------------
# When the three positions of a token are equal, every frequency turns by the same position, whichever
# axis it belongs to: the tables are exactly those of ordinary RoPE, for both layouts below.
plain = posenc.rope_cos_sin(torch.arange(64), DIM, base=1e6, dtype=torch.float64)
tables = [posenc.mrope_cos_sin(torch.arange(64).expand(3, 1, 64), DIM, sections, base=1e6,
                               interleaved=interleaved, dtype=torch.float64)
          for sections, interleaved in (([16, 24, 24], False), ([24, 20, 20], True))]
same_as_rope = all(torch.equal(t[0], r) for table in tables for t, r in zip(table, plain))
print(f"text-only M-RoPE tables bit-identical to rope_cos_sin, both layouts: {same_as_rope}")
assert same_as_rope

# %%
# Blocked and interleaved sections
# --------------------------------
# RoPE has ``DIM / 2 = 64`` frequencies :math:`\theta_k = \mathrm{base}^{-2k/128}`, from fast to slow.
# Qwen2-VL and Qwen2.5-VL give time, height and width contiguous blocks of 16, 24 and 24 of them;
# Qwen3-VL interleaves them (t, h, w, t, h, w, ...; ``mrope_section`` [24, 20, 20]) so that every
# axis gets fast and slow ones. The bases are the default ``rope_theta`` of transformers 5.24's
# ``Qwen2VLTextConfig`` and ``Qwen3VLTextConfig``. The last column is the largest angle by which an
# axis's frequencies separate the two ends of this image along that axis (the first and last column,
# or row): rotating a channel pair by :math:`\delta` changes its share of :math:`q\cdot k` by at most
# :math:`\delta\,|q_{pair}|\,|k_{pair}|`.
MODELS = {"Qwen2-VL": dict(sections=[16, 24, 24], base=1e6, interleaved=False),
          "Qwen3-VL": dict(sections=[24, 20, 20], base=5e5, interleaved=True)}
AXES, SPREAD = ("time", "height", "width"), {"time": 0, "height": h - 1, "width": w - 1}
assignment, across = {}, {}
print(f"{'':>9}{'axis':>7}{'freqs':>6}{'shortest':>11}{'longest':>12}  angle across the image (rad)")
for model, cfg in MODELS.items():
    axis_of = posenc.mrope_axes(DIM, cfg["sections"], interleaved=cfg["interleaved"])
    theta, _ = posenc.rope_inv_freq(DIM, base=cfg["base"], dtype=torch.float64)  # (DIM // 2,)
    assignment[model] = (axis_of, 2 * math.pi / theta)
    for a, name in enumerate(AXES):
        mine = theta[axis_of == a]
        across[model, name] = SPREAD[name] * float(mine.max())
        print(f"{model:>9}{name:>7}{len(mine):>6}{2 * math.pi / float(mine.max()):>11.3g}"
              f"{2 * math.pi / float(mine.min()):>12.3g}  {across[model, name]:.2g}")
assert across["Qwen2-VL", "width"] < 0.01 and across["Qwen3-VL", "width"] > 1
assert assignment["Qwen3-VL"][0][-4:].tolist() == [0] * 4  # time keeps the 4 slowest
wavelengths = [assignment["Qwen3-VL"][1][assignment["Qwen3-VL"][0] == a] for a in range(3)]
assert all(float(wl.min()) < 20 and float(wl.max()) > 1e5 for wl in wavelengths)  # the whole range
fig, ax = plt.subplots(figsize=(9, 3.4))
for row, (model, (axis_of, wavelength)) in enumerate(assignment.items()):
    for a, name in enumerate(AXES):
        chosen = (axis_of == a).numpy()
        ax.scatter(wavelength.numpy()[chosen], np.full(chosen.sum(), row + 0.25 * (a - 1)), s=14,
                   color=f"C{a}", label=name if row == 0 else None)
ax.set_xscale("log")
ax.set_yticks([0, 1], ["Qwen2-VL\nblocked, base 1e6", "Qwen3-VL\ninterleaved, base 5e5"])
ax.set_xlabel("wavelength of the frequency (positions per turn, 2 pi / theta_k)")
ax.set_title("Which axis turns each of the 64 rotary frequencies")
ax.legend(loc="lower right", ncol=3)
plt.show()

# %%
# With blocks, time gets only the fastest frequencies and width only the slowest: across a whole
# picture, the width positions of Qwen2-VL turn the scores by less than a hundredth of a radian, so
# left and right can only be told apart coarsely. Interleaving gives every axis frequencies from the
# whole range (time keeps the 4 slowest).
#
# Two mistakes, measured on attention scores
# ------------------------------------------
# Random queries and keys (4 heads, ``head_dim`` 128, float64; no model needed) for the prompt
# above, scored :math:`q_i\cdot k_j/\sqrt{128}` over causal pairs after the correct M-RoPE, then:
#
# * **1-D positions**: an engine gives every token one position, ``0 ... seq - 1`` on all axes
#   (plain RoPE); ollama PR #13306 (ollama/ollama) describes this for Qwen3-VL images;
# * **sections mixed up**: a Qwen3-VL model run with blocked sections; alibaba/MNN PR #4133 proposes
#   a fix and notes that the old code behaved the same on text but looped endlessly on images.
#   (Qwen2-VL's [16, 24, 24] cannot be interleaved: :func:`posenc.mrope_axes` raises.)
#
# Both models get the positions above (Qwen3-VL's own ``get_rope_index`` in transformers 5.24 would
# give each video frame its own grid, the frames separated by time-stamp text).
try:
    posenc.mrope_axes(DIM, [16, 24, 24], interleaved=True)
except ValueError as error:
    print(f"[16, 24, 24] interleaved: ValueError: {str(error)[:70]}...")
else:
    raise AssertionError("[16, 24, 24] interleaved was accepted")
generator = torch.Generator().manual_seed(0)
q, k = torch.randn(2, 4, seq, DIM, generator=generator, dtype=torch.float64)


def scores(positions, sections, base, interleaved):
    cos, sin = posenc.mrope_cos_sin(positions, DIM, sections, base=base, interleaved=interleaved,
                                    dtype=torch.float64)
    return posenc.apply_rope(q, cos, sin) @ posenc.apply_rope(k, cos, sin).transpose(-1, -2) / math.sqrt(DIM)


flat = torch.arange(seq).expand(3, 1, seq)
correct = {model: scores(position_ids, **cfg) for model, cfg in MODELS.items()}
CASES = {"Qwen2-VL, 1-D positions": ("Qwen2-VL", scores(flat, **MODELS["Qwen2-VL"])),
         "Qwen3-VL, 1-D positions": ("Qwen3-VL", scores(flat, **MODELS["Qwen3-VL"])),
         "Qwen3-VL, blocked sections": ("Qwen3-VL", scores(position_ids, **{**MODELS["Qwen3-VL"],
                                                                              "interleaved": False}))}
text, causal = types[0] == 0, torch.ones(seq, seq, dtype=torch.bool).tril()
same = span[:, None] == span[None, :]
PAIRS = {"text-text, same span": causal & text[:, None] & text[None, :] & same,
         "text-text, across pictures": causal & text[:, None] & text[None, :] & ~same,
         "text-vision": causal & (text[:, None] ^ text[None, :]),
         "vision, same picture": causal & ~text[:, None] & ~text[None, :] & same,
         "vision, image-video": causal & ~text[:, None] & ~text[None, :] & ~same}
change, largest, moved = {}, {}, {}
for case, (model, broken) in CASES.items():
    delta = (broken - correct[model]).abs()
    for pair, mask in PAIRS.items():
        change[case, pair] = float(delta[:, mask].mean() / correct[model][:, mask].abs().mean())
        largest[case, pair] = float(delta[:, mask].max())
    top = [sc.masked_fill(~causal, -math.inf).argmax(-1) for sc in (broken, correct[model])]
    for who, rows in (("text", text), ("vision", ~text)):
        moved[case, who] = float((top[0] != top[1])[:, rows].double().mean())
print("mean |score change| / mean |score| over causal pairs (4 heads)")
print(f"{'':>27}" + "".join(f"{case:>28}" for case in CASES))
for pair in PAIRS:
    print(f"{pair:>27}" + "".join(f"{change[case, pair]:>28.2e}" for case in CASES))
for who in ("text", "vision"):
    print(f"{who + ' queries, new top key':>27}" + "".join(f"{moved[c, who]:>28.0%}" for c in CASES))

# %%
# Text inside one span is untouched by 1-D positions: the first span keeps its positions and the later
# ones are shifted by a constant, which RoPE does not see (float64 rounding only). Text reading text
# across a picture changes, because a picture occupies a different number of positions in the two
# schemes, and so does every score involving a picture. Mixed-up sections leave every text-text score
# bit-identical (equal triplets turn every frequency alike) and change the rest.
assert all(change[c, "text-text, same span"] < 1e-9 for c in CASES if "1-D" in c)
assert all(largest["Qwen3-VL, blocked sections", p] == 0 for p in PAIRS if p.startswith("text-text"))
assert all(change[c, p] > 1e-3 for c in CASES for p in PAIRS if not p.startswith("text-text"))
assert all(change[c, "text-text, across pictures"] > 1e-3 for c in CASES if "1-D" in c)
fig, ax = plt.subplots(figsize=(9, 3.8))
x, FLOOR = np.arange(len(PAIRS)), 1e-18  # an exact 0 is drawn at the floor
for i, case in enumerate(CASES):
    ax.bar(x + (i - 1) * 0.27, [max(change[case, p], FLOOR) for p in PAIRS], 0.27, label=case)
ax.set_yscale("log")
ax.set_xticks(x, [p.replace(", ", "\n") for p in PAIRS], fontsize=8)
ax.set_xlabel("query-key pair")
ax.set_ylabel("mean |score change| / mean |score|\n(an exact 0 drawn at 1e-18)")
ax.set_title("How much two M-RoPE mistakes change attention scores (random q, k, float64)")
fig.legend(loc="outside lower center", ncol=3, fontsize=8)
plt.show()

# %%
# What this shows
# ---------------
# * M-RoPE gives text equal (t, h, w) triplets, where it is exactly RoPE; a picture's tokens share a
#   time and count rows and columns, and the picture takes as many positions as its longer side. The
#   ``delta`` carried into decoding makes the first generated token follow the largest prompt position.
# * Blocked sections give width only the slowest frequencies: across an image they barely turn.
#   Qwen3-VL's interleaving gives each axis the whole range.
# * An engine that gives every token 1-D positions keeps the scores inside each text span, but
#   changes text across pictures and everything touching a picture. Mixed-up sections are invisible
#   on text and change the scores that involve a picture, so text-only tests cannot catch them.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
flat_change = {p: change["Qwen2-VL, 1-D positions", p] for p in PAIRS}
within, across_pictures = flat_change["text-text, same span"], flat_change["text-text, across pictures"]
outside = min(v for p, v in flat_change.items() if not p.startswith("text-text"))
mixed_vision = min(change["Qwen3-VL, blocked sections", p] for p in PAIRS if not p.startswith("text-text"))
mixed_text = max(largest["Qwen3-VL, blocked sections", p] for p in PAIRS if p.startswith("text-text"))
claims = [
    {
        "claim": "For text, M-RoPE reduces to ordinary 1-D RoPE.",
        "source": "Qwen2-VL (Wang et al., 2024)",
        "measured": "text-only cos/sin tables of blocked [16, 24, 24] and interleaved [24, 20, 20] M-RoPE vs "
        f"rope_cos_sin (head_dim 128, float64): bit-identical = {same_as_rope}",
        # rule: "holds" if bit-identical for both layouts, otherwise "does not hold"
        "verdict": "holds" if same_as_rope else "does not hold",
    },
    {
        "claim": "Giving every token a 1-D position only changes attention that involves image tokens.",
        "source": "common assumption",
        "measured": "Qwen2-VL, random q/k, mean |score change| / mean |score|: text-text in one span "
        f"{within:.0e}, text-text across a picture {across_pictures:.2f}, pairs with a picture at least "
        f"{outside:.2f}",
        # rule: "holds" if every text-text change is < 1e-9; "holds with conditions" if only those
        # within one text span are; otherwise "does not hold"
        "verdict": "holds" if max(within, across_pictures) < 1e-9
        else "holds with conditions" if within < 1e-9 else "does not hold",
    },
    {
        "claim": "Running an interleaved M-RoPE model with blocked sections changes nothing on text, "
        "only where images take part.",
        "source": "alibaba/MNN PR #4133",
        "measured": f"Qwen3-VL sections run blocked: largest text-text score change {mixed_text:.0e}, "
        f"picture pairs mean relative change at least {mixed_vision:.2f}",
        # rule: "holds" if text-text scores are bit-identical and picture pairs change by > 1e-3
        "verdict": "holds" if mixed_text == 0 and mixed_vision > 1e-3 else "does not hold",
    },
]
