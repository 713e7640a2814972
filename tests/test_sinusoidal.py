"""Unit tests for posenc.sinusoidal: the table in its three styles and the nn.Module on top."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc.sinusoidal import (
    SINUSOIDAL_STYLES,
    SinusoidalPositionalEncoding,
    sinusoidal_frequencies,
    sinusoidal_table,
)

FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def reference_table(length: int, dim: int, *, base: float = 10000.0, style: str = "interleaved",
                    offset: int = 0) -> torch.Tensor:
    """The definitions of docs/dev/spec.md, written as plain float64 Python loops."""
    n_sin = (dim + 1) // 2
    n = dim // 2
    rows = []
    for p in range(offset, offset + length):
        row = []
        for j in range(dim):
            if style == "interleaved":
                angle = p / base ** (2 * (j // 2) / dim)
                row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
            elif style == "concat":
                i = j if j < n_sin else j - n_sin
                angle = p / base ** (2 * i / dim)
                row.append(math.sin(angle) if j < n_sin else math.cos(angle))
            else:  # tensor2tensor
                log_inc = math.log(base) / max(n - 1, 1)
                if j >= 2 * n:
                    row.append(0.0)
                else:
                    angle = p * math.exp(-(j % n) * log_inc)
                    row.append(math.sin(angle) if j < n else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(length, dim)


# ----------------------------------------------------------------------------- sinusoidal_table


@pytest.mark.parametrize("style", SINUSOIDAL_STYLES)
@pytest.mark.parametrize("dim", [1, 2, 3, 4, 7, 16, 33, 64])
@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_table_matches_float64_formula(style: str, dim: int, base: float) -> None:
    got = sinusoidal_table(48, dim, base=base, style=style, dtype=torch.float64)
    want = reference_table(48, dim, base=base, style=style)
    assert got.shape == (48, dim) and got.dtype == torch.float64
    # p * base**(-e) and p / base**e differ in the last bit of the angle only.
    torch.testing.assert_close(got, want, rtol=0, atol=1e-13)


def test_worked_example_d512_pos1() -> None:
    row = sinusoidal_table(2, 512, dtype=torch.float64)[1]
    assert row[0].item() == pytest.approx(math.sin(1.0), abs=1e-15)
    assert row[1].item() == pytest.approx(math.cos(1.0), abs=1e-15)
    assert row[2].item() == pytest.approx(math.sin(1 / 10000 ** (2 / 512)), abs=1e-15)
    assert row[3].item() == pytest.approx(math.cos(1 / 10000 ** (2 / 512)), abs=1e-15)
    assert row[510].item() == pytest.approx(math.sin(1 / 10000 ** (510 / 512)), abs=1e-15)
    assert row[511].item() == pytest.approx(math.cos(1 / 10000 ** (510 / 512)), abs=1e-15)
    # Position 0 is sin 0 = 0 and cos 0 = 1 in every pair.
    row0 = sinusoidal_table(1, 512, dtype=torch.float64)[0]
    assert torch.equal(row0[0::2], torch.zeros(256, dtype=torch.float64))
    assert torch.equal(row0[1::2], torch.ones(256, dtype=torch.float64))


@pytest.mark.parametrize("dim", [1, 3, 5, 9, 65])
def test_odd_dims(dim: int) -> None:
    inter = sinusoidal_table(20, dim, dtype=torch.float64)
    concat = sinusoidal_table(20, dim, style="concat", dtype=torch.float64)
    t2t = sinusoidal_table(20, dim, style="tensor2tensor", dtype=torch.float64)
    n_sin = (dim + 1) // 2
    # Interleaved and concat: the extra column is the sine of the next frequency.
    angle = torch.arange(20, dtype=torch.float64) * 10000.0 ** (-(dim - 1) / dim)
    torch.testing.assert_close(inter[:, -1], torch.sin(angle), rtol=0, atol=1e-14)
    torch.testing.assert_close(concat[:, n_sin - 1], torch.sin(angle), rtol=0, atol=1e-14)
    # tensor2tensor: one zero column appended.
    assert torch.equal(t2t[:, -1], torch.zeros(20, dtype=torch.float64))
    if dim > 1:
        assert t2t[:, :-1].abs().sum() > 0


@pytest.mark.parametrize("style", SINUSOIDAL_STYLES)
@pytest.mark.parametrize("offset", [0, 1, 37, -5])
def test_offset_shifts_positions(style: str, offset: int) -> None:
    got = sinusoidal_table(16, 10, style=style, offset=offset, dtype=torch.float64)
    torch.testing.assert_close(got, reference_table(16, 10, style=style, offset=offset), rtol=0, atol=1e-13)


@given(
    length=st.integers(1, 24),
    dim=st.integers(1, 40),
    offset=st.integers(0, 3000),
    style=st.sampled_from(SINUSOIDAL_STYLES),
)
@settings(max_examples=60, deadline=None)
def test_offset_is_exactly_a_row_shift(length: int, dim: int, offset: int, style: str) -> None:
    shifted = sinusoidal_table(length, dim, style=style, offset=offset)
    full = sinusoidal_table(offset + length, dim, style=style)
    assert torch.equal(shifted, full[offset:])
    assert shifted.abs().max() <= 1.0


@given(length=st.integers(1, 24), dim=st.integers(1, 40), offset=st.integers(-100, 100))
@settings(max_examples=60, deadline=None)
def test_concat_is_a_column_permutation_of_interleaved(length: int, dim: int, offset: int) -> None:
    inter = sinusoidal_table(length, dim, offset=offset)
    concat = sinusoidal_table(length, dim, style="concat", offset=offset)
    perm = list(range(0, dim, 2)) + list(range(1, dim, 2))
    assert torch.equal(concat, inter[:, perm])


@pytest.mark.parametrize("style", SINUSOIDAL_STYLES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dtype_is_float64_table_rounded_once(style: str, dtype: torch.dtype) -> None:
    table64 = sinusoidal_table(300, 37, style=style, offset=11, dtype=torch.float64)
    got = sinusoidal_table(300, 37, style=style, offset=11, dtype=dtype)
    assert got.dtype == dtype
    assert torch.equal(got, round_once(table64, dtype))


def test_default_dtype_is_torch_default(default_float64: None) -> None:
    assert sinusoidal_table(4, 6).dtype == torch.float64
    torch.set_default_dtype(torch.float32)
    assert sinusoidal_table(4, 6).dtype == torch.float32


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "meta"])
def test_device_argument(device: str | torch.device) -> None:
    table = sinusoidal_table(8, 6, device=device)
    assert table.device.type == torch.device(device).type
    assert table.shape == (8, 6)
    assert sinusoidal_frequencies(6, device=device).device.type == torch.device(device).type


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    cuda = sinusoidal_table(512, 64, dtype=torch.float64, device="cuda")
    assert cuda.device.type == "cuda"
    torch.testing.assert_close(cuda.cpu(), sinusoidal_table(512, 64, dtype=torch.float64), rtol=0, atol=1e-12)


def test_frequencies() -> None:
    freqs = sinusoidal_frequencies(8)
    assert freqs.dtype == torch.float64
    want = torch.tensor([10000.0 ** (-k / 8) for k in (0, 2, 4, 6)], dtype=torch.float64)
    torch.testing.assert_close(freqs, want)
    assert sinusoidal_frequencies(7).shape == (4,)
    # tensor2tensor: dim//2 timescales, geometric from 1 to exactly 1/base.
    t2t = sinusoidal_frequencies(7, style="tensor2tensor")
    assert t2t.shape == (3,)
    assert t2t[0].item() == 1.0
    assert t2t[-1].item() == pytest.approx(1e-4, rel=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"length": 0}, ValueError, r"length.*0"),
        ({"length": -1}, ValueError, r"length.*-1"),
        ({"length": 2.5}, TypeError, r"length.*2\.5"),
        ({"length": True}, TypeError, r"length.*True"),
        ({"dim": 0}, ValueError, r"dim.*0"),
        ({"dim": -4}, ValueError, r"dim.*-4"),
        ({"dim": 8.0}, TypeError, r"dim.*8\.0"),
        ({"base": 0.0}, ValueError, r"base.*0"),
        ({"base": -1.0}, ValueError, r"base.*-1"),
        ({"base": math.inf}, ValueError, r"base.*inf"),
        ({"base": math.nan}, ValueError, r"base.*nan"),
        ({"base": "10000"}, TypeError, r"base"),
        ({"style": "sine"}, ValueError, r"style.*'sine'"),
        ({"style": "Interleaved"}, ValueError, r"style.*'interleaved'"),
        ({"offset": 1.0}, TypeError, r"offset.*1\.0"),
        ({"offset": False}, TypeError, r"offset.*False"),
        ({"dtype": torch.int64}, TypeError, r"dtype.*int64"),
        ({"dtype": torch.bool}, TypeError, r"dtype.*bool"),
        ({"dtype": "float32"}, TypeError, r"dtype"),
    ],
)
def test_table_bad_input(kwargs: dict, error: type[Exception], pattern: str) -> None:
    args = {"length": 4, "dim": 8, **kwargs}
    with pytest.raises(error, match=pattern):
        sinusoidal_table(args.pop("length"), args.pop("dim"), **args)


# ----------------------------------------------------------------------- SinusoidalPositionalEncoding


def test_module_batch_first() -> None:
    module = SinusoidalPositionalEncoding(16, max_len=32)
    x = torch.randn(3, 10, 16)
    out = module(x)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.equal(out, x + sinusoidal_table(10, 16)[None])


def test_module_seq_first() -> None:
    module = SinusoidalPositionalEncoding(16, max_len=32, batch_first=False, style="concat")
    x = torch.randn(10, 3, 16)
    assert torch.equal(module(x), x + sinusoidal_table(10, 16, style="concat")[:, None])


@pytest.mark.parametrize("offset", [0, 5, 22, -3])
def test_module_offset(offset: int) -> None:
    module = SinusoidalPositionalEncoding(8, max_len=32, style="tensor2tensor")
    x = torch.randn(2, 10, 8)
    want = x + sinusoidal_table(10, 8, style="tensor2tensor", offset=offset)
    assert torch.equal(module(x, offset=offset), want)


def test_module_grows_past_max_len() -> None:
    module = SinusoidalPositionalEncoding(12, max_len=8)
    x = torch.randn(2, 20, 12)
    out = module(x)
    torch.testing.assert_close(out - x, reference_table(20, 12).float().expand(2, -1, -1), rtol=0, atol=2e-6)
    assert module.pe.shape[0] >= 20
    assert torch.equal(module(torch.zeros(1, 5, 12), offset=30)[0], sinusoidal_table(5, 12, offset=30))
    assert module.pe.shape[0] >= 35
    assert "pe" in dict(module.named_buffers())
    assert torch.equal(module.pe, sinusoidal_table(module.pe.shape[0], 12))


def test_module_state_dict_and_grown_table_round_trip() -> None:
    module = SinusoidalPositionalEncoding(6, max_len=4)
    state = module.state_dict()
    assert list(state) == ["pe"]
    assert torch.equal(state["pe"], sinusoidal_table(4, 6))
    module(torch.zeros(1, 50, 6))
    grown = module.state_dict()
    fresh = SinusoidalPositionalEncoding(6, max_len=4)
    fresh.load_state_dict(grown)
    assert fresh.pe.shape == (module.pe.shape[0], 6)
    assert torch.equal(fresh.pe, module.pe)
    # And the other way: a short saved table into a module built with a long one.
    long = SinusoidalPositionalEncoding(6, max_len=100)
    long.load_state_dict(state)
    assert torch.equal(long.pe, state["pe"])


def test_module_to_casts_and_moves_buffer() -> None:
    module = SinusoidalPositionalEncoding(10, max_len=16)
    table32 = module.pe.clone()
    module.to(torch.float64)
    assert module.pe.dtype == torch.float64
    # Recomputed in the new dtype, not cast: float64-accurate, not float32 values widened.
    assert torch.equal(module.pe, sinusoidal_table(16, 10, dtype=torch.float64))
    assert not torch.equal(module.pe, table32.double())
    assert module(torch.zeros(1, 4, 10, dtype=torch.float64)).dtype == torch.float64
    module.to(torch.bfloat16)
    assert module.pe.dtype == torch.bfloat16
    out = module(torch.zeros(2, 40, 10, dtype=torch.bfloat16))  # also grows, in bfloat16
    assert out.dtype == torch.bfloat16 and module.pe.dtype == torch.bfloat16
    assert torch.equal(out[0], sinusoidal_table(40, 10, dtype=torch.bfloat16))
    module.to("meta")
    assert module.pe.device.type == "meta"
    grown = module(torch.zeros(1, 200, 10, dtype=torch.bfloat16, device="meta"))
    assert grown.device.type == "meta" and module.pe.device.type == "meta"


def test_module_casts_table_to_input_dtype() -> None:
    module = SinusoidalPositionalEncoding(10, max_len=16)
    x = torch.zeros(1, 6, 10, dtype=torch.float16)
    out = module(x)
    assert out.dtype == torch.float16
    assert torch.equal(out[0], sinusoidal_table(6, 10).half())


def test_module_dropout_train_and_eval() -> None:
    torch.manual_seed(0)
    module = SinusoidalPositionalEncoding(16, max_len=64, dropout=0.5)
    x = torch.ones(4, 64, 16)
    clean = x + sinusoidal_table(64, 16)
    module.train()
    out = module(x)
    dropped = out == 0
    assert 0.4 < dropped.float().mean().item() < 0.6
    torch.testing.assert_close(out[~dropped], 2.0 * clean[~dropped])
    module.eval()
    assert torch.equal(module(x), clean)


def test_module_table_is_not_a_parameter() -> None:
    module = SinusoidalPositionalEncoding(8, max_len=16)
    assert list(module.parameters()) == []
    assert not module.pe.requires_grad
    x = torch.randn(2, 5, 8, requires_grad=True)
    module(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    assert module.pe.grad is None


@pytest.mark.parametrize(
    ("x", "error", "pattern"),
    [
        (torch.zeros(5, 8), ValueError, r"x must be 3-D"),
        (torch.zeros(1, 2, 5, 8), ValueError, r"x must be 3-D"),
        (torch.zeros(2, 5, 7), ValueError, r"x\.shape\[-1\] must equal dim=8"),
        (torch.zeros(2, 5, 8, dtype=torch.int64), TypeError, r"x must have a floating-point dtype"),
        (torch.zeros(2, 5, 8, dtype=torch.bool), TypeError, r"x must have a floating-point dtype"),
    ],
)
def test_module_bad_input(x: torch.Tensor, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        SinusoidalPositionalEncoding(8, max_len=16)(x)


def test_module_bad_offset() -> None:
    with pytest.raises(TypeError, match="offset"):
        SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8), offset=1.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"dropout": 1.0}, ValueError, r"dropout.*1\.0"),
        ({"dropout": -0.1}, ValueError, r"dropout.*-0\.1"),
        ({"dim": 0}, ValueError, r"dim.*0"),
        ({"max_len": 0}, ValueError, r"max_len.*0"),
        ({"max_len": 10.0}, TypeError, r"max_len"),
        ({"style": "paper"}, ValueError, r"style.*'paper'"),
        ({"base": math.nan}, ValueError, r"base.*nan"),
    ],
)
def test_module_bad_constructor(kwargs: dict, error: type[Exception], pattern: str) -> None:
    args = {"dim": 8, **kwargs}
    with pytest.raises(error, match=pattern):
        SinusoidalPositionalEncoding(args.pop("dim"), **args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_module_compiles_fullgraph_including_past_the_cache(dtype: torch.dtype) -> None:
    torch._dynamo.reset()
    eager = SinusoidalPositionalEncoding(8, max_len=16)
    compiled = torch.compile(SinusoidalPositionalEncoding(8, max_len=16), fullgraph=True, backend="eager")
    for seq, offset in [(10, 0), (12, 3), (40, 0), (6, 30)]:
        x = torch.randn(2, seq, 8, dtype=dtype)
        want = eager(x, offset=offset)
        got = compiled(x, offset=offset)
        assert torch.equal(got, want)
        table = sinusoidal_table(seq, 8, offset=offset).to(dtype)
        torch.testing.assert_close(got - x, table.expand(2, -1, -1))


def test_module_repr() -> None:
    text = repr(SinusoidalPositionalEncoding(8, max_len=16, style="concat"))
    assert "dim=8" in text and "max_len=16" in text and "'concat'" in text


@pytest.mark.parametrize("value", [1, 0, "no", None])
def test_module_flags_must_be_bools(value: object) -> None:
    # A truthy string or int would otherwise be read as True and pick a layout silently.
    with pytest.raises(TypeError, match="batch_first must be a bool"):
        SinusoidalPositionalEncoding(8, batch_first=value)  # type: ignore[arg-type]


def test_half_module_gives_the_same_bits_before_and_after_growth() -> None:
    # A cast table would be rounded twice (float64 -> float32 -> float16) and the rows added when
    # the cache grows once: positions would change bits. After .half() the table is recomputed.
    module = SinusoidalPositionalEncoding(8, max_len=3000).half()
    x = torch.zeros(1, 3000, 8, dtype=torch.float16)
    before = module(x)
    module(torch.zeros(1, 3001, 8, dtype=torch.float16))  # grows the cache
    assert torch.equal(module(x), before)
    assert torch.equal(before[0], sinusoidal_table(3000, 8, dtype=torch.float16))
