"""
Per-layer RoPE misread: fine under the window, wrong beyond it?
===============================================================

:ref:`sphx_glr_auto_examples_08_todays_models_plot_per_layer_rope.py` reads the released configs:
Gemma 3 gives its local (sliding-window) and global layers their own RoPE base and scales only the
global one; Llama 4 and Command R7B rotate only the local layers and leave the global ones without
positions (NoPE). It also shows that under the window a sliding and a full layer see the same keys.
Bugs in these per-layer settings are commonly described as "fine under the window, wrong beyond
it". This page tests that description: it trains a small model of each design and measures what
four misreadings of its config do to the loss and the logits, under the window and beyond it.
"""

# %%
# A small model of each design
# ----------------------------
# Two three-layer causal language models: two sliding layers (window :math:`W = 8`) and one full
# layer. Model A follows Gemma 3: local RoPE base 10 000 unscaled, global base 1 000 000 with linear
# scaling by 8. Model B follows Llama 4 and Command R7B: every local layer rotates with base 10 000,
# the full layer is NoPE. The library builds both from :class:`posenc.models.TransformerConfig`;
# ``transformer.position.layer_rotary`` lists which rotary module each layer uses.
import dataclasses

import matplotlib.pyplot as plt
import torch
from torch import nn

from posenc.models import CausalLM, TransformerConfig, next_token_loss, stdlib_corpus, train

W = 8  # the sliding window of the local layers
SCALING = {"rope_type": "linear", "factor": 8.0}
LAYERS = ("sliding_attention", "sliding_attention", "full_attention")
DESIGNS = {"A (Gemma 3 style)": dict(rope_base=1e6, rope_scaling=SCALING, local_rope_base=1e4),
           "B (Llama 4 style)": dict(rope_base=1e4, nope_layers=(2,))}
corpus = stdlib_corpus(["argparse", "configparser", "difflib", "inspect", "typing", "tarfile"],
                       ["textwrap", "shutil"])
HALF = 24  # the text is written twice: 2 * HALF characters per window


def config_of(design):
    return TransformerConfig(vocab_size=corpus.vocab_size, dim=64, num_heads=4, num_layers=3, max_len=2 * HALF,
                             position="rope", causal=True, sliding_window=W, layer_types=LAYERS, **DESIGNS[design])


for design in DESIGNS:
    position = CausalLM(config_of(design)).transformer.position
    print(f"model {design}, layer_rotary = {position.layer_rotary}")
    for layer, (kind, rotary) in enumerate(zip(LAYERS, position.layer_rotary)):
        scaling = getattr(position, rotary).scaling if rotary else None
        print(f"  layer {layer} {kind:<17}: " + (f"base {scaling.base:g}, {scaling.rope_type}" if rotary else "NoPE"))

# %%
# The training text is the character corpus of the other pages, with one change. A model this small,
# trained this briefly on plain text, leans on the last few characters
# (:ref:`sphx_glr_auto_examples_08_todays_models_plot_chunked_prefill_and_windows.py` measured that
# hiding everything beyond 16 characters hardly changes such a model's loss), so its global layer
# would have little to do beyond the window, and a bug there little to spoil. We therefore write
# each piece of 24 characters twice (48 characters; the model reads 47 and predicts the next one at
# each). From position 23 on, the next character repeats the one 23 positions back (at 23 it is the
# first of the second copy) — beyond the window, where only the full layer reaches. Held-out text: 256 pieces
# of the held-out modules, written twice the same way. Two seeds per design, 450 steps each.
STEPS, SEEDS = 450, (0, 1)
pieces = corpus.windows(HALF, 16)


def written_twice(generator):
    piece = pieces(generator)[:, :HALF]  # (16, HALF)
    return torch.cat([piece, piece], dim=1)  # (16, 2 * HALF)


