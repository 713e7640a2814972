"""posenc.multidim against positional-encodings, MAE, timm and rotary-embedding-torch.

Each reference is checked in its own tests, so a missing package skips only those.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.multidim import sinusoidal_2d, sinusoidal_nd
from posenc.rope import axial_rope_cos_sin

# ---------------------------------------------------------------- positional-encodings >= 5


def _pe_module(ndim: int, dim: int) -> torch.nn.Module:
    torch_encodings = pytest.importorskip("positional_encodings.torch_encodings")
    return getattr(torch_encodings, f"PositionalEncoding{ndim}D")(dim)


SHAPES = [(1,), (5,), (17,), (1, 1), (3, 4), (6, 2), (7, 7), (2, 3, 4), (4, 1, 3), (3, 3, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 24, 31, 64])
def test_sinusoidal_nd_equals_positional_encodings(shape, dim):
    ref = _pe_module(len(shape), dim)(torch.zeros(2, *shape, dim))
    ours = sinusoidal_nd(shape, dim, dtype=torch.float32)
    assert ref.shape == (2, *shape, dim)
    # The package computes in float32; posenc in float64 rounded once.
    torch.testing.assert_close(ours.expand_as(ref), ref, rtol=0, atol=2e-5)


def test_positional_encodings_is_float32_inside():
    # Even on float64 input its angles are float32, so it differs from the float64 table at ~1e-6.
    ref = _pe_module(1, 64)(torch.zeros(1, 400, 64, dtype=torch.float64))[0]
    exact = sinusoidal_nd((400,), 64, dtype=torch.float64)
    error = (ref - exact).abs().max().item()
    assert 1e-7 < error < 1e-3


@pytest.mark.reference_doc
def test_positional_encodings_2d_is_one_interleaved_block_per_axis():
    # 2 * ceil(dim / 4) channels per axis, the first axis first, each block sin, cos, sin, ...
    # with the frequencies of its own width; the result is cut to dim channels.
    h, w, dim = 3, 5, 10
    ref = _pe_module(2, dim)(torch.zeros(1, h, w, dim))[0].double()
    block = 2 * math.ceil(dim / 4)
    omega = 10000.0 ** (-torch.arange(0, block, 2, dtype=torch.float64) / block)

    def interleaved(size):
        angles = torch.arange(size, dtype=torch.float64)[:, None] * omega
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)

    expected = torch.cat(
        [interleaved(h)[:, None].expand(h, w, block), interleaved(w)[None].expand(h, w, block)], dim=-1
    )[..., :dim]
    torch.testing.assert_close(ref, expected, rtol=0, atol=1e-5)


# ---------------------------------------------------------------- MAE util/pos_embed.py


def mae_get_2d_sincos_pos_embed(embed_dim: int, grid_size: int | tuple[int, int], cls_token: bool = False) -> np.ndarray:
    """Transcribes facebookresearch/mae util/pos_embed.py ``get_2d_sincos_pos_embed``.

    Generalised from MAE's square ``grid_size`` to ``(h, w)`` the way its later forks do; the grid
    order is MAE's: ``np.meshgrid(grid_w, grid_h)``, so ``grid[0]`` holds the *column*.
    """
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else grid_size
    grid_h = np.arange(h, dtype=np.float32)
    grid_w = np.arange(w, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, h, w])
    pos_embed = mae_get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed


def mae_get_2d_sincos_pos_embed_from_grid(embed_dim: int, grid: np.ndarray) -> np.ndarray:
    """Transcribes MAE ``get_2d_sincos_pos_embed_from_grid``."""
    assert embed_dim % 2 == 0
    # use half of dimensions to encode grid_h
    emb_h = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])  # (H*W, D/2)
    emb_w = mae_get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])  # (H*W, D/2)
    return np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)


def mae_get_1d_sincos_pos_embed_from_grid(embed_dim: int, pos: np.ndarray) -> np.ndarray:
    """Transcribes MAE ``get_1d_sincos_pos_embed_from_grid`` (``np.float`` is now ``np.float64``)."""
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = np.einsum("m,d->md", pos, omega)  # (M, D/2), outer product
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)  # (M, D)


@pytest.mark.parametrize("grid", [1, 2, 7, 14, (3, 5), (6, 2), (1, 9)], ids=str)
@pytest.mark.parametrize("dim", [4, 8, 12, 64, 768])
def test_sinusoidal_2d_mae_equals_mae(grid, dim):
    h, w = (grid, grid) if isinstance(grid, int) else grid
    ref = torch.from_numpy(mae_get_2d_sincos_pos_embed(dim, grid))
    torch.testing.assert_close(sinusoidal_2d(h, w, dim, style="mae", dtype=torch.float64), ref, rtol=0, atol=1e-12)


def test_mae_class_token_is_a_zero_row_in_front():
    ref = mae_get_2d_sincos_pos_embed(8, 3, cls_token=True)
    assert np.all(ref[0] == 0)
    torch.testing.assert_close(sinusoidal_2d(3, 3, 8, dtype=torch.float64), torch.from_numpy(ref[1:]), rtol=0, atol=1e-12)


def test_mae_half_named_grid_h_encodes_the_column():
    # MAE's comment says the first half encodes grid_h; with meshgrid(grid_w, grid_h) it is the
    # width. posenc's "mae" style documents and reproduces that: its first half follows the column.
    ref = mae_get_2d_sincos_pos_embed(8, (2, 3)).reshape(2, 3, 8)
    ours = sinusoidal_2d(2, 3, 8, style="mae", dtype=torch.float64).reshape(2, 3, 8).numpy()
    for table in (ref, ours):
        assert np.allclose(table[0, :, :4], table[1, :, :4])  # same column, different row: equal
        assert not np.allclose(table[0, 0, :4], table[0, 1, :4])  # same row, different column: not
    # posenc's "timm" style puts the row first instead.
    timm_style = sinusoidal_2d(2, 3, 8, style="timm", dtype=torch.float64).reshape(2, 3, 8)
    assert torch.equal(timm_style[:, 0, :2], timm_style[:, 1, :2])


def _row_col_angles(h: int, w: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column angles of a row-major h x w grid, dim/4 frequencies 10000**(-i/(dim/4))."""
    omega = 10000.0 ** (-torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    rows = torch.arange(h, dtype=torch.float64).repeat_interleave(w)[:, None] * omega
    cols = torch.arange(w, dtype=torch.float64).repeat(h)[:, None] * omega
    return rows, cols


@pytest.mark.reference_doc
def test_mae_blocks_are_sin_col_cos_col_sin_row_cos_row():
    rows, cols = _row_col_angles(3, 5, 16)
    ref = torch.from_numpy(mae_get_2d_sincos_pos_embed(16, (3, 5)))
    assert ref.dtype == torch.float64
    expected = torch.cat([cols.sin(), cols.cos(), rows.sin(), rows.cos()], dim=1)
    torch.testing.assert_close(ref, expected, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- timm layers/pos_embed_sincos.py


def _timm_pos_embed_sincos() -> types.ModuleType:
    """timm's ``layers/pos_embed_sincos.py``.

    ``import timm`` needs torchvision (``timm/layers/create_norm.py``); when that fails, the one file
    is loaded from the installed package under a stand-in package whose ``__path__`` is timm's
    ``layers`` folder, so its relative imports (``._fx``, ``.grid``, ``.trace_utils``) resolve to the
    real timm files without running ``timm/__init__.py``.
    """
    try:
        return importlib.import_module("timm.layers.pos_embed_sincos")
    except ImportError:
        pass
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("timm is not installed")
    name = "_posenc_timm_layers"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(Path(next(iter(spec.submodule_search_locations))) / "layers")]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.pos_embed_sincos")


@pytest.mark.parametrize("grid", [(1, 1), (4, 4), (3, 5), (7, 2), (14, 14)], ids=str)
@pytest.mark.parametrize("dim", [4, 8, 16, 64, 384])
def test_sinusoidal_2d_timm_equals_timm(grid, dim):
    timm_sincos = _timm_pos_embed_sincos()
    ref = timm_sincos.build_sincos2d_pos_embed(list(grid), dim=dim)  # defaults otherwise
    assert ref.dtype == torch.float32
    torch.testing.assert_close(sinusoidal_2d(*grid, dim, style="timm", dtype=torch.float32), ref, rtol=0, atol=1e-5)


@pytest.mark.reference_doc
@pytest.mark.parametrize("grid", [(3, 5), (4, 4)], ids=str)
def test_timm_sincos2d_blocks_are_sin_row_sin_col_cos_row_cos_col(grid):
    timm_sincos = _timm_pos_embed_sincos()
    rows, cols = _row_col_angles(*grid, 16)
    ref = timm_sincos.build_sincos2d_pos_embed(list(grid), dim=16)
    expected = torch.cat([rows.sin(), cols.sin(), rows.cos(), cols.cos()], dim=1)
    torch.testing.assert_close(ref.double(), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("grid", [(1, 1), (4, 4), (3, 5), (6, 2)], ids=str)
@pytest.mark.parametrize("dim", [4, 8, 32, 64])
def test_axial_rope_equals_timm_rotary(layout, grid, dim):
    timm_sincos = _timm_pos_embed_sincos()
    sin, cos = timm_sincos.build_rotary_pos_embed(
        list(grid), dim=dim, in_pixels=False, temperature=10000.0, rotate_half=layout == "half"
    )
    ours_cos, ours_sin = axial_rope_cos_sin(*grid, dim, layout=layout, dtype=torch.float32)
    torch.testing.assert_close(ours_cos, cos, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours_sin, sin, rtol=0, atol=1e-5)


# ---------------------------------------------------------------- rotary-embedding-torch


# dim=4 is left out: RotaryEmbedding(dim=2) raises ZeroDivisionError (theta_rescale_factor ** (dim / (dim - 2))).
@pytest.mark.parametrize("grid", [(1, 1), (4, 4), (3, 5), (8, 2)], ids=str)
@pytest.mark.parametrize("dim", [8, 12, 32, 64])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_axial_rope_equals_rotary_embedding_torch_axial_freqs(grid, dim, base):
    ret = pytest.importorskip("rotary_embedding_torch")
    # Each axis gets a dim/2-wide 1-D rotary table ("lang" frequencies), concatenated row then column.
    freqs = ret.RotaryEmbedding(dim=dim // 2, theta=base).get_axial_freqs(*grid)
    assert freqs.shape == (*grid, dim)
    cos, sin = axial_rope_cos_sin(*grid, dim, base=base, layout="interleaved", dtype=torch.float32)
    torch.testing.assert_close(cos, freqs.cos().flatten(0, 1), rtol=0, atol=1e-5)
    torch.testing.assert_close(sin, freqs.sin().flatten(0, 1), rtol=0, atol=1e-5)


def test_axial_rope_rotation_equals_rotary_embedding_torch():
    ret = pytest.importorskip("rotary_embedding_torch")
    rope = pytest.importorskip("posenc.rope")
    h, w, dim = 3, 4, 16
    freqs = ret.RotaryEmbedding(dim=dim // 2).get_axial_freqs(h, w)
    x = torch.randn(2, h, w, dim)
    ref = ret.apply_rotary_emb(freqs, x).flatten(1, 2)
    cos, sin = axial_rope_cos_sin(h, w, dim, layout="interleaved", dtype=torch.float32)
    torch.testing.assert_close(rope.apply_rope(x.flatten(1, 2), cos, sin, layout="interleaved"), ref, rtol=1e-5, atol=1e-5)
