"""
RoPE porting bugs: what each does to the logits
===============================================

When a RoPE port goes wrong, how far does each classic mistake move the logits, and at which
positions? This page takes the small Llama and Phi-3 models of
:ref:`sphx_glr_auto_examples_08_todays_models_plot_engine_parity.py`, whose MLX conversion matches
transformers to a few millionths, reproduces five porting bugs on the MLX side and measures each
one position by position.
"""

# %%
# One model, two engines
# ----------------------
# A ``LlamaForCausalLM`` with 2 layers, 4 query heads and 2 key/value heads of width 16, a vocabulary
# of 97, ``rope_theta`` 500 000 and seeded random weights (standard deviation 0.2, so that attention
# is far from uniform and positions matter); float32, evaluation mode. The scaled types stretch an
# original context of 16 positions by 4 to the 64 positions run here. The conversion loads the state
# dict under its own names (mlx-lm's ``llama.py`` uses the same ones; the load is strict) and permutes
# nothing: transformers rotates pairs :math:`(i, i + d/2)` (``rotate_half``) and mlx-lm's ``llama``
# does too unless the config sets ``rope_traditional``. One thing must be translated: transformers
# 5.24 keeps the RoPE settings in ``rope_parameters``, mlx-lm 0.32.2's ``llama.ModelArgs`` reads
# ``rope_theta`` and ``rope_scaling``.
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import mlx.core as mx
import numpy as np
import torch
import transformers
from mlx_lm.models import llama, phi3
from mlx_lm.utils import load_model
from transformers import LlamaConfig, LlamaForCausalLM, Phi3Config, Phi3ForCausalLM

import posenc

transformers.logging.disable_progress_bar()  # save_pretrained's, below
HEAD, BASE, CONTEXT, LENGTH, TOL = 16, 500000.0, 16, 64, 1e-4
SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=97, max_position_embeddings=LENGTH, initializer_range=0.2,
             tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
ROPES = {"default": {"rope_type": "default"}, "linear": {"rope_type": "linear", "factor": 4.0},
         "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": CONTEXT},
         "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": CONTEXT}}
TOKENS = torch.randint(0, 97, (1, LENGTH), generator=torch.Generator().manual_seed(1))


def reference(rope: dict, family=(LlamaConfig, LlamaForCausalLM), **extra):
    torch.manual_seed(0)
    return family[1](family[0](**SHAPE, rope_parameters={**rope, "rope_theta": BASE}, **extra)).eval()


def convert(model, module=llama, state=None, **override):
    """The mlx-lm model of ``module`` with the weights ``state`` (default: the model's own)."""
    args = model.config.to_dict()
    rope = dict(args.pop("rope_parameters"))  # -> the keys mlx-lm 0.32.2 reads
    args.update(rope_theta=rope.pop("rope_theta"), rope_scaling=None if rope["rope_type"] == "default" else rope)
    engine = module.Model(module.ModelArgs.from_dict({**args, **override}))
    state = model.state_dict() if state is None else state
    engine.load_weights([(name, mx.array(t.detach().numpy())) for name, t in state.items()], strict=True)
    return engine


def logits(model) -> torch.Tensor:
    """Next-token logits, (LENGTH, vocab), as float64."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(TOKENS).logits[0].double()
    return torch.from_numpy(np.array(model(mx.array(TOKENS.numpy()))[0])).double()


def change(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative logit change at each position, (LENGTH,): ||got - ref|| / ||ref|| over the vocabulary."""
    return (got - ref).norm(dim=-1) / ref.norm(dim=-1)


# %%
# The correct engine
# ------------------
# Every bug is compared with the correct conversion of the same model, which matches transformers
# to within the tolerance: the four RoPE types, and a Phi-3 of the same shape that rotates 8 of its
# 16 channels.
models = {name: reference(rope) for name, rope in ROPES.items()}
models["partial"] = reference(ROPES["default"], (Phi3Config, Phi3ForCausalLM), partial_rotary_factor=0.5)
SCALINGS = {**ROPES, "partial": {"partial_rotary_factor": 0.5}}
ref = {name: logits(model) for name, model in models.items()}
correct = {name: logits(convert(model, phi3 if name == "partial" else llama)) for name, model in models.items()}
parity = {name: dict(rel=change(correct[name], ref[name])) for name in models}
print(f"{'RoPE':>8} {'worst rel, MLX vs transformers':>31}")
for name, p in parity.items():
    print(f"{name:>8} {float(p['rel'].max()):>31.2e}")
assert all(10 * float(p["rel"].max()) < TOL for p in parity.values())

