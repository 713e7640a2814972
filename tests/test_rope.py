"""Unit and property tests of posenc.rope (formulas against float64 hand-written references)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc._rope_scaling import parse_scaling
from posenc import _rotation
from posenc.rope import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_qk,
    half_to_interleaved,
    interleaved_to_half,
    permute_for_half_layout,
    rope_cos_sin,
    rope_inv_freq,
    yarn_mscale,
)

LOW_PRECISION = [torch.float16, torch.bfloat16]
ALL_FLOATS = [torch.float64, torch.float32, *LOW_PRECISION]


# ---------------------------------------------------------------------------------------------
# Hand-written float64 references
# ---------------------------------------------------------------------------------------------


def ref_inv_freq(dim: int, base: float = 10000.0) -> list[float]:
    return [base ** (-2 * i / dim) for i in range(dim // 2)]


def ref_rotate(x: torch.Tensor, positions: list[int], inv_freq: list[float], layout: str) -> torch.Tensor:
    """Rotate each channel pair of x[..., p, :] by p * inv_freq[i], one pair at a time."""
    out = x.clone().double()
    half = len(inv_freq)
    for s, p in enumerate(positions):
        for i, f in enumerate(inv_freq):
            a, b = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
            c, sn = math.cos(p * f), math.sin(p * f)
            xa, xb = x[..., s, a].double(), x[..., s, b].double()
            out[..., s, a] = xa * c - xb * sn
            out[..., s, b] = xb * c + xa * sn
    return out


# ---------------------------------------------------------------------------------------------
# rope_inv_freq
# ---------------------------------------------------------------------------------------------


def test_inv_freq_default_formula() -> None:
    inv_freq, factor = rope_inv_freq(16, base=500.0)
    assert inv_freq.dtype == torch.float64 and inv_freq.shape == (8,)
    assert factor == 1.0
    torch.testing.assert_close(inv_freq, torch.tensor(ref_inv_freq(16, 500.0), dtype=torch.float64), rtol=1e-15, atol=0)


def test_inv_freq_dtype_and_device() -> None:
    inv_freq, _ = rope_inv_freq(8, dtype=torch.float32, device="cpu")
    assert inv_freq.dtype == torch.float32 and inv_freq.device.type == "cpu"
    torch.testing.assert_close(inv_freq, torch.tensor(ref_inv_freq(8), dtype=torch.float32))


def test_inv_freq_linear_and_partial() -> None:
    linear, _ = rope_inv_freq(32, scaling={"rope_type": "linear", "factor": 4})
    torch.testing.assert_close(linear, torch.tensor(ref_inv_freq(32), dtype=torch.float64) / 4)
    partial, _ = rope_inv_freq(32, scaling={"partial_rotary_factor": 0.25})
    # the rotary width is int(32 * 0.25) = 8 and the exponent is over that width
    torch.testing.assert_close(partial, torch.tensor(ref_inv_freq(8), dtype=torch.float64))


def test_inv_freq_proportional() -> None:
    # Gemma 4: 512 * 0.25 // 2 = 64 pairs turn, their exponents over the whole 512-wide head.
    scaling = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    inv_freq, factor = rope_inv_freq(512, base=1e6, scaling=scaling)
    expected = torch.tensor(ref_inv_freq(512, 1e6), dtype=torch.float64)
    expected[64:] = 0
    torch.testing.assert_close(inv_freq, expected, rtol=1e-15, atol=0)
    assert factor == 1.0
    scaled, _ = rope_inv_freq(512, base=1e6, scaling={**scaling, "factor": 8.0})
    torch.testing.assert_close(scaled, expected / 8, rtol=1e-15, atol=0)
    # The pairs that do not turn leave their channels as they are: (i, i + 256) for i >= 64.
    cos, sin = rope_cos_sin(16, 512, base=1e6, scaling=scaling)
    x = torch.randn(16, 512, dtype=torch.float64)
    y = apply_rope(x, cos.double(), sin.double())
    still = torch.cat([torch.arange(64, 256), torch.arange(320, 512)])
    assert torch.equal(y[:, still], x[:, still]) and not torch.equal(y[1:, :64], x[1:, :64])


def test_inv_freq_proportional_edges() -> None:
    # Without a proportion, or with 1, every pair turns: the default frequencies.
    default, _ = rope_inv_freq(64, base=500.0)
    for scaling in ({}, {"partial_rotary_factor": 1.0}):
        torch.testing.assert_close(rope_inv_freq(64, base=500.0, scaling={"rope_type": "proportional", **scaling})[0],
                                   default, rtol=0, atol=0)
    # One pair is enough: 8 * 0.25 // 2 = 1.
    one, _ = rope_inv_freq(8, scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25})
    assert one.tolist() == [1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="dim must be even"):
        rope_inv_freq(9, scaling={"rope_type": "proportional", "partial_rotary_factor": 0.5})


@pytest.mark.parametrize(
    "scaling",
    [
        {},
        {"rope_type": "linear", "factor": 2.0},
        {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 16},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        {"rope_type": "longrope", "short_factor": [1.5] * 8, "long_factor": [3.0] * 8,
         "original_max_position_embeddings": 16, "factor": 4.0},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 16},
        {"rope_type": "proportional", "partial_rotary_factor": 0.5},
    ],
    ids=lambda scaling: scaling.get("rope_type", "default"),
)
def test_inv_freq_on_the_meta_device(scaling: dict) -> None:
    # Every type computes on the requested device: no step falls back to the CPU, also for a
    # length given as a tensor on that device (RotaryEmbedding's path, which never syncs).
    for seq_len in (None, 64):
        inv_freq, _ = rope_inv_freq(16, scaling=scaling, seq_len=seq_len, device="meta")
        assert inv_freq.device.type == "meta" and inv_freq.shape == (8,)
    kind = parse_scaling(16, 10000.0, scaling)
    inv_freq = kind.inv_freq(torch.tensor(64, device="meta"), "meta")
    assert inv_freq.device.type == "meta" and inv_freq.shape == (8,)


def test_inv_freq_smallest_widths_and_unit_factors() -> None:
    # The narrowest widths each type allows: dynamic needs 4 channels, partial rotary 2.
    dynamic, _ = rope_inv_freq(4, scaling={"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8})
    assert dynamic.shape == (2,)
    two, _ = rope_inv_freq(8, scaling={"partial_rotary_factor": 0.25})
    assert two.tolist() == [1.0]
    # LongRoPE with factor 1 needs no original length of 2 or more: its attention factor is 1.
    lists = {"short_factor": [1.0] * 4, "long_factor": [1.0] * 4}
    _, attention = rope_inv_freq(8, scaling={"rope_type": "longrope", **lists, "factor": 1.0,
                                             "original_max_position_embeddings": 1})
    assert attention == 1.0


def test_inv_freq_longrope_factors_in_float64() -> None:
    # The factor lists are applied in float64: 1.1 is not a float32 number.
    scaling = {"rope_type": "longrope", "short_factor": [1.1] * 4, "long_factor": [2.3] * 4,
               "original_max_position_embeddings": 16, "factor": 4.0}
    base = torch.tensor(ref_inv_freq(8), dtype=torch.float64)
    torch.testing.assert_close(rope_inv_freq(8, scaling=scaling, seq_len=16)[0], base / 1.1, rtol=0, atol=0)
    torch.testing.assert_close(rope_inv_freq(8, scaling=scaling, seq_len=17)[0], base / 2.3, rtol=0, atol=0)
    # The long list takes over past the original length, not at it (tensor lengths too).
    kind = parse_scaling(8, 10000.0, scaling)
    torch.testing.assert_close(kind.inv_freq(torch.tensor(16), None), base / 1.1, rtol=0, atol=0)
    torch.testing.assert_close(kind.inv_freq(torch.tensor(17), None), base / 2.3, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        ({"partial_rotary_factor": 1.5}, r"must be in \(0, 1\]"),
        ({"partial_rotary_factor": 0.001}, "rotates no pair"),
        ({"factor": 0.0}, "factor"),
        ({"factor": 2.0, "low_freq_factor": 1.0}, "does not use"),
    ],
    ids=["over-one", "no-pair", "zero-factor", "foreign-key"],
)
def test_inv_freq_proportional_bad_input(scaling: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rope_inv_freq(512, scaling={"rope_type": "proportional", **scaling})


def test_inv_freq_legacy_type_key() -> None:
    old, _ = rope_inv_freq(16, scaling={"type": "linear", "factor": 2.0})
    new, _ = rope_inv_freq(16, scaling={"rope_type": "linear", "factor": 2.0})
    assert torch.equal(old, new)


def test_inv_freq_dynamic_formula() -> None:
    scaling = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 100}
    default, _ = rope_inv_freq(16)
    for seq_len in (None, 1, 100):
        assert torch.equal(rope_inv_freq(16, scaling=scaling, seq_len=seq_len)[0], default)
    base = 10000.0 * (2.0 * 300 / 100 - 1.0) ** (16 / 14)
    got, factor = rope_inv_freq(16, scaling=scaling, seq_len=300)
    torch.testing.assert_close(got, torch.tensor(ref_inv_freq(16, base), dtype=torch.float64), rtol=1e-14, atol=0)
    assert factor == 1.0
    assert got[0] == 1.0  # the highest frequency is kept


def test_inv_freq_yarn_limits_and_attention_factor() -> None:
    scaling = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 256}
    got, factor = rope_inv_freq(64, scaling=scaling)
    plain = torch.tensor(ref_inv_freq(64), dtype=torch.float64)
    assert factor == pytest.approx(0.1 * math.log(16.0) + 1.0, rel=1e-15)
    assert got[0] == plain[0]  # high frequencies extrapolate
    torch.testing.assert_close(got[-1], plain[-1] / 16)  # low ones interpolate
    assert torch.all(got <= plain * (1 + 1e-12)) and torch.all(got >= plain / 16 * (1 - 1e-12))
    mscaled = dict(scaling, mscale=1.0, mscale_all_dim=0.5)
    expected = (0.1 * math.log(16.0) + 1.0) / (0.05 * math.log(16.0) + 1.0)
    assert rope_inv_freq(64, scaling=mscaled)[1] == pytest.approx(expected, rel=1e-15)
    assert rope_inv_freq(64, scaling=dict(scaling, attention_factor=0.7))[1] == 0.7


def test_inv_freq_yarn_without_factor_uses_context_ratio() -> None:
    a = rope_inv_freq(32, scaling={"rope_type": "yarn", "original_max_position_embeddings": 100,
                                   "max_position_embeddings": 400})
    b = rope_inv_freq(32, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 100})
    assert torch.equal(a[0], b[0]) and a[1] == b[1]


def test_inv_freq_longrope_short_and_long() -> None:
    short, long = [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]
    scaling = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
               "original_max_position_embeddings": 64, "factor": 4.0}
    plain = torch.tensor(ref_inv_freq(8), dtype=torch.float64)
    for seq_len, ext in ((None, short), (64, short), (65, long)):
        got, factor = rope_inv_freq(8, scaling=scaling, seq_len=seq_len)
        torch.testing.assert_close(got, plain / torch.tensor(ext, dtype=torch.float64), rtol=1e-15, atol=0)
        assert factor == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(64)), rel=1e-15)


def test_inv_freq_llama3_bands() -> None:
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    got, _ = rope_inv_freq(32, scaling=scaling)
    for f, g in zip(ref_inv_freq(32), got.tolist()):
        wavelen = 2 * math.pi / f
        if wavelen < 64 / 4:
            assert g == pytest.approx(f, rel=1e-15)
        elif wavelen > 64:
            assert g == pytest.approx(f / 8, rel=1e-15)
        else:
            smooth = (64 / wavelen - 1.0) / 3.0
            assert g == pytest.approx((1 - smooth) * f / 8 + smooth * f, rel=1e-14)


# ---------------------------------------------------------------------------------------------
# rope_cos_sin
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cos_sin_values_and_layout(layout: str) -> None:
    cos, sin = rope_cos_sin(7, 8, layout=layout, dtype=torch.float64)
    assert cos.shape == sin.shape == (7, 8)
    freqs = ref_inv_freq(8)
    for p in range(7):
        for j in range(8):
            i = j % 4 if layout == "half" else j // 2
            assert cos[p, j].item() == pytest.approx(math.cos(p * freqs[i]), abs=1e-15)
            assert sin[p, j].item() == pytest.approx(math.sin(p * freqs[i]), abs=1e-15)


@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_cos_sin_rounded_once_from_float64(dtype: torch.dtype) -> None:
    positions = torch.tensor([0, 1, 1000, 65535, 1_000_000])
    cos, sin = rope_cos_sin(positions, 16, dtype=dtype)
    ref_cos, ref_sin = rope_cos_sin(positions, 16, dtype=torch.float64)
    assert cos.dtype == dtype
    assert torch.equal(cos, round_once(ref_cos, dtype)) and torch.equal(sin, round_once(ref_sin, dtype))
    # float64 angles: position 1e6 is still accurate (float32 angles would be off by ~0.03)
    assert ref_sin[-1, 0].item() == pytest.approx(math.sin(1_000_000.0), abs=1e-9)


def test_cos_sin_default_dtype_and_tensor_shapes() -> None:
    cos, _ = rope_cos_sin(3, 4)
    assert cos.dtype == torch.get_default_dtype()
    positions = torch.arange(24).reshape(2, 3, 4)
    cos, sin = rope_cos_sin(positions, 6)
    assert cos.shape == sin.shape == (2, 3, 4, 6)
    flat, _ = rope_cos_sin(positions.flatten(), 6)
    assert torch.equal(cos.flatten(0, 2), flat)


def test_cos_sin_float_positions_and_negative() -> None:
    ints = rope_cos_sin(torch.tensor([-3, 0, 5]), 8, dtype=torch.float64)
    floats = rope_cos_sin(torch.tensor([-3.0, 0.0, 5.0], dtype=torch.float64), 8, dtype=torch.float64)
    assert torch.equal(ints[0], floats[0]) and torch.equal(ints[1], floats[1])
    cos, sin = rope_cos_sin(torch.tensor([0.5]), 2, dtype=torch.float64)
    assert cos[0, 0].item() == pytest.approx(math.cos(0.5), abs=1e-15)


def test_cos_sin_attention_factor_and_partial() -> None:
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
               "partial_rotary_factor": 0.5}
    cos, sin = rope_cos_sin(10, 16, scaling=scaling, dtype=torch.float64)
    inv_freq, factor = rope_inv_freq(16, scaling=scaling)
    assert cos.shape == (10, 8)
    angles = torch.arange(10, dtype=torch.float64)[:, None] * inv_freq
    torch.testing.assert_close(cos[:, :4], factor * angles.cos(), rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(sin[:, 4:], factor * angles.sin(), rtol=1e-15, atol=1e-15)
    assert factor > 1


def test_cos_sin_dynamic_length_from_positions() -> None:
    scaling = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8}
    by_len = rope_cos_sin(20, 8, scaling=scaling, dtype=torch.float64)
    by_tensor = rope_cos_sin(torch.arange(20), 8, scaling=scaling, dtype=torch.float64)
    assert torch.equal(by_len[0], by_tensor[0])
    inv_freq, _ = rope_inv_freq(8, scaling=scaling, seq_len=20)
    torch.testing.assert_close(by_len[1][:, :4], (torch.arange(20.0, dtype=torch.float64)[:, None] * inv_freq).sin())


# ---------------------------------------------------------------------------------------------
# apply_rope
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_matches_pairwise_rotation(layout: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    positions = [0, 1, 4, 9, 100]
    cos, sin = rope_cos_sin(torch.tensor(positions), 8, layout=layout, dtype=torch.float64)
    torch.testing.assert_close(apply_rope(x, cos, sin, layout=layout), ref_rotate(x, positions, ref_inv_freq(8), layout))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_partial_rotary(layout: str) -> None:
    torch.manual_seed(1)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    cos, sin = rope_cos_sin(5, 4, layout=layout, dtype=torch.float64)
    out = apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(out[..., 4:], x[..., 4:])
    torch.testing.assert_close(out[..., :4], ref_rotate(x[..., :4], list(range(5)), ref_inv_freq(4), layout))
    with torch.enable_grad():  # the autograd path too
        grad_out = apply_rope(x.clone().requires_grad_(), cos, sin, layout=layout)
    torch.testing.assert_close(grad_out, out, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", ALL_FLOATS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_dtypes(dtype: torch.dtype, layout: str) -> None:
    torch.manual_seed(2)
    x64 = torch.randn(3, 17, 16, dtype=torch.float64)
    cos, sin = rope_cos_sin(17, 16, layout=layout, dtype=dtype)
    out = apply_rope(x64.to(dtype), cos, sin, layout=layout)
    assert out.dtype == dtype and out.shape == x64.shape
    ref = ref_rotate(x64.to(dtype), list(range(17)), ref_inv_freq(16), layout)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.double(), ref, rtol=4 * eps, atol=8 * eps)


def test_apply_rope_casts_cos_sin_to_x_dtype() -> None:
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    cos, sin = rope_cos_sin(4, 8, dtype=torch.float64)
    out = apply_rope(x, cos, sin)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, apply_rope(x, cos.bfloat16(), sin.bfloat16()))


def test_apply_rope_preserves_norm_and_identity_at_zero() -> None:
    torch.manual_seed(3)
    x = torch.randn(2, 4, 6, 32, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(0, 600, 100), 32, dtype=torch.float64)
    out = apply_rope(x, cos, sin)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :], rtol=0, atol=0)


def test_apply_rope_gradient() -> None:
    torch.manual_seed(4)
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_cos_sin(3, 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, cos, sin, layout="interleaved"), (x,))
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, cos, sin), (x,))


def test_apply_rope_non_contiguous_input() -> None:
    torch.manual_seed(5)
    x = torch.randn(2, 7, 3, 8).transpose(1, 2)  # (batch, heads, seq, dim) view of (batch, seq, heads, dim)
    cos, sin = rope_cos_sin(7, 8)
    torch.testing.assert_close(apply_rope(x, cos, sin), apply_rope(x.contiguous(), cos, sin), rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    "shape, cos_batch, transposed, plan",
    [
        ((2, 8, 512, 128), False, False, (1, 2)),  # blocks of whole (batch, head) slices
        ((1, 1, 17000, 64), False, False, (2, 2048)),  # one long slice: blocks of rows, the last shorter
        ((2, 8, 512, 128), True, False, (1, 2)),  # per-sample cos (batch, 1, seq, w)
        ((2, 8, 512, 128), False, True, (1, 2)),  # a (batch, heads, seq, dim) view of (batch, seq, heads, dim)
        ((3, 7, 200, 128), False, False, (1, 5)),  # blocks of 5 heads and of the last 2
        ((2, 3, 5, 24), True, True, None),  # small: whole-tensor operations, no blocks
    ],
)
def test_torch_path_gives_the_formula_bits_blocked_or_whole(
    layout: str, shape: tuple[int, ...], cos_batch: bool, transposed: bool,
    plan: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Large CPU tensors are rotated block by block (cache-sized), small ones whole; the bits must
    # not depend on it, and must be those of the formula.
    batch, heads, seq, dim = shape
    x = torch.randn(batch, seq, heads, dim, generator=torch.Generator().manual_seed(0)).transpose(1, 2)
    if not transposed:
        x = x.contiguous()
    width = dim - 8  # partial rotary: the pass-through channels are copied too
    positions = torch.arange(seq).expand(batch, -1) + torch.arange(batch)[:, None]
    cos, sin = rope_cos_sin(positions if cos_batch else seq, width, layout=layout)
    if cos_batch:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    assert _rotation._cpu_block_plan(x) == plan
    blocked = apply_rope(x, cos, sin, layout=layout)
    interleaved = layout == "interleaved"
    blocked_inverse = _rotation.rotate(x, cos, sin, interleaved, inverse=True)
    blocked_inplace = apply_rope_qk(x.clone(), x.clone(), cos, sin, layout=layout, inplace=True)[0]
    monkeypatch.setattr(_rotation, "_CPU_BLOCK_BYTES", 1 << 40)
    assert _rotation._cpu_block_plan(x) is None
    whole = apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(blocked, whole)
    assert torch.equal(blocked_inplace, whole)
    assert torch.equal(blocked_inverse, _rotation.rotate(x, cos, sin, interleaved, inverse=True))
    # ...and they are the formula's: each product rounded, then the sum (or difference).
    x1, x2 = _rotation.pair_views(x, width, interleaved)
    c1, c2 = _rotation.pair_views(cos, width, interleaved)
    s1, s2 = _rotation.pair_views(sin, width, interleaved)
    for got, y1, y2 in [
        (whole, x1 * c1 - x2 * s1, x2 * c2 + x1 * s2),
        (blocked_inverse, x1 * c1 + x2 * s2, x2 * c2 - x1 * s1),
    ]:
        assert torch.equal(torch.stack(_rotation.pair_views(got, width, interleaved)), torch.stack((y1, y2)))
        assert torch.equal(got[..., width:], x[..., width:])


def _largest_cpu_allocations(fn: Callable[[], object]) -> list[int]:
    """Bytes of the CPU allocations that ``fn()`` makes, largest first (PyTorch's profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return sorted((e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0), reverse=True)


@pytest.mark.parametrize("seq", [1024, 32])  # blocked, and small enough to be rotated whole
def test_inplace_rotation_on_cpu_allocates_at_most_a_block(seq: int) -> None:
    # The docstring of apply_rope_qk: in place on a CPU, no allocation beyond one cache-sized
    # block (so nothing the size of a q or k larger than a block).
    q, k = torch.randn(2, 8, seq, 64), torch.randn(2, 8, seq, 64)
    cos, sin = rope_cos_sin(seq, 64)
    out_of_place = _largest_cpu_allocations(lambda: apply_rope_qk(q, k, cos, sin))
    assert out_of_place[:2] == [q.nbytes, k.nbytes]  # the probe sees the two outputs
    in_place = _largest_cpu_allocations(lambda: apply_rope_qk(q, k, cos, sin, inplace=True))
    assert max(in_place) <= _rotation._CPU_BLOCK_BYTES
    if seq == 1024:
        assert q.nbytes >= 8 * _rotation._CPU_BLOCK_BYTES


def test_apply_rope_forward_mode_ad_outside_torch_func() -> None:
    # torch.autograd.forward_ad dual tensors do not require grad; the tangent must still flow.
    import torch.autograd.forward_ad as fwAD

    x, tangent = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    cos, sin = rope_cos_sin(5, 8)
    with fwAD.dual_level():
        out = apply_rope(fwAD.make_dual(x, tangent), cos, sin)
        primal, out_tangent = fwAD.unpack_dual(out)
    assert torch.equal(primal, apply_rope(x, cos, sin))
    assert out_tangent is not None and torch.equal(out_tangent, apply_rope(tangent, cos, sin))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_compiles_fullgraph(layout: str) -> None:
    torch.manual_seed(6)
    x = torch.randn(2, 3, 9, 16)
    cos, sin = rope_cos_sin(9, 8, layout=layout)  # partial rotary, too
    compiled = torch.compile(apply_rope, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, cos, sin, layout=layout), apply_rope(x, cos, sin, layout=layout))


