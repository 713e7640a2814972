"""
Same model, different engine
============================

A checkpoint converted to another inference engine should give the same next-token logits: the
weights are the same, only the code differs. RoPE is a common place for a port to go wrong, and a
quiet one: the converted model still runs, without an error. This page converts a small Llama model
from transformers 5.24 to MLX (mlx 0.32.4 on the CPU, with mlx-lm 0.32.2's own ``llama`` model
code) and measures how closely the logits agree for the four common RoPE types;
:ref:`sphx_glr_auto_examples_08_todays_models_plot_rope_porting_bugs.py` reproduces five classic
porting bugs on the MLX side and measures what each does. llama.cpp is not run here: building it
from source is too slow for a page executed at every build of the site. Its GGUF side is checked in
the conventions table instead, and :doc:`/auto_examples/08_todays_models/plot_rope_parity_check`
names each bug from the engine's queries alone.
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
import matplotlib.pyplot as plt
import mlx.core as mx
import numpy as np
import torch
from mlx_lm.models import llama, phi3
from transformers import LlamaConfig, LlamaForCausalLM, Phi3Config, Phi3ForCausalLM

import posenc

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


def engine_frequencies(rope) -> tuple[torch.Tensor, float]:
    """Angle per position of each pair, and q/k factor, of an mlx-lm RoPE module."""
    if hasattr(rope, "_freqs"):  # Llama3RoPE, YarnRoPE: periods 1 / theta_i
        return 1.0 / torch.from_numpy(np.array(rope._freqs)).double(), getattr(rope, "mscale", 1.0)
    # nn.RoPE: base^(-2i/dims), positions times scale (tests/conformance/test_mlx_refs.py)
    return rope.scale * posenc.rope_inv_freq(rope.dims, base=rope.base)[0], 1.0


# %%
# The parity table
# ----------------
# For each type: what the engine's RoPE module holds against what :func:`posenc.rope_inv_freq` says
# the config means (relative error of the frequencies, and the factor on queries and keys), then the
# largest logit difference, the worst relative change of one position, and the share of positions
# where both engines pick the same top token, over all 64 positions and over those past the original
# context. The last row is a partial-rotary model: a Phi-3 of the same shape (transformers'
# ``Phi3ForCausalLM``, mlx-lm's ``phi3``; both read ``partial_rotary_factor``) that rotates 8 of its
# 16 channels, at :math:`\mathrm{base}^{-2i/8}`.
models = {name: reference(rope) for name, rope in ROPES.items()}
models["partial"] = reference(ROPES["default"], (Phi3Config, Phi3ForCausalLM), partial_rotary_factor=0.5)
SCALINGS = {**ROPES, "partial": {"partial_rotary_factor": 0.5}}
parity, ref, correct = {}, {}, {}
print(f"{'RoPE':>8} {'freq err':>9} {'factor':>7} {'max |dlogit|':>13} {'max |logit|':>12} {'worst rel':>10}"
      f" {'top-1 all':>10} {'top-1 16-63':>12}")
for name, model in models.items():
    engine = convert(model, phi3 if name == "partial" else llama)
    theta, factor = engine_frequencies(engine.layers[0].self_attn.rope)
    want, want_factor = posenc.rope_inv_freq(HEAD, base=BASE, scaling=SCALINGS[name])
    hf = ref[name] = logits(model)
    got = correct[name] = logits(engine)
    same = (got.argmax(-1) == hf.argmax(-1)).double()
    p = parity[name] = dict(freq=float(((theta - want) / want).abs().max()), factor=(factor, want_factor),
                            rel=change(got, hf), top1=float(same.mean()), past=float(same[CONTEXT:].mean()))
    print(f"{name:>8} {p['freq']:>9.1e} {factor:>7.4f} {float((got - hf).abs().max()):>13.2e} "
          f"{float(hf.abs().max()):>12.2f} {float(p['rel'].max()):>10.2e} {p['top1']:>10.0%} {p['past']:>12.0%}")
assert all(p["freq"] < 1e-6 and abs(p["factor"][0] - p["factor"][1]) < 1e-12 for p in parity.values())
assert all(10 * float(p["rel"].max()) < TOL and p["top1"] == 1.0 for p in parity.values())

# %%
# The engines agree to a few millionths of the logits' size, past the original context as well, and
# pick the same top token everywhere. Both compute in float32 (unit roundoff :math:`6\times10^{-8}`)
# but not in the same order: transformers forms the angles from float32 ``inv_freq``, MLX its own way
# (``tests/conformance/test_mlx_refs.py``), and the matrix products sum differently; each logit is the
# result of thousands of such operations. The tolerance of this page and of
# ``tests/conformance/test_mlx_model_parity.py``, a relative change of :math:`10^{-4}` at any
# position, leaves a margin of more than ten over what was measured and is far below every porting
# bug of :ref:`sphx_glr_auto_examples_08_todays_models_plot_rope_porting_bugs.py`.
fig, ax = plt.subplots(figsize=(9, 4.2))
for name, p in parity.items():
    ax.plot(np.arange(LENGTH), p["rel"].numpy(), linewidth=1.3, label=name)
ax.axhline(TOL, color="0.3", linestyle=":", label="tolerance")
ax.axvline(CONTEXT - 0.5, color="0.8", zorder=0)
ax.text(CONTEXT, TOL / 2, " end of the original context", fontsize=8)
ax.set_yscale("log")
ax.set_xlabel("position")
ax.set_ylabel("relative logit change")
ax.set_title("The same model in transformers and in MLX (random weights, float32)")
fig.legend(loc="outside lower center", ncol=6, fontsize=8)
plt.show()
worst = torch.stack([p["rel"] for p in parity.values()]).max(0).values

# %%
# What this shows
# ---------------
# * mlx-lm's Llama code reproduces transformers' logits for default, linear, llama3 and YaRN RoPE, and
#   its Phi-3 code a partial-rotary model, to a few millionths, with no Q/K permutation, once the
#   config's RoPE keys are translated.

# %%
# Claims tested here
# ------------------
# Rows of the site's claims ledger.
worst_parity, lowest_top1 = float(worst.max()), min(p["top1"] for p in parity.values())
claims = [
    {
        "claim": "mlx-lm's Llama model reproduces transformers' next-token logits for default, linear, llama3 "
        "and YaRN RoPE.",
        "source": "mlx-lm 0.32.2 models/llama.py and rope_utils.py; transformers 5.24 LlamaForCausalLM",
        "measured": f"random 2-layer Llama (and Phi-3 with partial rotary), float32, 64 positions, original context "
        f"16: worst relative logit change {worst_parity:.1e}, top-1 agreement at least {lowest_top1:.0%}",
        # rule: "holds" if every model stays below the 1e-4 tolerance with 100 % top-1 agreement
        "verdict": "holds" if worst_parity < TOL and lowest_top1 == 1.0 else "does not hold",
    },
]
