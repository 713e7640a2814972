r"""posenc RoPE against MLX's ``mx.fast.rope`` and mlx-lm's ``rope_utils``, on the CPU.

Versions run and read: mlx 0.32.4 (``mlx[cpu]``, wheel ``mlx-cpu`` 0.32.4; its ``mx.fast.rope``
docstring), mlx-lm 0.32.2 (``mlx_lm/models/rope_utils.py``, imported with its dependencies). The
composed-ops fallback of ``rope`` in ml-explore/mlx ``mlx/fast.cpp`` (a copy not tied to the 0.32.4
tag) suggested the float32 recipe below; the tests establish it on 0.32.4 by experiment.

Conventions of ``mx.fast.rope(x, dims, *, traditional, base, scale, offset, freqs=None)`` for
``x`` of shape ``(B, *, T, D)``, as these tests find them:

* ``traditional=True`` is posenc's ``"interleaved"`` layout (pairs ``(2i, 2i+1)``);
  ``traditional=False`` is ``"half"`` (pairs ``(i, i + dims/2)``).
* ``dims < D`` (partial rotary): the first ``dims`` channels rotate, at
  :math:`\mathrm{base}^{-2i/\mathrm{dims}}` (the denominator is the rotated width, as with Hugging
  Face's ``partial_rotary_factor``); the others pass through.
* ``scale`` multiplies the positions: Hugging Face's ``linear`` scaling with ``scale = 1/factor``.
* ``offset`` shifts the positions to ``offset, ..., offset + T - 1`` (a KV cache); an array of
  ``B`` offsets gives each batch row its own.
* ``freqs`` holds *periods* :math:`1/\theta_i` (``base ** (2i/dims)``), not inverse frequencies:
  MLX takes their reciprocal. mlx-lm's scaled RoPEs pass their frequencies this way.

Precision of the angles (test_angles_are_float32_whatever_the_dtype and
test_mlx_angles_equal_their_float32_reconstruction): MLX computes the positions
:math:`(t + \mathrm{offset})\cdot\mathrm{scale}`, the inverse frequencies
:math:`\exp(-i \ln(\mathrm{base}) / (\mathrm{dims}/2))` (or ``1 / freqs``) and their product
:math:`\phi` in float32, whatever the dtype of ``x``; it takes cos and sin of :math:`\phi` in
float32, rounds them to ``x``'s dtype and rotates in that dtype. posenc computes the angles in
float64 and rounds cos/sin once. In float32 the two therefore drift apart with the position: at
positions 100 000 to 100 007 (64-wide head, standard-normal ``x`` with max 3.9) the largest
difference measured was 9.8e-3, against 4.5e-7 at positions 0 to 7. In float16 and bfloat16 both
round cos and sin from nearly the same angle, and the outputs measured here differ by at most one
unit in the last place (float16: 9.8e-4 at outputs below 4; bfloat16: no difference).

mlx-lm differs from Hugging Face (and posenc) in two places, documented by
test_mlx_lm_longrope_uses_long_factor_at_every_length and
test_mlx_lm_yarn_mscale_without_mscale_all_dim: its LongRoPE always uses ``long_factor``, and
its YaRN attention factor with ``mscale`` alone is :math:`0.1\,\mathrm{mscale} \ln s + 1`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc.rope import apply_rope, rope_cos_sin, rope_inv_freq

mx = pytest.importorskip("mlx.core")
rope_utils = pytest.importorskip("mlx_lm.models.rope_utils")

EPS32 = 2.0**-24  # unit roundoff of float32
LAYOUTS = [(True, "interleaved"), (False, "half")]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _from_mlx(y) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """An mlx array as a float64 torch tensor (through float32: numpy has no bfloat16)."""
    return torch.from_numpy(np.array(y.astype(mx.float32))).double()


def _posenc(
    x: np.ndarray, positions: torch.Tensor, dim: int, layout: str, *, base: float = 10000.0,
    scaling: dict | None = None,
) -> torch.Tensor:
    """posenc's rotation of ``x`` (B, H, T, D) in float64: the exact value MLX approximates."""
    cos, sin = rope_cos_sin(positions, dim, base=base, scaling=scaling, layout=layout, dtype=torch.float64)
    if positions.ndim == 2:  # (B, T, w) -> (B, 1, T, w): one table per batch row, shared by heads
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return apply_rope(torch.from_numpy(x).double(), cos, sin, layout=layout)


