"""
What a PyTorch module adds to a sinusoidal table
================================================

In a model the sinusoidal table lives in a module, :class:`posenc.SinusoidalPositionalEncoding`,
which keeps it in a buffer, adds it to the token embeddings and applies dropout. This page tests
what the module adds: a table that is not trained, is saved and loaded and moves with the model;
dropout in training and evaluation mode; offsets for step-by-step decoding. The table itself, and
the slip its double loop is usually written with, are on
:ref:`sphx_glr_auto_examples_03_implementations_plot_loops_to_module.py`.
"""

# %%
# The PyTorch module
# ------------------
# In a model, the table is computed once, when the module is built, and added to the token
# embeddings in ``forward``. :class:`posenc.SinusoidalPositionalEncoding` is that module: it
# keeps the table in a buffer registered with ``register_buffer("pe", ...)``, adds rows
# ``offset … offset + seq - 1`` to its input and applies dropout. The seed article credits the
# buffer with three things: the table is not a trainable parameter, it is saved and loaded with
# the model, and it follows the model to its device. We check each on a small model, a token
# embedding followed by the positional encoding:
import copy
import io

import matplotlib.pyplot as plt
import torch
from torch import nn

import posenc

torch.manual_seed(0)
dim, vocab, p_drop = 16, 100, 0.1
model = nn.Sequential(nn.Embedding(vocab, dim), posenc.SinusoidalPositionalEncoding(dim, max_len=64,
                                                                                     dropout=p_drop))
position = model[1]
print("parameters:   ", [name for name, _ in model.named_parameters()])
print("buffers:      ", [name for name, _ in model.named_buffers()])
print("state_dict:   ", list(model.state_dict()))
print("pe.requires_grad:", position.pe.requires_grad)

