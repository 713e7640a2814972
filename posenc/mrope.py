"""Multimodal RoPE (M-RoPE): three positions per token, the frequencies split between them.

Qwen2-VL gives every token a (time, height, width) position. Text tokens repeat one position on
all three axes; an image's patches share a time and count their row and column. RoPE's ``dim / 2``
frequencies are shared out between the three axes: frequency :math:`k` turns by the position on
its axis, :math:`p_{a(k)}\\,\\theta_k`. Qwen2-VL and Qwen2.5-VL give each axis one contiguous block
of frequencies (``sections = [16, 24, 24]`` for 64 frequencies: time the fastest, width the
slowest); Qwen3-VL interleaves them (time, height, width, time, height, width, ...), so that every
axis gets fast and slow frequencies.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import torch

from posenc._checks import (
    check_bool,
    check_float_dtype,
    check_integer_tensor,
    check_positive_float,
    check_positive_int,
)
from posenc._frequencies import inverse_frequencies
from posenc.rope import _cos_sin_of_angles

__all__ = ["mrope_axes", "mrope_cos_sin", "mrope_position_ids"]


def _check_sections(sections: Any, dim: int) -> tuple[int, int, int]:
    if not isinstance(sections, Sequence) or len(sections) != 3:
        raise TypeError(f"sections must be three integers (time, height, width), got {sections!r}")
    sections = tuple(check_positive_int(f"sections[{a}]", s) for a, s in enumerate(sections))
    if dim % 2 or sum(sections) != dim // 2:
        raise ValueError(
            f"sections must add up to dim // 2 = {dim // 2} frequencies (dim even), got {list(sections)} "
            f"(sum {sum(sections)}) for dim={dim}"
        )
    return sections  # type: ignore[return-value]


def mrope_axes(dim: int, sections: Sequence[int], *, interleaved: bool = False) -> torch.Tensor:
    r"""The axis (0 time, 1 height, 2 width) whose position turns each of the ``dim // 2`` frequencies.

    Blocked (Qwen2-VL, Qwen2.5-VL): the first ``sections[0]`` frequencies follow time, the next
    ``sections[1]`` height, the last ``sections[2]`` width. Interleaved (Qwen3-VL): frequency
    :math:`k` follows height when :math:`k \bmod 3 = 1` and :math:`k < 3\,s_1`, width when
    :math:`k \bmod 3 = 2` and :math:`k < 3\,s_2`, and time otherwise.

    Parameters
    ----------
    dim : int
        Head dimension (even).
    sections : list of int
        Frequencies per axis, ``(time, height, width)``, adding up to ``dim // 2``.
    interleaved : bool, optional
        Qwen3-VL's interleaved assignment instead of blocks.

    Returns
    -------
    torch.Tensor
        ``torch.long`` ``(dim // 2,)`` with values 0, 1, 2.

    Raises
    ------
    TypeError
        If ``sections`` is not three integers.
    ValueError
        If a section is not positive, ``dim`` is odd, the sections do not add up to ``dim // 2``,
        or (interleaved) the time axis would not get ``sections[0]`` frequencies.

    References
    ----------
    Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of the World at Any
    Resolution", 2024, section 2.1; transformers 5.24 ``Qwen2VLRotaryEmbedding`` and
    ``Qwen3VLTextRotaryEmbedding`` (``recomposition_frequencies``).
    """
    dim = check_positive_int("dim", dim)
    time, height, width = _check_sections(sections, dim)
    check_bool("interleaved", interleaved)
    if not interleaved:
        return torch.repeat_interleave(torch.arange(3), torch.tensor([time, height, width]))
    k = torch.arange(dim // 2)
    axes = torch.zeros(dim // 2, dtype=torch.long)
    axes[(k % 3 == 1) & (k < 3 * height)] = 1
    axes[(k % 3 == 2) & (k < 3 * width)] = 2
    if int((axes == 0).sum()) != time:
        raise ValueError(
            f"interleaved sections {[time, height, width]} give the time axis {int((axes == 0).sum())} "
            f"frequencies, not {time}: height and width must fit in every third of the first "
            f"3 * section frequencies"
        )
    return axes


def mrope_cos_sin(
    position_ids: torch.Tensor,
    dim: int,
    sections: Sequence[int],
    *,
    base: float = 10000.0,
    interleaved: bool = False,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Cosine and sine tables of M-RoPE, in the half layout, ready for :func:`~posenc.apply_rope`.

    .. math::

        \cos_{t, j} = \cos\!\big(p^{(a(k))}_t\,\theta_k\big), \qquad k = j \bmod d/2, \qquad
        \theta_k = \mathrm{base}^{-2k/d},

    where :math:`p^{(0)}, p^{(1)}, p^{(2)}` are the time, height and width positions of token
    :math:`t` and :math:`a(k)` the axis of frequency :math:`k` (:func:`mrope_axes`). When the three
    positions of every token are equal (text), this is :func:`~posenc.rope_cos_sin`. Angles are
    computed in float64 and rounded once to ``dtype``.

    Parameters
    ----------
    position_ids : torch.Tensor
        Integer ``(3, ..., seq)``: the time, height and width positions of each token.
    dim : int
        Head dimension (even).
    sections : list of int
        Frequencies per axis, ``(time, height, width)``, adding up to ``dim // 2`` (the
        ``mrope_section`` of the model's ``rope_parameters``).
    base : float, optional
        RoPE base (``rope_theta``). Default 10000.
    interleaved : bool, optional
        Qwen3-VL's interleaved frequencies instead of Qwen2-VL's blocks.
    dtype : torch.dtype, optional
        Output dtype; default ``torch.get_default_dtype()``.
    device : torch.device or str, optional
        Output device; default the device of ``position_ids``.

    Returns
    -------
    cos, sin : tuple of torch.Tensor
        Each ``(..., seq, dim)``.

    Raises
    ------
    TypeError
        If ``position_ids`` is not an integer tensor, or ``sections`` not three integers.
    ValueError
        If ``position_ids`` does not have 3 rows on its first axis, or the sections do not fit
        ``dim`` (see :func:`mrope_axes`).

    References
    ----------
    Wang et al., "Qwen2-VL", 2024, section 2.1; transformers 5.24 ``Qwen2VLRotaryEmbedding``,
    ``Qwen3VLTextRotaryEmbedding``.
    """
    check_integer_tensor("position_ids", position_ids)
    if position_ids.ndim < 2 or position_ids.shape[0] != 3:
        raise ValueError(
            "position_ids must be (3, ..., seq): time, height and width positions, got shape "
            f"{tuple(position_ids.shape)}"
        )
    axes = mrope_axes(dim, sections, interleaved=interleaved)
    base = check_positive_float("base", base)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    device = position_ids.device if device is None else device
    inv_freq = inverse_frequencies(dim, base, device=device)  # (dim // 2,) float64
    # (3, ..., seq) -> (..., seq, 3), then each frequency picks its axis: (..., seq, dim // 2)
    positions = position_ids.to(device=device, dtype=torch.float64).movedim(0, -1)[..., axes.to(device)]
    return _cos_sin_of_angles(positions * inv_freq, 1.0, "half", dtype)


#: Token types of :func:`mrope_position_ids` (transformers' ``mm_token_type_ids``).
TEXT, IMAGE, VIDEO = 0, 1, 2


def _grids(name: str, grid_thw: Any) -> list[tuple[int, int, int]]:
    if grid_thw is None:
        return []
    check_integer_tensor(name, grid_thw)
    if grid_thw.ndim != 2 or grid_thw.shape[1] != 3:
        raise ValueError(f"{name} must be (n, 3): (time, height, width) per item, got shape {tuple(grid_thw.shape)}")
    if bool((grid_thw <= 0).any()):
        raise ValueError(f"{name} must be positive, got {grid_thw.tolist()}")
    return [tuple(int(v) for v in row) for row in grid_thw]  # type: ignore[misc]


def _vision_positions(start: int, grid: tuple[int, int, int], merge: int, interval: float) -> tuple[torch.Tensor, int]:
    """(3, t*h*w) positions of one image or video, and where the text after it starts."""
    time, height, width = grid[0], grid[1] // merge, grid[2] // merge
    t = (torch.arange(time) * interval).long() + start  # scaled before the offset, as transformers
    h, w = torch.arange(height) + start, torch.arange(width) + start
    # (time, height, width) grids -> (3, time * height * width), row-major like the patches
    positions = torch.stack(torch.meshgrid(t, h, w, indexing="ij")).reshape(3, -1)
    return positions, start + max(height, width)


def mrope_position_ids(
    token_types: torch.Tensor,
    image_grid_thw: torch.Tensor | None = None,
    video_grid_thw: torch.Tensor | None = None,
    *,
    spatial_merge_size: int = 1,
    attention_mask: torch.Tensor | None = None,
    time_interval: float | Sequence[float] = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The (time, height, width) positions of a multimodal prompt, and the offset decoding adds.

    Text tokens count up on all three axes at once. The patches of an image or a video start at
    the position :math:`s` after the text before them: a patch at frame :math:`f`, row :math:`r`
    and column :math:`c` of the merged grid gets :math:`(s + \lfloor f\,\Delta \rfloor, s + r,
    s + c)`, with :math:`\Delta` the ``time_interval`` (1 for images). The text after it starts
    at :math:`s + \max(h, w)`, so a picture takes as many positions as its longer side, not as
    many as its patches. After the prompt, decoding continues every axis at
    ``cached + delta`` (``delta`` = the largest position + 1 - the number of tokens).

    Parameters
    ----------
    token_types : torch.Tensor
        Integer ``(batch, seq)``: 0 text, 1 image, 2 video (transformers' ``mm_token_type_ids``).
    image_grid_thw, video_grid_thw : torch.Tensor, optional
        Integer ``(n, 3)``: the (time, height, width) patch grid of each image or video, in the
        order they appear in the batch, row by row, before the spatial merge.
    spatial_merge_size : int, optional
        Patches merged per side into one token (2 in the released Qwen2-VL models).
    attention_mask : torch.Tensor, optional
        ``(batch, seq)``, 0 for padding: padding is skipped and gets position 0 on every axis.
    time_interval : float or list of float, optional
        Position step between frames of a video: one value, or one per video (Qwen2.5-VL:
        ``tokens_per_second * second_per_grid_ts``). Default 1.

    Returns
    -------
    position_ids : torch.Tensor
        int64 ``(3, batch, seq)``.
    deltas : torch.Tensor
        int64 ``(batch, 1)``: add to the cache length to get the next token's position.

    Raises
    ------
    TypeError
        If ``token_types``, a grid or ``attention_mask`` is not an integer (or bool) tensor.
    ValueError
        If a shape is wrong, a token type is not 0, 1 or 2, a run of image or video tokens does
        not match the grids given (too few, too many, or a grid whose merged size differs), a
        grid side is not divisible by ``spatial_merge_size``, or ``time_interval`` has the wrong
        length.

    References
    ----------
    Wang et al., "Qwen2-VL", 2024, section 2.1; Bai et al., "Qwen2.5-VL Technical Report", 2025
    (absolute time); transformers 5.24 ``Qwen2VLModel.get_rope_index`` and
    ``Qwen2_5_VLModel.get_rope_index``.
    """
    check_integer_tensor("token_types", token_types)
    if token_types.ndim != 2:
        raise ValueError(f"token_types must be (batch, seq), got shape {tuple(token_types.shape)}")
    if token_types.numel() and not bool(((token_types >= TEXT) & (token_types <= VIDEO)).all()):
        raise ValueError(f"token_types must be 0 (text), 1 (image) or 2 (video), got {sorted(set(token_types.flatten().tolist()))}")
    merge = check_positive_int("spatial_merge_size", spatial_merge_size)
    grids = {IMAGE: _grids("image_grid_thw", image_grid_thw), VIDEO: _grids("video_grid_thw", video_grid_thw)}
    for kind, name in ((IMAGE, "image_grid_thw"), (VIDEO, "video_grid_thw")):
        if any(h % merge or w % merge for _, h, w in grids[kind]):
            raise ValueError(f"{name} heights and widths must be divisible by spatial_merge_size={merge}, got {grids[kind]}")
    intervals = [float(time_interval)] * len(grids[VIDEO]) if isinstance(time_interval, (int, float)) else [float(v) for v in time_interval]
    if len(intervals) != len(grids[VIDEO]):
        raise ValueError(f"time_interval has {len(intervals)} values for {len(grids[VIDEO])} videos")
    keep = torch.ones_like(token_types, dtype=torch.bool)
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.dtype.is_floating_point:
            raise TypeError("attention_mask must be an integer or bool tensor (1 = token, 0 = padding)")
        if attention_mask.shape != token_types.shape:
            raise ValueError(f"attention_mask must have the shape of token_types {tuple(token_types.shape)}, "
                             f"got {tuple(attention_mask.shape)}")
        keep = attention_mask.bool()
    queues: dict[int, Iterator[tuple[tuple[int, int, int], float]]] = {
        IMAGE: iter([(g, 1.0) for g in grids[IMAGE]]), VIDEO: iter(zip(grids[VIDEO], intervals))}
    used = {IMAGE: 0, VIDEO: 0}
    position_ids = torch.zeros(3, *token_types.shape, dtype=torch.long)
    deltas = []
    for row in range(token_types.shape[0]):
        types = token_types[row][keep[row]].tolist()
        pieces, start = [], 0
        for kind, run in itertools.groupby(types):
            length = len(list(run))
            if kind == TEXT:
                pieces.append(torch.arange(start, start + length).expand(3, -1))
                start += length
                continue
            while length > 0:  # a run may hold several images (or videos) back to back
                try:
                    grid, interval = next(queues[kind])
                except StopIteration:
                    raise ValueError(f"row {row} has more {'image' if kind == IMAGE else 'video'} tokens than "
                                     f"the grids given cover") from None
                used[kind] += 1
                size = grid[0] * (grid[1] // merge) * (grid[2] // merge)
                if size > length:
                    raise ValueError(f"row {row}: a run of {length} {'image' if kind == IMAGE else 'video'} tokens is "
                                     f"shorter than the grid {list(grid)} (merge {merge}), which needs {size}")
                positions, start = _vision_positions(start, grid, merge, interval)
                pieces.append(positions)
                length -= size
        row_positions = torch.cat(pieces, dim=1) if pieces else torch.zeros(3, 0, dtype=torch.long)
        position_ids[:, row, keep[row]] = row_positions
        deltas.append((int(row_positions.max()) + 1 if row_positions.numel() else 0) - row_positions.shape[1])
    for kind, name in ((IMAGE, "image_grid_thw"), (VIDEO, "video_grid_thw")):
        if used[kind] != len(grids[kind]):
            raise ValueError(f"{name} has {len(grids[kind])} grids, the token types use {used[kind]}")
    return position_ids.to(token_types.device), torch.tensor(deltas, device=token_types.device)[:, None]
