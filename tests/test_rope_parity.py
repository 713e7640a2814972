"""``posenc.rope_parity`` and ``python -m posenc rope-parity``: the contract, the bad inputs, the
command line. The bugs reproduced in a real engine are in tests/conformance/test_rope_parity_engines.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc import apply_rope, rope_cos_sin, rope_report
from posenc.__main__ import BAD_INPUT, MATCH, MISMATCH, load_array, main
from posenc.parity import KNOWN_BUGS, rope_parity

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 512,
          "rope_theta": 500000.0, "rope_scaling": LLAMA3}
HEAD = 32
POSITIONS = torch.arange(0, 300, 5)


def tables(base: float = 500000.0, scaling: dict | None = LLAMA3, layout: str = "half",
           positions: torch.Tensor = POSITIONS) -> tuple[torch.Tensor, torch.Tensor]:
    return rope_cos_sin(positions, HEAD, base=base, scaling=scaling, layout=layout, dtype=torch.float32)


def test_every_candidate_is_a_known_bug() -> None:
    x = torch.randn(len(POSITIONS), HEAD)
    result = rope_parity(CONFIG, reference=x, rotated=apply_rope(x, *tables()), positions=POSITIONS)
    assert set(result.errors) - {"config"} <= set(KNOWN_BUGS)
    assert set(result.errors) == {"config", "base", "scaling", "base and scaling", "permutation"}


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_tables_in_either_layout_or_one_value_per_pair(layout: str) -> None:
    cos, sin = tables(layout=layout)
    result = rope_parity(CONFIG, cos=cos, sin=sin, positions=POSITIONS)
    assert result.matches and result.layout == layout
    pairs = rope_parity(CONFIG, cos=cos[:, ::2] if layout == "interleaved" else cos[:, : HEAD // 2],
                        sin=sin[:, ::2] if layout == "interleaved" else sin[:, : HEAD // 2], positions=POSITIONS)
    assert pairs.matches and pairs.layout == "pairs"


@pytest.mark.parametrize(("base", "scaling", "bug"), [
    (10000.0, LLAMA3, "base"),
    (500000.0, None, "scaling"),
    (10000.0, None, "base and scaling"),
])
def test_tables_name_the_bug(base: float, scaling: dict | None, bug: str) -> None:
    result = rope_parity(CONFIG, cos=tables(base, scaling)[0], sin=tables(base, scaling)[1], positions=POSITIONS)
    assert not result.matches and result.diagnosis == bug
    assert result.errors[bug] <= result.tolerance < result.errors["config"]
    assert f"looks like '{bug}'" in str(result)


def test_default_positions_and_leading_axes_of_size_one() -> None:
    cos, sin = rope_cos_sin(40, HEAD, base=500000.0, scaling=LLAMA3, dtype=torch.float32)
    assert rope_parity(CONFIG, cos=cos[None, None], sin=sin[None, None]).matches
    shifted = rope_parity(CONFIG, cos=cos, sin=sin, positions=torch.arange(1, 41))
    assert not shifted.matches and shifted.diagnosis is None  # an offset is not a known bug


def test_positions_that_cannot_separate_the_bugs_say_so() -> None:
    # At position 0 every angle is 0: every candidate without an attention factor gives the same table.
    zero = torch.zeros(1, dtype=torch.long)
    result = rope_parity(CONFIG, cos=tables(positions=zero)[0], sin=tables(positions=zero)[1], positions=zero)
    assert result.matches and set(result.also_within_tolerance) == {"base", "scaling", "base and scaling"}
    assert "cannot be told apart" in str(result)


def test_the_attention_factor_is_expected_on_cos_and_sin() -> None:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128}
    config = {**CONFIG, "rope_scaling": yarn}
    cos, sin = rope_cos_sin(POSITIONS, HEAD, base=500000.0, scaling=yarn, dtype=torch.float64)
    factor = rope_report(config).scheme.attention_factor
    assert factor > 1
    assert rope_parity(config, cos=cos, sin=sin, positions=POSITIONS).matches
    for scale, bug in ((factor, "factor twice"), (1 / factor, "factor dropped")):
        result = rope_parity(config, cos=cos * scale, sin=sin * scale, positions=POSITIONS)
        assert result.diagnosis == bug


def test_a_report_and_a_scheme_can_be_given() -> None:
    gemma = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2, "head_dim": HEAD,
             "num_hidden_layers": 6, "max_position_embeddings": 512, "rope_theta": 1000000.0,
             "rope_local_base_freq": 10000.0, "sliding_window": 16}
    report = rope_report(gemma)
    local = rope_cos_sin(POSITIONS, HEAD, base=10000.0, dtype=torch.float32)
    assert rope_parity(report, cos=local[0], sin=local[1], positions=POSITIONS, scheme="sliding_attention").matches
    assert not rope_parity(report, cos=local[0], sin=local[1], positions=POSITIONS).matches


def test_a_given_tolerance_is_used() -> None:
    cos, sin = tables()
    result = rope_parity(CONFIG, cos=cos + 1e-3, sin=sin, positions=POSITIONS)
    assert not result.matches
    assert rope_parity(CONFIG, cos=cos + 1e-3, sin=sin, positions=POSITIONS, tolerance=2e-3).matches


def _bad(**kwargs):
    cos, sin = tables()
    x = torch.randn(len(POSITIONS), HEAD)
    arguments = {"cos": cos, "sin": sin, "positions": POSITIONS}
    for key, value in kwargs.items():
        if key == "qk":
            arguments = {"reference": x, "rotated": x, "positions": POSITIONS}
        elif value is None:
            arguments.pop(key)
        else:
            arguments[key] = value
    return arguments


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"cos": None, "sin": None}, ValueError, "either cos and sin, or reference and rotated"),
    ({"reference": torch.zeros(3, HEAD)}, ValueError, "not both"),
    ({"sin": None}, ValueError, "cos and sin go together"),
    ({"qk": 1, "rotated": None}, ValueError, "reference and rotated go together"),
    ({"sin": torch.zeros(3, HEAD)}, ValueError, "same shape"),
    ({"cos": torch.zeros(60, 6), "sin": torch.zeros(60, 6)}, ValueError, "16 rotated pairs or the 32"),
    ({"cos": torch.zeros(60), "sin": torch.zeros(60)}, ValueError, "at least 2 dimensions"),
    ({"cos": torch.zeros(2, 60, HEAD), "sin": torch.zeros(2, 60, HEAD)}, ValueError, "leading axes must have size 1"),
    ({"cos": torch.zeros(60, HEAD, dtype=torch.long), "sin": torch.zeros(60, HEAD, dtype=torch.long)}, TypeError, "cos"),
    ({"cos": torch.full((60, HEAD), float("nan")), "sin": torch.zeros(60, HEAD)}, ValueError, "finite"),
    ({"positions": torch.arange(7)}, ValueError, "positions must have shape (60,)"),
    ({"positions": torch.ones(60, dtype=torch.bool)}, TypeError, "real tensor"),
    ({"positions": [0, 1]}, TypeError, "real tensor"),
    ({"positions": torch.full((60,), float("inf"))}, ValueError, "finite"),
    ({"qk": 1, "reference": torch.zeros(60, 16), "rotated": torch.zeros(60, 16)}, ValueError, "32 wide"),
    ({"scheme": "sliding_attention"}, ValueError, "scheme must be one of ['all']"),
    ({"layout": "complex"}, ValueError, "layout"),
    ({"tolerance": 0.0}, ValueError, "tolerance"),
], ids=["neither", "both", "cos-alone", "reference-alone", "shapes", "width", "1-d", "leading-axes", "integer",
        "nan", "positions-length", "bool-positions", "list-positions", "inf-positions", "head-width", "scheme",
        "layout", "tolerance"])
def test_bad_input(arguments: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        rope_parity(CONFIG, **_bad(**arguments))


def test_proportional_rope_is_refused() -> None:
    config = {**CONFIG, "rope_scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.5}}
    cos, sin = tables(scaling=None)
    with pytest.raises(ValueError, match="proportional"):
        rope_parity(config, cos=cos, sin=sin, positions=POSITIONS)


# ---------------------------------------------------------------------------------------------
# Command line (in process: the command's exit status and its output)
# ---------------------------------------------------------------------------------------------


LATER = torch.arange(1000, 1060)  # as a cache at offset 1000 would hold them


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    for name, base in (("right", 500000.0), ("defaulted", 10000.0)):
        cos, sin = tables(base, positions=LATER)
        np.save(tmp_path / f"cos_{name}.npy", cos.numpy())
        np.save(tmp_path / f"sin_{name}.npy", sin.numpy())
    np.save(tmp_path / "positions.npy", LATER.numpy())
    return tmp_path


def test_command_line_match_and_mismatch(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(files / "config.json")
    right = ["--cos", str(files / "cos_right.npy"), "--sin", str(files / "sin_right.npy")]
    assert main(["rope-parity", config, *right, "--positions", str(files / "positions.npy")]) == MATCH
    assert capsys.readouterr().out.startswith("match:")
    defaulted = ["--cos", str(files / "cos_defaulted.npy"), "--sin", str(files / "sin_defaulted.npy")]
    assert main(["rope-parity", config, *defaulted, "--offset", "1000", "--json"]) == MISMATCH
    assert json.loads(capsys.readouterr().out)["diagnosis"] == "base"
    assert main(["rope-parity", config, *right]) == MISMATCH  # read as positions 0 ... 59: not these tables


def test_command_line_reads_safetensors(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors.torch import save_file

    cos, sin = tables(positions=POSITIONS)
    save_file({"cos": cos, "sin": sin}, files / "tables.safetensors")
    save_file({"positions": POSITIONS}, files / "positions.safetensors")
    tables_file = str(files / "tables.safetensors")
    arguments = ["rope-parity", str(files / "config.json"), "--cos", tables_file + ":cos", "--sin", tables_file + ":sin",
                 "--positions", str(files / "positions.safetensors")]
    assert main(arguments) == MATCH
    assert torch.equal(load_array(tables_file + ":sin"), sin)
    with pytest.raises(ValueError, match=r"holds \['cos', 'sin'\]; name one"):
        load_array(tables_file)
    with pytest.raises(ValueError, match="no tensor 'tan'"):
        load_array(tables_file + ":tan")


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: str(d / "missing.npy"), "no such file"),
    (lambda d: (d / "a.txt").write_text("1") and str(d / "a.txt"), "expected a .npy or .safetensors file"),
    (lambda d: np.save(d / "o.npy", np.array([{}], dtype=object)) or str(d / "o.npy"), "not a numeric .npy array"),
    (lambda d: np.save(d / "s.npy", np.array(["a"])) or str(d / "s.npy"), "not real numbers"),
    (lambda d: (d / "b.safetensors").write_bytes(b"junk") and str(d / "b.safetensors"), "not a safetensors file"),
    (lambda d: str(d / "cos_right.npy") + ":cos", "drop ':cos'"),
    (lambda d: np.save(d / "i.npy", np.zeros((60, HEAD), dtype=np.int64)) or str(d / "i.npy"), "floating"),
], ids=["missing", "suffix", "pickled", "strings", "bad-safetensors", "npy-with-name", "integers"])
def test_command_line_bad_files(files: Path, make, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["rope-parity", str(files / "config.json"), "--cos", make(files), "--sin", str(files / "sin_right.npy")]
    assert main(arguments) == BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


def test_command_line_positions_and_offset_exclude_each_other(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["rope-parity", str(files / "config.json"), "--cos", str(files / "cos_right.npy"), "--sin",
                 str(files / "sin_right.npy"), "--positions", str(files / "positions.npy"), "--offset", "3"]
    assert main(arguments) == BAD_INPUT and "not both" in capsys.readouterr().err