# %%
# Not trained
# ~~~~~~~~~~~
# The optimizer gets ``model.parameters()``, which holds the embedding weights and not the table.
# One training step moves the former and leaves the latter bit for bit as it was:
tokens = torch.randint(vocab, (4, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
pe_before, weight_before = position.pe.clone(), model[0].weight.detach().clone()
loss = model(tokens).pow(2).mean()
loss.backward()
optimizer.step()
pe_unchanged = torch.equal(position.pe, pe_before)
print(f"table unchanged by the step: {pe_unchanged}; "
      f"embedding changed by up to {(model[0].weight - weight_before).abs().max().item():.3f}")
assert pe_unchanged and not torch.equal(model[0].weight, weight_before)

# %%
# Saved and loaded with the model
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The buffer is part of ``state_dict``, so ``torch.save`` writes it and ``load_state_dict`` puts it
# back into a fresh model:
checkpoint = io.BytesIO()
torch.save(model.state_dict(), checkpoint)
checkpoint.seek(0)
fresh = nn.Sequential(nn.Embedding(vocab, dim), posenc.SinusoidalPositionalEncoding(dim, max_len=64))
fresh.load_state_dict(torch.load(checkpoint))
reloaded = torch.equal(fresh[1].pe, position.pe) and torch.equal(fresh[0].weight, model[0].weight)
print(f"reloaded model equal to the saved one: {reloaded}")
assert reloaded

# %%
# Since the table travels in the checkpoint, loading a checkpoint made with another encoding
# would silently replace it. :class:`posenc.SinusoidalPositionalEncoding` compares the loaded
# table with its own formula and refuses one that differs by more than rounding — for example
# the slipped table of base :math:`10^8`:
try:
    posenc.SinusoidalPositionalEncoding(dim, max_len=64).load_state_dict(
        {"pe": posenc.sinusoidal_table(64, dim, base=10000.0**2)})
except RuntimeError as error:
    print(str(error).splitlines()[-1].strip())

# %%
# Moved with the model
# ~~~~~~~~~~~~~~~~~~~~
# ``Module.to`` converts parameters *and* buffers. This build runs on a CPU, so we show the dtype
# and the ``meta`` device (tensors with a shape and no data); ``.to("cuda")`` moves the buffer in
# the same way. For contrast, a module that keeps its table as a plain tensor attribute: it is
# neither converted nor saved.


class PlainAttribute(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.pe = table  # an ordinary attribute: not registered


plain = PlainAttribute(posenc.sinusoidal_table(64, dim))
print(f"{'':>16} {'after .double()':>16} {'after .to(meta)':>16} {'in state_dict':>14}")
moved = {}
for name, module in (("register_buffer", position), ("plain attribute", plain)):
    as_double = copy.deepcopy(module).double().pe.dtype
    on_meta = copy.deepcopy(module).to("meta").pe.device
    moved[name] = (as_double, on_meta)
    print(f"{name:>16} {str(as_double):>16} {str(on_meta):>16} {str('pe' in module.state_dict()):>14}")

# %%
# A plain buffer would be cast: ``.double()`` would convert the float32 numbers, keeping float32's
# rounding. :class:`posenc.SinusoidalPositionalEncoding` recomputes its table instead whenever a
# cast changes the buffer's dtype, so the float64 module holds the float64 table exactly, the
# same table :meth:`~posenc.SinusoidalPositionalEncoding.reset_parameters` computes at the
# buffer's current dtype:
position64 = copy.deepcopy(position).double()
exact64 = posenc.sinusoidal_table(64, dim, dtype=torch.float64)
after_cast = (position64.pe - exact64).abs().max().item()
print(f"after .double():           largest difference from the float64 table {after_cast:.1e}")
cast_only = position.pe.double()  # what casting the float32 numbers would give
print(f"float32 numbers cast:      largest difference from the float64 table "
      f"{(cast_only - exact64).abs().max().item():.1e}")
position64.reset_parameters()
assert after_cast == 0 and torch.equal(position64.pe, exact64)
assert not torch.equal(cast_only, exact64)

# %%
# Dropout
# -------
# The module applies dropout to the *sum* of embedding and encoding, as in the original
# Transformer. A new module is in training mode, so two calls on the same input give different
# outputs: each entry is zeroed with probability :math:`p` and the rest are scaled by
# :math:`1/(1-p)`, which keeps the expected value. In evaluation mode the output is exactly
# :math:`x + PE`.
torch.manual_seed(1)
encoder = posenc.SinusoidalPositionalEncoding(dim, dropout=p_drop)
x = torch.randn(8, 32, dim)
target = x + posenc.sinusoidal_table(32, dim)
first, second = encoder(x), encoder(x)
kept = first != 0
zeroed = 1 - kept.float().mean().item()
print(f"train mode: two calls equal: {torch.equal(first, second)}; "
      f"fraction zeroed: {zeroed:.3f} (p = {p_drop})")
assert torch.allclose(first[kept], target[kept] / (1 - p_drop))
print("kept entries equal (x + PE) / (1 - p): True")
encoder.eval()
eval_exact = torch.equal(encoder(x), target) and torch.equal(encoder(x), encoder(x))
print(f"eval mode: output equals x + PE exactly, every call: {eval_exact}")
assert eval_exact

# %%
# The factor by which each entry of :math:`x + PE` is multiplied, for the first sequence of the
# batch: in training mode 0 or :math:`1/(1-p)`, at places that change from call to call; in
# evaluation mode 1 everywhere.
factors = {
    "training mode, call 1": first[0] / target[0],
    "training mode, call 2": second[0] / target[0],
    "evaluation mode": encoder(x)[0] / target[0],
}
fig, axes = plt.subplots(1, 3, figsize=(9, 4), sharey=True)
for ax, (title, factor) in zip(axes, factors.items()):
    image = ax.imshow(factor.detach().numpy(), aspect="auto", cmap="viridis", vmin=0,
                      vmax=1 / (1 - p_drop), interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("dimension")
axes[0].set_ylabel("position")
fig.colorbar(image, ax=axes, label="output / (x + PE)")
fig.suptitle("Dropout on the sum of embedding and encoding")
plt.show()

# %%
# Forgetting ``model.eval()`` at inference time therefore gives outputs that change from run to
# run, although the encoding itself is fixed.
#
# Offsets: one token at a time
# ----------------------------
# When a decoder generates text token by token, each new token must get the encoding of its
# position in the whole sequence, not of position 0. ``forward(x, offset=k)`` adds rows
# :math:`k \dots k + n - 1`. Feeding the sequence one token at a time with the right offsets
# gives exactly the full pass:
full = encoder(x)
step_by_step = torch.cat([encoder(x[:, t : t + 1], offset=t) for t in range(x.shape[1])], dim=1)
k = 20
shifted = encoder(x, offset=k)
print(f"token by token equals the full pass: {torch.equal(step_by_step, full)}")
print(f"offset {k} equals x + rows {k}..{k + x.shape[1] - 1}: "
      f"{torch.equal(shifted, x + posenc.sinusoidal_table(x.shape[1], dim, offset=k))}")
assert torch.equal(step_by_step, full)
assert torch.equal(shifted, x + posenc.sinusoidal_table(x.shape[1], dim, offset=k))

# %%
# What this shows
# ---------------
# * In the module, ``register_buffer`` keeps the table out of the optimizer's parameters, puts
#   it in the ``state_dict`` and lets ``.to()`` convert and move it; dropout makes training-mode
#   outputs random, and offsets make step-by-step decoding equal to the full pass.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "register_buffer keeps the positional encoding out of the trainable parameters, saves "
        "and loads it with the model, and moves it to the right device.",
        "source": "seed article",
        "measured": f"not in parameters, unchanged by an SGD step: {pe_unchanged}; state_dict round "
        f"trip equal: {reloaded}; .double() → {moved['register_buffer'][0]}, .to('meta') → "
        f"{moved['register_buffer'][1]}",
        "verdict": "holds",
    },
]
