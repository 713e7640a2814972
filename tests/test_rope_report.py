"""rope_report and ``python -m posenc rope``: what a config means, and each warning rule.

Every warning rule has a config that triggers it and a correct config that does not. The real
configs of tests/data/configs are compared with transformers in
tests/conformance/test_real_configs.py.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from posenc import rope_inv_freq, rope_report

LLAMA_31: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def edited(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``config`` with top-level keys changed (``None`` removes a key)."""
    copied = copy.deepcopy(config)
    for key, value in changes.items():
        if value is None:
            copied.pop(key, None)
        else:
            copied[key] = value
    return copied


def warned(config: dict[str, Any], text: str) -> bool:
    return any(text in w for w in rope_report(config).warnings)


def test_llama31_reads_as_transformers_and_warns_nothing() -> None:
    report = rope_report(LLAMA_31)
    assert report.warnings == []
    scheme = report.scheme
    assert (scheme.rope_type, scheme.base, report.head_dim, scheme.rotary_dim) == ("llama3", 500000.0, 128, 128)
    assert (scheme.factor, scheme.original_context, scheme.target_context) == (8.0, 8192, 131072)
    inv_freq, attention = rope_inv_freq(128, base=500000.0, scaling=dict(LLAMA_31["rope_scaling"]))
    torch.testing.assert_close(scheme.inv_freq, inv_freq, rtol=0, atol=0)
    unscaled, _ = rope_inv_freq(128, base=500000.0)
    slow_down = unscaled / inv_freq
    assert torch.equal(scheme.slow_down, slow_down)
    assert scheme.unchanged == int((slow_down == 1).sum())
    assert scheme.interpolated == int(torch.isclose(slow_down, torch.tensor(8.0, dtype=torch.float64)).sum())
    assert scheme.unchanged + scheme.interpolated + scheme.in_between == scheme.pairs == 64
    assert scheme.in_between > 0 and scheme.attention_factor == attention
    assert scheme.longer_than_original == int((2 * torch.pi / unscaled > 8192).sum())
    assert report.softmax_scale == 128 ** -0.5
    assert [g.layers for g in report.layers] == [tuple(range(32))]
    assert any("legacy 'rope_scaling'" in n for n in report.notes)
    text = str(report)
    assert "llama3" in text and "warnings           none" in text and "\nlayers" not in text


# --- warning rules: each with a config that triggers it and a correct one that does not ---------

def test_missing_original_context_warns() -> None:
    scaling = {k: v for k, v in LLAMA_31["rope_scaling"].items() if k != "original_max_position_embeddings"}
    report = rope_report(edited(LLAMA_31, rope_scaling=scaling))
    (warning,) = report.warnings
    assert "no 'original_max_position_embeddings'" in warning and "still scaled by the factor" in warning
    assert report.scheme.original_context == report.scheme.target_context == 131072
    assert not warned(LLAMA_31, "original_max_position_embeddings")


def test_missing_original_context_for_longrope_and_for_yarn_without_factor() -> None:
    base = {"head_dim": 64, "max_position_embeddings": 16384}
    lists = {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32}

    def warning(params: dict[str, Any]) -> tuple[Any, str]:
        report = rope_report({**base, "rope_parameters": params})
        (found,) = [w for w in report.warnings if "no 'original_max_position_embeddings'" in w]
        return report, found

    report, found = warning({"rope_type": "longrope", **lists})
    assert "long_factor applies only to sequences longer than 16384" in found
    assert "attention factor is 1" in found and "None" not in found
    assert report.scheme.attention_factor == 1.0 and report.scheme.unchanged == report.scheme.pairs
    report, found = warning({"rope_type": "longrope", **lists, "factor": 4.0})
    assert "attention factor follows factor 4" in found and report.scheme.attention_factor > 1.0
    _, found = warning({"rope_type": "longrope", **lists, "attention_factor": 1.2})
    assert "the one given (1.2)" in found
    report, found = warning({"rope_type": "yarn"})
    assert "nothing is scaled" in found and report.scheme.unchanged == report.scheme.pairs


