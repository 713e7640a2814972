"""Contracts of posenc.benchmark: what it computes from given timings and prints, never timings themselves."""

from __future__ import annotations

import datetime
import json
import platform
import re
import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo  # noqa: F401  (imported once here, not by every torch.compile below)
from transformers.models.llama import modeling_llama  # noqa: F401  (rope_implementations imports it)

import posenc
from posenc import benchmark
from posenc.benchmark import (
    CPU_SHAPES,
    RopeTiming,
    _format,
    _targets,
    environment,
    main,
    median_seconds,
    meta_complex_rope,
    rope_bytes,
    rope_implementations,
    time_rope,
)
from posenc.rope import apply_rope_qk, rope_cos_sin

SHAPE = (1, 2, 4, 8)


class FakeClock:
    """A perf_counter that moves only when a timed function says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _timed(clock: FakeClock, durations: list[float], calls: list[str], name: str):
    def fn() -> None:
        calls.append(name)
        clock.now += durations.pop(0)
    return fn


# --------------------------------------------------------------------------------------------
# median_seconds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [0, -1])
def test_median_refuses_rounds_below_one(rounds: int) -> None:
    with pytest.raises(ValueError, match=f"^rounds must be a positive integer, got {rounds}$"):
        median_seconds({"nothing": lambda: None}, rounds)


def test_median_warms_up_twice_then_interleaves_and_takes_the_median(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(benchmark.time, "perf_counter", clock)
    calls: list[str] = []
    # Two warm-up calls each (their times are ignored), then three timed rounds.
    a = _timed(clock, [100.0, 100.0, 3.0, 1.0, 2.0], calls, "a")
    b = _timed(clock, [100.0, 100.0, 10.0, 30.0, 20.0], calls, "b")
    got = median_seconds({"a": a, "b": b}, 3)
    assert got == {"a": 2.0, "b": 20.0}
    assert calls == ["a", "a", "b", "b", "a", "b", "a", "b", "a", "b"]


def test_median_of_one_round(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(benchmark.time, "perf_counter", clock)
    calls: list[str] = []
    got = median_seconds({"a": _timed(clock, [0.0, 0.0, 0.25], calls, "a")}, 1, device="cpu")
    assert got == {"a": 0.25}
    assert len(calls) == 3


# --------------------------------------------------------------------------------------------
# rope_bytes, meta_complex_rope
# --------------------------------------------------------------------------------------------


def test_bytes_count_each_tensor_by_its_own_element_size() -> None:
    q = torch.empty(1, 2, 3, 8, dtype=torch.float16)
    k = torch.empty(1, 1, 3, 8, dtype=torch.float64)
    cos = torch.empty(3, 8, dtype=torch.float32)
    sin = torch.empty(3, 4, dtype=torch.bfloat16)
    assert rope_bytes(q, k, cos, sin) == 2 * (48 * 2 + 24 * 8) + 24 * 4 + 12 * 2


def test_meta_complex_keeps_the_dtype_and_rotates_pairs() -> None:
    q = torch.tensor([[[[1.0, 0.0, 0.0, 2.0]]]], dtype=torch.float16)
    k = q.double()
    freqs_cis = torch.tensor([[1j, -1.0]], dtype=torch.complex64)  # pair 0 by pi/2, pair 1 by pi
    got_q, got_k = meta_complex_rope(q, k, freqs_cis)
    assert got_q.dtype == torch.float16 and got_k.dtype == torch.float64
    assert got_q.tolist() == [[[[0.0, 1.0, 0.0, -2.0]]]]
    assert got_k.tolist() == [[[[0.0, 1.0, 0.0, -2.0]]]]


# --------------------------------------------------------------------------------------------
# rope_implementations
# --------------------------------------------------------------------------------------------


def _qk(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(SHAPE, generator=generator).to(dtype), torch.randn(SHAPE, generator=generator).to(dtype)


def test_implementations_in_order_with_their_results() -> None:
    q, k = _qk()
    fns, tables = rope_implementations(q, k, compiled=True)
    assert list(fns) == ["copy", "Hugging Face eager", "Hugging Face compiled", "Meta complex", "posenc"]
    cos, sin = rope_cos_sin(4, 8)
    want = apply_rope_qk(q, k, cos, sin)
    copy = fns["copy"]()
    assert torch.equal(copy[0], q) and torch.equal(copy[1], k)
    assert copy[0] is not q and copy[1] is not k
    for name in ("Hugging Face eager", "posenc"):
        got = fns[name]()
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    meta = fns["Meta complex"]()
    assert torch.equal(meta[0], meta_complex_rope(q, k, tables["freqs_cis"])[0])
    assert torch.equal(meta[1], meta_complex_rope(q, k, tables["freqs_cis"])[1])


def test_implementations_tables() -> None:
    q, k = _qk(torch.bfloat16)
    _, tables = rope_implementations(q, k, compiled=False)
    cos, sin = rope_cos_sin(4, 8, dtype=torch.bfloat16)
    assert torch.equal(tables["cos"], cos) and torch.equal(tables["sin"], sin)
    angles = torch.arange(4, dtype=torch.float64)[:, None] * (10000.0 ** (-torch.arange(0, 8, 2) / 8))
    want = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    assert tables["freqs_cis"].dtype == torch.complex64
    torch.testing.assert_close(tables["freqs_cis"], want, rtol=0, atol=1e-7)


def test_implementations_without_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers.models.llama.modeling_llama", None)
    fns, _ = rope_implementations(*_qk(), compiled=True)
    assert list(fns) == ["copy", "Meta complex", "posenc"]


def test_implementations_refuse_a_hugging_face_result_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.llama import modeling_llama

    real = modeling_llama.apply_rotary_pos_emb
    for wrong_q, wrong_k in ((True, False), (False, True)):
        def shifted(q, k, cos, sin, *args, wrong_q=wrong_q, wrong_k=wrong_k):
            got_q, got_k = real(q, k, cos, sin, *args)
            return got_q + wrong_q, got_k + wrong_k
        monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb", shifted)
        with pytest.raises(RuntimeError,
                           match="^posenc.apply_rope_qk differs from Hugging Face's apply_rotary_pos_emb$"):
            rope_implementations(*_qk(), compiled=False)


def test_implementations_check_the_complex_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmark, "meta_complex_rope", lambda q, k, f: (q, k))
    with pytest.raises(AssertionError):
        rope_implementations(*_qk(), compiled=False)


# --------------------------------------------------------------------------------------------
# time_rope: the rows computed from the medians
# --------------------------------------------------------------------------------------------


def test_time_rope_rows_from_given_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def medians(fns, rounds, *, device="cpu"):
        seen.update(names=list(fns), rounds=rounds, device=device, inference=torch.is_inference_mode_enabled())
        return {"copy": 0.002, "Meta complex": 0.008, "posenc": 0.004}

    monkeypatch.setattr(benchmark, "median_seconds", medians)
    rows = time_rope(SHAPE, torch.float16, rounds=7, compiled=False)
    assert seen == {"names": ["copy", "Hugging Face eager", "Meta complex", "posenc"], "rounds": 7,
                    "device": "cpu", "inference": True}
    qk = 2 * (64 * 2)  # q and k, 64 float16 elements each
    moved = 2 * qk + 2 * 32 * 2  # read and written, plus cos/sin (4 x 8 float16) read once
    assert rows == [
        RopeTiming("copy", SHAPE, "float16", "cpu", 2.0, 2 * qk, 2 * qk / 0.002 / 1e9, 1.0),
        RopeTiming("Meta complex", SHAPE, "float16", "cpu", 8.0, moved, moved / 0.008 / 1e9,
                   (moved / 0.008) / (2 * qk / 0.002)),
        RopeTiming("posenc", SHAPE, "float16", "cpu", 4.0, moved, moved / 0.004 / 1e9,
                   (moved / 0.004) / (2 * qk / 0.002)),
    ]


def test_time_rope_defaults_and_seeded_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def implementations(q, k, *, compiled=True):
        seen.update(q=q, k=k, compiled=compiled)
        return {"copy": lambda: None}, {"cos": torch.empty(4, 8), "sin": torch.empty(4, 8)}

    def medians(fns, rounds, *, device="cpu"):
        seen.update(rounds=rounds)
        return {"copy": 1.0}

    monkeypatch.setattr(benchmark, "rope_implementations", implementations)
    monkeypatch.setattr(benchmark, "median_seconds", medians)
    rows = time_rope(SHAPE)
    assert seen["rounds"] == 20 and seen["compiled"] is True
    assert seen["q"].dtype == torch.float32 and rows[0].dtype == "float32"
    want_q, want_k = _qk()
    assert torch.equal(seen["q"], want_q) and torch.equal(seen["k"], want_k)
    time_rope(SHAPE, seed=1)
    generator = torch.Generator().manual_seed(1)
    assert torch.equal(seen["q"], torch.randn(SHAPE, generator=generator))


def test_time_rope_shape_is_a_tuple(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmark, "median_seconds", lambda fns, rounds, device="cpu": dict.fromkeys(fns, 1.0))
    rows = time_rope([1, 2, 4, 8], compiled=False)  # type: ignore[arg-type]
    assert all(r.shape == SHAPE and isinstance(r.shape, tuple) for r in rows)


# --------------------------------------------------------------------------------------------
# environment, _format, _targets
# --------------------------------------------------------------------------------------------


def test_environment_on_cpu() -> None:
    import transformers

    info = environment()
    assert info["date"] == datetime.date.today().isoformat()
    assert info["machine"] == platform.machine()
    assert info["processor"] == (platform.processor() or platform.machine())
    assert info["python"] == platform.python_version()
    assert info["torch"] == torch.__version__
    assert info["posenc"] == posenc.__version__
    assert info["threads"] == str(torch.get_num_threads())
    assert info["transformers"] == transformers.__version__
    triton = pytest.importorskip("triton")
    assert info["triton"] == triton.__version__
    assert "gpu" not in info and "cuda" not in info
    assert list(info)[:7] == ["date", "machine", "processor", "python", "torch", "posenc", "threads"]


def test_environment_processor_falls_back_to_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert environment("cpu")["processor"] == platform.machine()


def test_environment_leaves_out_packages_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    info = environment()
    assert "triton" not in info and "transformers" not in info


def _row(implementation: str, ms: float, shape=(4, 16, 1024, 128), device="cpu", dtype="float32",
         fraction: float = 0.5) -> RopeTiming:
    return RopeTiming(implementation, shape, dtype, device, ms, 1000, 12.345, fraction)


def test_format_is_a_header_and_one_aligned_line_per_row() -> None:
    text = _format([_row("posenc", 1.23456, shape=SHAPE, fraction=0.456)])
    assert text == (
        "shape                 dtype     implementation                  ms      GB/s  of copy\n"
        "(1, 2, 4, 8)          float32   posenc                       1.235      12.3     46%"
    )


def test_targets_on_the_cpu_row() -> None:
    rows = [_row("copy", 0.5), _row("Hugging Face eager", 5.0), _row("posenc", 2.0)]
    assert _targets(rows) == ["CPU float32 (4, 16, 1024, 128): HF eager / posenc = 2.50 (target >= 2), "
                              "posenc / copy = 4.00 (target <= 2)"]


@pytest.mark.parametrize("missing", ["Hugging Face eager", "posenc"])
def test_targets_need_both_cpu_rows(missing: str) -> None:
    rows = [r for r in [_row("copy", 1.0), _row("Hugging Face eager", 5.0), _row("posenc", 2.0)]
            if r.implementation != missing]
    assert _targets(rows) == []


def test_targets_only_on_their_size_dtype_and_device() -> None:
    for changed in ({"shape": (4, 16, 1024, 64)}, {"dtype": "bfloat16"}, {"device": "cuda"}):
        rows = [_row(n, 1.0, **changed) for n in ("copy", "Hugging Face eager", "posenc")]
        assert _targets(rows) == []


def test_targets_on_the_cuda_rows() -> None:
    gpu = {"shape": (8, 32, 4096, 128), "device": "cuda", "dtype": "bfloat16"}
    rows = [_row("copy", 1.0, **gpu), _row("posenc", 2.0, fraction=0.934, **gpu)]
    assert _targets(rows) == ["CUDA bfloat16 (8, 32, 4096, 128): posenc at 93% of the copy (target >= 90%)"]
    rows.append(_row("Hugging Face compiled", 3.0, **gpu))
    assert _targets(rows) == ["CUDA bfloat16 (8, 32, 4096, 128): posenc at 93% of the copy (target >= 90%), "
                              "HF compiled / posenc = 1.50 (target >= 1.3)"]


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """main with time_rope replaced: the calls it made, one row each."""
    made: list[dict] = []

    def fake(shape, dtype=torch.float32, *, device="cpu", rounds=20, compiled=True, seed=0):
        made.append({"shape": shape, "dtype": dtype, "device": device, "rounds": rounds, "compiled": compiled})
        return [RopeTiming("copy", tuple(shape), str(dtype).removeprefix("torch."), str(device), 1.0, 8, 0.5, 1.0)]

    monkeypatch.setattr(benchmark, "time_rope", fake)
    monkeypatch.setattr(benchmark, "environment", lambda device="cpu": {"device": str(device), "torch": "x"})
    return made


def test_main_defaults_on_cpu(calls: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--device", "cpu"]) == 0
    assert calls == [{"shape": s, "dtype": torch.float32, "device": "cpu", "rounds": 20, "compiled": True}
                     for s in CPU_SHAPES]
    out = capsys.readouterr().out
    assert out.startswith("device cpu, torch x\nshape ")
    assert out.endswith(_format([RopeTiming("copy", s, "float32", "cpu", 1.0, 8, 0.5, 1.0) for s in CPU_SHAPES]) + "\n")


def test_main_passes_its_arguments(calls: list[dict]) -> None:
    assert main(["--device", "cpu", "--dtypes", "float16", "bfloat16", "--shapes", "1,2,3,4", "2,2,2,2",
                 "--rounds", "3", "--no-compile"]) == 0
    assert [(c["shape"], c["dtype"]) for c in calls] == [
        ((1, 2, 3, 4), torch.float16), ((1, 2, 3, 4), torch.bfloat16),
        ((2, 2, 2, 2), torch.float16), ((2, 2, 2, 2), torch.bfloat16)]
    assert all(c["rounds"] == 3 and c["compiled"] is False and c["device"] == "cpu" for c in calls)


def test_main_cuda_defaults(calls: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["--device", "cuda", "--shapes", "1,1,1,2"]) == 0
    assert [c["dtype"] for c in calls] == [torch.bfloat16, torch.float16, torch.float32]
    assert all(c["rounds"] == 50 and c["device"] == "cuda" for c in calls)
    calls.clear()
    assert main(["--device", "cuda", "--dtypes", "float32"]) == 0
    assert [c["shape"] for c in calls] == benchmark.CUDA_SHAPES


def test_main_default_device_is_the_cpu_without_cuda(calls: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--shapes", "1,1,1,2"]) == 0
    assert calls[0]["device"] == "cpu"


def test_main_refuses_a_shape_of_other_than_four_sizes(calls: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--device", "cpu", "--shapes", "1,2,3"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith("error: a shape is B,H,S,D, got (1, 2, 3)\n")
    assert calls == []


def test_main_prints_the_targets(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [_row("copy", 1.0), _row("Hugging Face eager", 5.0), _row("posenc", 2.0)]
    monkeypatch.setattr(benchmark, "time_rope", lambda *a, **k: rows)
    monkeypatch.setattr(benchmark, "environment", lambda device="cpu": {"d": "e"})
    assert main(["--device", "cpu", "--shapes", "4,16,1024,128"]) == 0
    assert capsys.readouterr().out == "d e\n" + _format(rows) + "\n" + _targets(rows)[0] + "\n"


def test_main_writes_the_environment_and_rows_as_json(calls: list[dict], tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    assert main(["--device", "cpu", "--shapes", "1,2,3,4", "--json", str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    record = {"environment": {"device": "cpu", "torch": "x"},
              "rows": [{"implementation": "copy", "shape": [1, 2, 3, 4], "dtype": "float32", "device": "cpu",
                        "ms": 1.0, "bytes_moved": 8, "gb_per_s": 0.5, "fraction_of_copy": 1.0}]}
    assert text == json.dumps(record, indent=1) + "\n"


def test_main_help_describes_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: python -m posenc.benchmark ")
    assert re.search(r"\] Time RoPE implementations against a copy of q and k \(the memory bound\)\. \w+:", out)
    for text in [
                 "--dtypes DTYPES [DTYPES ...] default: float32 on CPU; bfloat16 float16 float32 on CUDA",
                 "--shapes B,H,S,D [B,H,S,D ...] default: a grid for the device",
                 "--rounds ROUNDS default: 20 on CPU, 50 on CUDA",
                 "--no-compile skip Hugging Face compiled",
                 "--json JSON also write the environment and rows here"]:
        assert text in out
    assert re.search(r"--device DEVICE\b", out)


# --------------------------------------------------------------------------------------------
# The CUDA paths, with CUDA's events and device name replaced (no GPU needed)
# --------------------------------------------------------------------------------------------


class FakeEvent:
    """A CUDA event on a fake GPU clock (milliseconds)."""

    clock = 0.0
    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing is True, "the events must be created with enable_timing=True"
        self.at: float | None = None
        self.synchronized = False

    def record(self) -> None:
        self.at = FakeEvent.clock
        FakeEvent.log.append("record")

    def synchronize(self) -> None:
        self.synchronized = True
        FakeEvent.log.append("synchronize")

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert end.synchronized and self.at is not None and end.at is not None
        return end.at - self.at


def test_median_on_cuda_times_each_call_with_cuda_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(benchmark.time, "perf_counter", lambda: pytest.fail("perf_counter used on CUDA"))
    FakeEvent.clock, FakeEvent.log = 0.0, []
    durations = [0.0, 0.0, 4.0, 2.0, 8.0]  # milliseconds on the GPU's clock; two warm-up calls first

    def fn() -> None:
        FakeEvent.log.append("fn")
        FakeEvent.clock += durations.pop(0)

    assert median_seconds({"a": fn}, 3, device="cuda") == {"a": 0.004}
    assert FakeEvent.log[:2] == ["fn", "fn"]
    assert FakeEvent.log[2:] == ["record", "fn", "record", "synchronize"] * 3


def test_environment_on_cuda_names_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    names = []
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: names.append(device) or "Fake GPU")
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    info = environment("cuda")
    assert info["gpu"] == "Fake GPU" and names == ["cuda"]
    assert info["cuda"] == "12.9"


def test_main_default_device_is_cuda_when_there_is_one(calls: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert main(["--shapes", "1,1,1,2", "--dtypes", "float32"]) == 0
    assert calls[0]["device"] == "cuda" and calls[0]["rounds"] == 50


def test_implementations_include_the_compiled_one_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = []

    def fake_compile(fn, *, dynamic):
        compiled.append((fn, dynamic))
        return lambda *args: fn(*args)

    monkeypatch.setattr(torch, "compile", fake_compile)
    q, k = _qk()
    fns, _ = rope_implementations(q, k)
    assert compiled == [(modeling_llama.apply_rotary_pos_emb, True)]
    got, want = fns["Hugging Face compiled"](), fns["posenc"]()
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_time_rope_times_on_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(benchmark, "median_seconds", lambda fns, rounds, *, device="cpu": seen.append(device) or
                        dict.fromkeys(fns, 1.0))
    device = torch.device("cpu")
    time_rope(SHAPE, device=device, compiled=False)
    assert seen[0] is device


def _complex_form_off_by(monkeypatch: pytest.MonkeyPatch, units: float) -> None:
    """rope_implementations with the complex form's largest query value moved by ``units`` x eps x max|value|,
    eps that of float32 (the complex form's precision); float64 inputs, so that the move is exact."""
    q, k = _qk(torch.float64)
    cos_i, sin_i = rope_cos_sin(4, 8, layout="interleaved", dtype=torch.float64)
    ref_q, ref_k = apply_rope_qk(q, k, cos_i, sin_i, layout="interleaved")
    eps, largest = torch.finfo(torch.float32).eps, ref_q.abs().max().item()
    moved = ref_q.clone().flatten()
    j = moved.abs().argmax()
    moved[j] += units * eps * largest * torch.sign(moved[j])
    off = abs(moved[j].item() - ref_q.flatten()[j].item()) / (eps * largest)
    assert abs(off - units) < 0.4  # the move survived rounding
    monkeypatch.setattr(benchmark, "meta_complex_rope", lambda q_, k_, f: (moved.view_as(ref_q), ref_k))
    rope_implementations(q, k, compiled=False)


def test_implementations_accept_the_complex_form_within_4_eps() -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _complex_form_off_by(monkeypatch, 7.5)  # the bound here: 4 eps x max + 4 eps x |value| = 8 eps x max


def test_implementations_refuse_the_complex_form_past_4_eps() -> None:
    with pytest.MonkeyPatch.context() as monkeypatch, pytest.raises(AssertionError):
        _complex_form_off_by(monkeypatch, 8.5)


def test_implementations_of_float64_inputs_check_the_complex_form_at_float32_precision() -> None:
    """The complex form computes in float32 whatever the input: float64 inputs were refused (a bug)."""
    q, k = _qk(torch.float64)
    fns, tables = rope_implementations(q, k, compiled=False)
    got = fns["Meta complex"]()
    assert got[0].dtype == torch.float64
    cos_i, sin_i = rope_cos_sin(4, 8, layout="interleaved", dtype=torch.float64)
    want = apply_rope_qk(q, k, cos_i, sin_i, layout="interleaved")[0]
    assert (got[0] - want).abs().max() > 1e-10  # float32 rounding, far beyond float64's eps


def test_implementations_of_three_dimensional_inputs_without_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers.models.llama.modeling_llama", None)
    q, k = _qk()
    fns, tables = rope_implementations(q[0], k[0], compiled=False)  # (heads, seq, dim)
    assert tables["cos"].shape == (4, 8) and tables["freqs_cis"].shape == (4, 4)
    got = fns["posenc"]()
    want = apply_rope_qk(q, k, *rope_cos_sin(4, 8))
    assert torch.equal(got[0], want[0][0]) and torch.equal(got[1], want[1][0])