# %%
# Five porting bugs
# -----------------
# Each bug is reproduced on the MLX side, through the config the engine reads or by changing its RoPE
# module, and compared with the correct engine (not with transformers, so that only the bug counts):
#
# * **(a) Q/K permutation skipped**: the engine rotates interleaved pairs (``rope_traditional=True``,
#   the layout of Meta's original checkpoints) on weights laid out for the half layout;
# * **(b) rope_theta defaulted** to 10 000 while the model uses 500 000;
# * **(c) YaRN attention factor** :math:`a` applied twice (mlx-lm multiplies queries and keys by it,
#   so :math:`a^4` on the scores instead of :math:`a^2`), or not at all;
# * **(d) Llama 3's rule dropped**: plain RoPE at base 500 000;
# * **(e) partial-rotary denominator wrong**, on the Phi-3 model: the engine's rotation replaced by one
#   at :math:`\mathrm{base}^{-2i/16}` (the head width) instead of :math:`\mathrm{base}^{-2i/8}` (the
#   rotated width), both from :func:`posenc.rope_inv_freq`.
#
# A sixth row is not made up: a config written by transformers 5.24 (``save_pretrained``) holds only
# ``rope_parameters``, which mlx-lm 0.32.2's ``llama.ModelArgs.from_dict`` drops as an unknown key, so
# ``mlx_lm.utils.load_model`` builds the Llama 3 model with the default base and no scaling.
def rotate_with(inv_freq: torch.Tensor):
    """A RoPE for mlx-lm's attention turning the first 2 * len(inv_freq) channels (half layout)."""
    periods = mx.array((1.0 / inv_freq).numpy().astype(np.float32))  # mx.fast.rope takes periods
    return lambda x, offset=0: mx.fast.rope(x, 2 * len(inv_freq), traditional=False, base=None, scale=1.0,
                                            offset=offset, freqs=periods)


def set_rope(engine, **attributes):
    for layer in engine.layers:  # rope= replaces the module, other keys set its attributes
        for key, value in attributes.items():
            setattr(layer.self_attn if key == "rope" else layer.self_attn.rope, key, value)
    return engine


