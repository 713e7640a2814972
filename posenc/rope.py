"""Rotary position embedding (RoPE) and its context-extension variants.

RoPE rotates each pair of query/key channels by an angle proportional to the token position, so
that the attention score of a query at position :math:`m` and a key at position :math:`n`
depends on the positions only through :math:`m - n`. This module provides the inverse
frequencies (with the scaling rules of Hugging Face ``rope_parameters``, one class per type in
``posenc._rope_scaling``), the cos/sin tables (1-D and axial 2-D), the rotation itself in both
channel layouts (its kernel is ``posenc._rotation``), the weight permutation between the layouts,
and a thin :class:`torch.nn.Module` with a cos/sin cache.

Two channel layouts are in use:

* ``"half"`` (GPT-NeoX, Hugging Face Llama): channel ``i`` is paired with channel
  ``i + d/2``; cos/sin are ``cat(f, f)``.
* ``"interleaved"`` (RoFormer, Meta's original Llama, GPT-J): channel ``2i`` is paired with
  ``2i + 1``; each frequency appears twice in a row.

Both give the same attention scores once the q/k projection weights are permuted
(:func:`permute_for_half_layout`).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch
from torch import nn

from posenc._cache import RecomputedOnCast, cached_rows
from posenc._checks import (
    check_bool,
    check_choice,
    check_even,
    check_finite,
    check_float_dtype,
    check_floating_tensor,
    check_integer_tensor,
    check_last_dim,
    check_multiple_of,
    check_ndim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
)
from posenc._dtypes import round_once
from posenc._frequencies import inverse_frequencies
from posenc._rope_scaling import ROPE_TYPES, RopeScaling, _real, parse_scaling
from posenc._rope_scaling import yarn_mscale as _yarn_mscale
from posenc._rotation import BACKENDS, functorch_active, rotate, rotate_qk, wants_grad

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_TYPES",
    "rope_inv_freq",
    "yarn_mscale",
    "rope_cos_sin",
    "axial_rope_cos_sin",
    "ROPE_BACKENDS",
    "apply_rope",
    "apply_rope_qk",
    "RotaryEmbedding",
    "interleaved_to_half",
    "half_to_interleaved",
    "permute_for_half_layout",
]

#: Implementations :func:`apply_rope` and :func:`apply_rope_qk` choose between: ``"auto"`` (the
#: Triton kernel for CUDA tensors when Triton is installed, PyTorch otherwise), ``"torch"``,
#: ``"triton"``.
ROPE_BACKENDS = BACKENDS

#: Channel layouts accepted by :func:`rope_cos_sin`, :func:`axial_rope_cos_sin`,
#: :func:`apply_rope` and :class:`RotaryEmbedding`.
ROPE_LAYOUTS = ("half", "interleaved")


# --------------------------------------------------------------------------------------------
# Inverse frequencies
# --------------------------------------------------------------------------------------------


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    r"""YaRN's attention temperature for a context extended by ``factor``.

    .. math::

        m(s, \mu) = \begin{cases} 0.1\, \mu \ln s + 1 & s > 1, \\ 1 & s \le 1, \end{cases}

    with :math:`s` = ``factor`` and :math:`\mu` = ``mscale``. Plain YaRN multiplies cos and sin
    by :math:`m(s, 1)` (:func:`rope_inv_freq` returns it as the attention factor); DeepSeek's
    configs give two :math:`\mu`, ``mscale`` and ``mscale_all_dim``, and split the temperature
    between cos/sin and the softmax scale (:func:`~posenc.mla_softmax_scale`).

    Parameters
    ----------
    factor : float
        The context-extension factor :math:`s`, > 0.
    mscale : float, optional
        :math:`\mu` (default 1), a finite number.

    Returns
    -------
    float
        :math:`m(s, \mu)`.

    Raises
    ------
    TypeError
        If ``factor`` or ``mscale`` is not a real number.
    ValueError
        If ``factor`` is not a finite number > 0 or ``mscale`` is not finite.

    References
    ----------
    Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models", 2023;
    transformers 5.24 ``_compute_yarn_parameters`` (``get_mscale``) and DeepSeek-V3's
    ``yarn_get_mscale``.
    """
    return _yarn_mscale(check_positive_float("factor", factor), _real("mscale", mscale))



def rope_inv_freq(
    dim: int,
    *,
    base: float = 10000.0,
    scaling: dict | None = None,
    seq_len: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, float]:
    r"""Inverse frequencies and attention factor of RoPE, with optional context scaling.

    .. math::

        \theta_i = \mathrm{base}^{-2i/d}, \qquad i = 0, \dots, d/2 - 1,

    where :math:`d` is the rotary width, then rescaled according to ``scaling["rope_type"]``:

    * ``"default"``: unchanged.
    * ``"linear"`` (position interpolation): :math:`\theta_i / s`.
    * ``"dynamic"`` (NTK-aware): the base becomes
      :math:`\mathrm{base}\,(s L / L_0 - s + 1)^{d/(d-2)}` with
      :math:`L = \max(\mathrm{seq\_len}, L_0)`, :math:`L_0` = ``max_position_embeddings``.
    * ``"yarn"``: :math:`\theta_i (1 - \gamma_i) / s + \theta_i \gamma_i` with a linear ramp
      :math:`\gamma_i` between the channels that rotate ``beta_fast`` and ``beta_slow`` times
      in the original context; attention factor :math:`0.1 \ln s + 1` (or the ``mscale``
      ratio).
    * ``"longrope"``: :math:`\theta_i / \lambda_i` with per-frequency ``short_factor`` or,
      when ``seq_len`` exceeds ``original_max_position_embeddings``, ``long_factor``; attention
      factor :math:`\sqrt{1 + \ln s / \ln L_0}`, here with :math:`L_0` =
      ``original_max_position_embeddings``.
    * ``"llama3"``: low frequencies divided by :math:`s`, high ones kept, a smooth blend in
      between.
    * ``"proportional"`` (Gemma 4): the first :math:`\lfloor p\,d/2 \rfloor` frequencies
      :math:`\theta_i / s` with :math:`d` the *whole* head width and :math:`p` =
      ``partial_rotary_factor``, the others 0; the result has ``dim // 2`` entries, and the
      pairs that turn are ``(i, i + dim/2)`` in the half layout.

    The numbers equal those of ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``
    (transformers 5.x) for the same config, except that they are computed in float64.

    Parameters
    ----------
    dim : int
        Head dimension (even, unless ``partial_rotary_factor`` gives an even rotary width).
    base : float, optional
        The RoPE base :math:`\theta` (``rope_theta``). Default 10000.
    scaling : dict, optional
        Hugging Face ``rope_parameters``: ``rope_type`` (default ``"default"``), that type's keys
        (``factor``, ``original_max_position_embeddings``, ``attention_factor``, ``beta_fast``,
        ``beta_slow``, ``mscale``, ``mscale_all_dim``, ``truncate``, ``short_factor``,
        ``long_factor``, ``low_freq_factor``, ``high_freq_factor``), optional
        ``partial_rotary_factor`` (rotary width ``int(dim * partial_rotary_factor)``), and
        ``max_position_embeddings`` where the type needs the model's context length
        (``dynamic``; ``longrope`` and ``yarn`` without ``factor``). A ``rope_theta`` key must
        equal ``base``. Unknown keys raise ``ValueError``.
    seq_len : int, optional
        Current sequence length; only ``dynamic`` and ``longrope`` depend on it.
    dtype : torch.dtype, optional
        Output dtype. Default float64: the frequencies feed angle computations, which the
        library keeps in float64.
    device : torch.device, optional
        Output device.

    Returns
    -------
    inv_freq : torch.Tensor
        Shape ``(rotary_dim // 2,)``.
    attention_factor : float
        Factor by which cos and sin are multiplied (1 except for ``yarn`` and ``longrope``).

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    Chen et al., "Extending Context Window of Large Language Models via Positional
    Interpolation", 2023. bloc97 and emozilla, NTK-aware and dynamic NTK scaling (Reddit
    r/LocalLLaMA), 2023. Peng et al., "YaRN: Efficient Context Window Extension of Large
    Language Models", 2023. Ding et al., "LongRoPE: Extending LLM Context Window Beyond 2 Million
    Tokens", 2024. Grattafiori et al., "The Llama 3 Herd of Models", 2024.
    """
    scaling_type = parse_scaling(dim, base, scaling)
    if seq_len is not None:
        seq_len = check_positive_int("seq_len", seq_len)
    dtype = check_float_dtype("dtype", dtype) or torch.float64
    return round_once(scaling_type.inv_freq(seq_len, device), dtype), scaling_type.attention_factor


# --------------------------------------------------------------------------------------------
# cos / sin tables
# --------------------------------------------------------------------------------------------


def _per_channel(values: torch.Tensor, layout: str) -> torch.Tensor:
    """One value per rotated pair -> one per channel: ``cat(v, v)`` or each value twice in a row."""
    if layout == "half":
        return torch.cat((values, values), dim=-1)
    return values.repeat_interleave(2, dim=-1)


def _cos_sin_of_angles(
    angles: torch.Tensor, attention_factor: float, layout: str, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of float64 ``angles`` (one per pair), scaled, laid out and rounded once to ``dtype``."""
    cos = _per_channel(torch.cos(angles) * attention_factor, layout)
    sin = _per_channel(torch.sin(angles) * attention_factor, layout)
    return round_once(cos, dtype), round_once(sin, dtype)