# ---------------------------------------------------------------------------------------------
# RotaryEmbedding
# ---------------------------------------------------------------------------------------------


def _qk(batch: int = 2, seq: int = 10, dim: int = 16, dtype: torch.dtype = torch.float32):
    torch.manual_seed(7)
    return torch.randn(batch, 4, seq, dim, dtype=dtype), torch.randn(batch, 2, seq, dim, dtype=dtype)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_module_equals_functional(layout: str) -> None:
    q, k = _qk()
    module = RotaryEmbedding(16, base=500.0, layout=layout)
    cos, sin = rope_cos_sin(10, 16, base=500.0, layout=layout)
    out_q, out_k = module(q, k)
    assert torch.equal(out_q, apply_rope(q, cos, sin, layout=layout))
    assert torch.equal(out_k, apply_rope(k, cos, sin, layout=layout))


def test_module_offset_and_positions() -> None:
    q, k = _qk(seq=6)
    module = RotaryEmbedding(16)
    cos, sin = rope_cos_sin(torch.arange(5, 11), 16)
    expected = apply_rope(q, cos, sin)
    assert torch.equal(module(q, k, offset=5)[0], expected)
    torch.testing.assert_close(module(q, k, positions=torch.arange(5, 11))[0], expected, rtol=0, atol=0)
    per_batch = torch.stack([torch.arange(5, 11), torch.arange(0, 6)])
    out = module(q, k, positions=per_batch)[0]
    assert torch.equal(out[0], expected[0])
    assert torch.equal(out[1], module(q, k)[0][1])


