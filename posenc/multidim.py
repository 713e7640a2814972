"""Positional encodings beyond one dimension: N-d grids, 2-D images, video, and axial RoPE."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import nn

from posenc._dtypes import round_once
from posenc._checks import (
    check_choice,
    check_float_dtype,
    check_floating_tensor,
    check_last_dim,
    check_ndim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc.sinusoidal import sinusoidal_table

__all__ = [
    "SINUSOIDAL_2D_STYLES",
    "AXIAL_ROPE_LAYOUTS",
    "sinusoidal_nd",
    "sinusoidal_2d",
    "VideoPositionalEncoding",
    "axial_rope_cos_sin",
]

#: Channel orders accepted by :func:`posenc.sinusoidal_2d`.
SINUSOIDAL_2D_STYLES = ("mae", "timm")

#: Channel layouts accepted by :func:`posenc.axial_rope_cos_sin` (the layouts of ``posenc.rope``).
AXIAL_ROPE_LAYOUTS = ("half", "interleaved")


def _check_multiple_of_4(name: str, value: int, why: str) -> int:
    if value % 4:
        raise ValueError(f"{name} must be divisible by 4 ({why}), got {value}")
    return value


def _check_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, torch.Tensor) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    if not 1 <= len(shape) <= 3:
        raise ValueError(f"shape must have 1, 2 or 3 axes, got {len(shape)}: {tuple(shape)!r}")
    return tuple(check_positive_int(f"shape[{i}]", s) for i, s in enumerate(shape))


def sinusoidal_nd(
    shape: int | Sequence[int],
    dim: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Sinusoidal encoding of every cell of a 1-, 2- or 3-D grid, axes in consecutive channel blocks.

    With :math:`n` axes, each axis gets a block of :math:`c = 2\lceil d / 2n \rceil` channels holding
    the interleaved sine/cosine table of its coordinate; the blocks are concatenated in axis order and
    the result is cut to ``dim`` channels. For cell :math:`(p_0, \dots, p_{n-1})`:

    .. math::

        PE_{a c + 2i} = \sin(p_a \, \omega_i), \qquad PE_{a c + 2i + 1} = \cos(p_a \, \omega_i),
        \qquad \omega_i = \text{base}^{-2i/c}.

    When ``dim`` is not a multiple of :math:`2n` the last axes get fewer channels (possibly none):
    the cut removes the end of the last block, not a share of every block. Note that the frequencies
    use the padded width :math:`c`, so for one axis and odd ``dim`` they differ from
    ``sinusoidal_table(..., style="interleaved")``, which uses ``dim``.

    Parameters
    ----------
    shape : int or tuple of int
        Grid size, one to three axes (an int means one axis).
    dim : int
        Number of channels.
    base : float, optional
        Wavelength base.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(*shape, dim)``; channels last.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5 (the 1-D formula);
    the axis layout is that of the ``positional-encodings`` package (``PositionalEncoding1D/2D/3D``).
    """
    sizes = _check_shape(shape)
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    n = len(sizes)
    block = 2 * math.ceil(dim / (2 * n))
    freqs = base ** -(torch.arange(0, block, 2, dtype=torch.float64, device=device) / block)
    blocks = []
    for axis, size in enumerate(sizes):
        angles = torch.arange(size, dtype=torch.float64, device=device)[:, None] * freqs
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # sin, cos, sin, ...
        view = [1] * n + [block]
        view[axis] = size
        blocks.append(table.view(view).expand(*sizes, block))
    return round_once(torch.cat(blocks, dim=-1)[..., :dim], dtype)


def _grid_frequencies(dim: int, base: float, device: torch.device | str | None) -> torch.Tensor:
    # dim/4 frequencies per axis: the 1-D frequencies of a dim/2-wide table, base^(-i/(dim/4)).
    quarter = dim // 4
    return base ** -(torch.arange(quarter, dtype=torch.float64, device=device) / quarter)


