"""
``rope_scaling`` errors
=======================

A model's ``config.json`` gets a RoPE scaling block to reach a longer context, and the model
either refuses to load, prints warnings nobody can place, or loads silently and then reads long
inputs worse than it should. We write the usual mistakes as configs, show what the installed
Hugging Face ``transformers`` 5.24 does with each and what :func:`posenc.rope_report` says, and
measure which ones change the frequencies. Whether raising ``max_position_embeddings`` applies
linear scaling a second time is the question of
:ref:`sphx_glr_auto_examples_07_troubleshooting_plot_double_rope_scaling.py`.
"""

# %%
# What you see
# ------------
# * Loading fails with ``KeyError`` for a scaling block that looks right.
# * The log shows ``Unrecognized keys in `rope_parameters```, or a message about a factor that
#   "does not match the ratio implicitly set by other parameters".
# * Nothing is logged, and long inputs are handled worse than the model card promises.
#
# The configs on this page have the shape of a Llama 2 model (head width 128, base 10000) trained
# on 4096 tokens and extended four times, to 16 384. Nothing is downloaded: the configs are
# written here, and for each one ``transformers`` builds its ``LlamaConfig`` and the rotary
# module ``LlamaRotaryEmbedding`` (its inverse frequencies only; no model weights). The page on reading
# well-formed configs, :ref:`sphx_glr_auto_examples_04_variants_plot_reading_rope_configs.py`,
# explains the report itself.
#
# Reproduce it
# ------------
# ``hugging_face(config)`` returns what ``transformers`` does with a config: the messages it logs
# (recorded instead of printed), the exception it raises, and the rotary module it builds.
import copy
import logging
import textwrap
import warnings

import matplotlib.pyplot as plt
import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.utils import logging as hf_logging

import posenc

print(f"transformers {transformers.__version__}")


class Recorder(logging.Handler):
    """Keeps the messages of the ``transformers`` logger."""

    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def hugging_face(config):
    recorder, verbosity = Recorder(), hf_logging.get_verbosity()
    hf_logging.disable_default_handler()
    hf_logging.add_handler(recorder)
    hf_logging.set_verbosity_warning()
    outcome = {"messages": recorder.messages, "error": None, "rope": None, "rope_parameters": None}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                hf_config = LlamaConfig(**copy.deepcopy(config))  # transformers edits what it is given
                outcome["rope_parameters"] = hf_config.rope_parameters
                outcome["rope"] = LlamaRotaryEmbedding(hf_config)
            except (KeyError, ValueError) as error:
                outcome["error"] = error
        outcome["messages"] += [str(w.message) for w in caught]
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.remove_handler(recorder)
        hf_logging.enable_default_handler()
    return outcome


# %%
# The mistakes, each with the scaling it meant (the ``intended`` dict, in the form
# :func:`posenc.rope_inv_freq` takes). LongRoPE's per-frequency lists are made up here, in the
# shape of published ones.
HEAD_DIM, BASE, TRAINED, TARGET = 128, 10000.0, 4096, 16384
llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": BASE,
          "max_position_embeddings": TARGET}
yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED}
llama3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": TRAINED}
longrope = {"rope_type": "longrope", "short_factor": [1.0] * 64,
            "long_factor": [1.0 + 3.0 * i / 63 for i in range(64)],
            "original_max_position_embeddings": TRAINED}
linear = {"rope_type": "linear", "factor": 4.0}


def without(params, key):
    return {k: v for k, v in params.items() if k != key}


ORIGINAL = "original_max_position_embeddings"
mistakes = {  # name: (rope_parameters as written, as intended)
    "legacy key 'type'": ({"type": "yarn", **without(yarn, "rope_type")}, yarn),
    "yarn without original_max_position_embeddings": (without(yarn, ORIGINAL), yarn),
    "llama3 without original_max_position_embeddings": (without(llama3, ORIGINAL), llama3),
    "longrope without original_max_position_embeddings": (without(longrope, ORIGINAL), longrope),
    "misspelt optional key (yarn)": ({**without(yarn, ORIGINAL), "orignal_max_position_embeddings": TRAINED},
                                     yarn),
    "key of another type (linear)": ({**linear, ORIGINAL: TRAINED}, linear),
    "misspelt required key (linear)": ({"rope_type": "linear", "factr": 4.0}, linear),
    "unknown rope_type 'ntk'": ({"rope_type": "ntk", "factor": 4.0}, None),
    "factor 8 for 16384 / 4096 (yarn)": ({**yarn, "factor": 8.0}, yarn),
    "factor 8 for 16384 / 4096 (llama3)": ({**llama3, "factor": 8.0}, llama3),
}