yarn_factor = posenc.rope_inv_freq(HEAD, base=BASE, scaling=ROPES["yarn"])[1]
right_width = posenc.rope_inv_freq(HEAD, base=BASE, scaling=SCALINGS["partial"])[0]
head_width = posenc.rope_inv_freq(HEAD, base=BASE)[0][: HEAD // 4]  # the first 4 of base^(-2i/16)
with tempfile.TemporaryDirectory() as folder:
    models["llama3"].save_pretrained(folder)
    saved = json.loads((Path(folder) / "config.json").read_text())
    loaded, _ = load_model(Path(folder))
print(f"transformers {transformers.__version__} config.json, keys with 'rope': {[k for k in saved if 'rope' in k]}")
print(f"mlx-lm load_model reads rope_theta={loaded.args.rope_theta}, rope_scaling={loaded.args.rope_scaling}")
assert loaded.args.rope_theta == 10000 and loaded.args.rope_scaling is None
control = set_rope(convert(models["partial"], phi3), rope=rotate_with(right_width))
assert float(change(logits(control), correct["partial"]).max()) < TOL  # replacing the rotation alone
BUGS = {"(a) Q/K permutation skipped": ("default", convert(models["default"], rope_traditional=True)),
        "(b) rope_theta defaulted": ("default", convert(models["default"], rope_theta=10000.0)),
        "(c) YaRN factor twice": ("yarn", set_rope(convert(models["yarn"]), mscale=yarn_factor**2)),
        "(c) YaRN factor dropped": ("yarn", set_rope(convert(models["yarn"]), mscale=1.0)),
        "(d) Llama 3 rule dropped": ("llama3", convert(models["llama3"], rope_scaling=None)),
        "(e) partial: head width": ("partial", set_rope(convert(models["partial"], phi3),
                                                        rope=rotate_with(head_width))),
        "(b+d) 5.24 config.json": ("llama3", loaded)}
result = {}
print(f"{'bug':>28} {'pos 0':>6} {'rel 1-15':>9} {'rel 16-63':>10} {'top-1 1-15':>11} {'top-1 16-63':>12}")
for bug, (name, engine) in BUGS.items():
    got, want = logits(engine), correct[name]
    rel, same = change(got, want), (got.argmax(-1) == want.argmax(-1)).double()
    r = result[bug] = dict(rel=rel, first=bool(torch.equal(got[0], want[0])), inside=float(rel[1:CONTEXT].mean()),
                           past=float(rel[CONTEXT:].mean()), top1_in=float(same[1:CONTEXT].mean()),
                           top1_past=float(same[CONTEXT:].mean()))
    print(f"{bug:>28} {'same' if r['first'] else 'moved':>6} {r['inside']:>9.3f} {r['past']:>10.3f} "
          f"{r['top1_in']:>11.0%} {r['top1_past']:>12.0%}")
assert all(r["first"] and float(r["rel"][1:].max()) > 10 * TOL for r in result.values())

# %%
# Every bug leaves position 0 bit-identical, for two reasons: every RoPE angle is 0 there, and the
# first query has only itself to attend to, so no scale of its score matters. From position 1 on each
# moves the logits far beyond the parity of the previous table. Bugs (b), (d) and (e) change
# frequencies other than the fastest (:math:`\theta_0 = 1` whatever the base), by ratios
# :func:`posenc.rope_inv_freq` gives:
plain = posenc.rope_inv_freq(HEAD, base=BASE)[0]
ratio = {"(b) base 10 000 / 500 000": posenc.rope_inv_freq(HEAD, base=1e4)[0] / plain,
         "(d) plain / llama3": plain / posenc.rope_inv_freq(HEAD, base=BASE, scaling=ROPES["llama3"])[0],
         "(e) head / rotated width": head_width / right_width}
for name, r in ratio.items():
    print(f"{name:>26}: slowest pair turns {float(r[-1]):.3g} times as fast; all pairs {np.round(r.numpy(), 3)}")
print(f"(c) scores multiplied by {yarn_factor**4:.4f} (twice) or 1 (dropped) instead of a^2 = {yarn_factor**2:.4f}")
assert float(ratio["(b) base 10 000 / 500 000"][0]) == 1.0 and all(float(r[1:].min()) > 1 for r in ratio.values())
fig, ax = plt.subplots(figsize=(9, 4.2))
positions = np.arange(1, LENGTH)
for bug, r in result.items():
    ax.plot(positions, r["rel"][1:].numpy(), "--" if bug.startswith("(b+d)") else "-", linewidth=1.3, label=bug)
worst = torch.stack([p["rel"] for p in parity.values()]).max(0).values
ax.plot(positions, worst[1:].numpy(), color="0.5", linewidth=2, label="transformers vs MLX (worst type)")
ax.axhline(TOL, color="0.3", linestyle=":", label="tolerance")
ax.axvline(CONTEXT - 0.5, color="0.8", zorder=0)
ax.text(CONTEXT, 2 * TOL, " end of the original context", fontsize=8)
ax.set_yscale("log")
ax.set_xlabel("position (0 is bit-identical for every bug and not drawn)")
ax.set_ylabel("relative logit change")
ax.set_title("Porting bugs against the correct MLX engine (random weights, float32)")
fig.legend(loc="outside lower center", ncol=3, fontsize=8)
plt.show()

# %%
# The weights are random: these numbers measure how far each bug moves the computation of this
# model, not how much worse a trained model would write. The layout (a), the base (b), Llama 3's rule
# (d) and the partial-rotary width (e) change which positions attention prefers: they move the logits
# by at least 0.4 of their size inside the original context and by about their whole size past it,
# where the top token survives at a quarter of the positions or fewer. YaRN's factor (c) only changes
# how sharp attention is, and moves the logits least. Every bug moves them more past the original
# context than inside it. The config written by transformers 5.24 and read by mlx-lm 0.32.2 loses
# both the base and Llama 3's rule; ml-explore/mlx-lm PR #953 discusses moving mlx-lm's models to
# ``rope_parameters``.
frequency_bugs = [r for bug, r in result.items() if not bug.startswith("(c)")]
assert min(r["inside"] for r in frequency_bugs) > 0.4 and min(r["past"] for r in frequency_bugs) > 0.9
assert max(r["top1_past"] for r in frequency_bugs) <= 0.25
assert max(r["past"] for b, r in result.items() if b.startswith("(c)")) < min(r["inside"] for r in frequency_bugs)
assert all(r["past"] > r["inside"] for r in result.values())

# %%
# Bug (a) is a layout mismatch, not an engine defect: permuting the rows of ``q_proj`` and ``k_proj``
# of each head to the interleaved order (:func:`posenc.half_to_interleaved`, the inverse of
# :func:`posenc.permute_for_half_layout`) makes ``rope_traditional=True`` agree again.
def to_interleaved(weight: torch.Tensor, heads: int) -> torch.Tensor:
    rows = weight.T.reshape(weight.shape[1], heads, -1)  # (in, heads, head_dim)
    return posenc.half_to_interleaved(rows).reshape(weight.shape[1], -1).T  # (heads * head_dim, in)


heads = {"q_proj": SHAPE["num_attention_heads"], "k_proj": SHAPE["num_key_value_heads"]}
state = {name: next((to_interleaved(t, n) for key, n in heads.items() if key in name), t)
         for name, t in models["default"].state_dict().items()}
fixed = change(logits(convert(models["default"], state=state, rope_traditional=True)), ref["default"])
print(f"interleaved weights with rope_traditional=True: worst relative change {float(fixed.max()):.1e}")
assert float(fixed.max()) < TOL

# %%
# What this shows
# ---------------
# * Every RoPE porting bug leaves the first position bit-identical: a test on one token, or on the
#   first token of a prompt, cannot see any of them. Compare a few dozen positions, past the original
#   context for scaled models.
# * A config written by transformers 5.24 is read by mlx-lm 0.32.2's Llama code without its base and
#   its scaling: bugs (b) and (d) at once, without an error.
#
# Porting checklist
# -----------------
# * ``rope_theta``: read it, from ``rope_parameters`` in transformers 5 configs; never default to
#   10 000 silently. :func:`posenc.rope_report` lists the values that came from defaults.
# * ``rope_scaling`` / ``rope_parameters`` and its ``rope_type``: a type the engine does not implement
#   is a different model. :doc:`/auto_examples/04_variants/plot_reading_rope_configs`,
#   :doc:`/auto_examples/04_variants/plot_rope_scaling_atlas`.
# * ``original_max_position_embeddings`` and ``factor``: the context the frequencies were trained on.
#   :doc:`/auto_examples/07_troubleshooting/plot_rope_scaling_errors`.
# * ``attention_factor`` / ``mscale`` / ``mscale_all_dim``: once, on cos/sin or in the softmax scale.
#   :doc:`/auto_examples/08_todays_models/plot_mla_yarn_factors`.
# * ``partial_rotary_factor``: the exponent over the rotated width (proportional RoPE excepted).
#   :doc:`/auto_examples/08_todays_models/plot_partial_rotary`.
# * The layout and the permutation at conversion: half (``rotate_half``) or interleaved pairs, and the
#   q/k rows permuted to match. :doc:`/auto_examples/07_troubleshooting/plot_checkpoint_layout_mismatch`.
# * Per-layer settings (Gemma 3, Llama 4): :doc:`/auto_examples/08_todays_models/plot_per_layer_rope`.
# * Then check the engine's RoPE alone with ``python -m posenc rope-parity``, which names the bug
#   (:doc:`/auto_examples/08_todays_models/plot_rope_parity_check`), and compare logits over a few dozen
#   positions with this page's tolerance, not the first token.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
bug_rows = [r for bug, r in result.items() if not bug.startswith("(b+d)")]
first_same, smallest_later = all(r["first"] for r in bug_rows), min(float(r["rel"][1:].max()) for r in bug_rows)
unpermuted = float(parity["default"]["rel"].max())
skipped = float(result["(a) Q/K permutation skipped"]["rel"].max())
claims = [
    {
        "claim": "A Llama checkpoint in transformers' layout runs in mlx-lm without permuting q and k.",
        "source": "mlx-lm 0.32.2 models/llama.py (rope_traditional defaults to False)",
        "measured": f"unpermuted, half layout: {unpermuted:.1e}; unpermuted with rope_traditional=True: "
        f"{skipped:.2f}; permuted to interleaved with it: {float(fixed.max()):.1e}",
        # rule: "holds" if the unpermuted half layout and the permuted interleaved one are within the
        # tolerance and the unpermuted interleaved one is not
        "verdict": "holds" if max(unpermuted, float(fixed.max())) < TOL < skipped else "does not hold",
    },
    {
        "claim": "If a port gets the first token's logits right, its RoPE is right.",
        "source": "common assumption",
        "measured": f"bugs (a)-(e) on the MLX engine: position 0 bit-identical for all = {first_same}; largest "
        f"relative change after it at least {smallest_later:.2f}",
        # rule: "does not hold" if every bug leaves position 0 bit-identical and exceeds 10x the tolerance
        # later; "holds" otherwise
        "verdict": "does not hold" if first_same and smallest_later > 10 * TOL else "holds",
    },
    {
        "claim": "A Llama config.json saved by transformers 5 loads in mlx-lm with its RoPE settings.",
        "source": "common assumption (transformers 5 moved rope_theta and rope_scaling into rope_parameters)",
        "measured": f"transformers {transformers.__version__} save_pretrained, mlx-lm 0.32.2 load_model: "
        f"rope_theta {loaded.args.rope_theta} (config 500000), rope_scaling {loaded.args.rope_scaling}; "
        f"relative logit change past the original context {result['(b+d) 5.24 config.json']['past']:.2f}",
        # rule: "does not hold" if mlx-lm's Llama reads a base or scaling other than the config's
        "verdict": "does not hold" if loaded.args.rope_theta != BASE or loaded.args.rope_scaling is None
        else "holds",
    },
]