held = corpus.held_out[:256 * HALF].view(256, HALF)
held = torch.cat([held, held], dim=1)  # (256, 2 * HALF)
held_in, held_target = held[:, :-1], held[:, 1:]
trained, final_loss = {}, {}
for design in DESIGNS:
    for seed in SEEDS:
        torch.manual_seed(seed)
        model = CausalLM(config_of(design))
        log = train(model, next_token_loss, written_twice, steps=STEPS, lr=3e-3, seed=seed, warmup=20)
        trained[design, seed] = model.double().eval()
        final_loss[design, seed] = sum(log.losses[-20:]) / 20


def per_position(model):
    """Held-out loss at each of the 2 * HALF - 1 positions, mean over the pieces; and the logits."""
    with torch.no_grad():
        logits = model(held_in)  # (256, 2 * HALF - 1, vocab)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), held_target.flatten(), reduction="none")
    return loss.view_as(held_target).mean(dim=0), logits


correct = {run: per_position(model) for run, model in trained.items()}
BANDS = {"< W": slice(0, W), ">= W": slice(W, None), "W .. 22": slice(W, HALF - 1), "23 on": slice(HALF - 1, None)}
print(f"held-out loss (nats) by position band; training loss = mean of the last 20 of {STEPS} steps")
print(f"{'':>25} {'training':>8}" + "".join(f"{band:>10}" for band in BANDS))
for (design, seed), (loss, _) in correct.items():
    print(f"{design + f', seed {seed}':>25} {final_loss[design, seed]:>8.3f}"
          + "".join(f"{loss[s].mean():>10.3f}" for s in BANDS.values()))
    assert loss[BANDS["23 on"]].mean() < loss[BANDS["W .. 22"]].mean() - 0.5
copy_loss = {run: loss[BANDS["23 on"]].mean().item() for run, (loss, _) in correct.items()}
assert max(copy_loss["A (Gemma 3 style)", s] for s in SEEDS) < min(copy_loss["B (Llama 4 style)", s] for s in SEEDS)

# %%
# Both designs learn to copy: at positions 23 on the held-out loss is more than half a nat below
# that of positions :math:`W \dots 22` (asserted), and only the full layer sees 23 positions back.
# Model A copies better than model B after the same training (table; asserted).
#
# Four misreadings of the config
# ------------------------------
# An engine that misreads the config runs the trained weights with the wrong per-layer settings. We
# reproduce that the way an engine would get it: build a model from the misread config and load the
# trained weights (rotary tables are not parameters, so the state dicts match).
#
# * **Scaling on every layer** (model A): the global linear scaling also applied to the local layers,
#   ``local_rope_scaling=SCALING``. antonellof/ferrox issue #39 describes an engine doing this to
#   Gemma 3's sliding layers.
# * **Scaling missing** (model A): the full layer unscaled, ``rope_scaling=None``; Blaizzy/mlx-vlm
#   PR #1709 and lablup/mlxcel issue #1340 describe engines doing this to Gemma 3.
# * **NoPE layer rotated** (model B): ``nope_layers=()``, the full layer rotates with the local
#   RoPE. airockchip/rknn-llm issue #501 reports an engine doing this to SmolLM3's NoPE layers.
# * **Window on every layer** (both): the full layer slides too, ``layer_types=None``. Here only the
#   mask must change, so the misread model's ``transformer.position.layer_rotary`` is set back to the
#   trained one (otherwise model A's full layer would also take the local RoPE).
#
# The scaling is part of training here from the first step, so the model as trained is the correct
# reading (Gemma 3 adds its scaling in a later long-context stage). Evaluation in float64.
BUGS = {"scaling on every layer": ("A (Gemma 3 style)", dict(local_rope_scaling=SCALING)),
        "scaling missing": ("A (Gemma 3 style)", dict(rope_scaling=None)),
        "window on every layer, A": ("A (Gemma 3 style)", dict(layer_types=None)),
        "NoPE layer rotated": ("B (Llama 4 style)", dict(nope_layers=())),
        "window on every layer, B": ("B (Llama 4 style)", dict(layer_types=None))}


def misread(model, changes):
    twin = CausalLM(dataclasses.replace(model.transformer.config, **changes)).double().eval()
    twin.load_state_dict(model.state_dict())
    if "layer_types" in changes:  # the mask alone
        twin.transformer.position.layer_rotary = list(model.transformer.position.layer_rotary)
    return twin


