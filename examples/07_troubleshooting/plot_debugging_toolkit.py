"""
The debugging toolkit: posenc.diagnostics
=========================================

When a model misbehaves and the positional encoding is a suspect, one of the seed articles
advises: visualise the encoding matrix, look for anomalous values, compare the similarity of
positions, and test extreme cases such as very long sequences. We run that advice, and the
checks of :mod:`posenc.diagnostics`, on a correct table and on four broken ones, and count which
bug each tool shows. The page ends with a short list of what to run first.
"""

# %%
# What you see
# ------------
# * Training is slower or worse than expected, long inputs fail, or a converted model is worse
#   than the original, and nothing raises an error.
# * The encoding is a table of numbers between -1 and 1 that looks plausible when printed.
#
# Reproduce it
# ------------
# Five tables of 100 000 positions (the seed's "extreme case"), width 64 unless stated:
#
# * **correct**: :func:`posenc.sinusoidal_table`, the paper's interleaved layout, in float32;
# * **2*i slip**: the seed article's double loop, whose ``2 * i`` doubles an exponent that is
#   already doubled (the loop page,
#   :ref:`sphx_glr_auto_examples_03_implementations_plot_loops_to_module.py`, explains it): the
#   table of base :math:`10000^2`;
# * **float16 positions**: the positions created in float16 before the angles are computed, as
#   ``torch.arange(n, dtype=x.dtype)`` does for a half-precision input;
# * **bfloat16, d = 4**: the correct formula, stored in bfloat16 at width 4;
# * **concat layout**: all sines, then all cosines, used where the interleaved layout is expected
#   (a checkpoint from another codebase).
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.nn import functional as F

import posenc
from posenc import diagnostics

LENGTH, d = 100_000, 64


def seed_loop(seq_len, d_model):
    """The double loop of the seed article (section 3.1), as printed."""
    pe = np.zeros((seq_len, d_model))
    for pos in range(seq_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = np.sin(pos / (10000 ** (2 * i / d_model)))
            pe[pos, i + 1] = np.cos(pos / (10000 ** (2 * i / d_model)))
    return pe


slip_loop = torch.from_numpy(seed_loop(256, d))
assert torch.allclose(slip_loop, posenc.sinusoidal_table(256, d, base=10000.0**2, dtype=torch.float64))
half_positions = torch.arange(LENGTH).to(torch.float16)
angles = half_positions.float()[:, None] * posenc.sinusoidal_frequencies(d).float()
tables = {
    "correct": posenc.sinusoidal_table(LENGTH, d),
    "2*i slip": posenc.sinusoidal_table(LENGTH, d, base=10000.0**2),
    "float16 positions": torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1),  # interleaved
    "bfloat16, d = 4": posenc.sinusoidal_table(LENGTH, 4, dtype=torch.bfloat16),
    "concat layout": posenc.sinusoidal_table(LENGTH, d, style="concat"),
}
references = {name: posenc.sinusoidal_table(LENGTH, table.shape[1], dtype=torch.float64)
              for name, table in tables.items()}  # what each table should have been
for name, table in tables.items():
    print(f"{name:>17}: shape {tuple(table.shape)}, {table.dtype}")

# %%
# Visualise the table and the similarity of positions
# ----------------------------------------------------
# The seed's similarity code, ``F.cosine_similarity(pe.unsqueeze(1), pe.unsqueeze(0), dim=-1)``,
# computes what :func:`posenc.diagnostics.similarity_matrix` computes (in float64, and without
# the ``(L, L, d)`` intermediate tensor):
window = tables["correct"][:256]
seed_similarity = F.cosine_similarity(window.unsqueeze(1), window.unsqueeze(0), dim=-1)
similarity = diagnostics.similarity_matrix(window)
print(f"largest difference: {(seed_similarity.double() - similarity).abs().max().item():.1e}")
assert torch.allclose(seed_similarity.double(), similarity, atol=1e-5)

# %%
# A picture of 100 000 rows shows nothing, so each table is drawn over 256 consecutive positions:
# the first ones, except for the float16 table, shown near 65 504, the largest float16, where its
# positions are 32 apart and then overflow. Top: the table; bottom: its cosine similarity matrix.
starts = {name: 0 for name in tables}
starts["float16 positions"] = 65_536 - 192
fig, axes = plt.subplots(2, len(tables), figsize=(11, 5.2))
for column, (name, table) in enumerate(tables.items()):
    rows = table[starts[name]: starts[name] + 256].float()
    extent = (-0.5, rows.shape[1] - 0.5, starts[name] + 255.5, starts[name] - 0.5)
    picture = axes[0, column].imshow(rows.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto",
                                     interpolation="nearest", extent=extent)
    axes[0, column].set_title(name, fontsize=10)
    axes[0, column].set_xlabel("column")
    sim = axes[1, column].imshow(diagnostics.similarity_matrix(rows).numpy(), cmap="viridis", vmin=-1, vmax=1,
                                 interpolation="nearest", extent=(extent[3], extent[2], extent[2], extent[3]))
    axes[1, column].set_xlabel("position")