# %%
# For each config: what ``transformers`` does; whether the rotary module it builds has the
# intended frequencies and attention factor, probed with an input of 8192 tokens (longer than the
# trained length, so that every scaling rule is active); and the warnings and notes of
# :func:`posenc.rope_report`.
PROBE = 8192


def intended_rope(scaling, length=PROBE):
    """Inverse frequencies and attention factor the intended config gives an input of ``length``."""
    return posenc.rope_inv_freq(HEAD_DIM, base=BASE, scaling={**scaling, "max_position_embeddings": TARGET},
                                seq_len=length)


def compare(rope, intended):
    """Pairs whose frequency differs from the intended one, and the two attention factors."""
    rope(torch.zeros(1, 1, HEAD_DIM), torch.arange(PROBE)[None])  # dynamic types update here
    inv_freq, factor = intended_rope(intended)
    differ = int((~torch.isclose(rope.inv_freq.double(), inv_freq, rtol=1e-5)).sum())
    return differ, rope.attention_scaling, factor


def wrap(text, indent):
    return textwrap.fill(text, 104, initial_indent=indent, subsequent_indent=indent + "  ")


outcomes = {}
for name, (written, intended) in mistakes.items():
    config = {**llama2, "rope_parameters": written}
    outcome = outcomes[name] = hugging_face(config)
    print(f"=== {name}")
    if outcome["error"] is not None:
        print(wrap(f"transformers: {type(outcome['error']).__name__}: {outcome['error']}", "  "))
    else:
        outcome["differ"], built, meant = compare(outcome["rope"], intended)
        print(f"  transformers: loads; {outcome['differ']} of {HEAD_DIM // 2} pairs differ from the "
              f"intended frequencies; attention factor {built:.4f} (intended {meant:.4f})")
    for message in outcome["messages"]:
        print(wrap(f"logged: {message}", "    "))
    try:
        report = posenc.rope_report(config)
    except ValueError as error:
        print(wrap(f"rope_report: ValueError: {error}", "    "))
        continue
    for warning in report.warnings:
        print(wrap(f"rope_report warning: {warning}", "    "))
    for note in report.notes:
        print(wrap(f"rope_report note: {note}", "    "))

# %%
# Why
# ---
# The installed ``transformers`` handles these in ``RotaryEmbeddingConfigMixin``
# (``transformers/modeling_rope_utils.py``), and reading it explains every line above:
#
# * ``standardize_rope_params`` copies ``type`` into ``rope_type``, so the legacy key is harmless
#   there. For ``yarn``, ``llama3`` and ``longrope`` it then *fills in* a missing
#   ``original_max_position_embeddings`` with ``max_position_embeddings``: the model is declared
#   to have been trained on the long context it is meant to reach.
# * ``_check_received_keys`` raises ``KeyError`` for a missing required key (the misspelt
#   ``factor``) and only logs keys it does not know. A misspelt optional key is therefore just a
#   log line, and the value it carried is replaced by the fallback above.
# * ``_validate_yarn_rope_parameters`` compares ``factor`` with
#   ``max_position_embeddings / original_max_position_embeddings`` and logs the mismatch, once
#   per message, but skips the comparison when that ratio is 1: exactly the case of the missing
#   or misspelt original length. The ``llama3`` check logs that the original length is not below
#   ``max_position_embeddings``, and has no factor check. The ``longrope`` check finds the filled-in
#   value and asks the user to set ``factor`` instead, as if the user had written it.
# * An unknown ``rope_type`` has no validation function (a log line) and no entry in
#   ``ROPE_INIT_FUNCTIONS``: the rotary module raises ``KeyError``.
#
# What the fallback costs: with the original length taken as 16 384 instead of 4096, YaRN and the
# Llama 3 rule give the full factor only to the pairs whose wavelength exceeds 16 384 instead of
# 4096, and move their blend to longer wavelengths accordingly. The pairs in between, which
# never completed a turn in training, are slowed down less than intended, or not at all
# (:ref:`sphx_glr_auto_examples_04_variants_plot_rope_scaling_atlas.py` draws the rules). For
# LongRoPE the filled-in length decides when the long factors apply, and the ratio that sets the
# attention factor; both moved in the printed line above. Each pair's slow-down for YaRN and
# Llama 3, intended and as built:
unscaled = posenc.rope_inv_freq(HEAD_DIM, base=BASE)[0]
wavelength = 2 * torch.pi / unscaled
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), sharey=True)
for ax, (name, intended) in zip(axes, (("yarn without original_max_position_embeddings", yarn),
                                       ("llama3 without original_max_position_embeddings", llama3))):
    built = outcomes[name]["rope"].inv_freq.double()
    ax.plot((wavelength / TRAINED).numpy(), (unscaled / intended_rope(intended)[0]).numpy(), "o-",
            markersize=3, label="intended (trained on 4096)")
    ax.plot((wavelength / TRAINED).numpy(), (unscaled / built).numpy(), "s-", markersize=3,
            label="as built (fallback 16384)")
    ax.set_xscale("log")
    ax.set_title(f"{intended['rope_type']}, original length missing")
    ax.set_xlabel("wavelength / 4096")
