"""Contracts of the command line (posenc.__main__), called in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc import rope_cos_sin, rope_report
from posenc.__main__ import BAD_INPUT, MATCH, MISMATCH, load_array, main
from posenc.parity import rope_parity

CONFIG = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 2, "max_position_embeddings": 64,
          "rope_theta": 500000.0}
HEAD = 16


def _raises(error: type, message: str):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    return str(path)


def _tables(positions: torch.Tensor, base: float = 500000.0) -> tuple[torch.Tensor, torch.Tensor]:
    return rope_cos_sin(positions, HEAD, base=base, dtype=torch.float32)


def _save_tables(tmp_path: Path, positions: torch.Tensor, base: float = 500000.0) -> list[str]:
    cos, sin = _tables(positions, base)
    np.save(tmp_path / "cos.npy", cos.numpy())
    np.save(tmp_path / "sin.npy", sin.numpy())
    return ["--cos", str(tmp_path / "cos.npy"), "--sin", str(tmp_path / "sin.npy")]


# --------------------------------------------------------------------------------------------
# Exit statuses
# --------------------------------------------------------------------------------------------


def test_exit_statuses_are_zero_one_two() -> None:
    assert (MATCH, MISMATCH, BAD_INPUT) == (0, 1, 2)


# --------------------------------------------------------------------------------------------
# load_array
# --------------------------------------------------------------------------------------------


def test_load_array_refuses_a_missing_file_with_the_whole_message(tmp_path: Path) -> None:
    spec = str(tmp_path / "missing.npy")
    with _raises(OSError, f"{spec}: no such file"):
        load_array(spec)
    with _raises(OSError, f"{spec}:cos: no such file"):
        load_array(spec + ":cos")


def test_load_array_reads_a_file_whose_name_holds_a_colon(tmp_path: Path) -> None:
    path = tmp_path / "a:b.npy"
    np.save(path, np.arange(3.0))
    assert load_array(str(path)).tolist() == [0.0, 1.0, 2.0]


def test_load_array_splits_the_name_at_the_last_colon(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    folder = tmp_path / "x:y"
    folder.mkdir()
    save_file({"cos": torch.ones(2), "sin": torch.zeros(2)}, folder / "t.safetensors")
    assert torch.equal(load_array(str(folder / "t.safetensors") + ":sin"), torch.zeros(2))


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float32, np.float64])
def test_load_array_reads_real_npy_arrays(tmp_path: Path, dtype) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(6).reshape(2, 3).astype(dtype))
    got = load_array(str(path))
    assert got.dtype == torch.from_numpy(np.zeros(1, dtype=dtype)).dtype
    assert got.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_load_array_gives_a_contiguous_tensor_of_a_fortran_order_array(tmp_path: Path) -> None:
    path = tmp_path / "f.npy"
    np.save(path, np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    got = load_array(str(path))
    assert got.is_contiguous()
    assert got.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_load_array_refuses_a_name_after_an_npy_file(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(3.0))
    spec = f"{path}:cos"
    with _raises(ValueError, f"{spec}: a .npy file holds one array; drop ':cos'"):
        load_array(spec)


def test_load_array_refuses_pickled_npy_without_unpickling(tmp_path: Path) -> None:
    path = tmp_path / "o.npy"
    np.save(path, np.array([{}], dtype=object))
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: not a numeric .npy array (')}.*pickle.*\\)$"):
        load_array(str(path))


def test_load_array_refuses_an_npy_suffix_on_other_bytes(tmp_path: Path) -> None:
    path = tmp_path / "junk.npy"
    path.write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: not a numeric .npy array (')}.+\\)$"):
        load_array(str(path))


@pytest.mark.parametrize(("array", "name"), [(np.array([True]), "bool"), (np.array([1j]), "complex128"),
                                             (np.array(["a"]), "<U1")])
def test_load_array_refuses_arrays_of_other_values(tmp_path: Path, array: np.ndarray, name: str) -> None:
    path = tmp_path / "a.npy"
    np.save(path, array)
    with _raises(TypeError, f"{path}: holds {name} values, not real numbers"):
        load_array(str(path))


def test_load_array_safetensors_messages(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "t.safetensors"
    save_file({"sin": torch.zeros(2), "cos": torch.ones(2)}, path)
    with _raises(ValueError, f"{path}: holds ['cos', 'sin']; name one as {path}:NAME"):
        load_array(str(path))
    with _raises(ValueError, f"{path}:tan: no tensor 'tan'; the file holds ['cos', 'sin']"):
        load_array(f"{path}:tan")
    assert torch.equal(load_array(f"{path}:cos"), torch.ones(2))


def test_load_array_reads_the_only_tensor_of_a_safetensors_file(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "one.safetensors"
    save_file({"whatever": torch.arange(4)}, path)
    assert load_array(str(path)).tolist() == [0, 1, 2, 3]


def test_load_array_refuses_a_broken_safetensors_file(tmp_path: Path) -> None:
    path = tmp_path / "b.safetensors"
    path.write_bytes(b"junk")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: not a safetensors file (')}.+\\)$"):
        load_array(str(path))


def test_load_array_refuses_other_suffixes(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("1")
    with _raises(ValueError, f"{path}: expected a .npy or .safetensors file"):
        load_array(str(path))


# --------------------------------------------------------------------------------------------
# python -m posenc rope
# --------------------------------------------------------------------------------------------


def test_rope_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["rope", config]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{rope_report(config)}\n"
    assert captured.err == ""


def test_rope_json_prints_the_report_as_indented_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["rope", config, "--json"]) == 0
    assert capsys.readouterr().out == json.dumps(rope_report(config).to_dict(), indent=2) + "\n"


def test_rope_reports_a_bad_config_on_one_stderr_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(OSError) as error:
        rope_report(path)
    assert main(["rope", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"posenc rope: {path}: {error.value}\n"


def test_rope_reports_a_bad_value_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "rope_theta": -1.0}))
    with pytest.raises((TypeError, ValueError)) as error:
        rope_report(path)
    assert main(["rope", str(path)]) == 1
    assert capsys.readouterr().err == f"posenc rope: {path}: {error.value}\n"


# --------------------------------------------------------------------------------------------
# python -m posenc rope-parity
# --------------------------------------------------------------------------------------------


def test_parity_prints_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    positions = torch.arange(12)
    assert main(["rope-parity", config, *_save_tables(tmp_path, positions)]) == MATCH
    cos, sin = _tables(positions)
    captured = capsys.readouterr()
    assert captured.out == f"{rope_parity(config, cos=cos, sin=sin)}\n"
    assert captured.err == ""


def test_parity_json_prints_the_result_as_indented_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    positions = torch.arange(12)
    assert main(["rope-parity", config, *_save_tables(tmp_path, positions, base=10000.0), "--json"]) == MISMATCH
    cos, sin = _tables(positions, base=10000.0)
    want = json.dumps(rope_parity(config, cos=cos, sin=sin).to_dict(), indent=2) + "\n"
    assert capsys.readouterr().out == want


def test_parity_offset_numbers_the_rows_from_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    arguments = ["rope-parity", config, *_save_tables(tmp_path, torch.arange(7, 19))]
    assert main(arguments) == MISMATCH
    assert main([*arguments, "--offset", "7"]) == MATCH
    assert main([*arguments, "--offset", "8"]) == MISMATCH


def test_parity_offset_applies_to_reference_and_rotated(tmp_path: Path) -> None:
    from posenc import apply_rope

    config = _config(tmp_path)
    torch.manual_seed(0)
    reference = torch.randn(5, HEAD)
    rotated = apply_rope(reference, *_tables(torch.arange(3, 8)))
    np.save(tmp_path / "reference.npy", reference.numpy())
    np.save(tmp_path / "rotated.npy", rotated.numpy())
    arguments = ["rope-parity", config, "--reference", str(tmp_path / "reference.npy"),
                 "--rotated", str(tmp_path / "rotated.npy")]
    assert main(arguments) == MISMATCH
    assert main([*arguments, "--offset", "3"]) == MATCH


def test_parity_passes_the_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from posenc import apply_rope

    config = _config(tmp_path)
    torch.manual_seed(0)
    reference = torch.randn(5, HEAD)
    rotated = apply_rope(reference, *_tables(torch.arange(5)))  # the config's half layout
    np.save(tmp_path / "reference.npy", reference.numpy())
    np.save(tmp_path / "rotated.npy", rotated.numpy())
    arguments = ["rope-parity", config, "--reference", str(tmp_path / "reference.npy"),
                 "--rotated", str(tmp_path / "rotated.npy"), "--json"]
    assert main(arguments) == MATCH
    assert json.loads(capsys.readouterr().out)["layout"] == "half"
    assert main([*arguments, "--layout", "interleaved"]) == MISMATCH
    assert json.loads(capsys.readouterr().out)["layout"] == "interleaved"
    assert main([*arguments, "--layout", "half"]) == MATCH
    assert json.loads(capsys.readouterr().out)["layout"] == "half"


def test_parity_reads_positions_from_a_file(tmp_path: Path) -> None:
    config = _config(tmp_path)
    positions = torch.tensor([0, 5, 40, 41])
    np.save(tmp_path / "positions.npy", positions.numpy())
    arguments = ["rope-parity", config, *_save_tables(tmp_path, positions)]
    assert main([*arguments, "--positions", str(tmp_path / "positions.npy")]) == MATCH


def test_parity_offset_with_one_dimensional_tables_is_left_to_rope_parity(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    cos, sin = _tables(torch.arange(1))
    np.save(tmp_path / "cos.npy", cos[0].numpy())
    np.save(tmp_path / "sin.npy", sin[0].numpy())
    arguments = ["rope-parity", config, "--cos", str(tmp_path / "cos.npy"), "--sin", str(tmp_path / "sin.npy")]
    with pytest.raises((TypeError, ValueError)) as error:
        rope_parity(config, cos=cos[0], sin=sin[0])
    assert main([*arguments, "--offset", "0"]) == BAD_INPUT
    assert capsys.readouterr().err == f"posenc rope-parity: {error.value}\n"


def test_parity_refuses_positions_with_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    np.save(tmp_path / "positions.npy", np.arange(12))
    arguments = ["rope-parity", config, *_save_tables(tmp_path, torch.arange(12)),
                 "--positions", str(tmp_path / "positions.npy"), "--offset", "0"]
    assert main(arguments) == BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "posenc rope-parity: give --positions or --offset, not both\n"


def test_parity_reports_bad_files_on_one_stderr_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    missing = str(tmp_path / "missing.npy")
    assert main(["rope-parity", config, "--cos", missing, "--sin", missing]) == BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"posenc rope-parity: {missing}: no such file\n"


def test_parity_passes_tolerance_layout_and_scheme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    positions = torch.arange(12)
    arguments = ["rope-parity", config, *_save_tables(tmp_path, positions, base=10000.0), "--json"]
    assert main([*arguments, "--tolerance", "3"]) == MATCH
    assert json.loads(capsys.readouterr().out)["tolerance"] == 3.0
    assert main([*arguments, "--scheme", "nope"]) == BAD_INPUT
    cos, sin = _tables(positions, base=10000.0)
    with pytest.raises(ValueError) as error:
        rope_parity(config, cos=cos, sin=sin, scheme="nope")
    assert capsys.readouterr().err == f"posenc rope-parity: {error.value}\n"


# --------------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------------


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m posenc [-h] {rope,rope-parity} ...")
    assert "the following arguments are required: command" in err


def test_top_level_help_names_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(["--help"], capsys)
    assert out.startswith("usage: python -m posenc [-h] {rope,rope-parity} ... Command line. "
                          "``python -m posenc rope PATH [--json]`` explains a model's RoPE settings.")
    assert "rope explain the RoPE settings of a Hugging Face config.json" in out
    assert "rope-parity check an engine's cos/sin, or rotated queries/keys, against a config.json" in out


def test_top_level_help_keeps_the_lines_of_the_module_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert "``python -m posenc rope PATH [--json]`` explains a model's RoPE settings." in lines
    assert "engine's RoPE against the config and names the porting bug a difference looks like." in lines


def test_rope_help(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(["rope", "--help"], capsys)
    assert out.startswith("usage: python -m posenc rope [-h] [--json] config")
    assert "config path to config.json, or a model directory holding one" in out
    assert "--json print the report as JSON" in out


def test_rope_parity_help(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(["rope-parity", "--help"], capsys)
    assert out.startswith("usage: python -m posenc rope-parity [-h] [--cos COS] [--sin SIN] ")
    for text in [
        "Compare what an engine produced with posenc's reading of the config and name the known porting bug a "
        "difference looks like (exit status 0: match, 1: mismatch, 2: bad input). Arrays are FILE.npy, "
        "FILE.safetensors (its only tensor) or FILE.safetensors:NAME.",
        "config path to config.json, or a model directory holding one",
        "--cos COS the engine's cos table (..., seq, width)",
        "--sin SIN the engine's sin table, same shape",
        "--reference REFERENCE queries or keys before RoPE, from the reference model (..., seq, head_dim)",
        "--rotated ROTATED the same after the engine's RoPE, same shape",
        "--positions POSITIONS the positions of the seq rows (seq,); default 0 ... seq-1",
        "--offset OFFSET positions offset ... offset+seq-1 (a cache offset)",
        "--scheme SCHEME which RoPE setting of the config (e.g. sliding_attention); default the global one",
        "--layout {half,interleaved} pairing of the checkpoint's channels; default the config's",
        "--tolerance TOLERANCE largest difference counted as equal",
        "--json print the result as JSON",
    ]:
        assert text in out


def test_offset_must_be_an_integer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["rope-parity", _config(tmp_path), "--offset", "1.5"])
    assert exit_.value.code == 2
    assert "argument --offset: invalid int value: '1.5'" in capsys.readouterr().err


def test_layout_must_be_a_known_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["rope-parity", _config(tmp_path), "--layout", "neox"])
    assert exit_.value.code == 2
    assert "argument --layout: invalid choice: 'neox'" in capsys.readouterr().err


def test_tolerance_is_read_as_a_float(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    arguments = ["rope-parity", config, *_save_tables(tmp_path, torch.arange(12), base=10000.0), "--json"]
    assert main([*arguments, "--tolerance", "2.5"]) == MATCH
    assert json.loads(capsys.readouterr().out)["tolerance"] == 2.5
