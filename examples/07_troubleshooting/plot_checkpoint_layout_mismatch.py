"""
Nonsense after converting a checkpoint: the RoPE layout
=======================================================

A RoPE model is moved from one codebase to another: the weights load without a warning, the
model runs, and it writes worse text than it did before. A frequent cause is the channel layout
of RoPE — interleaved pairs in the original code, half-split pairs in the new one — with the
query and key projections copied as they are. We reproduce it on a tiny character-level
language model, measure the damage, and fix it with :func:`posenc.permute_for_half_layout`.
"""

# %%
# What you see
# ------------
# * ``load_state_dict`` reports no missing and no unexpected keys: the two layouts have the
#   same parameters, of the same shapes.
# * The model runs and produces text, but the loss on held-out text is much higher than the
#   source codebase reported, and the samples are worse.
# * The first token of a sequence is predicted exactly as before; the damage starts at the
#   second and grows further in.
#
# Reproduce it
# ------------
# We train a small causal language model (:class:`posenc.models.CausalLM`: two layers, four
# heads, width 64) on characters of a few modules of Python's standard library, with RoPE in the
# interleaved layout (``rope_layout="interleaved"``, as in Meta's original Llama code and
# RoFormer). One module, ``glob``, is held out. ``STEPS`` sets the length of the run, short
# enough for two cores; the symptom does not need a well-trained model.
import math
import re

import matplotlib.pyplot as plt
import torch

import posenc
from posenc.models import CausalLM, TransformerConfig, next_token_loss, stdlib_corpus, train

STEPS = 400
LENGTH, BATCH = 64, 16

corpus = stdlib_corpus(["textwrap", "string", "shlex", "fnmatch"], ["glob"])
train_data, held_out = corpus.train, corpus.held_out
# 1000 held-out windows of LENGTH + 1 characters (LENGTH predictions each), at random starts.
starts = torch.randint(0, len(held_out) - LENGTH, (1000,), generator=torch.Generator().manual_seed(1))
windows = torch.stack([held_out[s: s + LENGTH + 1] for s in starts.tolist()])
print(f"{len(train_data) + len(held_out)} characters, vocabulary of {corpus.vocab_size}, "
      f"{len(windows)} held-out windows")


make_batch = corpus.windows(LENGTH, BATCH)


def config(layout):
    return TransformerConfig(vocab_size=corpus.vocab_size, dim=64, num_heads=4, num_layers=2, max_len=LENGTH,
                             position="rope", rope_layout=layout, causal=True)


torch.manual_seed(0)
original = CausalLM(config("interleaved"))
log = train(original, next_token_loss, make_batch, steps=STEPS, lr=3e-3, seed=0, warmup=50)
print(f"training loss, mean of the last 50 steps: {sum(log.losses[-50:]) / 50:.3f}")

# %%
# Now the conversion as it often goes wrong: a model of the same shape, but written for the
# half-split layout (Hugging Face's Llama code in transformers 5.24, GPT-NeoX), and the state
# dict copied over unchanged. Nothing complains.
mixed_up = CausalLM(config("half"))
report = mixed_up.load_state_dict(original.state_dict())
mixed_up.eval()
print(f"missing keys: {report.missing_keys}, unexpected keys: {report.unexpected_keys}")


def held_out_loss(model):
    with torch.no_grad():
        return next_token_loss(model, windows).item()


losses = {"original (interleaved)": held_out_loss(original), "copied to half-split": held_out_loss(mixed_up)}
for name, value in losses.items():
    print(f"held-out loss, {name:>22}: {value:.3f} nats per character")

# %%
# The loss jumps. What does the text look like? Both models continue the same prompt, sampling
# at temperature 0.8 from the same seeded random generator, with a window of the last
# ``LENGTH`` characters (the length they were trained on).
PROMPT = "    def "