def test_module_cache_grows_and_doubles() -> None:
    q, k = _qk(seq=10)
    module = RotaryEmbedding(16, max_len=4)
    fresh = RotaryEmbedding(16, max_len=64)
    assert torch.equal(module(q, k)[0], fresh(q, k)[0])
    assert module.cos_cached.shape == (10, 16)
    module(q[:, :, :1], k[:, :, :1], offset=10)  # decoding step: doubles
    assert module.cos_cached.shape == (20, 16)
    assert torch.equal(module.cos_cached, fresh.cos_cached[:20])


def test_module_buffers_follow_to_and_stay_out_of_state_dict() -> None:
    module = RotaryEmbedding(8, max_len=16)
    assert module.cos_cached.dtype == torch.get_default_dtype()
    assert module.state_dict() == {}
    module = module.to(torch.float64)
    assert module.cos_cached.dtype == torch.float64
    # Recomputed at the new dtype, not the float32 values cast (which would differ by ~1e-8).
    assert torch.equal(module.cos_cached, rope_cos_sin(16, 8, dtype=torch.float64)[0])
    q, k = _qk(seq=20, dim=8, dtype=torch.float64)
    module(q, k)  # growth recomputes in the module's current dtype
    assert module.cos_cached.dtype == torch.float64
    assert torch.equal(module.sin_cached[:20], rope_cos_sin(20, 8, dtype=torch.float64)[1])
    length = module.sin_cached.shape[0]
    assert torch.equal(module.half().sin_cached, rope_cos_sin(length, 8, dtype=torch.float16)[1])


