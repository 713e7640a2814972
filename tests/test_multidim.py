"""Tests for posenc.multidim: N-d and 2-D sinusoidal tables, video encoding, axial RoPE."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc.multidim import VideoPositionalEncoding, sinusoidal_2d, sinusoidal_nd
from posenc.rope import axial_rope_cos_sin
from posenc.sinusoidal import sinusoidal_table

FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


# ---------------------------------------------------------------- hand-written float64 references


def nd_loop(shape: tuple[int, ...], dim: int, base: float = 10000.0) -> torch.Tensor:
    """One value at a time: axis a owns channels [a*c, (a+1)*c), c = 2*ceil(dim / 2n)."""
    n = len(shape)
    c = 2 * math.ceil(dim / (2 * n))
    out = torch.zeros(*shape, dim, dtype=torch.float64)
    for cell in itertools.product(*(range(s) for s in shape)):
        for j in range(dim):
            axis, jj = divmod(j, c)
            angle = cell[axis] / base ** (2 * (jj // 2) / c)
            out[cell + (j,)] = math.sin(angle) if jj % 2 == 0 else math.cos(angle)
    return out


def grid_loop(height: int, width: int, dim: int, style: str, base: float = 10000.0) -> torch.Tensor:
    q = dim // 4
    out = torch.zeros(height * width, dim, dtype=torch.float64)
    for r in range(height):
        for c in range(width):
            t = r * width + c
            for i in range(q):
                w = base ** (-i / q)
                if style == "mae":
                    vals = (math.sin(c * w), math.cos(c * w), math.sin(r * w), math.cos(r * w))
                else:
                    vals = (math.sin(r * w), math.sin(c * w), math.cos(r * w), math.cos(c * w))
                for block, v in enumerate(vals):
                    out[t, block * q + i] = v
    return out


def axial_angles_loop(height: int, width: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The dim/2 angles per token: row angles, then column angles."""
    q = dim // 4
    out = torch.zeros(height * width, dim // 2, dtype=torch.float64)
    for r in range(height):
        for c in range(width):
            for i in range(q):
                w = base ** (-4 * i / dim)
                out[r * width + c, i] = r * w
                out[r * width + c, q + i] = c * w
    return out


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Standard RoPE rotation: pairs (j, j + d/2) for "half", (2j, 2j+1) for "interleaved"."""
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)
        turned = torch.cat([-x2, x1], dim=-1)
    else:
        turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + turned * sin


# ---------------------------------------------------------------- sinusoidal_nd


@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 2, 4), (1, 1, 1)])
@pytest.mark.parametrize("dim", [1, 2, 3, 5, 6, 7, 8, 12, 13])
def test_nd_matches_loop(shape, dim):
    torch.testing.assert_close(sinusoidal_nd(shape, dim, dtype=torch.float64), nd_loop(shape, dim), rtol=0, atol=1e-12)


def test_nd_base_and_int_shape():
    torch.testing.assert_close(
        sinusoidal_nd(6, 10, base=100.0, dtype=torch.float64), nd_loop((6,), 10, base=100.0), rtol=0, atol=1e-12
    )


def test_nd_one_axis_even_dim_is_the_interleaved_table():
    torch.testing.assert_close(
        sinusoidal_nd((9,), 16, dtype=torch.float64), sinusoidal_table(9, 16, dtype=torch.float64), rtol=0, atol=0
    )


def test_nd_one_axis_odd_dim_uses_padded_width_for_frequencies():
    # positional-encodings pads 5 to 6 channels before choosing frequencies; sinusoidal_table does not.
    nd = sinusoidal_nd((9,), 5, dtype=torch.float64)
    assert not torch.allclose(nd, sinusoidal_table(9, 5, dtype=torch.float64))
    torch.testing.assert_close(nd, sinusoidal_table(9, 6, dtype=torch.float64)[:, :5], rtol=0, atol=0)


def test_nd_axis_blocks_depend_on_their_own_axis_only():
    pe = sinusoidal_nd((3, 4, 5), 12, dtype=torch.float64)  # blocks of 4 channels
    torch.testing.assert_close(pe[:, :, :, 0:4], pe[:, :1, :1, 0:4].expand(3, 4, 5, 4))
    torch.testing.assert_close(pe[:, :, :, 4:8], pe[:1, :, :1, 4:8].expand(3, 4, 5, 4))
    torch.testing.assert_close(pe[:, :, :, 8:12], pe[:1, :1, :, 8:12].expand(3, 4, 5, 4))


def test_nd_uneven_split_gives_last_axis_fewer_channels():
    # dim=6 on 2 axes: blocks of 4, so the second axis keeps only 2 channels.
    pe = sinusoidal_nd((3, 4), 6, dtype=torch.float64)
    cols = torch.arange(4.0, dtype=torch.float64)[None, :].expand(3, 4)
    rows = torch.arange(3.0, dtype=torch.float64)[:, None].expand(3, 4)
    torch.testing.assert_close(pe[..., 0], rows.sin())
    torch.testing.assert_close(pe[..., 4], cols.sin())
    torch.testing.assert_close(pe[..., 5], cols.cos())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nd_dtypes_round_once(dtype):
    pe = sinusoidal_nd((5, 6), 8, dtype=dtype)
    assert pe.dtype == dtype
    assert torch.equal(pe, round_once(sinusoidal_nd((5, 6), 8, dtype=torch.float64), dtype))


def test_nd_default_dtype_and_device():
    pe = sinusoidal_nd((2, 3), 4)
    assert pe.dtype == torch.get_default_dtype() and pe.device.type == "cpu"
    assert pe.is_contiguous()


@pytest.mark.parametrize(
    ("shape", "exc"),
    [((), ValueError), ((2, 2, 2, 2), ValueError), ((0, 3), ValueError), ((2.0,), TypeError), ("ab", TypeError),
     (torch.tensor([2, 3]), TypeError), ((True,), TypeError)],
)
def test_nd_bad_shape(shape, exc):
    with pytest.raises(exc, match="shape"):
        sinusoidal_nd(shape, 4)


def test_nd_bad_args():
    with pytest.raises(ValueError, match="dim"):
        sinusoidal_nd((2,), 0)
    with pytest.raises(TypeError, match="dim"):
        sinusoidal_nd((2,), 4.0)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_nd((2,), 4, base=0.0)
    with pytest.raises(TypeError, match="dtype"):
        sinusoidal_nd((2,), 4, dtype=torch.int64)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    dim=st.integers(1, 20),
)
def test_nd_property_sin_cos_pairs_on_unit_circle(shape, dim):
    pe = sinusoidal_nd(shape, dim, dtype=torch.float64)
    assert pe.shape == (*shape, dim)
    c = 2 * math.ceil(dim / (2 * len(shape)))
    pairs = [(j, j + 1) for j in range(0, dim - 1, 2) if (j % c) + 1 < c]
    for a, b in pairs:
        torch.testing.assert_close(pe[..., a] ** 2 + pe[..., b] ** 2, torch.ones(shape, dtype=torch.float64))
    # The origin encodes as sin 0 = 0, cos 0 = 1.
    origin = pe[(0,) * len(shape)]
    torch.testing.assert_close(origin, torch.tensor([float(j % 2) for j in range(dim)], dtype=torch.float64))


# ---------------------------------------------------------------- sinusoidal_2d


@pytest.mark.parametrize("style", ["mae", "timm"])
@pytest.mark.parametrize(("height", "width", "dim"), [(3, 5, 8), (4, 4, 12), (1, 6, 4), (5, 2, 16)])
def test_2d_matches_loop(style, height, width, dim):
    torch.testing.assert_close(
        sinusoidal_2d(height, width, dim, style=style, dtype=torch.float64),
        grid_loop(height, width, dim, style), rtol=0, atol=1e-12,
    )


def test_2d_base():
    torch.testing.assert_close(
        sinusoidal_2d(3, 4, 8, style="timm", base=50.0, dtype=torch.float64),
        grid_loop(3, 4, 8, "timm", base=50.0), rtol=0, atol=1e-12,
    )


def test_2d_mae_first_half_encodes_the_column():
    pe = sinusoidal_2d(3, 5, 8, dtype=torch.float64).view(3, 5, 8)
    # First half constant down each column, second half constant along each row.
    torch.testing.assert_close(pe[:, :, :4], pe[:1, :, :4].expand(3, 5, 4))
    torch.testing.assert_close(pe[:, :, 4:], pe[:, :1, 4:].expand(3, 5, 4))


def test_2d_styles_are_a_channel_permutation():
    q = 3
    mae = sinusoidal_2d(4, 6, 4 * q, style="mae", dtype=torch.float64)
    timm = sinusoidal_2d(4, 6, 4 * q, style="timm", dtype=torch.float64)
    # mae blocks: sin c, cos c, sin r, cos r; timm blocks: sin r, sin c, cos r, cos c
    perm = torch.cat([torch.arange(q) + 2 * q, torch.arange(q), torch.arange(q) + 3 * q, torch.arange(q) + q])
    assert torch.equal(mae[:, perm], timm)


def test_2d_row_major_token_order():
    pe = sinusoidal_2d(3, 4, 8, style="timm", dtype=torch.float64)  # 2 frequencies per block, the first is 1
    tokens = torch.arange(12, dtype=torch.float64)
    torch.testing.assert_close(pe[:, 0], torch.div(tokens, 4, rounding_mode="floor").sin())  # sin(row)
    torch.testing.assert_close(pe[:, 2], (tokens % 4).sin())  # sin(column)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_2d_dtypes(dtype):
    pe = sinusoidal_2d(4, 5, 8, dtype=dtype)
    assert pe.dtype == dtype
    assert torch.equal(pe, round_once(sinusoidal_2d(4, 5, 8, dtype=torch.float64), dtype))


@pytest.mark.parametrize("style", ["mae", "timm"])
@pytest.mark.parametrize("dim", [2, 6, 10])
def test_2d_dim_must_be_multiple_of_4(style, dim):
    with pytest.raises(ValueError, match="dim"):
        sinusoidal_2d(2, 2, dim, style=style)


def test_2d_bad_args():
    with pytest.raises(ValueError, match="style"):
        sinusoidal_2d(2, 2, 8, style="swin")
    with pytest.raises(ValueError, match="height"):
        sinusoidal_2d(0, 2, 8)
    with pytest.raises(TypeError, match="width"):
        sinusoidal_2d(2, 2.5, 8)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_2d(2, 2, 8, base=-1.0)
    with pytest.raises(TypeError, match="dtype"):
        sinusoidal_2d(2, 2, 8, dtype=torch.bool)


# ---------------------------------------------------------------- axial_rope_cos_sin


@pytest.mark.parametrize(("height", "width", "dim"), [(3, 4, 8), (2, 5, 16), (1, 1, 4)])
def test_axial_matches_loop(height, width, dim):
    angles = axial_angles_loop(height, width, dim)
    cos, sin = axial_rope_cos_sin(height, width, dim, dtype=torch.float64)
    torch.testing.assert_close(cos, torch.cat([angles, angles], 1).cos(), rtol=0, atol=1e-12)
    torch.testing.assert_close(sin, torch.cat([angles, angles], 1).sin(), rtol=0, atol=1e-12)
    cos_i, sin_i = axial_rope_cos_sin(height, width, dim, layout="interleaved", dtype=torch.float64)
    torch.testing.assert_close(cos_i, angles.repeat_interleave(2, 1).cos(), rtol=0, atol=1e-12)
    torch.testing.assert_close(sin_i, angles.repeat_interleave(2, 1).sin(), rtol=0, atol=1e-12)


def test_axial_base_and_first_quarter_follows_row():
    cos, _ = axial_rope_cos_sin(3, 4, 8, base=100.0, dtype=torch.float64)
    grid = cos.view(3, 4, 8)
    torch.testing.assert_close(grid[..., :2], grid[:, :1, :2].expand(3, 4, 2))  # row channels
    torch.testing.assert_close(grid[..., 2:4], grid[:1, :, 2:4].expand(3, 4, 2))  # column channels
    torch.testing.assert_close(grid[2, 0, 1], torch.tensor(math.cos(2 * 100.0 ** -0.5), dtype=torch.float64))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@settings(max_examples=30, deadline=None)
@given(
    r1=st.integers(0, 3), c1=st.integers(0, 3), r2=st.integers(0, 3), c2=st.integers(0, 3),
    dr=st.integers(0, 3), dc=st.integers(0, 3), seed=st.integers(0, 2**16),
)
def test_axial_scores_depend_on_offset_only(layout, r1, c1, r2, c2, dr, dc, seed):
    height = width = 7
    cos, sin = axial_rope_cos_sin(height, width, 16, layout=layout, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 16, generator=g, dtype=torch.float64)

    def score(qr, qc, kr, kc):
        a, b = qr * width + qc, kr * width + kc
        return rotate(q, cos[a], sin[a], layout) @ rotate(k, cos[b], sin[b], layout)

    torch.testing.assert_close(score(r1, c1, r2, c2), score(r1 + dr, c1 + dc, r2 + dr, c2 + dc), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_axial_row_channels_ignore_the_column_and_vice_versa(layout):
    cos, sin = axial_rope_cos_sin(4, 4, 8, layout=layout, dtype=torch.float64)
    row_channels = [0, 4] if layout == "half" else [0, 1]  # the pair of frequency 0 of each axis
    col_channels = [2, 6] if layout == "half" else [4, 5]
    for own, other_axis_step in ((row_channels, 1), (col_channels, 4)):
        q = torch.zeros(8, dtype=torch.float64)
        q[own] = torch.tensor([1.0, 0.5], dtype=torch.float64)

        def score(t):
            return rotate(q, cos[0], sin[0], layout) @ rotate(q, cos[t], sin[t], layout)

        own_step = 5 - other_axis_step  # 4 (next row) for row channels, 1 (next column) for column ones
        torch.testing.assert_close(score(other_axis_step), score(0))
        assert not torch.isclose(score(own_step), score(0))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_axial_works_with_posenc_apply_rope(layout):
    rope = pytest.importorskip("posenc.rope")
    cos, sin = axial_rope_cos_sin(3, 5, 8, layout=layout, dtype=torch.float64)
    x = torch.randn(2, 4, 15, 8, dtype=torch.float64)
    torch.testing.assert_close(rope.apply_rope(x, cos, sin, layout=layout), rotate(x, cos, sin, layout))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_axial_dtypes(dtype):
    cos, sin = axial_rope_cos_sin(3, 3, 8, dtype=dtype)
    ref_cos, ref_sin = axial_rope_cos_sin(3, 3, 8, dtype=torch.float64)
    assert cos.dtype == sin.dtype == dtype
    assert torch.equal(cos, round_once(ref_cos, dtype)) and torch.equal(sin, round_once(ref_sin, dtype))


def test_axial_bad_args():
    for dim in (2, 6, 7):
        with pytest.raises(ValueError, match="dim"):
            axial_rope_cos_sin(2, 2, dim)
    with pytest.raises(ValueError, match="layout"):
        axial_rope_cos_sin(2, 2, 8, layout="complex")
    with pytest.raises(ValueError, match="height"):
        axial_rope_cos_sin(-1, 2, 8)
    with pytest.raises(TypeError, match="width"):
        axial_rope_cos_sin(2, None, 8)
    with pytest.raises(TypeError, match="dtype"):
        axial_rope_cos_sin(2, 2, 8, dtype=torch.int32)


# ---------------------------------------------------------------- VideoPositionalEncoding


def test_video_adds_frame_table_broadcast_over_patches():
    m = VideoPositionalEncoding(6, max_frames=8).double()
    x = torch.randn(2, 3, 4, 5, 6, dtype=torch.float64)
    table = sinusoidal_table(3, 6, dtype=torch.float64)
    torch.testing.assert_close(m(x), x + table[None, :, None, None, :])


def test_video_spatial_adds_2d_table_per_patch():
    m = VideoPositionalEncoding(8, spatial=True, spatial_style="timm").double()
    x = torch.randn(2, 3, 4, 5, 8, dtype=torch.float64)
    frames = sinusoidal_table(3, 8, dtype=torch.float64)[None, :, None, None, :]
    patches = sinusoidal_2d(4, 5, 8, style="timm", dtype=torch.float64).view(1, 1, 4, 5, 8)
    torch.testing.assert_close(m(x), x + frames + patches)


def test_video_any_grid_size_with_one_module():
    # The reshape bug ties dim to height*width; a broadcast works for every grid.
    m = VideoPositionalEncoding(8, spatial=True)
    for h, w in [(2, 3), (5, 1), (3, 7), (1, 1)]:
        x = torch.zeros(1, 2, h, w, 8)
        expected = sinusoidal_table(2, 8)[None, :, None, None] + sinusoidal_2d(h, w, 8).view(1, 1, h, w, 8)
        torch.testing.assert_close(m(x), expected)
    assert m.spatial_pe.shape == (5, 7, 8)


def test_video_grows_past_max_frames_and_offset():
    m = VideoPositionalEncoding(4, max_frames=2).double()
    x = torch.zeros(1, 5, 1, 1, 4, dtype=torch.float64)
    torch.testing.assert_close(m(x)[0, :, 0, 0], sinusoidal_table(5, 4, dtype=torch.float64))
    assert m.frame_pe.shape[0] >= 5
    torch.testing.assert_close(m(x, offset=7)[0, :, 0, 0], sinusoidal_table(5, 4, offset=7, dtype=torch.float64))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_video_keeps_input_dtype(dtype):
    m = VideoPositionalEncoding(8, spatial=True)
    x = torch.zeros(1, 2, 3, 3, 8, dtype=dtype)
    out = m(x)
    assert out.dtype == dtype
    expected = (sinusoidal_table(2, 8)[None, :, None, None] + sinusoidal_2d(3, 3, 8).view(1, 1, 3, 3, 8)).to(dtype)
    torch.testing.assert_close(out, expected)


def test_video_to_and_state_dict():
    m = VideoPositionalEncoding(8, max_frames=4, spatial=True)
    m(torch.zeros(1, 2, 3, 3, 8))
    m = m.to(torch.float64)
    assert m.frame_pe.dtype == torch.float64 and m.spatial_pe.dtype == torch.float64
    # Fixed tables are not checkpointed: a grown module loads into a fresh one.
    assert len(m.state_dict()) == 0
    VideoPositionalEncoding(8, max_frames=1, spatial=True).load_state_dict(m.state_dict(), strict=True)
    assert VideoPositionalEncoding(8).spatial_pe is None


def test_video_dropout():
    m = VideoPositionalEncoding(8, dropout=0.5)
    x = torch.ones(2, 4, 4, 4, 8)
    assert (m(x) == 0).any()
    m.eval()
    torch.testing.assert_close(m(x), x + sinusoidal_table(4, 8)[None, :, None, None])


def test_video_compiles_fullgraph():
    m = VideoPositionalEncoding(8, max_frames=4, spatial=True)
    compiled = torch.compile(m, backend="eager", fullgraph=True)
    x = torch.randn(2, 3, 2, 2, 8)
    torch.testing.assert_close(compiled(x), m(x))
    longer = torch.randn(1, 9, 4, 5, 8)  # past both caches: computed inside the graph
    expected = longer + sinusoidal_table(9, 8)[None, :, None, None] + sinusoidal_2d(4, 5, 8).view(1, 1, 4, 5, 8)
    torch.testing.assert_close(compiled(longer), expected)


def test_video_bad_input():
    m = VideoPositionalEncoding(8, spatial=True)
    with pytest.raises(ValueError, match="x"):
        m(torch.zeros(2, 3, 4, 8))
    with pytest.raises(ValueError, match=r"x\.shape\[-1\]"):
        m(torch.zeros(1, 2, 3, 3, 6))
    with pytest.raises(TypeError, match="x"):
        m(torch.zeros(1, 2, 3, 3, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match="x"):
        m([[1.0]])
    with pytest.raises(ValueError, match="offset"):
        m(torch.zeros(1, 2, 3, 3, 8), offset=-1)


def test_video_bad_construction():
    with pytest.raises(ValueError, match="dim"):
        VideoPositionalEncoding(6, spatial=True)
    with pytest.raises(ValueError, match="dim"):
        VideoPositionalEncoding(0)
    with pytest.raises(ValueError, match="max_frames"):
        VideoPositionalEncoding(8, max_frames=0)
    with pytest.raises(ValueError, match="spatial_style"):
        VideoPositionalEncoding(8, spatial=True, spatial_style="vit")
    with pytest.raises(ValueError, match="dropout"):
        VideoPositionalEncoding(8, dropout=1.0)
    with pytest.raises(ValueError, match="base"):
        VideoPositionalEncoding(8, base=0.0)
    assert VideoPositionalEncoding(6).dim == 6  # any width without the 2-D part


@pytest.mark.parametrize("value", [1, "yes", None])
def test_video_spatial_must_be_a_bool(value: object) -> None:
    with pytest.raises(TypeError, match="spatial must be a bool"):
        VideoPositionalEncoding(8, max_frames=4, spatial=value)  # type: ignore[arg-type]


def test_half_video_module_gives_the_same_bits_before_and_after_growth() -> None:
    module = VideoPositionalEncoding(8, max_frames=3000).half()
    x = torch.zeros(1, 3000, 2, 2, 8, dtype=torch.float16)
    before = module(x)
    module(torch.zeros(1, 3001, 2, 2, 8, dtype=torch.float16))  # grows the frame cache
    assert torch.equal(module(x), before)