def sample(model, length=240, temperature=0.8):
    generator = torch.Generator().manual_seed(0)
    tokens = corpus.encode(PROMPT)[None]
    with torch.no_grad():
        for _ in range(length):
            logits = model(tokens[:, -LENGTH:])[0, -1]
            probabilities = (logits / temperature).softmax(dim=-1)
            following = torch.multinomial(probabilities, 1, generator=generator)
            tokens = torch.cat([tokens, following[None]], dim=1)
    return corpus.decode(tokens[0])


samples = {}
for name, model in (("original (interleaved)", original), ("copied to half-split", mixed_up)):
    samples[name] = sample(model)
    print(f"--- {name} ---")
    print(samples[name])
# The next paragraph relies on this: the original's sample has indented lines, an assignment and
# attribute access.
shaped = samples["original (interleaved)"]
assert re.search(r"\n {4,}\S", shaped) and " = " in shaped and re.search(r"[A-Za-z_]\.[A-Za-z_]", shaped)

# %%
# The original model, small and briefly trained, writes text with the shape of Python —
# indented lines, assignments, attribute access — if not correct Python. The mixed-up
# model still writes letters, punctuation and indented lines, and strings that read like
# English syllables run together, but hardly a whole word and no line of code. The parts of
# the model that involve no positions — embeddings, values, feed-forward layers — are intact;
# which earlier characters each character attends to is not.
#
# Why
# ---
# RoPE rotates pairs of channels of each query and key, pair :math:`i` by the angle
# :math:`p\,\theta_i` at position :math:`p`. The interleaved layout pairs channel :math:`2i` with
# :math:`2i + 1`; the half-split layout pairs channel :math:`i` with :math:`i + d/2`. The same
# weights therefore rotate other pairs of numbers, at other frequencies: the score between a
# query at :math:`m` and a key at :math:`n` is still a function of :math:`m - n` only, but a
# different function from the trained one. The derivation and the matrices are on
# :ref:`sphx_glr_auto_examples_04_variants_plot_rope_layouts.py`.
#
# One case is untouched: at :math:`m = n` the rotation cancels in both layouts, so a token's
# score against itself is unchanged. The first character of a window sees only itself, so its
# prediction is exactly the original one; the further into the window, the more the prediction
# depends on scores at other distances. The loss at each position of the held-out windows:


def loss_by_position(model):
    with torch.no_grad():
        logits = model(windows[:, :-1])  # (windows, LENGTH, vocab)
        per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:],
                                                      reduction="none")
    return per_token.mean(dim=0)  # (LENGTH,)


by_position = {"original (interleaved)": loss_by_position(original),
               "copied to half-split": loss_by_position(mixed_up)}
first = {name: curve[0].item() for name, curve in by_position.items()}
print("loss at position 0:", ", ".join(f"{name} {value:.4f}" for name, value in first.items()))
assert first["original (interleaved)"] == first["copied to half-split"]
gap = by_position["copied to half-split"][1:] - by_position["original (interleaved)"][1:]
print(f"positions 1 to {LENGTH - 1}: the mixed-up loss is higher by {gap.min().item():.2f} "
      f"to {gap.max().item():.2f} nats")

# %%
# The fix
# -------
# Permute the rows of the query and key projections, head by head, so that the numbers the
# interleaved code paired as :math:`(2i, 2i + 1)` land on channels :math:`(i, i + d/2)`.
# :func:`posenc.permute_for_half_layout` does this; it is the ``permute`` function of Hugging
# Face's ``convert_llama_weights_to_hf.py``, read in transformers 4.x sources (the installed
# 5.24 has no such file; the library's conformance tests compare the two bit for bit). Three
# details matter:
#
# * only the query and key rows move — values, output projection and everything else are
#   copied as they are;
# * the permutation is per head (its ``num_heads`` argument; with grouped-query attention, the
#   key projection takes the number of key/value heads);
# * a projection with a bias needs the same permutation on the bias.
#
# In :class:`posenc.models.CausalLM` each layer has one ``qkv`` projection whose output rows
# are the queries, then the keys, then the values, ``dim`` rows each.
heads, dim = original.transformer.config.num_heads, original.transformer.config.dim