@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_module_dtypes(dtype: torch.dtype) -> None:
    q, k = _qk(dtype=dtype)
    out_q, out_k = RotaryEmbedding(16)(q, k)
    assert out_q.dtype == out_k.dtype == dtype
    ref = ref_rotate(q, list(range(10)), ref_inv_freq(16), "half")
    eps = max(torch.finfo(dtype).eps, torch.finfo(torch.float32).eps)
    torch.testing.assert_close(out_q.double(), ref, rtol=4 * eps, atol=8 * eps)


def test_module_partial_rotary() -> None:
    q, k = _qk()
    module = RotaryEmbedding(16, scaling={"partial_rotary_factor": 0.5})
    out_q, _ = module(q, k)
    assert module.rotary_dim == 8
    assert torch.equal(out_q[..., 8:], q[..., 8:])
    assert "rotary_dim=8" in repr(module)


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8},
        {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
         "original_max_position_embeddings": 8, "max_position_embeddings": 32},
    ],
)
def test_module_length_dependent_scaling(scaling: dict) -> None:
    q, k = _qk(seq=12)
    module = RotaryEmbedding(16, scaling=scaling, max_len=32)
    long = apply_rope(q, *rope_cos_sin(12, 16, scaling=scaling))
    short = apply_rope(q[:, :, :8], *rope_cos_sin(8, 16, scaling=scaling))
    torch.testing.assert_close(module(q, k)[0], long, rtol=0, atol=1e-6)
    torch.testing.assert_close(module(q, k, positions=torch.arange(12))[0], long, rtol=0, atol=1e-6)
    # short sequences come from the cache, with the unscaled frequencies: stateless
    torch.testing.assert_close(module(q[:, :, :8], k[:, :, :8])[0], short, rtol=0, atol=0)
    assert not torch.allclose(long[:, :, :8], short, atol=1e-3)


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8},
        {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
         "original_max_position_embeddings": 8, "max_position_embeddings": 32},
    ],
    ids=["dynamic", "longrope"],
)
@pytest.mark.parametrize("length", [1, 7, 8, 9])
def test_module_equals_cos_sin_around_the_switch(scaling: dict, length: int) -> None:
    # At lengths 1, T - 1, T and T + 1 around the trained length T = 8, from the cache and from
    # explicit positions: the module gives the frequencies rope_cos_sin gives for that length,
    # and never NaN.
    q, k = _qk(seq=length)
    module = RotaryEmbedding(16, scaling=scaling, max_len=32)
    expected = apply_rope(q, *rope_cos_sin(length, 16, scaling=scaling))
    for out in (module(q, k)[0], module(q, k, positions=torch.arange(length))[0]):
        assert not out.isnan().any()
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_module_compiles_fullgraph_with_growth(layout: str) -> None:
    q, k = _qk(seq=12)
    module = RotaryEmbedding(16, layout=layout, max_len=4)
    compiled = torch.compile(module, backend="eager", fullgraph=True)
    expected = RotaryEmbedding(16, layout=layout, max_len=64)(q, k)
    got = compiled(q, k)
    assert module.cos_cached.shape[0] == 4  # the compiled graph did not mutate the cache
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(compiled(q, k, offset=3)[0], module(q, k, offset=3)[0])
    positions = torch.arange(12)[None].expand(2, 12) + 1
    torch.testing.assert_close(compiled(q, k, positions=positions)[0], module(q, k, offset=1)[0])