def _cos_sin(
    positions: torch.Tensor,
    scaling: RopeScaling,
    seq_len: int | torch.Tensor | None,
    layout: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = scaling.inv_freq(seq_len, positions.device)
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq
    return _cos_sin_of_angles(angles, scaling.attention_factor, layout, dtype)


def rope_cos_sin(
    positions: int | torch.Tensor,
    dim: int,
    *,
    base: float = 10000.0,
    scaling: dict | None = None,
    layout: str = "half",
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Cosine and sine tables of RoPE for the given positions.

    .. math::

        \cos_{p, j} = a \cos(p\, \theta_{k(j)}), \qquad \sin_{p, j} = a \sin(p\, \theta_{k(j)}),

    with :math:`\theta` and the attention factor :math:`a` from :func:`rope_inv_freq`, and
    :math:`k(j) = j \bmod d/2` for ``layout="half"`` (``cat(f, f)``) or :math:`k(j) = \lfloor j/2
    \rfloor` for ``layout="interleaved"`` (each frequency twice in a row). Angles are computed in
    float64 and rounded once to ``dtype``.

    For ``dynamic`` and ``longrope`` scaling, the sequence length is ``positions`` (an int) or
    ``floor(max(positions)) + 1`` (a tensor; this reads the tensor, like the NaN check).

    Parameters
    ----------
    positions : int or torch.Tensor
        Either a length ``L`` (positions ``0 … L-1``) or a tensor of positions of any shape:
        integer, or float32/float64 (finite; float16/bfloat16 cannot hold positions exactly and
        are refused).
    dim : int
        Head dimension.
    base : float, optional
        RoPE base. Default 10000.
    scaling : dict, optional
        Hugging Face ``rope_parameters`` dict, see :func:`rope_inv_freq`.
    layout : str, optional
        ``"half"`` (default) or ``"interleaved"``.
    dtype : torch.dtype, optional
        Output dtype; default ``torch.get_default_dtype()``.
    device : torch.device, optional
        Output device; default the device of ``positions`` (or the default device for an int).

    Returns
    -------
    cos, sin : tuple of torch.Tensor
        Each of shape ``(*positions.shape, rotary_dim)`` (``(L, rotary_dim)`` for an int), where
        ``rotary_dim`` is ``dim`` or ``int(dim * partial_rotary_factor)``; already multiplied by
        the attention factor.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """
    scaling_type = parse_scaling(dim, base, scaling)
    check_choice("layout", layout, ROPE_LAYOUTS)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    if isinstance(positions, torch.Tensor):
        if positions.dtype == torch.bool or positions.is_complex():
            raise TypeError(f"positions must be an integer or float tensor, got {positions.dtype}")
        if positions.dtype in (torch.float16, torch.bfloat16):
            raise TypeError(
                f"positions must not be held in {positions.dtype} (it cannot represent every "
                f"integer position); pass an integer tensor"
            )
        check_finite("positions", positions)
        positions = positions.to(device) if device is not None else positions
        seq_len = None
        if scaling_type.length_threshold is not None and positions.numel() > 0:
            seq_len = math.floor(positions.max().item()) + 1
    elif isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        seq_len = check_positive_int("positions", positions)
        positions = torch.arange(seq_len, device=device)
    else:
        raise TypeError(
            f"positions must be an int (a sequence length) or a torch.Tensor of positions, "
            f"got {positions!r} of type {type(positions).__name__}"
        )
    return _cos_sin(positions, scaling_type, seq_len, layout, dtype)


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

    They are laid out like :func:`rope_cos_sin`: ``"half"`` is
    :math:`\cos[\theta, \theta]`, ``"interleaved"`` repeats each angle twice in a row. Pass the
    result to :func:`apply_rope` with the same ``layout``; then
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
    dim = check_multiple_of("dim", check_positive_int("dim", dim), 4, "a rotated pair per frequency for each of 2 axes")
    base = check_positive_float("base", base)
    check_choice("layout", layout, ROPE_LAYOUTS)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    freqs = inverse_frequencies(dim // 2, base, device=device)
    # Row-major token order: token t sits at row t // width, column t % width.
    rows = torch.arange(height, dtype=torch.float64, device=device).repeat_interleave(width)
    cols = torch.arange(width, dtype=torch.float64, device=device).repeat(height)
    angles = torch.cat([rows[:, None] * freqs, cols[:, None] * freqs], dim=1)
    return _cos_sin_of_angles(angles, 1.0, layout, dtype)


# --------------------------------------------------------------------------------------------
# The rotation
# --------------------------------------------------------------------------------------------


def _certainly_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` share elements, where that can be seen from their metadata alone:
    they start at the same element, or both are contiguous and their byte ranges intersect. Other
    strided views of one storage (q and k split from a fused projection) are not flagged."""
    if torch.compiler.is_compiling() or a.device.type == "meta" or a.numel() == 0 or b.numel() == 0:
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    if a.data_ptr() == b.data_ptr():
        return True
    if not (a.is_contiguous() and b.is_contiguous()):
        return False
    a_end = a.data_ptr() + a.numel() * a.element_size()
    b_end = b.data_ptr() + b.numel() * b.element_size()
    return a.data_ptr() < b_end and b.data_ptr() < a_end


def _check_cos_sin(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> int:
    """Shape/dtype checks of :func:`apply_rope`; returns the rotary width."""
    check_floating_tensor("x", x)
    check_floating_tensor("cos", cos)
    check_floating_tensor("sin", sin)
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.device != x.device or sin.device != x.device:
        # PyTorch would raise only on some paths; a GPU kernel would read a host pointer.
        raise ValueError(
            f"cos and sin must be on x's device {x.device}, got {cos.device} and {sin.device}"
        )
    if x.ndim == 0 or cos.ndim == 0:
        raise ValueError(
            f"x and cos must have at least 1 dimension, got shapes {tuple(x.shape)} and "
            f"{tuple(cos.shape)}"
        )
    if cos.ndim != x.ndim and cos.ndim != 2:
        raise ValueError(
            f"cos/sin of shape {tuple(cos.shape)} must have 2 dimensions (seq, w) or as many as "
            f"x of shape {tuple(x.shape)} ({x.ndim}); with {cos.ndim}, their leading axes would "
            f"align with the wrong axes of x (a batch axis against heads). For per-sample "
            f"positions and x of shape (batch, heads, seq, dim), pass cos.unsqueeze(1) and "
            f"sin.unsqueeze(1) (Hugging Face's unsqueeze_dim=1)"
        )
    width = cos.shape[-1]
    if width % 2 or width == 0 or width > x.shape[-1]:
        raise ValueError(
            f"cos.shape[-1] must be even and in [2, x.shape[-1]={x.shape[-1]}] (the rotary "
            f"width; channels are rotated in pairs), got {width}"
        )
    # Each axis of cos (right-aligned) is 1 or that of x: broadcasting that never enlarges x.
    # (Written out: torch.broadcast_shapes costs more than the rotation of a short sequence.)
    lead = x.shape[:-1]
    ok = len(cos.shape) - 1 <= len(lead) and all(
        c == 1 or c == n for c, n in zip(reversed(cos.shape[:-1]), reversed(lead))
    )
    if not ok:
        raise ValueError(
            f"cos/sin of shape {tuple(cos.shape)} must broadcast to x of shape {tuple(x.shape)} "
            f"without enlarging it"
        )
    return width


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half",
    backend: str = "auto",
) -> torch.Tensor:
    r"""Rotate the channel pairs of ``x`` by the angles encoded in ``cos`` and ``sin``.

    For each pair :math:`(x_a, x_b)` (``layout="half"``: :math:`b = a + w/2`;
    ``"interleaved"``: :math:`(a, b) = (2i, 2i+1)`),

    .. math::

        y_a = x_a \cos_a - x_b \sin_a, \qquad y_b = x_b \cos_b + x_a \sin_b,

    which is Hugging Face's ``x * cos + rotate_half(x) * sin`` for ``"half"`` and Meta Llama's
    complex product :math:`(x_{2i} + \mathrm{i}\,x_{2i+1})\, e^{\mathrm{i} p \theta_i}` for
    ``"interleaved"``. If ``cos`` is narrower than ``x`` (partial rotary), only the first
    ``cos.shape[-1]`` channels rotate; the rest pass through.

    The result has the bits of that formula (each product rounded, no fused multiply-add) on
    every path: with or without autograd, under ``torch.compile`` and under ``torch.func``
    transforms (``vmap``, ``jvp``, ``grad``). On CPU a large tensor is rotated over cache-sized
    blocks with one block-sized scratch tensor (no temporaries the size of ``x``): in float32,
    over twice as fast as the formula written with ``rotate_half`` (the performance page
    measures it). The backward is the rotation by :math:`-\theta`. On CUDA a Triton
    kernel does the same arithmetic in one pass over ``x`` (the same bits; see ``backend``). Only
    shapes and dtypes are checked: no host synchronisation. To rotate queries and keys together
    (one kernel launch, optionally in place) use :func:`apply_rope_qk`.

    ``cos``/``sin`` have either two dimensions ``(seq, w)``, shared by every leading axis of
    ``x``, or as many dimensions as ``x``. Anything in between is refused: for ``x`` of shape
    ``(batch, heads, seq, dim)``, cos/sin of shape ``(batch, seq, w)`` (per-sample positions, as
    Hugging Face's rotary module returns them) would align their batch axis with ``heads`` and,
    when the two sizes agree, rotate every sequence by another sequence's positions. Insert the
    heads axis first: ``cos.unsqueeze(1)`` (Hugging Face's ``unsqueeze_dim=1``).

    Parameters
    ----------
    x : torch.Tensor
        Queries or keys, shape ``(..., seq, dim)``, floating point.
    cos, sin : torch.Tensor
        Shape ``(seq, w)``, or ``x.ndim`` dimensions broadcastable to ``x[..., :w]``, with even
        ``w <= dim`` (e.g. from :func:`rope_cos_sin`); cast to ``x.dtype``.
    layout : str, optional
        ``"half"`` (default) or ``"interleaved"``; must match the layout of ``cos``/``sin``.
    backend : str, optional
        ``"auto"`` (default): the Triton kernel for float32, float16 and bfloat16 CUDA tensors
        when ``triton`` is installed, PyTorch otherwise.
        ``"torch"``: always PyTorch. ``"triton"``: always the kernel (CUDA tensors, or CPU tensors
        under ``TRITON_INTERPRET=1``); an error says why when it cannot run.

    Returns
    -------
    torch.Tensor
        Same shape and dtype as ``x``.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_choice("backend", backend, ROPE_BACKENDS)
    _check_cos_sin(x, cos, sin)
    return rotate(x, cos.to(x.dtype), sin.to(x.dtype), layout == "interleaved", backend=backend)


def apply_rope_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    inplace: bool = False,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Rotate queries and keys by the same ``cos``/``sin``: :func:`apply_rope` on both, in one
    kernel launch.

    ``apply_rope_qk(q, k, cos, sin)`` returns the bits of
    ``(apply_rope(q, cos, sin), apply_rope(k, cos, sin))``. With the Triton backend the two
    tensors are rotated by one kernel launch instead of two, forward and backward.

    ``inplace=True`` writes the results into ``q`` and ``k`` and returns them. Nothing of the
    size of ``q`` or ``k`` is allocated by the Triton kernel, nor on a CPU, where the scratch
    space is about one cache-sized block (512 KiB); the PyTorch path on other devices makes
    temporaries of that size. Autograd works through it (the backward is the rotation by
    :math:`-\theta`, which needs only cos/sin), except for gradients of ``cos``/``sin``, which
    would need the overwritten values, and for ``torch.func`` transforms; both are refused with
    an error. ``q`` and ``k`` must not share memory: two views of the same elements are refused
    with an error (overlaps that only an element-by-element comparison would find are not
    looked for).

    Parameters
    ----------
    q, k : torch.Tensor
        Shape ``(..., seq, dim)``, the same dtype and ``dim``; their leading axes may differ
        (e.g. fewer key heads under grouped-query attention), each broadcasting ``cos``/``sin``
        as in :func:`apply_rope`.
    cos, sin : torch.Tensor
        As in :func:`apply_rope`.
    layout : str, optional
        ``"half"`` (default) or ``"interleaved"``.
    inplace : bool, optional
        Overwrite ``q`` and ``k`` (default False).
    backend : str, optional
        As in :func:`apply_rope`.

    Returns
    -------
    tuple of torch.Tensor
        The rotated ``q`` and ``k``: new tensors, or ``q`` and ``k`` themselves with
        ``inplace=True``.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_choice("backend", backend, ROPE_BACKENDS)
    check_bool("inplace", inplace)
    _check_cos_sin(q, cos, sin)
    _check_cos_sin(k, cos, sin)
    if q.dtype != k.dtype or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same dtype and last dimension, got {q.dtype} of shape "
            f"{tuple(q.shape)} and {k.dtype} of shape {tuple(k.shape)}"
        )
    if inplace:
        if not torch.compiler.is_compiling() and functorch_active():
            raise ValueError(
                "inplace=True does not work under torch.func transforms (vmap, grad, jvp, ...); "
                "pass inplace=False"
            )
        if _certainly_overlap(q, k):
            raise ValueError(
                "inplace=True needs q and k in separate memory, got two views of the same elements "
                "(each would be rotated twice); pass inplace=False or separate tensors"
            )
        if wants_grad(cos, sin):
            raise ValueError(
                "inplace=True cannot give gradients of cos/sin (they need the q and k that the "
                "rotation overwrites); pass inplace=False, or detach cos and sin"
            )
        for name, t in (("q", q), ("k", k)):
            if any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape)):
                raise ValueError(
                    f"inplace=True needs {name} to own its memory, got an expanded tensor of "
                    f"shape {tuple(t.shape)} and strides {t.stride()}"
                )
    interleaved = layout == "interleaved"
    return rotate_qk(
        q, k, cos.to(q.dtype), sin.to(q.dtype), interleaved, backend=backend, inplace=inplace
    )


# --------------------------------------------------------------------------------------------
# Module
# --------------------------------------------------------------------------------------------


class RotaryEmbedding(RecomputedOnCast):
    r"""Rotary position embedding for ``(batch, heads, seq, dim)`` queries and keys.

    Caches cos/sin for positions ``0 … max_len-1`` (non-persistent buffers ``cos_cached``
    and ``sin_cached`` in the default float dtype; they follow ``.to()`` and are not saved in the
    ``state_dict``, since they are a function of the arguments). :meth:`reset_parameters`
    recomputes them, so a module built on the meta device is ready after ``to_empty()`` and
    ``reset_parameters()``. A longer sequence doubles the
    cache in eager mode; under ``torch.compile`` the missing rows are computed directly instead,
    so the compiled graph never mutates the module.

    Explicit ``positions`` are turned into cos/sin directly (float64 angles), not looked up in
    the cache, so no value of a position can fall outside it and nothing is read on the host.

    ``dynamic`` and ``longrope`` scaling depend on the sequence length :math:`L` (the last
    position + 1): up to the threshold (``max_position_embeddings`` or
    ``original_max_position_embeddings``) the cache is used; beyond it cos/sin are computed for
    the current :math:`L`. Unlike Hugging Face's ``dynamic`` module, which keeps the frequencies
    of the longest sequence seen so far, the result depends only on the current call.

    Parameters
    ----------
    dim : int
        Head dimension.
    base : float, optional
        RoPE base. Default 10000.
    scaling : dict, optional
        Hugging Face ``rope_parameters`` dict, see :func:`rope_inv_freq`.
    layout : str, optional
        ``"half"`` (default) or ``"interleaved"``.
    max_len : int, optional
        Initial cache length. Default 2048.
    backend : str, optional
        Implementation of the rotation, as in :func:`apply_rope` (default ``"auto"``); ``q``
        and ``k`` are rotated by one :func:`apply_rope_qk` call.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor
    _cast_buffer = "cos_cached"

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        scaling: dict | None = None,
        layout: str = "half",
        max_len: int = 2048,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.scaling = parse_scaling(dim, base, scaling)
        self.dim = dim
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.backend = check_choice("backend", backend, ROPE_BACKENDS)
        max_len = check_positive_int("max_len", max_len)
        self.register_buffer("cos_cached", torch.empty(max_len, self.rotary_dim), persistent=False)
        self.register_buffer("sin_cached", torch.empty(max_len, self.rotary_dim), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Recompute the cos/sin cache in place, at its current length, dtype and device."""
        cos, sin = self._cos_sin_rows(0, self.cos_cached.shape[0])
        with torch.no_grad():
            self.cos_cached.copy_(cos)
            self.sin_cached.copy_(sin)

    @property
    def rotary_dim(self) -> int:
        """Number of channels that rotate (``dim`` unless ``partial_rotary_factor`` is set)."""
        return self.scaling.rotary_dim

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, rotary_dim={self.rotary_dim}, base={self.scaling.base}, "
            f"rope_type={self.scaling.rope_type!r}, layout={self.layout!r}, "
            f"backend={self.backend!r}"
        )

    def _cos_sin_rows(
        self, start: int, end: int, seq_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of positions ``start … end-1`` in the cache's dtype and on its device."""
        positions = torch.arange(start, end, device=self.cos_cached.device)
        return _cos_sin(positions, self.scaling, seq_len, self.layout, self.cos_cached.dtype)

    def _cos_sin_of_range(self, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of positions ``start … end-1`` (a sequence of length ``end``)."""
        threshold = self.scaling.length_threshold
        if threshold is not None and end > threshold:
            # The frequencies depend on this length: nothing cached applies.
            return self._cos_sin_rows(start, end, seq_len=end)
        cos, sin = cached_rows(self, ("cos_cached", "sin_cached"), start, end, self._cos_sin_rows)
        return cos, sin

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        positions: torch.Tensor | None = None,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys.

        Parameters
        ----------
        q, k : torch.Tensor
            Shape ``(batch, heads, seq, dim)`` (``heads`` may differ between them), floating point.
        positions : torch.Tensor, optional
            Integer positions of shape ``(seq,)`` or ``(batch, seq)``. Default
            ``offset … offset+seq-1``.
        offset : int, optional
            First position when ``positions`` is not given (e.g. the length of a KV cache).

        Returns
        -------
        tuple of torch.Tensor
            The rotated ``q`` and ``k``, same shapes and dtypes.
        """
        for name, t in (("q", q), ("k", k)):
            check_floating_tensor(name, t)
            check_ndim(name, t, 4, "(batch, heads, seq, dim)")
            check_last_dim(name, t, self.dim)
        if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
            raise ValueError(
                f"q and k must have the same batch and seq sizes, got shapes {tuple(q.shape)} "
                f"and {tuple(k.shape)}"
            )
        batch, seq = q.shape[0], q.shape[2]
        offset = check_nonnegative_int("offset", offset)
        if positions is None:
            cos, sin = self._cos_sin_of_range(offset, offset + seq)
        else:
            if offset:
                raise ValueError(f"offset must be 0 when positions are given, got {offset}")
            self._check_positions(positions, batch, seq)
            seq_len = None
            if self.scaling.length_threshold is not None and positions.numel() > 0:
                seq_len = positions.amax() + 1  # stays on the device: no host sync
            device, dtype = self.cos_cached.device, self.cos_cached.dtype
            cos, sin = _cos_sin(positions.to(device), self.scaling, seq_len, self.layout, dtype)
            if positions.ndim == 2:
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (batch, seq, w) -> (batch, 1, seq, w)
        return apply_rope_qk(q, k, cos, sin, layout=self.layout, backend=self.backend)

    @staticmethod
    def _check_positions(positions: Any, batch: int, seq: int) -> None:
        # Float positions would need a NaN check, which reads values (a host sync).
        check_integer_tensor("positions", positions)
        shape = tuple(positions.shape)
        if not (
            (positions.ndim == 1 and shape == (seq,))
            or (positions.ndim == 2 and shape[1] == seq and shape[0] in (1, batch))
        ):
            raise ValueError(
                f"positions must have shape (seq,) or (batch, seq) with seq={seq} and "
                f"batch={batch} (or 1), got {shape}"
            )


# --------------------------------------------------------------------------------------------
# Layout conversion
# --------------------------------------------------------------------------------------------


def _check_pairs(name: str, x: Any) -> int:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension, got a 0-D tensor")
    return check_even(f"{name}.shape[-1]", x.shape[-1])


def interleaved_to_half(x: torch.Tensor) -> torch.Tensor:
    r"""Reorder the last dimension from interleaved pairs to half-split pairs.

    Channel :math:`2i` moves to :math:`i` and channel :math:`2i+1` to :math:`i + d/2`, so that
    ``apply_rope(interleaved_to_half(x), cos_h, sin_h, layout="half")`` equals
    ``interleaved_to_half(apply_rope(x, cos_i, sin_i, layout="interleaved"))``.

    Parameters
    ----------
    x : torch.Tensor
        Shape ``(..., d)`` with even ``d``.

    Returns
    -------
    torch.Tensor
        Shape ``(..., d)``: ``cat(x[..., 0::2], x[..., 1::2])``.

    References
    ----------
    Hugging Face transformers, ``models/llama/convert_llama_weights_to_hf.py`` (``permute``).
    """
    d = _check_pairs("x", x)
    return x.unflatten(-1, (d // 2, 2)).transpose(-1, -2).flatten(-2)


def half_to_interleaved(x: torch.Tensor) -> torch.Tensor:
    r"""Inverse of :func:`interleaved_to_half`: channel :math:`i` moves to :math:`2i` and
    :math:`i + d/2` to :math:`2i + 1`.

    Parameters
    ----------
    x : torch.Tensor
        Shape ``(..., d)`` with even ``d``.

    Returns
    -------
    torch.Tensor
        Shape ``(..., d)``.

    References
    ----------
    Hugging Face transformers, ``models/llama/convert_llama_weights_to_hf.py`` (``permute``).
    """
    d = _check_pairs("x", x)
    return x.unflatten(-1, (2, d // 2)).transpose(-1, -2).flatten(-2)


def permute_for_half_layout(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    r"""Permute a q or k projection from the interleaved (Meta) to the half (Hugging Face) layout.

    This is the ``permute`` of Hugging Face's ``convert_llama_weights_to_hf.py``: within each
    head, output row :math:`2i` moves to :math:`i` and :math:`2i+1` to :math:`i + h/2`
    (:func:`interleaved_to_half` applied to the output features). Queries and keys projected by
    the permuted weights and rotated with ``layout="half"`` give the same attention scores as
    the original weights with ``layout="interleaved"``. For grouped-query attention, permute
    the k projection with the number of key/value heads.

    Parameters
    ----------
    weight : torch.Tensor
        Shape ``(num_heads * head_dim, in_features)``, or ``(num_heads * head_dim,)`` for a bias.
    num_heads : int
        Number of heads in the projection's output.

    Returns
    -------
    torch.Tensor
        Same shape as ``weight``.

    References
    ----------
    Hugging Face transformers, ``models/llama/convert_llama_weights_to_hf.py`` (``permute``).
    """
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    num_heads = check_positive_int("num_heads", num_heads)
    if weight.ndim not in (1, 2):
        raise ValueError(
            f"weight must be 2-D (out_features, in_features) or a 1-D bias, got shape "
            f"{tuple(weight.shape)}"
        )
    out_features = weight.shape[0]
    if out_features % num_heads or (out_features // num_heads) % 2:
        raise ValueError(
            f"weight.shape[0]={out_features} must be num_heads={num_heads} times an even head_dim"
        )
    head_dim = out_features // num_heads
    per_head = weight.reshape(num_heads, head_dim // 2, 2, *weight.shape[1:])
    return per_head.transpose(1, 2).reshape(weight.shape)
