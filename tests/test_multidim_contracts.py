"""Contracts of posenc.multidim that a reviewer's bug would break."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.multidim import VideoPositionalEncoding, sinusoidal_2d, sinusoidal_nd
from posenc.sinusoidal import sinusoidal_table


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


# sinusoidal_nd

@pytest.mark.parametrize(
    ("shape", "kwargs", "error", "message"),
    [
        (2.5, {}, TypeError, "shape must be an int or a sequence of ints, got 2.5"),
        (torch.tensor([2, 3]), {}, TypeError, "shape must be an int or a sequence of ints, got tensor([2, 3])"),
        ((2, 3), {"dim": 0}, ValueError, "dim must be a positive integer, got 0"),
        ((2, 3), {"base": 0.0}, ValueError, "base must be a finite number > 0, got 0.0"),
        ((2, 3), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_nd_refuses_bad_arguments_by_name(shape: object, kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        sinusoidal_nd(shape, **{"dim": 8, **kwargs})


@pytest.mark.parametrize("shape", [5, (2, 3), (2, 3, 4)])
def test_nd_is_made_on_the_requested_device(shape: int | tuple[int, ...]) -> None:
    table = sinusoidal_nd(shape, 12, device="meta")
    assert table.device.type == "meta"
    assert table.shape == (*((shape,) if isinstance(shape, int) else shape), 12)


# sinusoidal_2d

@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((0, 3, 8), {}, ValueError, "height must be a positive integer, got 0"),
        ((2, 0, 8), {}, ValueError, "width must be a positive integer, got 0"),
        ((2, 3, 0), {}, ValueError, "dim must be a positive integer, got 0"),
        ((2, 3, 6), {}, ValueError, "dim must be divisible by 4 (sin and cos for each of 2 axes), got 6"),
        ((2, 3, 8), {"style": "vit"}, ValueError, "style must be one of 'mae', 'timm'; got 'vit'"),
        ((2, 3, 8), {"base": -1.0}, ValueError, "base must be a finite number > 0, got -1.0"),
        ((2, 3, 8), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_2d_refuses_bad_arguments_by_name(args: tuple, kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        sinusoidal_2d(*args, **kwargs)


@pytest.mark.parametrize("style", ["mae", "timm"])
def test_2d_is_made_on_the_requested_device(style: str) -> None:
    table = sinusoidal_2d(2, 3, 8, style=style, device="meta")
    assert table.device.type == "meta"
    assert table.shape == (6, 8)


# VideoPositionalEncoding

@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer, got 0"),
        ({"dim": 8, "max_frames": 0}, ValueError, "max_frames must be a positive integer, got 0"),
        ({"dim": 8, "spatial_style": "vit"}, ValueError, "spatial_style must be one of 'mae', 'timm'; got 'vit'"),
        ({"dim": 8, "base": 0}, ValueError, "base must be a finite number > 0, got 0.0"),
        ({"dim": 8, "dropout": 1.0}, ValueError, "dropout must be in [0, 1), got 1.0"),
        ({"dim": 6, "spatial": True}, ValueError,
         "dim must be divisible by 4 (required by the 2-D encoding when spatial=True), got 6"),
    ],
)
def test_video_refuses_bad_arguments_by_name(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        VideoPositionalEncoding(**kwargs)


def test_video_computes_256_frames_by_default() -> None:
    assert VideoPositionalEncoding(8).frame_pe.shape == (256, 8)


def test_video_grid_is_empty_with_dim_channels_until_an_input_arrives() -> None:
    assert VideoPositionalEncoding(8, spatial=True).spatial_pe.shape == (0, 0, 8)


def test_video_extra_repr_names_every_setting() -> None:
    module = VideoPositionalEncoding(8, max_frames=4, spatial=True, spatial_style="timm", base=100)
    assert module.extra_repr() == "dim=8, max_frames=4, spatial=True, spatial_style='timm', base=100"
    assert VideoPositionalEncoding(4, max_frames=3).extra_repr() == (
        "dim=4, max_frames=3, spatial=False, spatial_style='mae', base=10000"
    )


@pytest.mark.parametrize(
    ("x", "kwargs", "error", "message"),
    [
        (torch.zeros(1, 2, 3, 3, 8, dtype=torch.long), {}, TypeError, "x must have a floating-point dtype, got torch.int64"),
        (torch.zeros(1, 2, 3, 8), {}, ValueError,
         "x must be 5-D (batch, frames, height, width, dim), got a 4-D tensor of shape (1, 2, 3, 8)"),
        (torch.zeros(1, 2, 3, 3, 8), {"offset": -1}, ValueError, "offset must be a non-negative integer, got -1"),
    ],
)
def test_video_forward_refuses_bad_input_by_name(
    x: torch.Tensor, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        VideoPositionalEncoding(8, spatial=True)(x, **kwargs)


def test_video_tables_use_the_module_base() -> None:
    module = VideoPositionalEncoding(8, max_frames=3, spatial=True, base=100.0)
    module(torch.zeros(1, 5, 2, 3, 8))
    assert torch.equal(module.frame_pe, sinusoidal_table(6, 8, base=100.0))
    assert torch.equal(module.spatial_pe, sinusoidal_2d(2, 3, 8, base=100.0).view(2, 3, 8))


def test_video_tables_keep_the_module_dtype_when_they_grow() -> None:
    module = VideoPositionalEncoding(8, max_frames=3, spatial=True).double()
    assert torch.equal(module.frame_pe, sinusoidal_table(3, 8, dtype=torch.float64))
    module(torch.zeros(1, 5, 2, 3, 8, dtype=torch.float64))
    assert torch.equal(module.frame_pe, sinusoidal_table(6, 8, dtype=torch.float64))
    assert torch.equal(module.spatial_pe, sinusoidal_2d(2, 3, 8, dtype=torch.float64).view(2, 3, 8))


def test_video_tables_stay_on_the_module_device_when_they_grow() -> None:
    module = VideoPositionalEncoding(8, max_frames=3, spatial=True).to("meta")
    out = module(torch.zeros(1, 5, 2, 3, 8, device="meta"))
    assert out.device.type == "meta" and out.shape == (1, 5, 2, 3, 8)
    assert module.frame_pe.device.type == "meta" and module.frame_pe.shape == (6, 8)
    assert module.spatial_pe.device.type == "meta" and module.spatial_pe.shape == (2, 3, 8)


def test_video_grid_grows_in_height_alone() -> None:
    module = VideoPositionalEncoding(8, spatial=True)
    module(torch.zeros(1, 1, 2, 5, 8))
    out = module(torch.zeros(1, 1, 4, 5, 8))
    assert module.spatial_pe.shape == (4, 5, 8)
    expected = sinusoidal_table(1, 8)[0] + sinusoidal_2d(4, 5, 8).view(4, 5, 8)
    assert torch.equal(out[0, 0], expected)


@pytest.mark.parametrize("size", [(2, 3), (1, 3), (2, 1)])
def test_video_grid_that_fits_is_read_from_the_cache(size: tuple[int, int]) -> None:
    module = VideoPositionalEncoding(8, spatial=True)
    module(torch.zeros(1, 1, 2, 3, 8))
    grid = module.spatial_pe
    module(torch.zeros(1, 1, *size, 8))
    assert module.spatial_pe is grid


def test_video_traced_path_builds_the_missing_rows_without_touching_the_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While torch.compile traces (simulated here), rows past the cache are computed, not cached.

    (The name avoids the word the mutation map deselects with ``-knot compile``.)"""
    eager = VideoPositionalEncoding(8, max_frames=3, spatial=True)
    x = torch.randn(1, 4, 2, 3, 8, generator=torch.Generator().manual_seed(0))
    expected = eager(x, offset=2)
    module = VideoPositionalEncoding(8, max_frames=3, spatial=True)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert torch.equal(module(x, offset=2), expected)
    assert module.frame_pe.shape == (3, 8)
    assert module.spatial_pe.shape == (0, 0, 8)