def test_lost_rope_theta_under_a_scaling_block_warns() -> None:
    lost = edited(LLAMA_31, rope_theta=None)
    report = rope_report(lost)
    assert report.scheme.base == 10000.0 and report.defaults["rope_theta"] == 10000.0
    assert warned(lost, "no rope_theta: the base defaults to 10000 under the Llama 3 rule")
    assert not warned(LLAMA_31, "no rope_theta")
    # Without scaling, a defaulted base is only reported as a default (Llama 2's configs omit it).
    plain = edited(LLAMA_31, rope_theta=None, rope_scaling=None, max_position_embeddings=4096)
    report = rope_report(plain)
    assert report.warnings == [] and report.defaults == {"rope_theta": 10000.0}
    # Other scalings of base 10000 exist on purpose (MiniCPM3's LongRoPE): listed, not warned.
    yarn = edited(plain, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
                  max_position_embeddings=16384)
    assert rope_report(yarn).warnings == [] and rope_report(yarn).defaults == {"rope_theta": 10000.0}
    # A family's own default is not surprising: Gemma 3 scales its global layers with base 1e6.
    gemma = {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
             "num_hidden_layers": 12, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    report = rope_report(gemma)
    assert report.warnings == [] and report.schemes["full_attention"].base == 1e6


def test_keys_the_type_does_not_use_warn() -> None:
    scaling = dict(LLAMA_31["rope_scaling"])
    scaling["orignal_max_position_embeddings"] = scaling.pop("original_max_position_embeddings")
    report = rope_report(edited(LLAMA_31, rope_scaling=scaling))
    assert any("does not use" in w and "orignal_max_position_embeddings" in w for w in report.warnings)
    assert not warned(LLAMA_31, "does not use")


def test_misspelt_top_level_key_warns() -> None:
    typo = edited(LLAMA_31, rope_theta=None, rope_thetta=500000.0)
    assert warned(typo, "unknown key 'rope_thetta': did you mean 'rope_theta'?")
    # DeepSeek's value-head width is a real key, close as it is to head_dim.
    assert not warned(edited(LLAMA_31, v_head_dim=128), "unknown key")


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        ({"rope_scaling": {**LLAMA_31["rope_scaling"], "type": "linear"}}, "'type' ('linear') and 'rope_type'"),
        ({"rope_parameters": {"rope_type": "default"}}, "both 'rope_parameters' and 'rope_scaling'"),
        ({"rope_scaling": {**LLAMA_31["rope_scaling"], "rope_theta": 10000.0}}, "rope_theta is 10000.0 inside"),
    ],
    ids=["type-rope_type", "parameters-scaling", "theta-inside-outside"],
)
def test_two_spellings_that_disagree_warn(changes: dict[str, Any], text: str) -> None:
    assert warned(edited(LLAMA_31, **changes), text)


def test_two_spellings_that_agree_are_notes() -> None:
    same = edited(
        LLAMA_31,
        rope_scaling={**LLAMA_31["rope_scaling"], "type": "llama3", "rope_theta": 500000.0},
        rope_parameters={**LLAMA_31["rope_scaling"], "type": "llama3", "rope_theta": 500000.0},
    )
    report = rope_report(same)
    assert report.warnings == []
    assert report.scheme.rope_type == "llama3"


def test_gpt_neox_names_and_their_disagreement() -> None:
    pythia = {"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 8,
              "num_hidden_layers": 16, "max_position_embeddings": 2048,
              "rotary_pct": 0.25, "rotary_emb_base": 10000}
    report = rope_report(pythia)
    assert report.warnings == [] and (report.head_dim, report.scheme.rotary_dim) == (256, 64)
    assert any("'rotary_pct'" in n for n in report.notes)
    assert rope_report(edited(pythia, rotary_pct=0.5)).scheme.rotary_dim == 128
    assert warned(edited(pythia, partial_rotary_factor=0.5), "'rotary_pct' (0.25) and 'partial_rotary_factor' (0.5)")
    assert warned(edited(pythia, rope_theta=20000.0), "'rotary_emb_base' (10000) and 'rope_theta' (20000.0)")
    assert rope_report(edited(pythia, partial_rotary_factor=0.25, rope_theta=10000)).warnings == []
    # Without the key, GPT-NeoX's default (a quarter of the head) applies, and is reported.
    report = rope_report(edited(pythia, rotary_pct=None))
    assert report.scheme.rotary_dim == 64 and report.defaults["partial_rotary_factor"] == 0.25