excess, under_logits = {}, {}
for bug, (design, changes) in BUGS.items():
    for seed in SEEDS:
        loss, logits = per_position(misread(trained[design, seed], changes))
        excess[bug, seed] = loss - correct[design, seed][0]
        under_logits[bug, seed] = (logits - correct[design, seed][1])[:, :W].abs().max().item()
print("excess held-out loss, misread - correct (nats), by position band; max |logit change| at positions < W")
print(f"{'':>33}" + "".join(f"{band:>10}" for band in BANDS) + f"{'logits < W':>12}")
for (bug, seed), value in excess.items():
    print(f"{bug + f', seed {seed}':>33}" + "".join(f"{value[s].mean():>+10.3f}" for s in BANDS.values())
          + f"{under_logits[bug, seed]:>12.1e}")

fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for i, (bug, (design, _)) in enumerate(BUGS.items()):
    ax = axes[list(DESIGNS).index(design)]
    for seed, line in zip(SEEDS, ("-", ":")):
        ax.plot(excess[bug, seed].numpy(), line, color=f"C{i}", label=bug if seed == 0 else None)
for ax, design in zip(axes, DESIGNS):
    ax.axvline(W - 0.5, color="grey", linewidth=0.8)
    ax.axvline(HALF - 1.5, color="grey", linewidth=0.8, linestyle="--")
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_title(f"model {design}")
    ax.set_xlabel("position (grey: W = 8; dashed: copying starts at 23)")
    ax.legend(fontsize=8, loc="upper left")
axes[0].set_ylabel("loss misread - loss correct (nats)")
fig.suptitle("Excess held-out loss per position, four misreadings (solid: seed 0, dotted: seed 1)")
plt.show()

# %%
# The rule for "fine under the window, wrong beyond it": for every seed, the mean excess loss at
# positions :math:`< W` is under 0.05 nats in size, and the mean excess at positions :math:`\ge W`
# is over 0.1 nats and over the seed spread (the difference between the two correctly read models'
# mean loss at :math:`\ge W`). Where it holds we also ask whether the excess covers everything
# beyond the window or only the copied part (positions 23 on): is the excess in the band
# :math:`W \dots 22` (beyond the window, nothing to copy yet) over 0.1 nats for every seed?
spread = {d: abs(correct[d, 0][0][W:].mean() - correct[d, 1][0][W:].mean()).item() for d in DESIGNS}


def band(bug, name):
    return [excess[bug, seed][BANDS[name]].mean().item() for seed in SEEDS]


def fine_under_wrong_beyond(bug):
    limit = max(0.1, spread[BUGS[bug][0]])
    return max(abs(x) for x in band(bug, "< W")) < 0.05 and min(band(bug, ">= W")) > limit


def verdict(bug):
    """The ledger's verdict on "fine under the window, wrong beyond it" for one misreading."""
    if not fine_under_wrong_beyond(bug):
        return "does not hold"
    return "holds" if min(band(bug, "W .. 22")) > 0.1 else "holds with conditions"


print("seed spread of the loss at >= W: " + ", ".join(f"{d} {s:.3f}" for d, s in spread.items()))
for bug in BUGS:
    print(f"{bug:>25}: fine under the window, wrong beyond it: {verdict(bug)}")
rope_bugs = ("scaling on every layer", "scaling missing", "NoPE layer rotated")
assert all(max(under_logits[b, s] for s in SEEDS) < 1e-9 for b in BUGS if b.startswith("window"))
assert all(min(under_logits[b, s] for s in SEEDS) > 1 for b in rope_bugs)
for bug in ("scaling on every layer", "scaling missing"):
    assert min(band(bug, "< W")) > 0.1 and min(band(bug, ">= W")) > 2 * max(band(bug, "< W"))
assert all(verdict(b) == "holds with conditions" for b in ("NoPE layer rotated", "window on every layer, A",
                                                          "window on every layer, B"))

