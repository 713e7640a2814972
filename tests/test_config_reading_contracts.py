"""Contracts of the config reader (``posenc._config_reading``) and of ``posenc.rope_report``.

Each test states one rule of how a Hugging Face config is read (module docstrings, and
docs/dev/decisions.md, "Reading configs"), with small configs written here. They were written
against the mutants that the rest of the suite let survive (docs/dev/mutation-testing.md), so
several pin a value or a message exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

import posenc._config_reading as config_reading
from posenc import rope_report
from posenc._config_reading import load_config, model_families, read_config
from test_rope_report import edited

LLAMA: dict[str, Any] = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                         "num_hidden_layers": 4, "max_position_embeddings": 8192, "rope_theta": 500000.0}



# --- loading ------------------------------------------------------------------------------------

def test_load_config_names_the_type_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="got list$"):
        load_config([LLAMA])  # type: ignore[arg-type]
    path = tmp_path / "config.json"
    # config.json files are UTF-8, whatever the locale.
    path.write_text(json.dumps({**LLAMA, "_name_or_path": "Llama-3-éè"}, ensure_ascii=False), encoding="utf-8")
    loaded, source = load_config(tmp_path)
    assert source == str(path) and loaded["_name_or_path"] == "Llama-3-éè"


# --- head width ---------------------------------------------------------------------------------

def test_head_width_reads_the_familys_own_key_first() -> None:
    # ChatGLM's config class names the head width kv_channels; hidden_size / heads would give 128.
    chatglm = {"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 64,
               "seq_length": 8192, "num_layers": 2}
    assert read_config(chatglm).head_dim == 64
    # Elsewhere head_dim wins over hidden_size // num_attention_heads.
    assert read_config(edited(LLAMA, head_dim=96)).head_dim == 96


def test_missing_head_width_message() -> None:
    needs = "config needs 'head_dim', or 'hidden_size' and 'num_attention_heads'"
    with pytest.raises(ValueError) as error:
        read_config({"rope_theta": 1e4})
    assert str(error.value) == needs
    with pytest.raises(ValueError) as error:
        read_config({"rope_theta": 1e4, "vision_config": {}})
    assert str(error.value) == needs + " (its language model may be under 'text_config')"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (edited(LLAMA, hidden_size=0), "hidden_size"),
        (edited(LLAMA, num_hidden_layers=0), "num_hidden_layers"),
        (edited(LLAMA, max_position_embeddings=0), "max_position_embeddings"),
        ({"model_type": "deepseek_v2", "qk_rope_head_dim": 0}, "qk_rope_head_dim"),
        ({"model_type": "gemma3_text", "num_hidden_layers": 4, "sliding_window_pattern": 0}, "sliding_window_pattern"),
        ({"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4, "no_rope_layer_interval": 0},
         "no_rope_layer_interval"),
        ({"model_type": "gemma4_text", "num_hidden_layers": 6, "global_head_dim": 0}, "global_head_dim"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_invalid_width_or_count_names_its_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key} must be a positive integer"):
        read_config(config)


def test_mla_rotates_qk_rope_head_dim_and_scales_by_the_whole_query() -> None:
    model = read_config({"model_type": "deepseek_v2", "qk_rope_head_dim": 32, "qk_nope_head_dim": 96})
    assert (model.head_dim, model.query_width, model.rotary_head_dim) == (128, 128, 32)


# --- names and aliases --------------------------------------------------------------------------

def test_every_alias_of_a_family_is_read() -> None:
    # GPT-NeoX: rotary_emb_base and rotary_pct; the second is read even when the first is absent.
    model = read_config({"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 8, "rotary_pct": 0.5})
    assert model.parameters["all"]["partial_rotary_factor"] == 0.5
    assert model.notes == ["'rotary_pct' (0.5) read as partial_rotary_factor, this family's name for it"]


def test_a_familys_own_keys_are_not_misspellings(monkeypatch: pytest.MonkeyPatch) -> None:
    # Keys a family declares (defaults, aliases, keys transformers ignores) are never reported as a
    # misspelt RoPE key, however close they come to one.
    table = {"toy": {"defaults": {"rope_thetas": 1.0}, "aliases": {"head_dims": "head_dim"},
                     "ignored_by_transformers": {"partial_rotary_factors": "partial_rotary_factor"}}}
    monkeypatch.setattr(config_reading, "model_families", lambda: table)
    config = {"model_type": "toy", "head_dims": 64, "rope_thetas": 1.0, "partial_rotary_factors": 0.5}
    assert not [w for w in read_config(config).warnings if "unknown key" in w]
    # The same keys in a family that does not declare them are reported.
    table["toy"] = {"defaults": {"rope_theta": 1e4}}
    assert len([w for w in read_config({**config, "head_dim": 64}).warnings if "unknown key" in w]) == 3


def test_an_unknown_layer_rule_in_the_table_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_reading, "model_families", lambda: {"toy": {"layer_types": "every_third"}})
    with pytest.raises(AssertionError, match="unknown layer_types rule 'every_third'"):
        read_config({"model_type": "toy", "head_dim": 64, "num_hidden_layers": 3})


def test_rope_pct_is_compared_only_when_partial_rotary_factor_is_absent() -> None:
    stablelm = {"model_type": "stablelm", "hidden_size": 2560, "num_attention_heads": 32}
    both = read_config({**stablelm, "partial_rotary_factor": 0.25, "rope_pct": 0.5})
    assert both.warnings == [] and not [n for n in both.notes if "rope_pct" in n]
    assert both.parameters["all"]["partial_rotary_factor"] == 0.25


# --- the multimodal wrapper and the towers --------------------------------------------------------

def test_towers_with_their_own_rope_are_listed_and_nothing_else() -> None:
    config = {
        "model_type": "qwen2_vl",
        "text_config": {"model_type": "qwen2_vl_text", "hidden_size": 1536, "num_attention_heads": 12,
                        "rope_theta": 1e6},
        "vision_config": {"model_type": "siglip", "rope_theta": 100.0, "rope_parameters": {"rope_type": "default"},
                          "rope_scaling": {"rope_type": "linear"}, "rope_type": "default", "depth": 2},
        "audio_config": {"rope_theta": 10.0},
        "projector_config": {"depth": 2},
        "rope_scaling": {"rope_type": "default"},
    }
    model = read_config(config)
    assert model.towers == {
        "vision_config": "siglip: rope_theta=100.0, rope_parameters={'rope_type': 'default'}, "
                         "rope_scaling={'rope_type': 'linear'}, rope_type='default'",
        "audio_config": "audio_config: rope_theta=10.0",
    }
    assert read_config(LLAMA).towers == {}


def test_text_config_without_model_type_takes_the_wrappers_text_model_type() -> None:
    text = {"hidden_size": 2560, "num_attention_heads": 8}
    model = read_config({"model_type": "gemma3", "text_config": text})
    assert model.model_type == "gemma3_text" and model.read_from == "text_config"
    assert "read the language model's settings under 'text_config' (model_type 'gemma3_text' inside 'gemma3')" \
        in model.notes
    # Its own model_type stays, and a wrapper posenc does not know adds none.
    model = read_config({"model_type": "mistral3", "text_config": {**text, "model_type": "ministral3"}})
    assert model.model_type == "ministral3"
    model = read_config({"model_type": "omni", "text_config": {**text, "rope_theta": 1e4}})
    assert model.model_type is None and model.read_from == "text_config"


def test_older_multimodal_config_is_read_at_the_top_level() -> None:
    model = read_config({"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12})
    assert model.model_type == "qwen2_vl_text" and model.read_from is None
    assert model.notes[0] == "the language model's settings are at the top level (read as model_type 'qwen2_vl_text')"


# --- rope_parameters and rope_scaling -------------------------------------------------------------

def test_legacy_rope_scaling_note_and_type_errors() -> None:
    model = read_config(edited(LLAMA, rope_scaling={"rope_type": "linear", "factor": 2.0}))
    assert "legacy 'rope_scaling' (transformers 5 writes 'rope_parameters'; both are read)" in model.notes
    with pytest.raises(TypeError, match=r"^'rope_scaling' must be a dict or null, got 'linear'$"):
        read_config(edited(LLAMA, rope_scaling="linear"))
    with pytest.raises(TypeError, match=r"^'rope_parameters' must be a dict or null, got 2\.0$"):
        read_config(edited(LLAMA, rope_parameters=2.0))


def test_default_base_without_any_rope_theta() -> None:
    # A model_type posenc does not know, with a scaling block and no base: 10000, listed as a default.
    model = read_config({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    assert model.parameters["all"]["rope_theta"] == 10000.0 and model.defaults == {"rope_theta": 10000.0}
    # A family's own default base (Mixtral: 1e6) replaces it.
    model = read_config({"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32})
    assert model.parameters["all"]["rope_theta"] == 1e6 and model.defaults["rope_theta"] == 1e6


def test_per_layer_type_parameters() -> None:
    config = {
        "model_type": "gpt_oss", "head_dim": 64, "num_hidden_layers": 2, "rope_theta": 300000.0,
        "rope_parameters": {
            "full_attention": {"type": "linear", "factor": 2.0},
            "sliding_attention": {"type": "linear", "rope_type": "default"},
        },
    }
    model = read_config(config)
    full, sliding = model.parameters["full_attention"], model.parameters["sliding_attention"]
    # The legacy 'type' is read as rope_type; where both are given, rope_type wins.
    assert full["rope_type"] == "linear" and "type" not in full and full["rope_theta"] == 300000.0
    assert sliding["rope_type"] == "default" and sliding["rope_theta"] == 300000.0
    assert "one RoPE setting per layer type: ['full_attention', 'sliding_attention']" in model.notes
    # Without a base anywhere, each setting takes the family's default (gpt-oss: 150000), not 10000.
    model = read_config(edited(config, rope_theta=None))
    assert {p["rope_theta"] for p in model.parameters.values()} == {150000.0}


def test_family_default_rope_parameters_only_without_a_config_of_its_own() -> None:
    gemma4 = {"model_type": "gemma4_text", "num_hidden_layers": 6}
    defaults = model_families()["gemma4_text"]["default_rope_parameters"]
    assert read_config(gemma4).defaults["rope_parameters"] == defaults
    model = read_config({**gemma4, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    assert "rope_parameters" not in model.defaults and model.parameters["all"]["rope_type"] == "linear"


def test_gemma4_forces_its_last_layer_to_full_attention() -> None:
    # 5 layers with a pattern of 6: the rule makes all of them sliding; transformers forces the last one.
    model = read_config({"model_type": "gemma4_text", "num_hidden_layers": 5})
    assert model.layer_types == ["sliding_attention"] * 4 + ["full_attention"]
    given = ["sliding_attention", "full_attention", "sliding_attention"]
    model = read_config({"model_type": "gemma4_text", "num_hidden_layers": 3, "layer_types": given})
    assert model.warnings == ["the last layer is 'sliding_attention'; transformers forces it to 'full_attention'"]


def test_mrope_sections_and_interleaving() -> None:
    scaling = {"rope_type": "mrope", "mrope_section": [16, 24, 24], "mrope_interleaved": True}
    model = read_config({"model_type": "qwen3_vl_text", "rope_scaling": scaling})
    assert model.mrope_section == (16, 24, 24) and model.mrope_interleaved is True
    assert "rope_type 'mrope' (Qwen2-VL's old name) is read as 'default' with M-RoPE sections" in model.notes
    assert read_config(LLAMA).mrope_interleaved is False and rope_report(LLAMA).mrope_interleaved is False


def test_legacy_rope_type_of_a_family() -> None:
    scaling = {"rope_type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}
    model = read_config({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
                         "max_position_embeddings": 131072, "rope_scaling": scaling})
    assert "rope_type 'su' is read as 'longrope' for model_type 'phi3'" in model.notes


def test_gemma3_base_of_each_layer_kind_and_the_scaling_note() -> None:
    gemma = {"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_theta": 2e6, "rope_local_base_freq": 2e4}
    note = ("the scaling applies to the global (full-attention) layers only; the local layers keep their own "
            "base, unscaled")
    model = read_config(gemma)
    assert model.parameters["full_attention"]["rope_theta"] == 2e6
    assert model.parameters["sliding_attention"]["rope_theta"] == 2e4
    assert note not in model.notes
    assert note in read_config({**gemma, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}).notes


def test_lost_base_under_llama3_warning_text() -> None:
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    model = read_config(edited(LLAMA, rope_theta=None, rope_scaling=scaling))
    assert model.warnings == ["no rope_theta: the base defaults to 10000 under the Llama 3 rule, whose models use "
                              "500000; check the model's documented base"]


def test_remote_code_families_runtime_flags_and_base_multiplier() -> None:
    qwen = {"model_type": "qwen", "hidden_size": 2048, "num_attention_heads": 16, "kv_channels": 128,
            "seq_length": 8192, "use_dynamic_ntk": True, "use_logn_attn": False}
    model = read_config(qwen)
    flags = model_families()["qwen"]["runtime_flags"]
    assert f"use_dynamic_ntk: {flags['use_dynamic_ntk']}" in model.notes
    assert not [n for n in model.notes if n.startswith("use_logn_attn")]
    assert ("transformers has no class for model_type 'qwen': the model runs its own code (trust_remote_code), "
            "whose reading of the config this follows") in model.notes
    chatglm = {"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "kv_channels": 128,
               "seq_length": 8192, "rope_ratio": 500}
    model = read_config(chatglm)
    assert model.parameters["all"]["rope_theta"] == 10000.0 * 500
    assert "base = rope_theta x rope_ratio (500)" in model.notes
    assert read_config(edited(chatglm, rope_ratio=None)).parameters["all"]["rope_theta"] == 10000.0


def test_partial_rotary_factor_inside_the_parameters_wins() -> None:
    model = read_config(edited(LLAMA, partial_rotary_factor=0.5,
                              rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.25}))
    assert model.parameters["all"]["partial_rotary_factor"] == 0.25
    # Without one anywhere, the key is not added.
    assert "partial_rotary_factor" not in read_config(LLAMA).parameters["all"]


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "yarn", "factor": 4.0},
        {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        {"rope_type": "longrope", "short_factor": [1.0] * 64, "long_factor": [2.0] * 64},
    ],
    ids=lambda s: s["rope_type"],
)
def test_top_level_original_context_fills_in_for_the_types_that_read_it(scaling: dict[str, Any]) -> None:
    config = edited(LLAMA, max_position_embeddings=32768, original_max_position_embeddings=8192, rope_scaling=scaling)
    report = rope_report(config)
    assert report.scheme.original_context == 8192 and report.warnings == []
    # The one inside the scaling block wins.
    inside = edited(config, rope_scaling={**scaling, "original_max_position_embeddings": 4096})
    assert read_config(inside).parameters["all"]["original_max_position_embeddings"] == 4096


def test_original_context_is_added_only_where_the_type_reads_it() -> None:
    model = read_config(edited(LLAMA, original_max_position_embeddings=4096))
    assert "original_max_position_embeddings" not in model.parameters["all"]
    phi3 = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 4096}
    assert "original_max_position_embeddings" not in read_config(phi3).parameters["all"]
    # Phi-3 reads it at the top level, its class default (4096) included, for the types that use it.
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    model = read_config({**phi3, "max_position_embeddings": 32768, "rope_scaling": llama3})
    assert model.parameters["all"]["original_max_position_embeddings"] == 4096
    assert model.defaults["original_max_position_embeddings"] == 4096


# --- layers -------------------------------------------------------------------------------------

def test_qwen2_sliding_layers_from_max_window_layers() -> None:
    qwen2 = {"model_type": "qwen2", "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 4,
             "sliding_window": 4096, "max_window_layers": 2}
    model = read_config({**qwen2, "use_sliding_window": True})
    assert model.layer_types == ["full_attention"] * 2 + ["sliding_attention"] * 2
    assert read_config({**qwen2, "use_sliding_window": False}).layer_types is None
    assert read_config(edited(qwen2, use_sliding_window=True, sliding_window=None)).layer_types is None


def test_mistral_slides_in_every_layer_only_with_a_window() -> None:
    mistral = {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 2}
    model = read_config({**mistral, "sliding_window": 4096})
    assert model.layer_types == ["sliding_attention"] * 2 and model.rope_layers is None
    assert model.sliding_window == 4096
    assert read_config({**mistral, "sliding_window": None}).layer_types is None


def test_sliding_window_default_of_the_family_for_sliding_layers() -> None:
    report = rope_report({"model_type": "gemma2", "num_hidden_layers": 2})
    assert [(g.attention, g.window) for g in report.layers] == [("sliding_attention", 4096),
                                                                ("full_attention", None)]
    assert report.defaults["sliding_window"] == 4096
    # A window of a model without sliding layers is kept as given.
    assert read_config(edited(LLAMA, sliding_window=1024)).sliding_window == 1024


def test_explicit_no_rope_layers() -> None:
    smollm3 = {"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4}
    assert read_config({**smollm3, "no_rope_layers": [0, 1, 1, 1]}).rope_layers == [False, True, True, True]
    assert read_config(smollm3).rope_layers == [True, True, True, False]
    with pytest.raises(ValueError, match=r"^'no_rope_layers' has 3 entries for num_hidden_layers=4$"):
        read_config({**smollm3, "no_rope_layers": [1, 1, 1]})


def test_layers_without_attention_do_not_rotate() -> None:
    config = {"head_dim": 64, "rope_theta": 1e4, "num_hidden_layers": 3,
              "layer_types": ["linear_attention", "full_attention", "mamba"]}
    assert read_config(config).rope_layers == [False, True, False]
    report = rope_report(config)
    assert [(g.layers, g.scheme) for g in report.layers] == [((0,), None), ((1,), "all"), ((2,), None)]


# --- what the reader hands on -------------------------------------------------------------------

def test_model_level_values_of_a_plain_config() -> None:
    model = read_config(LLAMA)
    assert model.model_type == "llama" and model.max_position_embeddings == 8192 and model.num_layers == 4
    assert model.softmax_scale_rule == "head_dim" and model.query_pre_attn_scalar is None and model.query_width == 128
    # Gemma's scalar is read only where the family's rule uses it.
    assert read_config({**LLAMA, "query_pre_attn_scalar": 144}).query_pre_attn_scalar is None
    assert model.layout == "half (rotate_half)" and rope_report(LLAMA).layout == "half (rotate_half)"
    assert read_config({"head_dim": 64, "rope_theta": 1e4}).model_type is None


# --- rope_report: the analysis of each setting -----------------------------------------------------

SMALL: dict[str, Any] = {"head_dim": 64, "max_position_embeddings": 16384, "rope_theta": 1e4}


def notes_of(scaling: dict[str, Any], config: dict[str, Any] = SMALL) -> list[str]:
    return rope_report({**config, "rope_parameters": scaling}).notes


def test_how_dynamic_and_linear_read_the_lengths_are_notes() -> None:
    report = rope_report({**SMALL, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})
    assert report.notes == ["dynamic reads max_position_embeddings (16384) as the trained context: frequencies "
                            "change only for sequences longer than that"]
    assert report.scheme.original_context == 16384 and report.warnings == []
    assert notes_of({"rope_type": "linear", "factor": 2.0}) == [
        "linear: max_position_embeddings does not enter the frequencies; the factor alone divides every frequency"]
    assert notes_of({"rope_type": "default"}) == []
    # A setting that serves some layers only is named in its notes.
    gemma = {"model_type": "gemma3_text", "num_hidden_layers": 2, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    assert rope_report(gemma).notes[-1] == ("full_attention: dynamic reads max_position_embeddings (131072) as the "
                                            "trained context: frequencies change only for sequences longer than that")


def test_yarn_factor_equal_to_the_context_ratio_is_not_a_note() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    assert notes_of(yarn) == []
    assert notes_of({**yarn, "factor": 4.000001}) == []  # equal within 1e-6
    assert len(notes_of({**yarn, "factor": 8.0})) == 1
    # The comparison is YaRN's: Llama 3's factor is the rule's own parameter.
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 4096}
    assert notes_of(llama3) == []


def test_keys_of_other_code_are_notes_not_warnings() -> None:
    report = rope_report({**SMALL, "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 4096, "finetuned": True}})
    assert report.warnings == [] and "finetuned" not in report.scheme.parameters
    assert report.notes == ["'finetuned': read by the YaRN authors' own modelling code (NousResearch's Yarn-Llama and "
                            "Yarn-Mistral); transformers does not read it"]


def test_an_invalid_base_names_its_setting() -> None:
    with pytest.raises(ValueError, match="^rope_theta must be"):
        rope_report({**SMALL, "rope_theta": -1.0})
    nested = {"full_attention": {"rope_type": "default", "rope_theta": -1.0},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    with pytest.raises(ValueError, match="^full_attention rope_theta must be"):
        rope_report({**SMALL, "rope_parameters": nested})


def test_longrope_frequencies_at_the_target_context() -> None:
    # Without max_position_embeddings the target is factor x the original context, past which
    # LongRoPE uses long_factor; at the original context itself it uses short_factor.
    longrope = {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 4096,
                "short_factor": [1.0] * 32, "long_factor": [2.0] * 32}
    config = {"head_dim": 64, "rope_theta": 1e4, "rope_parameters": longrope}
    report = rope_report(config)
    assert report.scheme.target_context is None and report.scheme.slow_down.tolist() == [2.0] * 32
    report = rope_report({**config, "max_position_embeddings": 4096})
    assert report.scheme.slow_down.tolist() == [1.0] * 32


def test_frequency_band_counts() -> None:
    plain = rope_report(SMALL).scheme
    assert (plain.unchanged, plain.interpolated, plain.in_between) == (32, 0, 0)
    linear = rope_report({**SMALL, "rope_parameters": {"rope_type": "linear", "factor": 2.0}}).scheme
    assert (linear.unchanged, linear.interpolated, linear.in_between) == (0, 32, 0)
    assert linear.parameters["rope_theta"] == 1e4 and linear.parameters["rope_type"] == "linear"
    unscaled = 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    assert torch.allclose(linear.wavelength, 2 * torch.pi / unscaled, rtol=1e-12, atol=0)


def test_proportional_rope_notes_the_pairs_that_turn() -> None:
    report = rope_report({"model_type": "gemma4_text", "num_hidden_layers": 6})
    assert report.notes[-1] == ("full_attention: 64 of 256 pairs turn, (i, i + 256) for i < 64; their exponents "
                                "divide by the head width 512, not by the rotated width")
    assert not [n for n in rope_report(SMALL).notes if "pairs turn" in n]


def test_softmax_scales_of_the_family_rules() -> None:
    report = rope_report({"model_type": "gemma4_text", "num_hidden_layers": 6})
    assert (report.softmax_scale, report.softmax_scale_rule) == (1.0, "1 (queries and keys are RMS-normalised instead)")

    def mla(factor: float) -> float:
        scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 4096,
                   "mscale_all_dim": 1.0}
        report = rope_report({"model_type": "deepseek_v2", "rope_scaling": scaling})
        assert report.query_width == 192
        return report.softmax_scale

    # YaRN's mscale is 1 for a factor of 1 or less, 0.1 ln(factor) + 1 above.
    assert mla(1.0) == mla(0.5) == 192 ** -0.5
    assert mla(1.5) == pytest.approx(192 ** -0.5 * (0.1 * math.log(1.5) + 1) ** 2, rel=1e-12)


# --- rope_report: layers --------------------------------------------------------------------------

def test_layer_groups_without_a_layer_count() -> None:
    from posenc.rope_config import LayerGroup

    assert rope_report(SMALL).layers == [LayerGroup(layers=(), attention="full_attention", scheme="all", window=None)]


def test_layers_take_their_kinds_setting_else_the_only_one() -> None:
    gemma = rope_report({"model_type": "gemma3_text", "num_hidden_layers": 2, "sliding_window_pattern": 2})
    assert [(g.attention, g.scheme) for g in gemma.layers] == [("sliding_attention", "sliding_attention"),
                                                               ("full_attention", "full_attention")]
    mistral = rope_report({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                           "num_hidden_layers": 2, "sliding_window": 4096})
    assert [(g.attention, g.scheme) for g in mistral.layers] == [("sliding_attention", "all")]
    # A kind without a setting of its own, in a config without an "all" one, takes the first setting.
    only_full = {"head_dim": 64, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
                 "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    assert [(g.attention, g.scheme) for g in rope_report(only_full).layers] == [
        ("sliding_attention", "full_attention"), ("full_attention", "full_attention")]


# --- rope_report: the readable and the JSON forms ---------------------------------------------------

LLAMA4: dict[str, Any] = {
    "model_type": "llama4",
    "vision_config": {"model_type": "llama4_vision_model", "rope_theta": 10000},
    "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
        "num_hidden_layers": 12, "attention_chunk_size": 8192, "rope_theta": 500000.0,
        "max_position_embeddings": 10485760,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
    },
}

LLAMA4_TEXT = """\
model_type         llama4_text (read under text_config)
head_dim           128
softmax scale      0.0883883 = head_dim ** -0.5 (128)
layout             interleaved (complex numbers)
rope_type          llama3
base (rope_theta)  500000
rotated channels   128 (64 pairs)
factor             8
original context   8192
target context     10485760
attention factor   1
frequency pairs    29 unchanged, 29 divided by the factor, 6 in between
                   29 with a wavelength longer than the original context