def convert_to_half_layout(state_dict, num_heads=heads, permute_bias=True):
    converted = dict(state_dict)
    for key, tensor in state_dict.items():
        if key.endswith("attn.qkv.weight") or (permute_bias and key.endswith("attn.qkv.bias")):
            q, k, v = tensor.split(dim, dim=0)  # (3 * dim, ...) -> three (dim, ...) blocks
            converted[key] = torch.cat([posenc.permute_for_half_layout(q, num_heads),
                                        posenc.permute_for_half_layout(k, num_heads), v])
    return converted


converted = CausalLM(config("half"))
converted.load_state_dict(convert_to_half_layout(original.state_dict()))
converted.eval()
losses["converted to half-split"] = held_out_loss(converted)
by_position["converted to half-split"] = loss_by_position(converted)
for name, value in losses.items():
    print(f"held-out loss, {name:>23}: {value:.3f} nats per character")

# %%
# Check
# -----
# The converted model is the original model: its logits on every held-out window agree with
# the original ones to float32 rounding (the per-head dot products add the same products in
# another order), and its sample is the original sample. The checks below run during the
# build of this page.
with torch.no_grad():
    reference, logits = original(windows[:, :-1]), converted(windows[:, :-1])
logit_difference = (logits - reference).abs().max().item()
print(f"max |logit difference|, converted vs original: {logit_difference:.1e} "
      f"(max |logit| {reference.abs().max().item():.1f})")
assert torch.allclose(logits, reference, rtol=0, atol=1e-4)
assert math.isclose(losses["converted to half-split"], losses["original (interleaved)"], rel_tol=1e-5)
assert sample(converted) == sample(original)
print("the converted model's sample equals the original's")

# %%
# The check is not a formality: the same conversion with the bias left alone, or with the whole
# projection permuted as one head, fails it, as does no conversion at all.
wrong_ways = {"bias not permuted": convert_to_half_layout(original.state_dict(), permute_bias=False),
              "permuted as one head": convert_to_half_layout(original.state_dict(), num_heads=1),
              "not permuted at all": original.state_dict()}
for name, state in wrong_ways.items():
    model = CausalLM(config("half"))
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        difference = (model(windows[:, :-1]) - reference).abs().max().item()
    print(f"{name:>21}: held-out loss {held_out_loss(model):.3f}, max |logit difference| {difference:.1f}")
    assert difference > 1e-2

# %%
# Compare logits, not only losses: a mistake that changes the held-out loss by little can
# still move the logits by far more than rounding (compare the rows above).
#

# The held-out loss by position for the three models. The original and the converted curves
# lie on top of each other. The mixed-up one starts at the same value at position 0, lies above
# them at every later position (the gap printed earlier), and climbs over the first dozen
# positions, as each prediction comes to depend on more keys at other distances.
fig, ax = plt.subplots(figsize=(7, 4))
styles = {"original (interleaved)": ("C0", "-", 3.0), "copied to half-split": ("C3", "-", 1.5),
          "converted to half-split": ("k", "--", 1.2)}
for name, curve in by_position.items():
    colour, line, width = styles[name]
    ax.plot(range(LENGTH), curve.numpy(), color=colour, linestyle=line, linewidth=width, label=name)
ax.set_xlabel("position in the window")
ax.set_ylabel("held-out loss (nats per character)")
ax.set_title("A RoPE checkpoint run in the other layout, before and after conversion")
ax.legend()
plt.show()

# %%
# What this shows
# ---------------
# * Copying an interleaved-RoPE checkpoint into half-split code raises no error and keeps the
#   model running; it only makes the model worse (the held-out loss printed above), from the
#   second position on, with text that keeps plausible characters but loses words and code.
# * Permuting the query and key rows of every layer, per head and bias included
#   (:func:`posenc.permute_for_half_layout`, Hugging Face's conversion ``permute``), restores
#   the model exactly: logits equal to float32 rounding.
# * To catch the mistake, compare the converted model's logits (or loss) with the source
#   model's on a few sequences; the model itself gives no sign.