def test_module_compiles_fullgraph_dynamic_positions() -> None:
    q, k = _qk(seq=12)
    scaling = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8}
    module = RotaryEmbedding(16, scaling=scaling)
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, positions=torch.arange(12))[0], module(q, k)[0])


# ---------------------------------------------------------------------------------------------
# Layout conversion
# ---------------------------------------------------------------------------------------------


def test_layout_permutations_explicit() -> None:
    x = torch.arange(8)
    assert interleaved_to_half(x).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert half_to_interleaved(x).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_layout_conversion_commutes_with_rope() -> None:
    torch.manual_seed(8)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    cos_i, sin_i = rope_cos_sin(9, 16, layout="interleaved", dtype=torch.float64)
    cos_h, sin_h = rope_cos_sin(9, 16, layout="half", dtype=torch.float64)
    torch.testing.assert_close(interleaved_to_half(cos_i), cos_h, rtol=0, atol=0)
    via_half = half_to_interleaved(apply_rope(interleaved_to_half(x), cos_h, sin_h))
    torch.testing.assert_close(via_half, apply_rope(x, cos_i, sin_i, layout="interleaved"), rtol=0, atol=1e-15)


def test_permute_for_half_layout_bias_and_rows() -> None:
    bias = torch.arange(8.0)  # 2 heads of 4
    assert permute_for_half_layout(bias, 2).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    w = torch.arange(8.0)[:, None].expand(8, 3)
    assert torch.equal(permute_for_half_layout(w, 2)[:, 1], permute_for_half_layout(bias, 2))


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    lead=st.lists(st.integers(1, 3), max_size=3),
    pairs=st.integers(1, 16),
)
def test_layout_round_trips(lead: list[int], pairs: int) -> None:
    x = torch.randn(*lead, 2 * pairs)
    assert torch.equal(half_to_interleaved(interleaved_to_half(x)), x)
    assert torch.equal(interleaved_to_half(half_to_interleaved(x)), x)
    assert sorted(interleaved_to_half(x).flatten().tolist()) == sorted(x.flatten().tolist())


SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 3.0},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
]


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(-5000, 5000),
    n=st.integers(-5000, 5000),
    shift=st.integers(-5000, 5000),
    pairs=st.integers(1, 16),
    layout=st.sampled_from(["half", "interleaved"]),
    scaling=st.sampled_from(SCALINGS),
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_relative_position(
    m: int, n: int, shift: int, pairs: int, layout: str, scaling: dict | None, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2 * pairs, dtype=torch.float64, generator=gen)
    k = torch.randn(2 * pairs, dtype=torch.float64, generator=gen)

    def score(pq: int, pk: int) -> float:
        cos, sin = rope_cos_sin(torch.tensor([pq, pk]), 2 * pairs, scaling=scaling, layout=layout,
                                dtype=torch.float64)
        rq = apply_rope(q[None], cos[:1], sin[:1], layout=layout)
        rk = apply_rope(k[None], cos[1:], sin[1:], layout=layout)
        return float((rq * rk).sum())

    scale = float(q.norm() * k.norm())
    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9 * scale)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 0}, ValueError, "dim"),
        ({"dim": 7}, ValueError, "dim"),
        ({"dim": 8.0}, TypeError, "dim"),
        ({"dim": 8, "base": -1.0}, ValueError, "base"),
        ({"dim": 8, "seq_len": 0}, ValueError, "seq_len"),
        ({"dim": 8, "dtype": torch.int64}, TypeError, "dtype"),
        ({"dim": 8, "scaling": [("rope_type", "linear")]}, TypeError, "scaling"),
        ({"dim": 8, "scaling": {"rope_type": "ntk"}}, ValueError, "rope_type"),
        ({"dim": 8, "scaling": {"rope_type": "linear"}}, ValueError, "factor"),
        ({"dim": 8, "scaling": {"rope_type": "linear", "factor": 0}}, ValueError, "factor"),
        ({"dim": 8, "scaling": {"rope_type": "linear", "factr": 2}}, ValueError, "factr"),
        ({"dim": 8, "scaling": {"rope_type": "default", "factor": 2}}, ValueError, "factor"),
        ({"dim": 8, "scaling": {"rope_theta": 500.0}}, ValueError, "rope_theta"),
        ({"dim": 8, "scaling": {"partial_rotary_factor": 1.5}}, ValueError, "partial_rotary_factor"),
        ({"dim": 8, "scaling": {"partial_rotary_factor": 0.375}}, ValueError, "partial_rotary_factor"),
        ({"dim": 8, "scaling": {"max_position_embeddings": -4}}, ValueError, "max_position_embeddings"),
        ({"dim": 8, "scaling": {"rope_type": "dynamic", "factor": 2.0}}, ValueError, "max_position_embeddings"),
        ({"dim": 2, "scaling": {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8}},
         ValueError, "dim"),
        ({"dim": 8, "scaling": {"rope_type": "yarn", "factor": 2.0}}, ValueError, "max_position_embeddings"),
        ({"dim": 8, "scaling": {"rope_type": "yarn", "original_max_position_embeddings": 8}},
         ValueError, "factor"),
        ({"dim": 8, "scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8,
                                "truncate": 1}}, TypeError, "truncate"),
        ({"dim": 8, "scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8,
                                "beta_fast": 0}}, ValueError, "beta_fast"),
        ({"dim": 8, "scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8,
                                "mscale": "big"}}, TypeError, "mscale"),
        ({"dim": 8, "base": 1.0, "scaling": {"rope_type": "yarn", "factor": 2.0,
                                             "original_max_position_embeddings": 8}}, ValueError, "base"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 3,
                                "original_max_position_embeddings": 8, "factor": 2.0}}, ValueError, "long_factor"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "short_factor": 1.0, "long_factor": [1.0] * 4,
                                "original_max_position_embeddings": 8, "factor": 2.0}}, TypeError, "short_factor"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "long_factor": [1.0] * 4,
                                "original_max_position_embeddings": 8, "factor": 2.0}}, ValueError, "short_factor"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4,
                                "original_max_position_embeddings": 1, "factor": 2.0}},
         ValueError, "original_max_position_embeddings"),
        ({"dim": 8, "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8}},
         ValueError, "high_freq_factor"),
        ({"dim": 8, "scaling": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8}}, ValueError, "low_freq_factor"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 4,
                                "original_max_position_embeddings": 8, "factor": 2.0}},
         ValueError, r"must have rotary_dim // 2 = 4 entries, got 3$"),
        ({"dim": 8, "scaling": {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 5,
                                "original_max_position_embeddings": 8, "factor": 2.0}},
         ValueError, r"^scaling\['long_factor'\] must have rotary_dim // 2 = 4 entries, got 5$"),
    ],
)
def test_inv_freq_bad_input(kwargs: dict, error: type, match: str) -> None:
    # The parameters are shared by every run of the test in a process: read them, do not pop them.
    arguments = {k: v for k, v in kwargs.items() if k != "dim"}
    with pytest.raises(error, match=match):
        rope_inv_freq(kwargs["dim"], **arguments)


