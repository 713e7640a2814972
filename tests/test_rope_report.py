"""rope_report and ``python -m posenc rope``: what a config means, and each mistake it reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc import rope_inv_freq, rope_report

LLAMA_31 = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def test_report_of_a_clean_config_matches_rope_inv_freq() -> None:
    config = {**LLAMA_31, "max_position_embeddings": 65536}  # factor 8 = 65536 / 8192: no warning
    report = rope_report(config)
    assert report.warnings == []
    assert (report.rope_type, report.base, report.head_dim, report.rotary_dim) == ("llama3", 500000.0, 128, 128)
    assert (report.factor, report.original_context, report.target_context) == (8.0, 8192, 65536)
    inv_freq, attention = rope_inv_freq(128, base=500000.0, scaling=dict(config["rope_parameters"]))
    unscaled, _ = rope_inv_freq(128, base=500000.0)
    slow_down = unscaled / inv_freq
    assert report.unchanged == int((slow_down == 1).sum())
    assert report.interpolated == int(torch.isclose(slow_down, torch.tensor(8.0, dtype=torch.float64)).sum())
    assert torch.equal(report.slow_down, slow_down)
    assert report.unchanged + report.interpolated + report.in_between == report.pairs == 64
    assert report.in_between > 0 and report.attention_factor == attention
    wavelengths = 2 * torch.pi / unscaled
    assert report.longer_than_original == int((wavelengths > 8192).sum())
    text = str(report)
    assert "llama3" in text and "warnings           none" in text


def test_legacy_rope_scaling_and_type_key() -> None:
    config = {
        "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    }
    report = rope_report(config)
    assert report.rope_type == "yarn" and report.base == 1e6
    assert any("legacy 'rope_scaling'" in w for w in report.warnings)
    assert any("legacy key 'type'" in w for w in report.warnings)
    assert not any("disagrees" in w for w in report.warnings)  # 131072 / 32768 = 4


def test_factor_that_disagrees_with_the_context_ratio() -> None:
    report = rope_report(LLAMA_31)  # 131072 / 8192 = 16, factor 8
    (warning,) = [w for w in report.warnings if "disagrees" in w]
    assert "factor 8" in warning and "= 16" in warning


def test_missing_original_context_and_unknown_key() -> None:
    params = {k: v for k, v in LLAMA_31["rope_parameters"].items() if k != "original_max_position_embeddings"}
    params["orignal_max_position_embeddings"] = 8192  # a typo
    report = rope_report({**LLAMA_31, "rope_parameters": params})
    assert any("does not use" in w and "orignal_max_position_embeddings" in w for w in report.warnings)
    assert any("no 'original_max_position_embeddings'" in w for w in report.warnings)
    # The fallback: the target context is taken as the trained one, and the factor still applies.
    assert report.original_context == report.target_context == 131072
    assert any("still scaled by the factor" in w for w in report.warnings)
    assert report.unchanged < report.pairs


def test_missing_original_context_for_longrope_and_for_yarn_without_factor() -> None:
    base = {"head_dim": 64, "max_position_embeddings": 16384}
    lists = {"short_factor": [1.0] * 32, "long_factor": [2.0] * 32}

    def warning(params: dict) -> tuple:
        report = rope_report({**base, "rope_parameters": params})
        (found,) = [w for w in report.warnings if "no 'original_max_position_embeddings'" in w]
        return report, found

    # LongRoPE has no factor of its own to scale by: the long list waits for sequences past the
    # target, and the attention factor depends on whether a factor was given.
    report, found = warning({"rope_type": "longrope", **lists})
    assert "long_factor applies only to sequences longer than 16384" in found
    assert "attention factor is 1" in found and "None" not in found and "scaled by the factor" not in found
    assert report.attention_factor == 1.0 and report.unchanged == report.pairs
    report, found = warning({"rope_type": "longrope", **lists, "factor": 4.0})
    assert "attention factor follows factor 4" in found and report.attention_factor > 1.0
    _, found = warning({"rope_type": "longrope", **lists, "attention_factor": 1.2})
    assert "the one given (1.2)" in found
    # YaRN without factor and original length: the ratio of the two is 1, nothing moves.
    report, found = warning({"rope_type": "yarn"})
    assert "nothing is scaled" in found and "None" not in found
    assert report.unchanged == report.pairs


def test_dynamic_and_linear_read_max_position_embeddings_differently() -> None:
    base = {"head_dim": 64, "max_position_embeddings": 4096}
    dynamic = rope_report({**base, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})
    assert any("dynamic reads max_position_embeddings (4096) as the trained context" in w for w in dynamic.warnings)
    assert dynamic.unchanged == dynamic.pairs  # at the trained length nothing moves yet
    linear = rope_report({**base, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})
    assert any("does not scale twice" in w for w in linear.warnings)
    assert linear.interpolated == linear.pairs
    raised = rope_report({**base, "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})
    assert raised.interpolated == raised.pairs  # the same frequencies: no double scaling


def test_phi3_top_level_original_context() -> None:
    pairs = 48
    config = {
        "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0] * pairs, "long_factor": [2.0] * pairs},
    }
    report = rope_report(config)
    assert report.original_context == 4096
    assert not any("no 'original_max_position_embeddings'" in w for w in report.warnings)
    assert report.interpolated == 0 and report.unchanged == 0  # every pair divided by 2, not by 32


def test_config_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31))
    assert str(rope_report(path)) == str(rope_report(str(path))) == str(rope_report(LLAMA_31))
    with pytest.raises(FileNotFoundError):
        rope_report(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError):
        rope_report(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(TypeError, match="config must be a dict"):
        rope_report(tmp_path / "list.json")


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="config must be a dict"):
        rope_report(["head_dim", 64])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_attention_heads must be a positive integer"):
        rope_report({"hidden_size": 64, "num_attention_heads": 0})
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        rope_report({"head_dim": -64})
    with pytest.raises(TypeError, match="rope_theta must be a real number"):
        rope_report({"head_dim": 64, "rope_theta": None})
    with pytest.raises(ValueError, match="head_dim"):
        rope_report({"rope_parameters": {"rope_type": "default"}})
    with pytest.raises(ValueError, match="rope_type"):
        rope_report({"head_dim": 64, "rope_parameters": {"rope_type": "ntk"}})


def test_command_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31))
    result = subprocess.run(
        [sys.executable, "-m", "posenc", "rope", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(rope_report(LLAMA_31))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = subprocess.run(
        [sys.executable, "-m", "posenc", "rope", str(broken)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "broken.json" in result.stderr