def _f32_atol(x: np.ndarray, max_angle: float, inv_freq_rel_err: float) -> float:
    """Bound on ``|MLX(float32) - exact|`` for a rotation of ``x`` by angles up to ``max_angle``.

    MLX's float32 angle is off by at most ``max_angle * (inv_freq_rel_err + 2 EPS32)`` (the
    inverse frequency's error plus the rounding of the position and of the product); a pair of
    norm ``sqrt(2) max|x|`` turned by a wrong angle moves by that norm times the angle error.
    ``8 EPS32`` of that norm covers float32 cos/sin and the rounding of the rotation itself.
    """
    pair_norm = math.sqrt(2.0) * float(np.abs(x).max())
    return pair_norm * (max_angle * (inv_freq_rel_err + 2 * EPS32) + 8 * EPS32)


def _exp_rel_err(base: float) -> float:
    """Relative error of MLX's float32 ``exp(-i ln(base) / (dims/2))``: ``ln(base) / (dims/2)``
    is rounded once (an error of ``ln(base) EPS32`` in the exponent at the last ``i``), and ``exp``
    and the multiplication are taken as within 4 EPS32 together."""
    return (math.log(base) + 4.0) * EPS32


# ---------------------------------------------------------------------------------------------
# mx.fast.rope
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
@pytest.mark.parametrize("offset", [0, 37])
def test_fast_rope_layouts_and_offset(traditional: bool, layout: str, offset: int) -> None:
    x = _x(2, 3, 16, 64)
    got = _from_mlx(mx.fast.rope(mx.array(x), 64, traditional=traditional, base=10000.0, scale=1.0, offset=offset))
    want = _posenc(x, torch.arange(offset, offset + 16), 64, layout)
    # The highest frequency is 1: angles up to the last position.
    atol = _f32_atol(x, offset + 15, _exp_rel_err(10000.0))
    torch.testing.assert_close(got, want, rtol=0, atol=atol)


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_fast_rope_partial_rotation_uses_the_rotated_width(traditional: bool, layout: str) -> None:
    # dims=24 of a 64-wide head: the first 24 channels rotate at base^(-2i/24); posenc's
    # partial_rotary_factor (Hugging Face's convention) gives the same frequencies and channels.
    x = _x(2, 3, 16, 64)
    got = _from_mlx(mx.fast.rope(mx.array(x), 24, traditional=traditional, base=500000.0, scale=1.0, offset=3))
    want = _posenc(x, torch.arange(3, 19), 64, layout, base=500000.0, scaling={"partial_rotary_factor": 0.375})
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 18, _exp_rel_err(500000.0)))
    # The channels past dims are returned unchanged, bit for bit.
    assert torch.equal(got[..., 24:], torch.from_numpy(x[..., 24:]).double())


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_fast_rope_scale_is_linear_scaling(traditional: bool, layout: str) -> None:
    x = _x(1, 2, 16, 32)
    got = _from_mlx(mx.fast.rope(mx.array(x), 32, traditional=traditional, base=10000.0, scale=0.25, offset=100))
    want = _posenc(x, torch.arange(100, 116), 32, layout, scaling={"rope_type": "linear", "factor": 4.0})
    # 0.25 is exact in float32; angles up to 115 / 4.
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 115 / 4, _exp_rel_err(10000.0)))


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_fast_rope_offset_per_batch_row(traditional: bool, layout: str) -> None:
    x = _x(3, 2, 8, 32)
    offsets = [0, 5, 60]
    got = _from_mlx(
        mx.fast.rope(mx.array(x), 32, traditional=traditional, base=10000.0, scale=1.0, offset=mx.array(offsets))
    )
    positions = torch.tensor(offsets)[:, None] + torch.arange(8)  # (B, T)
    want = _posenc(x, positions, 32, layout)
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 67, _exp_rel_err(10000.0)))


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_fast_rope_freqs_are_periods(traditional: bool, layout: str) -> None:
    x = _x(1, 2, 16, 64)
    inv_freq, _ = rope_inv_freq(64, base=500000.0, scaling=LLAMA3)
    periods = mx.array((1.0 / inv_freq).numpy().astype(np.float32))
    got = _from_mlx(
        mx.fast.rope(mx.array(x), 64, traditional=traditional, base=None, scale=1.0, offset=9, freqs=periods)
    )
    want = _posenc(x, torch.arange(9, 25), 64, layout, base=500000.0, scaling=LLAMA3)
    # The periods are rounded to float32 (EPS32) and MLX's reciprocal adds at most EPS32.
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 24, 2 * EPS32))
    # Passing the inverse frequencies instead rotates by other angles.
    wrong = _from_mlx(
        mx.fast.rope(mx.array(x), 64, traditional=traditional, base=None, scale=1.0, offset=9,
                     freqs=mx.array(inv_freq.numpy().astype(np.float32)))
    )
    assert (wrong - want).abs().max() > 0.1


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fast_rope_half_precision_matches_posenc_in_that_dtype(traditional: bool, layout: str, dtype: str) -> None:
    x = _x(2, 3, 16, 64)
    x_low = torch.from_numpy(x).to(getattr(torch, dtype))
    got = mx.fast.rope(mx.array(x).astype(getattr(mx, dtype)), 64, traditional=traditional, base=10000.0,
                       scale=1.0, offset=100)
    assert got.dtype == getattr(mx, dtype)
    cos, sin = rope_cos_sin(torch.arange(100, 116), 64, layout=layout, dtype=x_low.dtype)
    want = apply_rope(x_low, cos, sin, layout=layout).double()
    # Both round cos/sin to the dtype from nearly equal angles (MLX's float32, posenc's float64)
    # and rotate in the dtype: a cos or sin one unit apart (eps/2 below 1) moves each of the two
    # products by max|x| eps / 2, and the output may round one unit apart (eps |y| <= sqrt(2)
    # max|x| eps). Measured: float16 9.8e-4 (one unit at |y| < 2), bfloat16 0.
    eps = torch.finfo(x_low.dtype).eps
    atol = (1.0 + math.sqrt(2.0)) * eps * float(x_low.abs().max())
    torch.testing.assert_close(_from_mlx(got), want, rtol=0, atol=atol)