layers
  layers    attention          window  RoPE         base    scaling  rotated
  9 of 12   chunked_attention  8192    all          500000  llama3   128
  3, 7, 11  full_attention     -       none (NoPE)  -       -        0
NoPE temperature   attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1
tower vision_config: llama4_vision_model: rope_theta=10000 (not analysed)
defaults           no_rope_layer_interval = 4, attn_temperature_tuning = True,
                   floor_scale = 8192, attn_scale = 0.1 (not in the config; the
                   family's defaults)
notes
  - read the language model's settings under 'text_config' (model_type
    'llama4_text' inside 'llama4')
  - legacy 'rope_scaling' (transformers 5 writes 'rope_parameters'; both are
    read)
warnings           none"""


def test_readable_form_of_one_setting_with_nope_layers() -> None:
    assert str(rope_report(LLAMA4)) == LLAMA4_TEXT
    # Up to 8 layers of a group are listed one by one.
    ten = {**LLAMA4, "text_config": {**LLAMA4["text_config"], "num_hidden_layers": 10}}
    assert "  0, 1, 2, 4, 5, 6, 8, 9  chunked_attention" in str(rope_report(ten))


def test_readable_form_of_two_settings() -> None:
    lines = str(rope_report({"model_type": "gemma4_text", "num_hidden_layers": 7})).splitlines()
    assert lines[2] == "softmax scale      1 = 1 (queries and keys are RMS-normalised instead)"
    assert lines[4:7] == ["setting sliding_attention", "  rope_type          default",
                          "  base (rope_theta)  10000"]
    assert lines[14:16] == ["setting full_attention", "  rope_type          proportional"]
    assert lines[24:28] == [
        "layers",
        "  layers         attention          window  RoPE               base     scaling       rotated",
        "  0, 1, 2, 3, 4  sliding_attention  512     sliding_attention  10000    default       256",
        "  5, 6           full_attention     -       full_attention     1000000  proportional  128",
    ]


def test_readable_form_of_warnings_mrope_and_large_numbers() -> None:
    config = {"model_type": "deepseek_v2", "max_position_embeddings": 16384,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    text = str(rope_report(config))
    assert text.endswith(
        "\nwarnings\n"
        "  - no 'original_max_position_embeddings': yarn takes max_position_embeddings\n"
        "    (16384) as the trained context; the frequencies are still scaled by the\n"
        "    factor, as if a model trained on 16384 positions were extended 4x beyond it")
    qwen = {"model_type": "qwen2_vl_text", "hidden_size": 1536, "num_attention_heads": 12, "rope_theta": 1e6,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    assert "\nM-RoPE sections    [16, 24, 24] (time, height, width; blocked)\n" in str(rope_report(qwen))
    qwen["rope_scaling"]["mrope_interleaved"] = True
    assert "\nM-RoPE sections    [16, 24, 24] (time, height, width; interleaved)\n" in str(rope_report(qwen))
    lines = str(rope_report({"head_dim": 64, "rope_theta": 1e15})).splitlines()
    assert "base (rope_theta)  1e+15" in lines and "head_dim           64" in lines


def test_json_form_has_every_field_under_its_own_name() -> None:
    from dataclasses import fields

    from posenc.rope_config import RopeReport

    qwen = {"model_type": "qwen2_vl_text", "hidden_size": 1536, "num_attention_heads": 12, "rope_theta": 1e6,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    report = rope_report(qwen)
    plain = report.to_dict()
    assert set(plain) == {f.name for f in fields(RopeReport)}
    for name in ("source", "model_type", "read_from", "head_dim", "query_width", "softmax_scale",
                 "softmax_scale_rule", "layout", "mrope_interleaved", "temperature_tuning", "towers", "defaults",
                 "notes", "warnings"):
        assert plain[name] == getattr(report, name), name
    assert plain["mrope_section"] == [16, 24, 24]


def test_missing_original_context_warning_texts() -> None:
    head = ("no 'original_max_position_embeddings': {} takes max_position_embeddings (16384) as the trained "
            "context; ")
    lists = {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32}
    report = rope_report({**SMALL, "rope_parameters": {"rope_type": "longrope", **lists}})
    assert report.warnings == [head.format("longrope") + "long_factor applies only to sequences longer than 16384, "
                               "and the attention factor is 1 (no extension)"]
    report = rope_report({**SMALL, "rope_parameters": {"rope_type": "yarn"}})
    assert report.warnings == [head.format("yarn") + "with no 'factor' either, the factor is their ratio, 1: "
                               "nothing is scaled"]


def test_no_target_context_for_a_type_without_an_original_one() -> None:
    report = rope_report({"head_dim": 64, "rope_theta": 1e4, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})
    assert (report.scheme.target_context, report.scheme.original_context) == (None, None)
    assert report.scheme.interpolated == 32


def test_a_pair_changed_by_a_hair_is_in_between() -> None:
    # Llama 3 (factor 2, original 8192, low/high frequency factors 1 and 4) keeps the pairs whose
    # wavelength is below 8192 / 4 and divides those above 8192 by the factor. Pair 1 of a 4-wide
    # head has wavelength 2 pi sqrt(base): put it just past each edge of the band in between.
    scaling = {"rope_type": "llama3", "factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}

    def pair_1(wavelength: float) -> tuple[Any, int, int, int]:
        base = (wavelength / (2 * math.pi)) ** 2
        s = rope_report({"head_dim": 4, "rope_theta": base, "max_position_embeddings": 65536,
                         "rope_parameters": scaling}).scheme
        return s.slow_down[1].item(), s.unchanged, s.interpolated, s.in_between

    slow_down, *counts = pair_1(2048 * (1 + 2e-10))
    assert 0 < slow_down - 1 < 1e-9 and counts == [1, 0, 1]
    slow_down, *counts = pair_1(8192 * (1 - 9e-9))
    assert 0 < 2 - slow_down < 1e-8 and counts == [1, 0, 1]


def test_readable_form_without_text_config() -> None:
    assert str(rope_report(LLAMA)).splitlines()[0] == "model_type         llama"


def test_readable_lines_break_at_80_columns_between_words_only() -> None:
    def tower_lines(model_type: str) -> list[str]:
        config = {"head_dim": 64, "rope_theta": 1e4, "vision_config": {"model_type": model_type, "rope_theta": 1}}
        lines = str(rope_report(config)).splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("tower"))
        return lines[start:-1]

    # 81 characters: one line too many; the rest goes on an indented line.
    assert tower_lines("m" * 31) == ["tower vision_config: " + "m" * 31 + ": rope_theta=1 (not", "  analysed)"]
    # A word longer than a line stays whole, and so does a hyphenated word.
    assert tower_lines("x" * 90) == ["tower vision_config:", "  " + "x" * 90 + ":", "  rope_theta=1 (not analysed)"]
    hyphens = "rotary-vision-tower-" * 3 + "end"
    assert tower_lines(hyphens) == ["tower vision_config:", f"  {hyphens}: rope_theta=1", "  (not analysed)"]


# --- the global setting -------------------------------------------------------------------------

def test_report_scheme_is_the_global_layers_setting() -> None:
    # Gemma 3 lists its local setting first; the report's main setting is still the global one.
    gemma = {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 6,
             "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    report = rope_report(gemma)
    assert list(report.schemes) == ["sliding_attention", "full_attention"]
    assert report.scheme.name == "full_attention" and report.scheme.rope_type == "linear"
    # Without a full-attention setting, the first one listed.
    nested = {"model_type": "llama", "head_dim": 64, "num_hidden_layers": 2,
              "layer_types": ["sliding_attention", "chunked_attention"],
              "rope_parameters": {"chunked_attention": {"rope_type": "default", "rope_theta": 5e5},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    assert rope_report(nested).scheme.name == "chunked_attention"