axes[0].set_ylabel("slow-down of the pair")
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncol=2)
fig.suptitle("A missing original length moves the interpolation")
plt.show()

# %%
# The fix
# -------
# Write the transformers 5 form: a ``rope_parameters`` dict with ``rope_type`` (not ``type``),
# every key the type needs, ``original_max_position_embeddings`` set to the length the model
# was *trained* on, and ``max_position_embeddings`` equal to ``factor`` times that length. Then
# read it back before loading weights: :func:`posenc.rope_report` lists the surprises, and
# :func:`posenc.rope_inv_freq` is strict, refusing any key the type does not use (the
# misspelling included), where ``transformers`` only logs it:
try:
    posenc.rope_inv_freq(HEAD_DIM, base=BASE, scaling=mistakes["misspelt optional key (yarn)"][0])
except ValueError as error:
    strict_error = error
    print(wrap(f"rope_inv_freq: ValueError: {error}", ""))

# %%
# The intended configs pass through ``transformers`` without a message, and it builds the
# intended frequencies and attention factor:
repaired = {"yarn": yarn, "llama3": llama3, "longrope": {**longrope, "factor": TARGET / TRAINED},
            "linear": linear}
repaired_outcomes = {}
for name, params in repaired.items():
    config = {**llama2, "rope_parameters": params}
    outcome = repaired_outcomes[name] = hugging_face(config)
    outcome["differ"], built, meant = compare(outcome["rope"], params)
    outcome["same_factor"] = abs(built - meant) < 1e-9
    print(f"{name:>8}: {len(outcome['messages'])} messages logged, {outcome['differ']} pairs differ, "
          f"attention factor as intended: {outcome['same_factor']}")
    report = posenc.rope_report(config)
    for warning in report.warnings:
        print(wrap(f"rope_report warning: {warning}", "    "))
    for note in report.notes:
        print(wrap(f"rope_report note: {note}", "    "))

# %%
# The ``linear`` note is not a mistake; it answers the question of
# :ref:`sphx_glr_auto_examples_07_troubleshooting_plot_double_rope_scaling.py`.
#
# Check
# -----
# The statements of this page, as assertions that run with it.
assert isinstance(outcomes["misspelt required key (linear)"]["error"], KeyError)
assert isinstance(outcomes["unknown rope_type 'ntk'"]["error"], KeyError)
assert outcomes["legacy key 'type'"]["differ"] == 0  # harmless in transformers 5
for name in ("yarn", "llama3", "longrope"):
    silent = outcomes[f"{name} without original_max_position_embeddings"]
    assert silent["rope_parameters"][ORIGINAL] == TARGET  # filled in from max_position_embeddings
assert outcomes["yarn without original_max_position_embeddings"]["messages"] == []  # nothing logged
wrong_frequencies = [f"{kind} without {ORIGINAL}" for kind in ("yarn", "llama3", "longrope")]
wrong_frequencies += ["misspelt optional key (yarn)", "factor 8 for 16384 / 4096 (yarn)",
                      "factor 8 for 16384 / 4096 (llama3)"]
for name in wrong_frequencies:
    assert outcomes[name]["differ"] > 0, name  # the frequencies are not the intended ones
assert outcomes["key of another type (linear)"]["differ"] == 0
assert "orignal_max_position_embeddings" in str(strict_error)
for name, outcome in repaired_outcomes.items():
    assert outcome["messages"] == [] and outcome["differ"] == 0 and outcome["same_factor"], name
print("all checks passed")

# %%
# What this shows
# ---------------
# * ``transformers`` raises only for a missing required key or an unknown type. The costly
#   mistakes load, with a log line at most (none for YaRN): a missing or misspelt
#   ``original_max_position_embeddings`` is replaced by ``max_position_embeddings``, and the
#   interpolation moves to the wrong frequencies.
# * A factor that disagrees with the two lengths is logged for YaRN and not for the Llama 3 rule;
#   the frequencies follow the factor in both.