# ---------------------------------------------------------------------------------------------
# Precision of MLX's angles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_angles_are_float32_whatever_the_dtype(traditional: bool, layout: str) -> None:
    # dims=2: the one inverse frequency is exp(0) = 1 exactly, so MLX's angle is the product
    # position * scale, in whatever precision MLX computes it. scale=0.1 is not a float32.
    positions = np.arange(1_000_003, 1_000_011)
    x = _x(1, 1, 8, 2)
    got = _from_mlx(mx.fast.rope(mx.array(x), 2, traditional=traditional, base=10000.0, scale=0.1, offset=1_000_003))
    angle32 = (positions.astype(np.float32) * np.float32(0.1)).astype(np.float64)  # one float32 product
    x64 = torch.from_numpy(x).double()
    cos32 = torch.from_numpy(np.cos(angle32))[:, None].repeat(1, 2)  # (T, 2): one pair
    sin32 = torch.from_numpy(np.sin(angle32))[:, None].repeat(1, 2)
    # float32 cos/sin of an exactly known angle, and the rotation: within 8 EPS32 of the pair norm.
    torch.testing.assert_close(got, apply_rope(x64, cos32, sin32, layout=layout), rtol=0,
                               atol=_f32_atol(x, 0.0, 0.0))
    # posenc's float64 angles p / 10 differ from those by the rounding of 0.1 and of the product
    # (4.7e-3 rad at most here; the outputs measured 4.5e-3 apart).
    exact = _posenc(x, torch.from_numpy(positions), 2, layout, scaling={"rope_type": "linear", "factor": 10.0})
    assert (got - exact).abs().max() > 1e-4

    # float16 and bfloat16 cannot hold odd positions near 3000 (they step by 2 and by 16 there):
    # angles computed in the input dtype would be off by up to 1 and 8 rad.
    for dtype in ("float16", "bfloat16"):
        x_low = torch.from_numpy(x).to(getattr(torch, dtype))
        got_low = mx.fast.rope(mx.array(x).astype(getattr(mx, dtype)), 2, traditional=traditional, base=10000.0,
                               scale=1.0, offset=3001)
        cos, sin = rope_cos_sin(torch.arange(3001, 3009), 2, layout=layout, dtype=x_low.dtype)
        want = apply_rope(x_low, cos, sin, layout=layout).double()
        eps = torch.finfo(x_low.dtype).eps
        # As in test_fast_rope_half_precision_matches_posenc_in_that_dtype.
        torch.testing.assert_close(_from_mlx(got_low), want, rtol=0,
                                   atol=(1.0 + math.sqrt(2.0)) * eps * float(x_low.abs().max()))