axes[0, 0].set_ylabel("position")
axes[1, 0].set_ylabel("position")
fig.colorbar(picture, ax=axes[0], label="value", shrink=0.9)
fig.colorbar(sim, ax=axes[1], label="cosine similarity", shrink=0.9)
fig.suptitle("Five tables and their similarity matrices")
plt.show()

# %%
# In the 2*i slip the columns slow down twice as fast from left to right, so most of them are
# nearly constant over 256 positions, and its rows are more alike: a brighter similarity matrix.
# The float16 table repeats each row in blocks (positions spaced 32 apart there) and then turns
# blank: NaN, which the colour maps leave empty. The concat layout is a different picture of the
# table, but its similarity matrix is the correct one: cosine similarity does not depend on the
# order of the columns. The bfloat16 table looks right in both pictures.
#
# Why: what each check measures
# -----------------------------
# :func:`posenc.diagnostics.check_table` reports NaN, infinities, the value range and rows that
# repeat an earlier row exactly, on the whole table:
reports = {name: diagnostics.check_table(table) for name, table in tables.items()}
for name, report in reports.items():
    print(f"--- {name}")
    print(report)

# %%
# The bfloat16 table's duplicates are far apart, which is why no window shows them.
# :func:`posenc.diagnostics.collisions` predicts them from the length, width and dtype alone, and
# names the first pair:
predicted = diagnostics.collisions(LENGTH, 4, torch.bfloat16)
print(predicted)
first, second = (int(p) for p in predicted.pairs[0])
bf16 = tables["bfloat16, d = 4"]
assert torch.equal(bf16[first], bf16[second]) and predicted.count == reports["bfloat16, d = 4"].duplicate_rows
print(f"rows {first} and {second}: {bf16[first].tolist()} and {bf16[second].tolist()}")
print(f"at width 64: {diagnostics.collisions(LENGTH, 64, torch.bfloat16)}")

# %%
# Two checks test the structure the formula promises. The interleaved table moves by a fixed
# rotation: :math:`PE_{p+k} = PE_p\,M(k)`, with :math:`M(k)` from
# :func:`posenc.diagnostics.relative_rotation` (the relative-rotation page,
# :doc:`/properties/relative_rotation`, derives it). And the
# mean dot product of rows :math:`k` apart, :func:`posenc.diagnostics.dot_product_by_offset`,
# should be :math:`\sum_i \cos(k\,\omega_i)`, whatever the positions. Each is measured as its
# largest error over the whole table, against a tolerance of :math:`d` roundings of the table's
# dtype (its machine epsilon times the width); NaN counts as a failure.


def rotation_error(table, k=1):
    m = diagnostics.relative_rotation(k, table.shape[1], dtype=torch.float64)
    x = table.double()
    return (x[:-k] @ m - x[k:]).abs().max().item()


def dot_product_error(table):
    offsets = torch.arange(table.shape[0], dtype=torch.float64)
    expected = torch.cos(offsets[:, None] * posenc.sinusoidal_frequencies(table.shape[1])).sum(1)
    return (diagnostics.dot_product_by_offset(table) - expected).abs().max().item()


def failed(error, table):
    return not error <= table.shape[1] * torch.finfo(table.dtype).eps  # NaN fails too


structure = {}
for name, table in tables.items():
    structure[name] = (rotation_error(table), dot_product_error(table))
    print(f"{name:>17}: rotation error {structure[name][0]:.2g}, dot-product error {structure[name][1]:.2g}")

# %%
# The dot products by offset of three tables: the concat layout's curve lies on the correct one,
# since a dot product, like a cosine similarity, does not see the order of the columns.
fig, ax = plt.subplots(figsize=(7, 3.8))
for name, style in (("correct", {"linewidth": 4, "alpha": 0.4}), ("2*i slip", {}),
                    ("concat layout", {"linestyle": "--"})):
    ax.plot(diagnostics.dot_product_by_offset(tables[name])[:256].numpy(), label=name, **style)
ax.set_xlabel("offset $k$")
ax.set_ylabel("mean $PE_p \\cdot PE_{p+k}$")
ax.set_title("Dot product by offset, d = 64")
ax.legend()
plt.show()

# %%
# :func:`posenc.diagnostics.min_pairwise_distance` finds the two closest rows, a block at a
# time; its time grows with the square of the length, so it runs here on the first 4096
# positions of the finite tables. Zero means two positions share an encoding.
for name in ("correct", "2*i slip", "float16 positions", "concat layout"):
    closest = diagnostics.min_pairwise_distance(tables[name][:4096])
    print(f"{name:>17}: closest rows {closest.i} and {closest.j}, distance {closest.distance:.3g}")