def test_key_that_transformers_ignores_warns_only_when_it_matters() -> None:
    stablelm = {"model_type": "stablelm", "hidden_size": 2560, "num_attention_heads": 32,
                "num_hidden_layers": 32, "max_position_embeddings": 4096, "rope_theta": 10000, "rope_pct": 0.25}
    report = rope_report(stablelm)
    assert report.warnings == [] and any("'rope_pct'" in n for n in report.notes)
    assert report.scheme.rotary_dim == 20  # int(80 * 0.25)
    assert warned(edited(stablelm, rope_pct=0.5), "'rope_pct' (0.5) is not read by transformers")


def test_mrope_sections_that_do_not_cover_the_pairs_warn() -> None:
    qwen2_vl = {"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12,
                "num_hidden_layers": 28, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
                "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    report = rope_report(qwen2_vl)
    assert report.warnings == [] and report.mrope_section == (16, 24, 24) and not report.mrope_interleaved
    assert report.model_type == "qwen2_vl_text" and report.scheme.rope_type == "default"
    short = edited(qwen2_vl, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 16]})
    assert warned(short, "mrope_section [16, 24, 16] sums to 56, not to the 64 rotated pairs")


# --- what the report says of current models -------------------------------------------------

def test_gemma3_text_config_has_two_settings_and_a_layer_table() -> None:
    gemma = {"model_type": "gemma3",
             "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
                             "head_dim": 256, "num_hidden_layers": 34, "sliding_window": 1024,
                             "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
             "vision_config": {"model_type": "siglip_vision_model"}}
    report = rope_report(gemma)
    assert report.read_from == "text_config" and report.warnings == []
    local, full = report.schemes["sliding_attention"], report.schemes["full_attention"]
    assert (local.base, local.rope_type, full.base, full.rope_type) == (10000.0, "default", 1e6, "linear")
    groups = {g.attention: g for g in report.layers}
    assert groups["full_attention"].layers == (5, 11, 17, 23, 29)
    assert len(groups["sliding_attention"].layers) == 29 and groups["sliding_attention"].window == 1024
    assert report.softmax_scale == 256 ** -0.5 and report.defaults["query_pre_attn_scalar"] == 256
    assert "\nlayers" in str(report) and "5, 11, 17, 23, 29" in str(report)


def test_transformers5_per_layer_type_parameters() -> None:
    gemma = {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
             "num_hidden_layers": 6,
             "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
    report = rope_report(gemma)
    assert report.warnings == []
    assert report.schemes["full_attention"].interpolated == 128
    assert report.schemes["sliding_attention"].unchanged == 128


def test_gemma4_last_layer_not_full_warns() -> None:
    gemma4 = {"model_type": "gemma4_text", "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 6,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}
    report = rope_report(gemma4)
    assert report.warnings == [] and report.head_dim == 256  # the family's head_dim, not 2560 // 8
    assert report.schemes["full_attention"].rotary_dim == 128  # a quarter of the 512-wide global head
    wrong = edited(gemma4, layer_types=["sliding_attention"] * 4 + ["full_attention", "sliding_attention"])
    assert warned(wrong, "the last layer is 'sliding_attention'; transformers forces it to 'full_attention'")
    assert [g.layers for g in rope_report(wrong).layers if g.attention == "full_attention"] == [(4, 5)]


def test_llama4_nope_layers_and_temperature() -> None:
    llama4 = {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
        "num_hidden_layers": 8, "attention_chunk_size": 8192, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 1.0 + 3.0, "original_max_position_embeddings": 8192}}}
    report = rope_report(llama4)
    nope = [g for g in report.layers if g.scheme is None]
    assert [g.layers for g in nope] == [(3, 7)] and nope[0].attention == "full_attention"
    (rope,) = [g for g in report.layers if g.scheme is not None]
    assert rope.attention == "chunked_attention" and rope.window == 8192
    assert report.temperature_tuning == {"attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1}
    assert "interleaved" in report.layout and "none (NoPE)" in str(report)


def test_cohere2_rotates_only_its_sliding_layers() -> None:
    cohere2 = {"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32,
               "num_hidden_layers": 8, "rope_theta": 50000.0, "sliding_window": 4096}
    groups = {g.attention: g for g in rope_report(cohere2).layers}
    assert groups["full_attention"].scheme is None and groups["full_attention"].layers == (3, 7)
    assert groups["sliding_attention"].scheme == "all"


def test_deepseek_mla_softmax_scale_and_rotated_part() -> None:
    yarn = {"type": "yarn", "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32,
            "beta_slow": 1, "original_max_position_embeddings": 4096}
    deepseek = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16,
                "num_hidden_layers": 27, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "max_position_embeddings": 163840, "rope_theta": 10000, "rope_scaling": yarn}
    report = rope_report(deepseek)
    assert report.warnings == [] and (report.head_dim, report.scheme.rotary_dim) == (192, 64)
    mscale = 0.1 * 0.707 * math.log(40) + 1
    assert report.softmax_scale == pytest.approx(192 ** -0.5 * mscale**2, rel=1e-15)
    assert report.scheme.attention_factor == 1.0  # mscale / mscale_all_dim
    unscaled = rope_report(edited(deepseek, rope_scaling=None))
    assert unscaled.softmax_scale == 192 ** -0.5