def test_mlx_angles_equal_their_float32_reconstruction() -> None:
    # The whole float32 recipe at a 64-wide head and positions near 1e5: positions, inverse
    # frequencies exp(-i ln(base) / 32) and their product in float32 (with MLX's own exp), then
    # cos/sin and the rotation taken exactly. MLX equals that up to float32 cos/sin and rotation
    # rounding (8 EPS32 of the pair norm); posenc's float64 angles are up to ~5e-3 rad away.
    x = _x(1, 2, 8, 64)
    offset, base = 100_000, 10000.0
    got = _from_mlx(mx.fast.rope(mx.array(x), 64, traditional=False, base=base, scale=1.0, offset=offset))
    inv32 = mx.exp(mx.arange(0, -32, -1, dtype=mx.float32) * mx.array(math.log(base) / 32, dtype=mx.float32))
    positions32 = mx.arange(8, dtype=mx.float32) + offset
    angles = torch.from_numpy(np.array(positions32[:, None] * inv32)).double()  # (T, 32), float32 values
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # half layout
    torch.testing.assert_close(got, apply_rope(torch.from_numpy(x).double(), cos, sin), rtol=0,
                               atol=_f32_atol(x, 0.0, 0.0))
    exact = _posenc(x, torch.arange(offset, offset + 8), 64, "half")
    assert (got - exact).abs().max() > 1e-3


# ---------------------------------------------------------------------------------------------
# mlx-lm rope_utils
# ---------------------------------------------------------------------------------------------


def _inv_freq_of(rope) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """The inverse frequencies of an mlx-lm RoPE module, which stores periods in ``_freqs``."""
    return 1.0 / torch.from_numpy(np.array(rope._freqs)).double()


# Frequencies of mlx-lm are float32 (base ** (i / d) in float32 pow); relative error measured
# 1.6e-7 or less, bound 16 EPS32 = 9.5e-7.
FREQ_RTOL = 16 * EPS32


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_mlx_lm_llama3(traditional: bool, layout: str) -> None:
    rope = rope_utils.initialize_rope(128, 500000.0, traditional, LLAMA3, 131072)
    assert type(rope).__name__ == "Llama3RoPE"
    inv_freq, attention_factor = rope_inv_freq(128, base=500000.0, scaling=LLAMA3)
    torch.testing.assert_close(_inv_freq_of(rope), inv_freq, rtol=FREQ_RTOL, atol=0)
    assert attention_factor == 1.0
    x = _x(1, 2, 16, 128)
    got = _from_mlx(rope(mx.array(x), offset=20))
    want = _posenc(x, torch.arange(20, 36), 128, layout, base=500000.0, scaling=LLAMA3)
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 35, FREQ_RTOL + EPS32))


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
        "beta_slow": 1.0}