def _grid_coordinates(
    height: int, width: int, device: torch.device | str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    # Row-major token order: token t sits at row t // width, column t % width.
    rows = torch.arange(height, dtype=torch.float64, device=device).repeat_interleave(width)
    cols = torch.arange(width, dtype=torch.float64, device=device).repeat(height)
    return rows, cols


def sinusoidal_2d(
    height: int,
    width: int,
    dim: int,
    *,
    style: str = "mae",
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Fixed 2-D sine-cosine encoding of an image's patch grid, one row per token.

    Token :math:`t` is the patch at row :math:`r = \lfloor t / W \rfloor`, column
    :math:`c = t \bmod W` (row-major, as ``x.flatten(1, 2)`` orders ``(batch, H, W, dim)``). With
    :math:`\omega_i = \text{base}^{-4i/d}`, :math:`i = 0 \dots d/4 - 1`, the channel blocks of
    :math:`d/4` columns are

    .. math::

        \text{mae}:\;  [\sin c\omega \mid \cos c\omega \mid \sin r\omega \mid \cos r\omega],
        \qquad
        \text{timm}:\; [\sin r\omega \mid \sin c\omega \mid \cos r\omega \mid \cos c\omega].

    ``"mae"`` is MAE's ``get_2d_sincos_pos_embed`` (no class token). Its first half encodes the
    *column* although its comment says ``grid_h``: ``np.meshgrid(grid_w, grid_h)`` puts the width
    coordinate first. ``"timm"`` is timm's ``build_sincos2d_pos_embed`` with default arguments
    (``ij`` grid, row first, sines then cosines). Both hold the same numbers, permuted.

    Parameters
    ----------
    height : int
        Number of patch rows.
    width : int
        Number of patch columns.
    dim : int
        Number of channels; a multiple of 4.
    style : str, optional
        Channel order: ``"mae"`` or ``"timm"``.
    base : float, optional
        Wavelength base (``temperature`` in timm).
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(height * width, dim)``.

    References
    ----------
    He et al., "Masked Autoencoders Are Scalable Vision Learners", CVPR 2022;
    Chen, Xie and He, "An Empirical Study of Training Self-Supervised Vision Transformers"
    (MoCo v3), ICCV 2021.
    """
    height = check_positive_int("height", height)
    width = check_positive_int("width", width)
    dim = _check_multiple_of_4("dim", check_positive_int("dim", dim), "sin and cos for each of 2 axes")
    check_choice("style", style, SINUSOIDAL_2D_STYLES)
    base = check_positive_float("base", base)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    freqs = _grid_frequencies(dim, base, device)
    rows, cols = _grid_coordinates(height, width, device)
    r, c = rows[:, None] * freqs, cols[:, None] * freqs
    parts = [c.sin(), c.cos(), r.sin(), r.cos()] if style == "mae" else [r.sin(), c.sin(), r.cos(), c.cos()]
    return round_once(torch.cat(parts, dim=1), dtype)


def axial_rope_cos_sin(
    height: int,
    width: int,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "half",
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Cosines and sines of 2-D axial RoPE for a row-major ``height x width`` patch grid.

    The :math:`d/2` rotation angles of token :math:`t` at row :math:`r`, column :math:`c` are
    the row's angles followed by the column's, with the 1-D RoPE frequencies of a
    :math:`d/2`-wide head:

    .. math::

        \theta = [\, r\omega_0, \dots, r\omega_{d/4-1},\; c\omega_0, \dots, c\omega_{d/4-1} \,],
        \qquad \omega_i = \text{base}^{-4i/d}.

    They are laid out like ``posenc.rope.rope_cos_sin``: ``"half"`` is
    :math:`\cos[\theta, \theta]`, ``"interleaved"`` repeats each angle twice in a row. Pass the
    result to ``posenc.rope.apply_rope`` with the same ``layout``; then
    :math:`q_{r,c} \cdot k_{r',c'}` depends on the positions only through :math:`(r'-r, c'-c)`.
    This is the axial RoPE of rotary-embedding-torch's ``get_axial_freqs(height, width)``
    (``"interleaved"``) and of timm/EVA-02's ``build_rotary_pos_embed(..., in_pixels=False)``.

    Parameters
    ----------
    height : int
        Number of patch rows.
    width : int
        Number of patch columns.
    dim : int
        Rotated head width; a multiple of 4 (a pair of channels per frequency, per axis).
    base : float, optional
        RoPE base (``theta``).
    layout : str, optional
        ``"half"`` or ``"interleaved"``.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    tuple of torch.Tensor
        ``(cos, sin)``, each of shape ``(height * width, dim)``.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021;
    Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024;
    Fang et al., "EVA-02: A Visual Representation for Neon Genesis", 2023.
    """
    height = check_positive_int("height", height)
    width = check_positive_int("width", width)
    dim = _check_multiple_of_4("dim", check_positive_int("dim", dim), "a rotated pair per frequency for each of 2 axes")
    base = check_positive_float("base", base)
    check_choice("layout", layout, AXIAL_ROPE_LAYOUTS)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    freqs = _grid_frequencies(dim, base, device)
    rows, cols = _grid_coordinates(height, width, device)
    angles = torch.cat([rows[:, None] * freqs, cols[:, None] * freqs], dim=1)
    angles = torch.cat([angles, angles], dim=1) if layout == "half" else angles.repeat_interleave(2, dim=1)
    return round_once(angles.cos(), dtype), round_once(angles.sin(), dtype)


class VideoPositionalEncoding(nn.Module):
    r"""Adds a per-frame sinusoidal encoding (and optionally a per-patch 2-D one) to video tokens.

    For input :math:`x` of shape ``(batch, frames, height, width, dim)``:

    .. math::

        y_{b,t,h,w} = x_{b,t,h,w} + PE^{1D}_{t + \text{offset}}
        \;\bigl[+\; PE^{2D}_{h,w}\bigr],

    where :math:`PE^{1D}` is :func:`posenc.sinusoidal_table` (interleaved) and
    :math:`PE^{2D}` is :func:`posenc.sinusoidal_2d` when ``spatial=True``. The frame encoding is broadcast
    over height and width, never reshaped against them: flattening a frame to
    ``height * width * dim`` values and adding a table of that width (the bug this module
    replaces) only works for one image size and mixes the channel axis with the pixel axes.

    Tables are cached in non-persistent buffers (moved by ``.to()``, not saved in the
    ``state_dict``, as they are a fixed function of the sizes). Like
    :class:`posenc.SinusoidalPositionalEncoding`, a video longer than ``max_frames`` or
    a larger patch grid grows the cache instead of raising: the formula holds everywhere.

    Parameters
    ----------
    dim : int
        Channel width; the last dimension of the input. A multiple of 4 when ``spatial=True``.
    max_frames : int, optional
        Number of frame encodings computed up front.
    spatial : bool, optional
        Also add the 2-D encoding of each patch position.
    spatial_style : str, optional
        Channel order of the 2-D encoding, see :func:`posenc.sinusoidal_2d`.
    base : float, optional
        Wavelength base of both encodings.
    dropout : float, optional
        Dropout probability applied after the addition.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5;
    Arnab et al., "ViViT: A Video Vision Transformer", ICCV 2021.
    """

    frame_pe: torch.Tensor
    spatial_pe: torch.Tensor | None

    def __init__(
        self,
        dim: int,
        *,
        max_frames: int = 256,
        spatial: bool = False,
        spatial_style: str = "mae",
        base: float = 10000.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        max_frames = check_positive_int("max_frames", max_frames)
        self.spatial_style = check_choice("spatial_style", spatial_style, SINUSOIDAL_2D_STYLES)
        self.base = check_positive_float("base", base)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        if spatial:
            _check_multiple_of_4("dim", self.dim, "required by the 2-D encoding when spatial=True")
        self.register_buffer("frame_pe", sinusoidal_table(max_frames, dim, base=base), persistent=False)
        # An empty grid that grows to the largest height and width seen so far.
        empty = torch.empty(0, 0, dim) if spatial else None
        self.register_buffer("spatial_pe", empty, persistent=False)

    def _frames(self, start: int, length: int, like: torch.Tensor) -> torch.Tensor:
        end = start + length
        if end > self.frame_pe.shape[0]:
            if torch.compiler.is_compiling():
                # A compiled graph cannot replace a buffer; compute the rows directly.
                return sinusoidal_table(
                    length, self.dim, base=self.base, offset=start, dtype=like.dtype, device=like.device
                )
            self.frame_pe = sinusoidal_table(
                max(end, 2 * self.frame_pe.shape[0]), self.dim, base=self.base,
                dtype=self.frame_pe.dtype, device=self.frame_pe.device,
            )
        return self.frame_pe[start:end].to(like.dtype)

    def _grid(self, cache: torch.Tensor, height: int, width: int, like: torch.Tensor) -> torch.Tensor:
        if height > cache.shape[0] or width > cache.shape[1]:
            if torch.compiler.is_compiling():
                return sinusoidal_2d(
                    height, width, self.dim, style=self.spatial_style, base=self.base,
                    dtype=like.dtype, device=like.device,
                ).view(height, width, self.dim)
            h, w = max(height, cache.shape[0]), max(width, cache.shape[1])
            cache = sinusoidal_2d(
                h, w, self.dim, style=self.spatial_style, base=self.base,
                dtype=cache.dtype, device=cache.device,
            ).view(h, w, self.dim)
            self.spatial_pe = cache
        # Entry (h, w) depends on (h, w) only, so a smaller grid is a corner of a larger one.
        return cache[:height, :width].to(like.dtype)

    def forward(self, x: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
        """Add the frame (and patch) encodings to ``x``.

        Parameters
        ----------
        x : torch.Tensor
            Floating tensor of shape ``(batch, frames, height, width, dim)``.
        offset : int, optional
            Index of the first frame (e.g. for a clip cut from a longer video).

        Returns
        -------
        torch.Tensor
            Same shape and dtype as ``x``.
        """
        check_floating_tensor("x", x)
        check_ndim("x", x, 5, "(batch, frames, height, width, dim)")
        check_last_dim("x", x, self.dim)
        offset = check_nonnegative_int("offset", offset)
        _, frames, height, width, _ = x.shape
        out = x + self._frames(offset, frames, x)[:, None, None, :]
        if self.spatial_pe is not None:
            out = out + self._grid(self.spatial_pe, height, width, x)
        return self.dropout(out)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, max_frames={self.frame_pe.shape[0]}, "
            f"spatial={self.spatial_pe is not None}, spatial_style={self.spatial_style!r}, base={self.base:g}"
        )
