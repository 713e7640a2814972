"""
Building the position tables: is precomputing them worth it?
============================================================

Before RoPE can rotate ``q`` and ``k``, its cos and sin tables must be built, and absolute
encodings need their sinusoidal table. This page times building these tables and sets them beside
the rotation that reads them, for a long batch and for one generated token, to test whether
precomputing them pays. How fast the rotation itself is, against a copy of ``q`` and ``k``, is on
:ref:`sphx_glr_auto_examples_03_implementations_plot_rope_performance.py`.
"""

# %%
# The rotation the tables feed
# ----------------------------
# A table is worth precomputing only if building it costs something beside the rotation that reads
# it. So posenc's rotation is timed first, as on the performance page, for one generation step and
# for a training-size batch.
import platform

import matplotlib.pyplot as plt
import torch

import posenc
from posenc.benchmark import median_seconds, time_rope

shape = (4, 16, 1024, 128)
shapes = [(1, 32, 1, 128), shape]
rows = []
for s in shapes:
    rounds = 40 if s[2] < 512 else 15
    rows += time_rope(s, torch.float32, rounds=rounds, compiled=False)
by_name = {r.implementation: r for r in rows if r.shape == shape}
print(f"{platform.machine()}, {torch.get_num_threads()} threads, PyTorch {torch.__version__}")

# %%
# Building the tables
# -------------------
# The other cost is computing the tables: the sinusoidal table that absolute encodings add to
# the input, and RoPE's cos and sin. They are built once per model, or once per call when the
# positions change (cached generation, per-sample positions). The
# :ref:`speed page <sphx_glr_auto_examples_03_implementations_plot_speed.py>` compares the Python
# loop, NumPy and PyTorch for the sinusoidal table in detail; here are the three at a few lengths
# (``head_dim = 128``), and beside them :func:`posenc.rope_cos_sin` for the same
# number of positions. Each is the median of several calls, one thread.
from functools import partial

lengths = [128, 512, 2048]
builders = {
    "Python loop": posenc.numpy.sinusoidal_table_loop,
    "NumPy": posenc.numpy.sinusoidal_table,
    "PyTorch": posenc.sinusoidal_table,
    "RoPE cos/sin (PyTorch)": posenc.rope_cos_sin,
}
threads = torch.get_num_threads()
torch.set_num_threads(1)
per_length = [median_seconds({name: partial(build, n, 128) for name, build in builders.items()}, rounds=7)
              for n in lengths]
torch.set_num_threads(threads)
table_ms = {name: [1e3 * times[name] for times in per_length] for name in builders}
columns = {"Python loop": "loop", "NumPy": "NumPy", "PyTorch": "PyTorch", "RoPE cos/sin (PyTorch)": "cos/sin"}
print("milliseconds per table")
print(f"{'length':>7}" + "".join(f"{label:>11}" for label in columns.values()))
for i, n in enumerate(lengths):
    print(f"{n:>7}" + "".join(f"{table_ms[name][i]:>11.3f}" for name in builders))

# %%
fig, ax = plt.subplots(figsize=(7, 4.2))
for (name, values), marker in zip(table_ms.items(), "osD^"):
    ax.loglog(lengths, values, marker=marker, label=name)
ax.set_xlabel("positions (rows of the table), head_dim = 128")
ax.set_ylabel("time to build (ms)")
ax.set_title("Building the tables, one thread")
ax.legend(fontsize=8)
plt.show()

# %%
# Is precomputing the table worth it? One of the seed articles lists precomputing the table in
# ``__init__`` as a key optimisation of its PyTorch module. For cos/sin of 1024 positions, the
# comparison that matters is with the rotation that reads them:
build = median_seconds({
    "long": lambda: posenc.rope_cos_sin(shape[2], shape[3]),
    "one": lambda: posenc.rope_cos_sin(torch.tensor([5000]), shape[3]),
}, rounds=40)
cos_sin_ms, one_cos_sin_ms = 1e3 * build["long"], 1e3 * build["one"]
rotate_ms = by_name["posenc"].ms
print(f"cos/sin for {shape[2]} positions:  {cos_sin_ms:8.3f} ms")
print(f"rotating q and k of {shape}: {rotate_ms:8.3f} ms")
print(f"building / rotating:             {cos_sin_ms / rotate_ms:8.1%}")
decode = {r.implementation: r for r in rows if r.shape == shapes[0]}
print(f"one generation step, q and k of {shapes[0]}:")
print(f"  cos/sin for its one position: {one_cos_sin_ms:8.3f} ms")
print(f"  rotating q and k:             {decode['posenc'].ms:8.3f} ms")

long_share, step_share = cos_sin_ms / rotate_ms, one_cos_sin_ms / decode["posenc"].ms

# %%
# The two ratios answer the question. A model builds the table once per forward pass and rotates
# in every layer, so for a long batch precomputing saves at most the first ratio of one layer's
# rotation per pass. During generation the rotation is tiny, and the second
# ratio shows how much of a step the table costs; that is where a cache (what
# :class:`posenc.RotaryEmbedding` keeps) pays. The claim's verdict below follows from these two
# ratios by the rule written beside it.

# %%
# What this shows
# ---------------
# * Whether building the tables is worth caching depends on how long the rotation it feeds is:
#   the two ratios printed in the last section compare them for a long batch and for one
#   generated token.

# %%
# Claims tested here
# ------------------
claims = [
    {
        "claim": "Precomputing the position table once (in __init__) is a key optimisation of the module.",
        "source": "seed article",
        "measured": f"cos/sin for {shape[2]} positions: {cos_sin_ms:.2f} ms = "
        f"{cos_sin_ms / rotate_ms:.1%} of one rotation of q, k {shape}; for one generated token "
        f"{one_cos_sin_ms:.3f} ms vs {decode['posenc'].ms:.3f} ms rotating",
        # Rule: precomputing is worth it where building costs more than a quarter of the rotation it
        # feeds: "holds" if so for a long batch, "holds with conditions" if only for one token.
        "verdict": "holds" if long_share > 0.25 else "holds with conditions" if step_share > 0.25 else "does not hold",
    },
]