# %%
# Extreme lengths
# ---------------
# The seed's similarity code builds an ``(L, L, d)`` tensor before reducing it (in torch 2.13); the
# similarity matrix alone is ``(L, L)``. At 100 000 positions, where two of the bugs above appear,
# neither fits in memory, while the other checks of this page grow linearly with the length (the
# time of :func:`~posenc.diagnostics.min_pairwise_distance` grows with its square):
for length in (256, 4096, LENGTH):
    seed_bytes, matrix_bytes = length * length * d * 4, length * length * 8
    print(f"L = {length:>6}: seed's intermediate tensor {seed_bytes / 2**30:10.3f} GiB, "
          f"similarity matrix {matrix_bytes / 2**30:8.3f} GiB, table {length * d * 4 / 2**30:.4f} GiB")

# %%
# Which tool shows which bug? "Visible" means that the picture differs from the correct one by
# more than one colour step of a 256-colour map over :math:`[-1, 1]`, or has empty (NaN) cells,
# over the window drawn above.


def visible(shown, expected):
    difference = (shown.double() - expected).abs()
    return bool(difference.isnan().any() or difference.max() > 2 / 256)


detected = {}
for name, table in tables.items():
    if name == "correct":
        continue
    rows = slice(starts[name], starts[name] + 256)
    shown, expected = table[rows], references[name][rows]
    detected[name] = {
        "table picture": visible(shown, expected),
        "similarity picture": visible(diagnostics.similarity_matrix(shown),
                                      diagnostics.similarity_matrix(expected)),
        "check_table": not reports[name].ok,
        "rotation check": failed(structure[name][0], table),
        "dot products": failed(structure[name][1], table),
    }
tools = list(detected["2*i slip"])
print(f"{'':>17}  " + "  ".join(f"{tool:>18}" for tool in tools))
for name, found in detected.items():
    print(f"{name:>17}  " + "  ".join(f"{'yes' if found[tool] else 'no':>18}" for tool in tools))

# %%
# The fix: what to run first
# --------------------------
# #. :func:`posenc.diagnostics.check_table` on the table the model actually uses: its dtype, its
#    device, the longest length you will run. It finds NaN, infinities and identical rows.
# #. Compare with a reference, ``torch.allclose(pe, posenc.sinusoidal_table(L, d, style=...))``,
#    in the layout your model expects. This alone catches a wrong exponent or a wrong layout.
#    Without a reference, the rotation check :math:`PE_{p+k} = PE_p\,M(k)` does it.
# #. Before choosing a storage dtype or a small width, :func:`posenc.diagnostics.collisions`
#    says whether positions will share an encoding.
# #. Then draw the table and :func:`posenc.diagnostics.similarity_matrix` of a window, to see
#    what the numbers mean; a picture is a good explanation and a weak test.
#
# The correct table passes all of them:
assert reports["correct"].ok
assert not any(failed(error, tables["correct"]) for error in structure["correct"])
assert torch.allclose(tables["correct"].double(), references["correct"], atol=2**-24)
print("correct table: check_table OK, rotation and dot-product checks pass, equal to the reference")

# %%
# Check
# -----
# The table of detections above, as assertions: each bug is caught by at least one check, and
# the pictures miss exactly the ones this page says they miss.
for name, found in detected.items():
    assert found["check_table"] or found["rotation check"] or found["dot products"], name
assert not detected["bfloat16, d = 4"]["table picture"]
assert not detected["bfloat16, d = 4"]["similarity picture"]
assert detected["concat layout"]["table picture"] and not detected["concat layout"]["similarity picture"]
assert detected["2*i slip"]["table picture"] and detected["2*i slip"]["similarity picture"]
assert detected["float16 positions"]["table picture"] and reports["float16 positions"].has_nan
assert not detected["concat layout"]["dot products"] and detected["concat layout"]["rotation check"]
print("all checks passed")

# %%
# What this shows
# ---------------
# * The pictures the seed recommends show a wrong exponent and a half-precision overflow, and
#   the table's picture shows a wrong column layout if you know what the correct one looks like.
#   The similarity matrix and the dot products cannot show a layout error, and no picture shows
#   identical rows far apart in a low-precision table.
# * :func:`~posenc.diagnostics.check_table`, a comparison with a reference (or the rotation
#   check) and :func:`~posenc.diagnostics.collisions` catch all four, and they scale to 100 000
#   positions, where a similarity matrix does not fit in memory.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
seen = [name for name, found in detected.items() if found["table picture"] or found["similarity picture"]]
missed = [name for name in detected if name not in seen]
claims = [
    {
        "claim": "Visualising the table and its similarity matrix reveals encoding bugs.",
        "source": "seed article",
        "measured": f"visible: {', '.join(seen)}; not visible: {', '.join(missed)}; similarity matrix "
        f"blind to: {', '.join(n for n, f in detected.items() if not f['similarity picture'])}",
        "verdict": "holds with conditions",
    },
]
