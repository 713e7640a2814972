"""Positional encodings beyond one dimension: N-d grids, 2-D images and video.

Axial 2-D RoPE is beside 1-D RoPE, in :mod:`posenc.rope`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import nn

from posenc._cache import RecomputedOnCast, cached_rows
from posenc._checks import (
    check_bool,
    check_choice,
    check_float_dtype,
    check_floating_tensor,
    check_last_dim,
    check_multiple_of,
    check_ndim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc._dtypes import round_once
from posenc._frequencies import inverse_frequencies
from posenc.sinusoidal import sinusoidal_table

__all__ = [
    "SINUSOIDAL_2D_STYLES",
    "sinusoidal_nd",
    "sinusoidal_2d",
    "VideoPositionalEncoding",
]

#: Channel orders accepted by :func:`posenc.sinusoidal_2d`.
SINUSOIDAL_2D_STYLES = ("mae", "timm")


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
    freqs = inverse_frequencies(block, base, device=device)
    blocks = []
    for axis, size in enumerate(sizes):
        angles = torch.arange(size, dtype=torch.float64, device=device)[:, None] * freqs
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # sin, cos, sin, ...
        view = [1] * n + [block]
        view[axis] = size
        blocks.append(table.view(view).expand(*sizes, block))
    return round_once(torch.cat(blocks, dim=-1)[..., :dim], dtype)


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
    dim = check_multiple_of("dim", check_positive_int("dim", dim), 4, "sin and cos for each of 2 axes")
    check_choice("style", style, SINUSOIDAL_2D_STYLES)
    base = check_positive_float("base", base)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    # dim/4 frequencies per axis: those of a dim/2-wide 1-D table, base^(-i/(dim/4)).
    freqs = inverse_frequencies(dim // 2, base, device=device)
    # Row-major token order: token t sits at row t // width, column t % width.
    rows = torch.arange(height, dtype=torch.float64, device=device).repeat_interleave(width)
    cols = torch.arange(width, dtype=torch.float64, device=device).repeat(height)
    r, c = rows[:, None] * freqs, cols[:, None] * freqs
    parts = [c.sin(), c.cos(), r.sin(), r.cos()] if style == "mae" else [r.sin(), c.sin(), r.cos(), c.cos()]
    return round_once(torch.cat(parts, dim=1), dtype)


class VideoPositionalEncoding(RecomputedOnCast):
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
    ``state_dict``, as they are a fixed function of the sizes); :meth:`reset_parameters`
    recomputes them, as after ``to_empty()`` from the meta device. Like
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
    _cast_buffer = "frame_pe"

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
        if check_bool("spatial", spatial):
            check_multiple_of("dim", self.dim, 4, "required by the 2-D encoding when spatial=True")
        self.register_buffer("frame_pe", torch.empty(max_frames, dim), persistent=False)
        # A grid that grows to the largest height and width seen so far (empty until then).
        grid = torch.empty(0, 0, dim) if spatial else None
        self.register_buffer("spatial_pe", grid, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Recompute the cached tables in place, at their current sizes, dtype and device."""
        with torch.no_grad():
            self.frame_pe.copy_(self._frame_rows(0, self.frame_pe.shape[0])[0])
            if self.spatial_pe is not None and self.spatial_pe.numel():
                self.spatial_pe.copy_(self._grid_table(*self.spatial_pe.shape[:2]))

    def _frame_rows(self, start: int, end: int) -> tuple[torch.Tensor]:
        table = sinusoidal_table(
            end - start, self.dim, base=self.base, offset=start,
            dtype=self.frame_pe.dtype, device=self.frame_pe.device,
        )
        return (table,)

    def _grid_table(self, height: int, width: int) -> torch.Tensor:
        # In the dtype and on the device of the buffers (``.to()`` moves them together).
        return sinusoidal_2d(
            height, width, self.dim, style=self.spatial_style, base=self.base,
            dtype=self.frame_pe.dtype, device=self.frame_pe.device,
        ).view(height, width, self.dim)

    def _grid(self, cache: torch.Tensor, height: int, width: int) -> torch.Tensor:
        if height > cache.shape[0] or width > cache.shape[1]:
            if torch.compiler.is_compiling():
                # A compiled graph cannot replace a buffer; compute the grid directly.
                return self._grid_table(height, width)
            cache = self._grid_table(max(height, cache.shape[0]), max(width, cache.shape[1]))
            self.spatial_pe = cache
        # Entry (h, w) depends on (h, w) only, so a smaller grid is a corner of a larger one.
        return cache[:height, :width]

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
        (frame_pe,) = cached_rows(self, ("frame_pe",), offset, offset + frames, self._frame_rows)
        out = x + frame_pe.to(x.dtype)[:, None, None, :]  # (frames, dim) -> (frames, 1, 1, dim)
        if self.spatial_pe is not None:
            out = out + self._grid(self.spatial_pe, height, width).to(x.dtype)
        return self.dropout(out)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, max_frames={self.frame_pe.shape[0]}, "
            f"spatial={self.spatial_pe is not None}, spatial_style={self.spatial_style!r}, base={self.base:g}"
        )
