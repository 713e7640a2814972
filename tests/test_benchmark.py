"""posenc.benchmark: the timing harness of the benchmark script and the performance page."""

from __future__ import annotations

import json

import pytest
import torch

from posenc import apply_rope_qk, rope_cos_sin
from posenc.benchmark import (
    main,
    median_seconds,
    meta_complex_rope,
    rope_bytes,
    rope_implementations,
    time_rope,
)


def test_rows_measure_against_the_copy() -> None:
    rows = time_rope((1, 2, 16, 8), torch.float32, rounds=3, compiled=False)
    names = [r.implementation for r in rows]
    assert names[0] == "copy" and "posenc" in names and "Meta complex" in names
    copy = rows[0]
    assert copy.fraction_of_copy == pytest.approx(1.0)
    q_bytes = 1 * 2 * 16 * 8 * 4
    assert copy.gb_per_s == pytest.approx(4 * q_bytes / (copy.ms / 1e3) / 1e9)
    for r in rows:
        assert r.ms > 0 and r.shape == (1, 2, 16, 8) and r.dtype == "float32" and r.device == "cpu"
        assert r.fraction_of_copy == pytest.approx(r.gb_per_s / copy.gb_per_s)


def test_bytes_count_q_k_twice_and_the_tables_once() -> None:
    q, k = torch.empty(2, 4, 8, 16, dtype=torch.bfloat16), torch.empty(2, 1, 8, 16, dtype=torch.bfloat16)
    cos, sin = rope_cos_sin(8, 16, dtype=torch.bfloat16)
    assert rope_bytes(q, k, cos, sin) == 2 * (2 * 4 * 8 * 16 + 2 * 1 * 8 * 16) * 2 + 2 * 8 * 16 * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_complex_form_is_the_interleaved_rotation(dtype: torch.dtype) -> None:
    q = torch.randn(2, 3, 10, 8).to(dtype)
    fns, tables = rope_implementations(q, q.clone(), compiled=False)  # asserts agreement itself
    cos, sin = rope_cos_sin(10, 8, layout="interleaved", dtype=torch.float64)
    freqs = torch.complex(cos[:, ::2], sin[:, ::2]).to(torch.complex64)
    got = meta_complex_rope(q, q, freqs)[0]
    want = apply_rope_qk(q.double(), q.double(), cos, sin, layout="interleaved")[0]
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2 * torch.finfo(dtype).eps * 4)
    assert "Hugging Face eager" in fns and "Hugging Face compiled" not in fns
    assert tables["freqs_cis"].dtype == torch.complex64


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="rounds must be a positive integer, got 0"):
        median_seconds({"nothing": lambda: None}, 0)
    with pytest.raises(SystemExit):
        main(["--shapes", "1,2,3", "--no-compile", "--rounds", "1"])


def test_cli_prints_and_writes_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "rows.json"
    assert main(["--shapes", "1,2,8,8", "--rounds", "2", "--no-compile", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "posenc" in printed and "of copy" in printed
    record = json.loads(out.read_text())
    assert record["environment"]["torch"] == torch.__version__
    assert {row["implementation"] for row in record["rows"]} >= {"copy", "posenc"}