# %%
# The three RoPE misreadings differ. Putting the global scaling on the local layers, or leaving it
# off the global layer, raises the loss already under the window, by more than a tenth of a nat for
# both seeds; beyond the window the excess is more than twice as large (both asserted). So these
# bugs are worse beyond the window, but not fine under it. (Blaizzy/mlx-vlm PR #1709 compared the
# logits of a Gemma 3 4B model at 195 and at 2916 tokens, so its "short" is a few hundred tokens;
# here it is fewer than 8, on a model with 8 rotated pairs per head. A different scale: this page
# does not settle their case.)
#
# Rotating the NoPE layer barely moves the loss under the window and raises it a lot from position
# 23 on — the described shape, with a condition: between :math:`W` and position 22 the loss hardly
# moves either. In this model the NoPE layer matters for the copy, and the rotation spoils the copy;
# the window itself has nothing to do with it. Under the window the logits do change (by more than 1
# at some position, for every RoPE misreading: asserted), so comparing logits on a short prompt
# catches it even where the loss does not. Only the mask mistake has the shape by construction: every logit
# under the window is unchanged (asserted to 1e-9; the table shows exact zeros), whatever the weights.
# Beyond the window it too costs only where the far text is needed, so by the rule above it also
# gets "holds with conditions" on both models.
#
# What this shows
# ---------------
# * Under the window a sliding and a full layer see the same keys, so mask mistakes are invisible on
#   short prompts. RoPE mistakes are not confined that way: a wrong frequency changes every nonzero
#   distance. On these small models a wrong scaling on either kind of layer raised the loss under the
#   window; a rotated NoPE layer hardly did, but it did not raise the loss between :math:`W` and
#   position 22 either: that layer mattered only for the copy.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
def measured(bug):
    design = BUGS[bug][0]
    names = {"< W": f"< {W}", ">= W": f">= {W}", "W .. 22": f"{W} .. 22", "23 on": "23 on (copied)"}
    text = ", ".join(f"{shown} " + "/".join(f"{x:+.3f}" for x in band(bug, name)) for name, shown in names.items())
    return (f"model {design}, window {W}, excess held-out loss at positions (seeds {SEEDS[0]}/{SEEDS[1]}): "
            f"{text} nats; seed spread {spread[design]:.3f}")


RULE = "fine under the window, wrong beyond it"
claims = [
    {
        "claim": "Applying the global layers' RoPE scaling to the local (sliding-window) layers gives output "
        f"that is {RULE}.",
        "source": "common description of per-layer RoPE bugs",
        "measured": measured("scaling on every layer"),
        # rule (verdict()): "does not hold" unless |excess < W| < 0.05 and excess >= W > max(0.1,
        # seed spread) for every seed; then "holds" if the band W .. 22 also has excess > 0.1 for
        # every seed, "holds with conditions" if not
        "verdict": verdict("scaling on every layer"),
    },
    {
        "claim": "Leaving out the global layers' RoPE scaling is negligible at short context and grows "
        "with length.",
        "source": "Blaizzy/mlx-vlm PR #1709",
        "measured": measured("scaling missing") + "; short context here means < 8 positions",
        # rule: verdict(), the window standing for "short context"
        "verdict": verdict("scaling missing"),
    },
    {
        "claim": f"Rotating a NoPE layer gives output that is {RULE}.",
        "source": "common description of per-layer RoPE bugs",
        "measured": measured("NoPE layer rotated"),
        # rule: verdict(), as for the first claim
        "verdict": verdict("NoPE layer rotated"),
    },
    {
        "claim": "Running the global layers with the sliding window changes no output under the window.",
        "source": "common assumption",
        "measured": f"max |logit change| at positions < {W}, both models, both seeds: "
        f"{max(under_logits[b, s] for b in BUGS if b.startswith('window') for s in SEEDS):.1e} (float64); "
        f"excess loss at >= {W}: "
        + ", ".join(f"{x:+.3f}" for b in BUGS if b.startswith("window") for x in band(b, ">= W")) + " nats",
        # rule: "holds" if every logit under the window agrees to 1e-9 (asserted above)
        "verdict": "holds" if max(under_logits[b, s] for b in BUGS if b.startswith("window")
                                  for s in SEEDS) < 1e-9 else "does not hold",
    },
]
