"""Rotary position embedding (RoPE) and its context-extension variants.

RoPE rotates each pair of query/key channels by an angle proportional to the token position, so
that the attention score of a query at position :math:`m` and a key at position :math:`n`
depends on the positions only through :math:`m - n`. This module provides the inverse
frequencies (with the scaling rules of Hugging Face ``rope_parameters``), the cos/sin tables, the
rotation itself in both channel layouts, the weight permutation between the layouts, and a thin
:class:`torch.nn.Module` with a cos/sin cache.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from posenc._dtypes import round_once
from posenc._checks import (
    check_choice,
    check_even,
    check_finite,
    check_float_dtype,
    check_floating_tensor,
    check_last_dim,
    check_ndim,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
)

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_TYPES",
    "rope_inv_freq",
    "rope_cos_sin",
    "apply_rope",
    "RotaryEmbedding",
    "interleaved_to_half",
    "half_to_interleaved",
    "permute_for_half_layout",
]

#: Channel layouts accepted by :func:`rope_cos_sin`, :func:`apply_rope` and :class:`RotaryEmbedding`.
ROPE_LAYOUTS = ("half", "interleaved")
#: Values of ``scaling["rope_type"]`` (Hugging Face ``rope_parameters``).
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")

# Keys every ``scaling`` dict may hold (``max_position_embeddings`` is read from the model config
# by Hugging Face), then the keys of each ``rope_type`` (those of the Hugging Face validators).
_COMMON_KEYS = frozenset(
    {"rope_type", "type", "rope_theta", "partial_rotary_factor", "max_position_embeddings"}
)
_TYPE_KEYS = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor"}),
    "yarn": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "truncate",
        }
    ),
    "longrope": frozenset(
        {
            "short_factor",
            "long_factor",
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
        }
    ),
    "llama3": frozenset(
        {
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        }
    ),
}


# --------------------------------------------------------------------------------------------
# Scaling configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RopeSpec:
    """A validated ``scaling`` config: everything the inverse frequencies depend on."""

    rope_type: str
    rotary_dim: int
    base: float
    factor: float = 1.0
    attention_factor: float = 1.0
    max_position_embeddings: int | None = None  # dynamic: the trained context length
    original_max: int | None = None  # yarn / longrope / llama3: the pre-training length
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    @property
    def length_threshold(self) -> int | None:
        """Sequence length above which the frequencies change (``None``: they never do)."""
        if self.rope_type == "dynamic":
            return self.max_position_embeddings
        if self.rope_type == "longrope":
            return self.original_max
        return None


def _key(name: str) -> str:
    return f"scaling[{name!r}]"


def _real(name: str, value: Any) -> float:
    """Return ``value`` as ``float``; raise unless it is a finite real number (bool excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def _optional(params: Mapping[str, Any], name: str, check: Any) -> Any:
    """``check`` the value of ``params[name]``, or return ``None`` if it is missing or ``None``."""
    value = params.get(name)
    return None if value is None else check(_key(name), value)


def _factor_list(params: Mapping[str, Any], name: str, length: int) -> tuple[float, ...]:
    """The required list ``params[name]`` of ``length`` positive numbers (LongRoPE factors)."""
    value = params.get(name)
    if value is None:
        raise ValueError(f"rope_type='longrope' needs {_key(name)}")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{_key(name)} must be a list of numbers, got {value!r}")
    if len(value) != length:
        raise ValueError(f"{_key(name)} must have rotary_dim // 2 = {length} entries, got {len(value)}")
    return tuple(check_positive_float(f"{_key(name)}[{i}]", v) for i, v in enumerate(value))


def _required(params: Mapping[str, Any], name: str, check: Any) -> Any:
    value = _optional(params, name, check)
    if value is None:
        raise ValueError(f"rope_type={params.get('rope_type', params.get('type'))!r} needs {_key(name)}")
    return value


def _yarn_mscale(scale: float, mscale: float) -> float:
    """YaRN's attention temperature ``0.1 * mscale * ln(s) + 1`` (1 for ``s <= 1``)."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def _resolve(dim: Any, base: Any, scaling: Any) -> _RopeSpec:
    """Validate ``dim``, ``base`` and ``scaling``; fill in the defaults Hugging Face fills in."""
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    if scaling is None:
        scaling = {}
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be a dict in Hugging Face rope_parameters form or None, "
            f"got {type(scaling).__name__}"
        )
    rope_type = check_choice(
        "scaling['rope_type']", scaling.get("rope_type", scaling.get("type", "default")), ROPE_TYPES
    )
    allowed = _COMMON_KEYS | _TYPE_KEYS[rope_type]
    unknown = sorted(str(k) for k in scaling if k not in allowed)
    if unknown:
        raise ValueError(
            f"scaling has keys {unknown} that rope_type={rope_type!r} does not use; "
            f"allowed keys: {sorted(allowed)}"
        )
    if scaling.get("rope_theta") is not None:
        theta = check_positive_float(_key("rope_theta"), scaling["rope_theta"])
        if theta != base:
            raise ValueError(
                f"scaling['rope_theta']={theta} disagrees with base={base}; pass the same value "
                f"as base (or drop rope_theta from scaling)"
            )

    rotary_dim = dim
    partial = _optional(scaling, "partial_rotary_factor", check_positive_float)
    if partial is not None:
        # Hugging Face truncates: rotary_dim = int(head_dim * partial_rotary_factor).
        rotary_dim = int(dim * partial)
        if partial > 1.0 or rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(
                f"scaling['partial_rotary_factor'] must be in (0, 1] and give an even rotary "
                f"width int(dim * factor) >= 2; got {partial} (dim={dim}, width {rotary_dim})"
            )
    else:
        check_even("dim", dim)

    max_pos = _optional(scaling, "max_position_embeddings", check_positive_int)
    spec = _RopeSpec(rope_type=rope_type, rotary_dim=rotary_dim, base=base)
    if rope_type == "default":
        return spec
    if rope_type == "linear":
        return replace(spec, factor=_required(scaling, "factor", check_positive_float))
    if rope_type == "dynamic":
        if rotary_dim < 4:
            # The NTK exponent rotary_dim / (rotary_dim - 2) is undefined for a width of 2.
            raise ValueError(
                f"rope_type='dynamic' needs a rotary width >= 4, got dim={dim} (width {rotary_dim})"
            )
        if max_pos is None:
            raise ValueError("rope_type='dynamic' needs scaling['max_position_embeddings']")
        return replace(
            spec,
            factor=_required(scaling, "factor", check_positive_float),
            max_position_embeddings=max_pos,
        )
    original_max = _optional(scaling, "original_max_position_embeddings", check_positive_int)
    if original_max is None:
        # Hugging Face's standardize_rope_params falls back to max_position_embeddings.
        if max_pos is None:
            raise ValueError(
                f"rope_type={rope_type!r} needs scaling['original_max_position_embeddings'] "
                f"or scaling['max_position_embeddings']"
            )
        original_max = max_pos
    if rope_type == "llama3":
        low = _required(scaling, "low_freq_factor", check_positive_float)
        high = _required(scaling, "high_freq_factor", check_positive_float)
        if high <= low:
            raise ValueError(
                f"scaling['high_freq_factor'] must exceed scaling['low_freq_factor'], "
                f"got {high} <= {low}"
            )
        return replace(
            spec,
            factor=_required(scaling, "factor", check_positive_float),
            original_max=original_max,
            low_freq_factor=low,
            high_freq_factor=high,
        )

    # yarn and longrope: without ``factor``, the factor is the context-extension ratio.
    factor = _optional(scaling, "factor", check_positive_float)
    if factor is None:
        if max_pos is None:
            raise ValueError(
                f"rope_type={rope_type!r} without scaling['factor'] needs "
                f"scaling['max_position_embeddings'] (factor = max / original max)"
            )
        factor = max_pos / original_max
    attention_factor = _optional(scaling, "attention_factor", check_positive_float)

    if rope_type == "longrope":
        if attention_factor is None and factor > 1.0 and original_max == 1:
            raise ValueError(
                "scaling['original_max_position_embeddings'] must be >= 2 for the default "
                "LongRoPE attention factor sqrt(1 + ln(factor) / ln(original max))"
            )
        if attention_factor is None:
            attention_factor = (
                1.0
                if factor <= 1.0
                else math.sqrt(1.0 + math.log(factor) / math.log(original_max))
            )
        return replace(
            spec,
            factor=factor,
            attention_factor=attention_factor,
            original_max=original_max,
            short_factor=_factor_list(scaling, "short_factor", rotary_dim // 2),
            long_factor=_factor_list(scaling, "long_factor", rotary_dim // 2),
        )

    # yarn
    if base == 1.0:
        raise ValueError("base must differ from 1 for rope_type='yarn' (it divides by log(base))")
    if attention_factor is None:
        mscale = _optional(scaling, "mscale", _real)
        mscale_all_dim = _optional(scaling, "mscale_all_dim", _real)
        # As in Hugging Face: the mscale ratio is used only when both are given and non-zero.
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor, 1.0)
    truncate = scaling.get("truncate")
    if truncate is not None and not isinstance(truncate, bool):
        raise TypeError(f"scaling['truncate'] must be a bool, got {truncate!r}")
    return replace(
        spec,
        factor=factor,
        attention_factor=attention_factor,
        original_max=original_max,
        beta_fast=_optional(scaling, "beta_fast", check_positive_float) or 32.0,
        beta_slow=_optional(scaling, "beta_slow", check_positive_float) or 1.0,
        truncate=True if truncate is None else truncate,
    )


# --------------------------------------------------------------------------------------------
# Inverse frequencies
# --------------------------------------------------------------------------------------------


def _inv_freq(
    spec: _RopeSpec, seq_len: int | torch.Tensor | None, device: torch.device | None
) -> torch.Tensor:
    """Float64 inverse frequencies of ``spec`` for a sequence of length ``seq_len``.

    ``seq_len`` may be a 0-d tensor (read on the device, never on the host), which keeps
    :meth:`RotaryEmbedding.forward` free of host synchronisation for ``dynamic``/``longrope``.
    """
    r = spec.rotary_dim
    exponent = torch.arange(0, r, 2, dtype=torch.float64, device=device) / r
    inv_freq = 1.0 / spec.base**exponent
    kind = spec.rope_type
    if kind == "default":
        return inv_freq
    if kind == "linear":
        # Dividing the frequencies equals dividing the positions (position interpolation).
        return inv_freq / spec.factor
    if kind == "dynamic":
        max_pos = spec.max_position_embeddings
        if seq_len is None:
            length: float | torch.Tensor = float(max_pos)
        elif isinstance(seq_len, torch.Tensor):
            length = seq_len.to(device=device, dtype=torch.float64).clamp_min(max_pos)
        else:
            length = float(max(seq_len, max_pos))
        # NTK-aware: enlarge the base so that the lowest frequency is interpolated by
        # ``factor * length / max_pos - (factor - 1)`` while the highest stays put.
        base = spec.base * (spec.factor * length / max_pos - (spec.factor - 1)) ** (r / (r - 2))
        return 1.0 / base**exponent
    if kind == "longrope":
        short = torch.tensor(spec.short_factor, dtype=torch.float64, device=device)
        long = torch.tensor(spec.long_factor, dtype=torch.float64, device=device)
        if isinstance(seq_len, torch.Tensor):
            ext = torch.where(seq_len.to(device) > spec.original_max, long, short)
        else:
            ext = long if seq_len and seq_len > spec.original_max else short
        return inv_freq / ext
    if kind == "llama3":
        wavelen = 2 * math.pi / inv_freq
        low_wavelen = spec.original_max / spec.low_freq_factor
        high_wavelen = spec.original_max / spec.high_freq_factor
        scaled = torch.where(wavelen > low_wavelen, inv_freq / spec.factor, inv_freq)
        # Between the two wavelengths, blend linearly in 1/wavelen (continuous at both ends).
        smooth = (spec.original_max / wavelen - spec.low_freq_factor) / (
            spec.high_freq_factor - spec.low_freq_factor
        )
        blended = (1 - smooth) * scaled / spec.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, blended, scaled)
    # yarn: interpolate the low frequencies, keep the high ones, ramp in between.
    low, high = (_yarn_correction_dim(b, spec) for b in (spec.beta_fast, spec.beta_slow))
    if spec.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001  # as in the reference, avoids a zero-width ramp
    ramp = ((torch.arange(r // 2, dtype=torch.float64, device=device) - low) / (high - low)).clamp(0, 1)
    return (inv_freq / spec.factor) * ramp + inv_freq * (1 - ramp)


def _yarn_correction_dim(num_rotations: float, spec: _RopeSpec) -> float:
    """The (fractional) channel index whose wavelength fits ``num_rotations`` times in the
    original context."""
    return (
        spec.rotary_dim
        * math.log(spec.original_max / (num_rotations * 2 * math.pi))
        / (2 * math.log(spec.base))
    )


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
      factor :math:`\sqrt{1 + \ln s / \ln L_0}`.
    * ``"llama3"``: low frequencies divided by :math:`s`, high ones kept, a smooth blend in
      between.

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
    spec = _resolve(dim, base, scaling)
    if seq_len is not None:
        seq_len = check_positive_int("seq_len", seq_len)
    dtype = check_float_dtype("dtype", dtype) or torch.float64
    return round_once(_inv_freq(spec, seq_len, device), dtype), spec.attention_factor


# --------------------------------------------------------------------------------------------
# cos / sin tables
# --------------------------------------------------------------------------------------------


def _cos_sin(
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    attention_factor: float,
    layout: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of ``positions * inv_freq`` in float64, laid out and rounded once to ``dtype``."""
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq.to(positions.device)
    cos = torch.cos(angles) * attention_factor
    sin = torch.sin(angles) * attention_factor
    if layout == "half":
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    else:
        cos = torch.stack((cos, cos), dim=-1).flatten(-2)
        sin = torch.stack((sin, sin), dim=-1).flatten(-2)
    return round_once(cos, dtype), round_once(sin, dtype)


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
    spec = _resolve(dim, base, scaling)
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
        if spec.length_threshold is not None and positions.numel() > 0:
            seq_len = math.floor(positions.max().item()) + 1
    else:
        seq_len = check_positive_int("positions", positions)
        positions = torch.arange(seq_len, device=device)
    inv_freq = _inv_freq(spec, seq_len, positions.device)
    return _cos_sin(positions, inv_freq, spec.attention_factor, layout, dtype)


# --------------------------------------------------------------------------------------------
# The rotation
# --------------------------------------------------------------------------------------------


def _check_cos_sin(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> int:
    """Shape/dtype checks of :func:`apply_rope`; returns the rotary width."""
    check_floating_tensor("x", x)
    check_floating_tensor("cos", cos)
    check_floating_tensor("sin", sin)
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if x.ndim == 0 or cos.ndim == 0:
        raise ValueError(
            f"x and cos must have at least 1 dimension, got shapes {tuple(x.shape)} and "
            f"{tuple(cos.shape)}"
        )
    width = cos.shape[-1]
    check_even("cos.shape[-1]", width)
    if width == 0 or width > x.shape[-1]:
        raise ValueError(
            f"cos.shape[-1] must be in [2, x.shape[-1]={x.shape[-1]}] (the rotary width), "
            f"got {width}"
        )
    lead = tuple(x.shape[:-1])
    try:
        ok = tuple(torch.broadcast_shapes(lead, tuple(cos.shape[:-1]))) == lead
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"cos/sin of shape {tuple(cos.shape)} must broadcast to x of shape {tuple(x.shape)} "
            f"without enlarging it"
        )
    return width


def _pairs(t: torch.Tensor, width: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of each rotated channel pair, as views of ``t[..., :width]``."""
    if layout == "half":
        return t[..., : width // 2], t[..., width // 2 : width]
    return t[..., 0:width:2], t[..., 1:width:2]


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half"
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

    Outside autograd and ``torch.compile``, the result is written into one preallocated tensor
    (no full-size temporaries), which makes it several times faster than the reference
    formula on CPU. Only shapes and dtypes are checked: no host synchronisation.

    Parameters
    ----------
    x : torch.Tensor
        Queries or keys, shape ``(..., seq, dim)``, floating point.
    cos, sin : torch.Tensor
        Shape ``(..., seq, w)`` with even ``w <= dim``, broadcastable to ``x[..., :w]`` (e.g.
        from :func:`rope_cos_sin`); cast to ``x.dtype``.
    layout : str, optional
        ``"half"`` (default) or ``"interleaved"``; must match the layout of ``cos``/``sin``.

    Returns
    -------
    torch.Tensor
        Same shape and dtype as ``x``.

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    width = _check_cos_sin(x, cos, sin)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = _pairs(x, width, layout)
    c1, c2 = _pairs(cos, width, layout)
    s1, s2 = _pairs(sin, width, layout)
    needs_grad = torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    if needs_grad or torch.compiler.is_compiling():
        # out= has no autograd, and the compiler fuses this form by itself.
        y1, y2 = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
        if layout == "half":
            rotated = torch.cat((y1, y2), dim=-1)
        else:
            rotated = torch.stack((y1, y2), dim=-1).flatten(-2)
        return torch.cat((rotated, x[..., width:]), dim=-1) if width < x.shape[-1] else rotated
    # Eager fast path: each half of the output is written in place, so the only memory traffic
    # is reading x twice and writing y once (rotate_half would add four full-size temporaries).
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    o1, o2 = _pairs(out, width, layout)
    torch.mul(x1, c1, out=o1)
    o1.addcmul_(x2, s1, value=-1)
    torch.mul(x2, c2, out=o2)
    o2.addcmul_(x1, s2)
    if width < x.shape[-1]:
        out[..., width:] = x[..., width:]
    return out


# --------------------------------------------------------------------------------------------
# Module
# --------------------------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding for ``(batch, heads, seq, dim)`` queries and keys.

    Holds a cos/sin cache for positions ``0 … max_len-1`` (non-persistent buffers ``cos_cached``
    and ``sin_cached`` in the default float dtype; they follow ``.to()`` and are not saved in the
    ``state_dict``, since they are a function of the arguments). A longer sequence doubles the
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

    References
    ----------
    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        scaling: dict | None = None,
        layout: str = "half",
        max_len: int = 2048,
    ) -> None:
        super().__init__()
        self._spec = _resolve(dim, base, scaling)
        self.dim = dim
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        max_len = check_positive_int("max_len", max_len)
        cos, sin = self._compute(torch.arange(max_len), None, torch.get_default_dtype())
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)

    @property
    def rotary_dim(self) -> int:
        """Number of channels that rotate (``dim`` unless ``partial_rotary_factor`` is set)."""
        return self._spec.rotary_dim

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, rotary_dim={self.rotary_dim}, base={self._spec.base}, "
            f"rope_type={self._spec.rope_type!r}, layout={self.layout!r}"
        )

    def _compute(
        self, positions: torch.Tensor, seq_len: int | torch.Tensor | None, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = _inv_freq(self._spec, seq_len, positions.device)
        return _cos_sin(positions, inv_freq, self._spec.attention_factor, self.layout, dtype)

    def _range(self, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of positions ``start … end-1`` (a sequence of length ``end``)."""
        device, dtype = self.cos_cached.device, self.cos_cached.dtype
        threshold = self._spec.length_threshold
        if threshold is not None and end > threshold:
            # The frequencies depend on this length: nothing cached applies.
            return self._compute(torch.arange(start, end, device=device), end, dtype)
        if end > self.cos_cached.shape[0]:
            if torch.compiler.is_compiling():
                return self._compute(torch.arange(start, end, device=device), None, dtype)
            # Doubling keeps token-by-token decoding from rebuilding the cache at every step.
            cos, sin = self._compute(
                torch.arange(max(end, 2 * self.cos_cached.shape[0]), device=device), None, dtype
            )
            self.cos_cached, self.sin_cached = cos, sin
        return self.cos_cached[start:end], self.sin_cached[start:end]

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
            cos, sin = self._range(offset, offset + seq)
        else:
            if offset:
                raise ValueError(f"offset must be 0 when positions are given, got {offset}")
            self._check_positions(positions, batch, seq)
            seq_len = None
            if self._spec.length_threshold is not None and positions.numel() > 0:
                seq_len = positions.amax() + 1  # stays on the device: no host sync
            device, dtype = self.cos_cached.device, self.cos_cached.dtype
            cos, sin = self._compute(positions.to(device), seq_len, dtype)
            if positions.ndim == 2:
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # broadcast over heads
        return apply_rope(q, cos, sin, layout=self.layout), apply_rope(k, cos, sin, layout=self.layout)

    @staticmethod
    def _check_positions(positions: Any, batch: int, seq: int) -> None:
        if not isinstance(positions, torch.Tensor):
            raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
        if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
            # Float positions would need a NaN check, which reads values (a host sync).
            raise TypeError(f"positions must be an integer tensor in forward, got {positions.dtype}")
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