def test_phi3_top_level_original_context_and_su() -> None:
    config = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
              "rope_scaling": {"type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}}
    report = rope_report(config)
    assert report.warnings == [] and report.scheme.rope_type == "longrope"
    assert report.scheme.original_context == 4096
    assert report.scheme.interpolated == 0 and report.scheme.unchanged == 0  # every pair divided by 2


def test_yarn_factor_against_the_context_ratio_is_a_note() -> None:
    qwen = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
            "max_position_embeddings": 32768, "rope_theta": 1000000.0,
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    report = rope_report(qwen)
    assert report.warnings == []
    assert any("yarn factor 4" in n and "32768 / 32768 = 1" in n for n in report.notes)


def test_unknown_model_type_is_read_generically() -> None:
    report = rope_report(edited(LLAMA_31, model_type="my_llama"))
    assert report.warnings == [] and any("not in posenc's family table" in n for n in report.notes)


def test_json_form_round_trips() -> None:
    data = json.loads(json.dumps(rope_report(LLAMA_31).to_dict()))
    assert data["schemes"]["all"]["rope_type"] == "llama3"
    assert len(data["schemes"]["all"]["inv_freq"]) == 64 and data["warnings"] == []
    assert data["layers"] == [{"layers": list(range(32)), "attention": "full_attention",
                               "scheme": "all", "window": None}]


# --- paths and bad input ---------------------------------------------------------------------

def test_config_from_a_path_or_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31))
    expected = str(rope_report(LLAMA_31))
    for given in (path, str(path), tmp_path):
        assert str(rope_report(given)) == expected
        assert rope_report(given).source == str(path)
    with pytest.raises(FileNotFoundError):
        rope_report(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="broken.json is not JSON"):
        rope_report(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(TypeError, match="holds a JSON list"):
        rope_report(tmp_path / "list.json")


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="config must be a dict"):
        rope_report(["head_dim", 64])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_attention_heads must be a positive integer"):
        rope_report({"rope_theta": 1e4, "hidden_size": 64, "num_attention_heads": 0})
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        rope_report({"rope_theta": 1e4, "head_dim": -64})
    with pytest.raises(TypeError, match="rope_theta must be a real number"):
        rope_report({"model_type": "llama", "head_dim": 64, "rope_theta": "big"})
    with pytest.raises(ValueError, match="head_dim"):
        rope_report({"rope_parameters": {"rope_type": "default"}})
    with pytest.raises(ValueError, match="under 'text_config'"):
        rope_report({"rope_theta": 1e4, "vision_config": {}})
    with pytest.raises(ValueError, match="rope_type"):
        rope_report({"head_dim": 64, "rope_parameters": {"rope_type": "ntk"}})
    with pytest.raises(ValueError, match="no RoPE settings found .* model_type 'bert'"):
        rope_report({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12})
    with pytest.raises(ValueError, match="'layer_types' has 2 entries for num_hidden_layers=3"):
        rope_report(edited(LLAMA_31, num_hidden_layers=3, layer_types=["full_attention"] * 2))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "posenc", "rope", *args],
                          capture_output=True, text=True, check=False)


def test_command_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31))
    result = run_cli(str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(rope_report(LLAMA_31)).replace("\n", "\n")
    result = run_cli(str(tmp_path), "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["schemes"]["all"]["factor"] == 8.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        (json.dumps({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12}), "no RoPE settings"),
        (json.dumps(edited(LLAMA_31, rope_scaling={"rope_type": "ntk", "factor": 2.0})), "rope_type"),
    ],
    ids=["not-json", "no-rope", "unknown-type"],
)
def test_command_line_errors_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    result = run_cli(str(path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr and str(path) in result.stderr