# DeepSeek-V3 style: both mscale keys, a ratio different from 1.
YARN_MSCALE = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
               "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.707}


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
@pytest.mark.parametrize("scaling", [YARN, YARN_MSCALE], ids=["yarn", "yarn-mscale"])
def test_mlx_lm_yarn(traditional: bool, layout: str, scaling: dict) -> None:
    rope = rope_utils.initialize_rope(64, 10000.0, traditional, scaling, 163840)
    assert type(rope).__name__ == "YarnRoPE"
    inv_freq, attention_factor = rope_inv_freq(64, base=10000.0, scaling=scaling)
    torch.testing.assert_close(_inv_freq_of(rope), inv_freq, rtol=FREQ_RTOL, atol=0)
    # Both are Python float arithmetic on the same formula.
    assert rope.mscale == pytest.approx(attention_factor, rel=1e-12)
    assert attention_factor != 1.0
    x = _x(1, 2, 16, 64)
    # mlx-lm multiplies x by mscale (rounded to float32) before rotating; posenc multiplies
    # cos and sin: one more float32 rounding, covered by FREQ_RTOL's margin.
    got = _from_mlx(rope(mx.array(x), offset=11))
    want = _posenc(x, torch.arange(11, 27), 64, layout, scaling=scaling)
    torch.testing.assert_close(got, want, rtol=0, atol=attention_factor * _f32_atol(x, 26, FREQ_RTOL + EPS32))


def _longrope(dims: int) -> dict:
    half = dims // 2
    return {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.01 * i for i in range(half)],
        "long_factor": [1.0 + 0.5 * i for i in range(half)],
        "original_max_position_embeddings": 64,
    }


def test_mlx_lm_longrope_past_the_original_context() -> None:
    # mlx-lm's initialize_rope takes max_position_embeddings as an argument; posenc reads it from
    # the dict (factor = 256 / 64 = 4 in both).
    scaling = _longrope(32)
    rope = rope_utils.initialize_rope(32, 10000.0, False, scaling, 256)
    assert type(rope).__name__ == "SuScaledRoPE"
    ours = {**scaling, "max_position_embeddings": 256}
    inv_freq, attention_factor = rope_inv_freq(32, base=10000.0, scaling=ours, seq_len=65)
    torch.testing.assert_close(_inv_freq_of(rope), inv_freq, rtol=FREQ_RTOL, atol=0)
    assert rope._scale == pytest.approx(attention_factor, rel=1e-12)
    assert attention_factor == pytest.approx(math.sqrt(1 + math.log(4) / math.log(64)), rel=1e-12)
    # Positions 64..79: past the original context, posenc too uses long_factor (half layout:
    # mlx-lm's SuScaledRoPE has no traditional option).
    x = _x(1, 2, 16, 32)
    got = _from_mlx(rope(mx.array(x), offset=64))
    want = _posenc(x, torch.arange(64, 80), 32, "half", scaling=ours)
    torch.testing.assert_close(got, want, rtol=0, atol=attention_factor * _f32_atol(x, 79, FREQ_RTOL + EPS32))