@pytest.mark.parametrize(
    ("positions", "kwargs", "error", "match"),
    [
        (0, {}, ValueError, "positions"),
        (2.5, {}, TypeError, "positions"),
        (torch.tensor([0.0, float("nan")]), {}, ValueError, "positions"),
        (torch.tensor([0.0, float("inf")]), {}, ValueError, "positions"),
        (torch.tensor([0.0, 1.0], dtype=torch.float16), {}, TypeError, "positions"),
        (torch.tensor([True, False]), {}, TypeError, "positions"),
        (4, {"layout": "rotate_half"}, ValueError, "layout"),
        (4, {"dtype": torch.int32}, TypeError, "dtype"),
    ],
)
def test_cos_sin_bad_input(positions: object, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        rope_cos_sin(positions, 8, **kwargs)


def test_apply_rope_bad_input() -> None:
    x = torch.randn(2, 3, 8)
    cos, sin = rope_cos_sin(3, 8)
    with pytest.raises(ValueError, match="layout"):
        apply_rope(x, cos, sin, layout="neox")
    with pytest.raises(TypeError, match="x"):
        apply_rope(x.long(), cos, sin)
    with pytest.raises(TypeError, match="cos"):
        apply_rope(x, cos.long(), sin)
    with pytest.raises(ValueError, match="sin"):
        apply_rope(x, cos, sin[:, :6])
    odd_cos = torch.ones(3, 5)
    with pytest.raises(ValueError, match=r"cos\.shape\[-1\]"):
        apply_rope(torch.randn(2, 3, 5), odd_cos, odd_cos)
    wide_cos, wide_sin = rope_cos_sin(3, 10)
    with pytest.raises(ValueError, match=r"cos\.shape\[-1\]"):
        apply_rope(x, wide_cos, wide_sin)
    with pytest.raises(ValueError, match="broadcast"):
        apply_rope(x, cos[:2], sin[:2])  # seq 2 vs 3
    big_cos, big_sin = rope_cos_sin(torch.zeros(4, 3, dtype=torch.long), 8)
    with pytest.raises(ValueError, match="broadcast"):
        apply_rope(x, big_cos, big_sin)  # would enlarge x's batch


def test_module_bad_input() -> None:
    module = RotaryEmbedding(16)
    q, k = _qk()
    with pytest.raises(ValueError, match="layout"):
        RotaryEmbedding(16, layout="gptj")
    with pytest.raises(ValueError, match="max_len"):
        RotaryEmbedding(16, max_len=0)
    with pytest.raises(ValueError, match="dim"):
        RotaryEmbedding(15)
    with pytest.raises(ValueError, match="q"):
        module(q[0], k)
    with pytest.raises(ValueError, match="k"):
        module(q, k[..., :8])
    with pytest.raises(TypeError, match="q"):
        module(q.long(), k)
    with pytest.raises(ValueError, match="seq"):
        module(q, k[:, :, :5])
    with pytest.raises(ValueError, match="offset"):
        module(q, k, offset=-1)
    with pytest.raises(ValueError, match="offset"):
        module(q, k, positions=torch.arange(10), offset=2)
    with pytest.raises(TypeError, match="positions"):
        module(q, k, positions=torch.arange(10.0))
    with pytest.raises(TypeError, match="positions"):
        module(q, k, positions=list(range(10)))
    with pytest.raises(ValueError, match="positions"):
        module(q, k, positions=torch.arange(9))
    with pytest.raises(ValueError, match="positions"):
        module(q, k, positions=torch.zeros(3, 10, dtype=torch.long))


def test_layout_helpers_bad_input() -> None:
    with pytest.raises(ValueError, match="x"):
        interleaved_to_half(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="x"):
        half_to_interleaved(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x"):
        half_to_interleaved([1.0, 2.0])
    with pytest.raises(ValueError, match="num_heads"):
        permute_for_half_layout(torch.zeros(12, 4), 5)
    with pytest.raises(ValueError, match="num_heads"):
        permute_for_half_layout(torch.zeros(12, 4), 4)  # head_dim 3 is odd
    with pytest.raises(ValueError, match="num_heads"):
        permute_for_half_layout(torch.zeros(12, 4), 0)
    with pytest.raises(ValueError, match="weight"):
        permute_for_half_layout(torch.zeros(2, 4, 4), 1)
    with pytest.raises(TypeError, match="weight"):
        permute_for_half_layout([[1.0]], 1)


# ---------------------------------------------------------------------------------------------
# YaRN against the authors' repository (independent of transformers)
# ---------------------------------------------------------------------------------------------


def _yarn_repo_inv_freq(dim: int, base: float, scale: float, original_max: int,
                        beta_fast: float, beta_slow: float) -> tuple[torch.Tensor, float]:
    """Transcription of jquesnelle/yarn ``LlamaYaRNScaledRotaryEmbedding`` (find_correction_dim,
    find_correction_range, linear_ramp_mask, get_mscale), in float64, extrapolation_factor=1,
    attn_factor=1."""

    def find_correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original_max / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low = math.floor(find_correction_dim(beta_fast))
    high = math.ceil(find_correction_dim(beta_slow))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (scale * pos_freqs)
    mask = 1 - ramp
    inv_freq = interpolation * (1 - mask) + extrapolation * mask
    mscale = 1.0 if scale <= 1 else 0.1 * math.log(scale) + 1.0
    return inv_freq, mscale


@pytest.mark.parametrize(
    ("dim", "base", "scale", "original_max", "beta_fast", "beta_slow"),
    [
        (128, 10000.0, 16.0, 4096, 32.0, 1.0),  # the paper's Llama 2 setting
        (128, 10000.0, 8.0, 2048, 32.0, 1.0),
        (64, 500000.0, 4.0, 8192, 32.0, 1.0),
        (128, 10000.0, 4.0, 4096, 16.0, 2.0),  # other beta_fast / beta_slow
        (32, 10000.0, 2.0, 512, 64.0, 0.5),
        (16, 100.0, 3.0, 64, 32.0, 11.0),  # low == high == 0 after clamping: the 0.001 widening
    ],
)
def test_yarn_equals_authors_repository(dim, base, scale, original_max, beta_fast, beta_slow) -> None:
    scaling = {
        "rope_type": "yarn", "factor": scale, "original_max_position_embeddings": original_max,
        "beta_fast": beta_fast, "beta_slow": beta_slow,
    }
    ours, factor = rope_inv_freq(dim, base=base, scaling=scaling)
    expected, mscale = _yarn_repo_inv_freq(dim, base, scale, original_max, beta_fast, beta_slow)
    torch.testing.assert_close(ours, expected, rtol=1e-13, atol=0)
    assert factor == pytest.approx(mscale, rel=1e-15)
    # The ramp is not trivial in these settings: some frequencies move, some stay.
    unscaled, _ = rope_inv_freq(dim, base=base)
    assert (ours == unscaled).any()
    assert (ours < unscaled).any()


def test_apply_rope_qk_in_place_refuses_shared_memory() -> None:
    cos, sin = rope_cos_sin(4, 8)
    y = torch.randn(2, 4, 8)
    before = y.clone()
    for q, k in ((y, y), (y, y[:]), (y[0], y.view(-1)[:32].view(4, 8))):
        with pytest.raises(ValueError, match="separate memory"):
            apply_rope_qk(q, k, cos, sin, inplace=True)
    assert torch.equal(y, before)  # refused before anything was written
    # q and k split from one fused projection share a storage but no element: allowed.
    qkv = torch.randn(2, 4, 24)
    q, k, _ = qkv.split(8, dim=-1)
    want = apply_rope_qk(q, k, cos, sin)
    got = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    rows = torch.randn(4, 4, 8)
    apply_rope_qk(rows[:2], rows[2:], cos, sin, inplace=True)  # disjoint halves of one tensor


@pytest.mark.parametrize("transform", ["vmap", "jvp"])
def test_apply_rope_qk_in_place_refuses_torch_func(transform: str) -> None:
    cos, sin = rope_cos_sin(4, 8)
    q, k = torch.randn(2, 4, 8), torch.randn(2, 4, 8)

    def rotate(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope_qk(q.clone(), k.clone(), cos, sin, inplace=True)

    with pytest.raises(ValueError, match="torch.func"):
        if transform == "vmap":
            torch.func.vmap(rotate)(q, k)
        else:
            torch.func.jvp(rotate, (q, k), (q, k))


# --------------------------------------------------------------------------------------------
# yarn_mscale: YaRN's attention temperature
# --------------------------------------------------------------------------------------------


def test_yarn_mscale_values_and_the_attention_factor_it_gives() -> None:
    assert yarn_mscale(40.0) == 0.1 * math.log(40.0) + 1.0
    assert yarn_mscale(40, 0.707) == 0.1 * 0.707 * math.log(40.0) + 1.0
    assert yarn_mscale(1.0) == yarn_mscale(0.5) == yarn_mscale(8.0, 0.0) == 1.0  # no extension, or mu = 0
    # Plain YaRN's attention factor is m(s, 1); DeepSeek's cos/sin factor is a ratio of two.
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    assert rope_inv_freq(16, scaling=yarn)[1] == yarn_mscale(4.0)
    deepseek = {**yarn, "mscale": 0.5, "mscale_all_dim": 1.0}
    assert rope_inv_freq(16, scaling=deepseek)[1] == pytest.approx(yarn_mscale(4.0, 0.5) / yarn_mscale(4.0), rel=1e-15)


@pytest.mark.parametrize(("args", "error", "message"), [
    (("x",), TypeError, r"^factor must be a real number, got 'x' of type str$"),
    ((True,), TypeError, r"^factor must be a real number, got True of type bool$"),
    ((0.0,), ValueError, r"^factor must be a finite number > 0, got 0.0$"),
    ((float("inf"),), ValueError, r"^factor must be a finite number > 0, got inf$"),
    ((2.0, "a"), TypeError, r"^mscale must be a real number, got 'a' of type str$"),
    ((2.0, float("nan")), ValueError, r"^mscale must be finite, got nan$"),
])
def test_yarn_mscale_refuses_bad_input(args: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        yarn_mscale(*args)