def test_mlx_lm_longrope_uses_long_factor_at_every_length() -> None:
    # Hugging Face (transformers 5.24 _compute_longrope_parameters) and posenc use short_factor
    # while the sequence fits the original context; mlx-lm 0.32.2's SuScaledRoPE stores only
    # long_factor and uses it at every length.
    scaling = {**_longrope(32), "max_position_embeddings": 256}
    rope = rope_utils.initialize_rope(32, 10000.0, False, _longrope(32), 256)
    x = _x(1, 2, 16, 32)
    got = _from_mlx(rope(mx.array(x), offset=0))
    short = _posenc(x, torch.arange(16), 32, "half", scaling=scaling)  # seq_len 16 <= 64: short_factor
    inv_long, attention_factor = rope_inv_freq(32, base=10000.0, scaling=scaling, seq_len=65)
    angles = torch.arange(16, dtype=torch.float64)[:, None] * inv_long  # (T, 16)
    cos = torch.cat([angles.cos()] * 2, -1) * attention_factor  # (T, 32), half layout
    sin = torch.cat([angles.sin()] * 2, -1) * attention_factor
    long = apply_rope(torch.from_numpy(x).double(), cos, sin)
    torch.testing.assert_close(got, long, rtol=0, atol=attention_factor * _f32_atol(x, 15, FREQ_RTOL + EPS32))
    assert (got - short).abs().max() > 0.1


def test_mlx_lm_yarn_mscale_without_mscale_all_dim() -> None:
    # Hugging Face (transformers 5.24 _compute_yarn_parameters) and posenc use the mscale ratio
    # only when both mscale and mscale_all_dim are given; with mscale alone the factor is
    # 0.1 ln(s) + 1. mlx-lm 0.32.2 defaults mscale_all_dim to 0 and uses 0.1 mscale ln(s) + 1.
    scaling = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 0.707}
    rope = rope_utils.initialize_rope(64, 10000.0, False, scaling, 163840)
    _, attention_factor = rope_inv_freq(64, base=10000.0, scaling=scaling)
    assert attention_factor == pytest.approx(0.1 * math.log(40.0) + 1.0, rel=1e-12)
    assert rope.mscale == pytest.approx(0.1 * 0.707 * math.log(40.0) + 1.0, rel=1e-12)


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_mlx_lm_linear_and_dynamic(traditional: bool, layout: str) -> None:
    x = _x(1, 2, 16, 32)
    linear = {"rope_type": "linear", "factor": 4.0}
    rope = rope_utils.initialize_rope(32, 10000.0, traditional, linear, 2048)
    got = _from_mlx(rope(mx.array(x), offset=40))
    want = _posenc(x, torch.arange(40, 56), 32, layout, scaling=linear)
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 55 / 4, _exp_rel_err(10000.0)))
    # Dynamic NTK past max_position_embeddings=32: both grow the base for length 56 = offset + T.
    dynamic = {"rope_type": "dynamic", "factor": 2.0}
    rope = rope_utils.initialize_rope(32, 10000.0, traditional, dynamic, 32)
    assert type(rope).__name__ == "DynamicNTKScalingRoPE"
    got = _from_mlx(rope(mx.array(x), offset=40))
    want = _posenc(x, torch.arange(40, 56), 32, layout, scaling={**dynamic, "max_position_embeddings": 32})
    new_base = 10000.0 * (2.0 * 56 / 32 - 1.0) ** (32 / 30)
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 55, _exp_rel_err(new_base)))


@pytest.mark.parametrize(("traditional", "layout"), LAYOUTS)
def test_mlx_lm_proportional(traditional: bool, layout: str) -> None:
    # Gemma 4's proportional RoPE: 16 of 64 pairs turn at base^(-2i/128) / factor (the head width
    # as denominator); mlx-lm gives the others an infinite period, posenc a zero frequency.
    scaling = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": 2.0}
    rope = rope_utils.initialize_rope(128, 1_000_000.0, traditional, scaling, 131072)
    assert type(rope).__name__ == "ProportionalRoPE"
    inv_freq, _ = rope_inv_freq(128, base=1_000_000.0, scaling=scaling)
    torch.testing.assert_close(_inv_freq_of(rope), inv_freq, rtol=FREQ_RTOL, atol=0)
    x = _x(1, 2, 16, 128)
    got = _from_mlx(rope(mx.array(x), offset=5))
    want = _posenc(x, torch.arange(5, 21), 128, layout, base=1_000_000.0, scaling=scaling)
    torch.testing.assert_close(got, want, rtol=0, atol=_f32_atol(x, 20, FREQ_RTOL + EPS32))
