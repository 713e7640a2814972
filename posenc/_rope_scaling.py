"""RoPE context-scaling types: one class per ``rope_type``, each in one place.

A ``scaling`` dict in Hugging Face ``rope_parameters`` form is parsed by :func:`parse_scaling`
into one of the classes below. Each class says which keys it reads (``keys``), how it validates
them (``from_params``), how it rescales the base inverse frequencies (``scale``), its attention
factor, and the sequence length past which its frequencies change (``length_threshold``).
This mirrors ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` without needing a model
config. Adding a scaling type means adding a class and a line in :data:`SCALING_TYPES`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import torch

from posenc._checks import check_bool, check_choice, check_even, check_positive_float, check_positive_int
from posenc._frequencies import inverse_frequencies

__all__ = ["COMMON_KEYS", "ROPE_TYPES", "SCALING_TYPES", "RopeScaling", "parse_scaling", "scaling_and_type", "yarn_mscale"]

_T = TypeVar("_T")

# Keys every ``scaling`` dict may hold (``max_position_embeddings`` is read from the model config
# by Hugging Face).
COMMON_KEYS = frozenset(
    {"rope_type", "type", "rope_theta", "partial_rotary_factor", "max_position_embeddings"}
)


def _real(name: str, value: Any) -> float:
    """Return ``value`` as ``float``; raise unless it is a finite real number (bool excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


class ScalingParams:
    """The raw ``scaling`` dict, with checked access to its keys."""

    def __init__(self, params: Mapping[str, Any], rope_type: str) -> None:
        self.params = params
        self.rope_type = rope_type

    @staticmethod
    def label(name: str) -> str:
        return f"scaling[{name!r}]"

    def get(self, name: str, check: Callable[[str, Any], _T]) -> _T | None:
        """``check`` the value of key ``name``; ``None`` if it is missing or ``None``."""
        value = self.params.get(name)
        return None if value is None else check(self.label(name), value)

    def require(self, name: str, check: Callable[[str, Any], _T]) -> _T:
        value = self.get(name, check)
        if value is None:
            raise ValueError(f"rope_type={self.rope_type!r} needs {self.label(name)}")
        return value

    def factor_list(self, name: str, length: int) -> tuple[float, ...]:
        """The required list of ``length`` positive numbers under key ``name`` (LongRoPE)."""
        value = self.params.get(name)
        if value is None:
            raise ValueError(f"rope_type={self.rope_type!r} needs {self.label(name)}")
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{self.label(name)} must be a list of numbers, got {value!r}")
        if len(value) != length:
            raise ValueError(
                f"{self.label(name)} must have rotary_dim // 2 = {length} entries, got {len(value)}"
            )
        return tuple(check_positive_float(f"{self.label(name)}[{i}]", v) for i, v in enumerate(value))

    def original_max(self) -> int:
        """The pre-training context length; Hugging Face falls back to ``max_position_embeddings``."""
        value = self.get("original_max_position_embeddings", check_positive_int)
        if value is None:
            value = self.get("max_position_embeddings", check_positive_int)
        if value is None:
            raise ValueError(
                f"rope_type={self.rope_type!r} needs scaling['original_max_position_embeddings'] "
                f"or scaling['max_position_embeddings']"
            )
        return value

    def factor_or_ratio(self, original_max: int) -> float:
        """``factor``, or without it the context-extension ratio max / original max (YaRN, LongRoPE)."""
        factor = self.get("factor", check_positive_float)
        if factor is not None:
            return factor
        max_pos = self.get("max_position_embeddings", check_positive_int)
        if max_pos is None:
            raise ValueError(
                f"rope_type={self.rope_type!r} without scaling['factor'] needs "
                f"scaling['max_position_embeddings'] (factor = max / original max)"
            )
        return max_pos / original_max



@dataclass(frozen=True)
class RopeScaling:
    """No scaling (``rope_type="default"``): :math:`\\theta_i = \\mathrm{base}^{-2i/d}`."""

    rotary_dim: int
    base: float

    rope_type: ClassVar[str] = "default"
    keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> RopeScaling:
        return cls(rotary_dim, base)

    @property
    def attention_factor(self) -> float:
        """Factor applied to cos and sin."""
        return 1.0

    @property
    def length_threshold(self) -> int | None:
        """Sequence length above which the frequencies change (``None``: they never do)."""
        return None

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        """Rescale the float64 base inverse frequencies for a sequence of length ``seq_len``."""
        return inv_freq

    @classmethod
    def rotary_width(cls, dim: int, p: ScalingParams) -> int:
        """Channels of a ``dim``-wide head that carry the rotation (``partial_rotary_factor``)."""
        return _rotary_dim(dim, p)

    def unscaled_inv_freq(self, device: torch.device | str | None = None) -> torch.Tensor:
        r"""Float64 frequencies before scaling: :math:`\mathrm{base}^{-2i/r}` over the rotary width."""
        return inverse_frequencies(self.rotary_dim, self.base, device=device)

    def inv_freq(self, seq_len: int | torch.Tensor | None, device: torch.device | str | None) -> torch.Tensor:
        """Float64 inverse frequencies for a sequence of length ``seq_len``.

        ``seq_len`` may be a 0-d tensor (read on the device, never on the host), which keeps
        ``RotaryEmbedding.forward`` free of host synchronisation.
        """
        return self.scale(self.unscaled_inv_freq(device), seq_len)


@dataclass(frozen=True)
class LinearScaling(RopeScaling):
    """Position interpolation (Chen et al., 2023): :math:`\\theta_i / s`."""

    factor: float = 1.0

    rope_type: ClassVar[str] = "linear"
    keys: ClassVar[frozenset[str]] = frozenset({"factor"})

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> LinearScaling:
        return cls(rotary_dim, base, factor=p.require("factor", check_positive_float))

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        # Dividing the frequencies equals dividing the positions.
        return inv_freq / self.factor


@dataclass(frozen=True)
class DynamicNTKScaling(RopeScaling):
    """Dynamic NTK-aware scaling: past the trained length :math:`L_0`, the base grows to
    :math:`\\mathrm{base}\\,(sL/L_0 - s + 1)^{d/(d-2)}`."""

    factor: float = 1.0
    max_position_embeddings: int = 1

    rope_type: ClassVar[str] = "dynamic"
    keys: ClassVar[frozenset[str]] = frozenset({"factor"})

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> DynamicNTKScaling:
        if rotary_dim < 4:
            # The NTK exponent rotary_dim / (rotary_dim - 2) is undefined for a width of 2.
            raise ValueError(
                f"rope_type='dynamic' needs a rotary width >= 4 (dim, or int(dim * "
                f"partial_rotary_factor)), got {rotary_dim}"
            )
        max_pos = p.get("max_position_embeddings", check_positive_int)
        if max_pos is None:
            raise ValueError("rope_type='dynamic' needs scaling['max_position_embeddings']")
        return cls(
            rotary_dim, base, factor=p.require("factor", check_positive_float), max_position_embeddings=max_pos
        )

    @property
    def length_threshold(self) -> int | None:
        return self.max_position_embeddings

    def inv_freq(self, seq_len: int | torch.Tensor | None, device: torch.device | str | None) -> torch.Tensor:
        max_pos, r = self.max_position_embeddings, self.rotary_dim
        length: float | torch.Tensor
        if seq_len is None:
            length = float(max_pos)
        elif isinstance(seq_len, torch.Tensor):
            length = seq_len.to(device=device, dtype=torch.float64).clamp_min(max_pos)
        else:
            length = float(max(seq_len, max_pos))
        # NTK-aware: enlarge the base so that the lowest frequency is interpolated by
        # ``factor * length / max_pos - (factor - 1)`` while the highest stays put.
        base = self.base * (self.factor * length / max_pos - (self.factor - 1)) ** (r / (r - 2))
        return inverse_frequencies(r, base, device=device)


def yarn_mscale(scale: float, mscale: float) -> float:
    """YaRN's attention temperature ``0.1 * mscale * ln(s) + 1`` (1 for ``s <= 1``)."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


@dataclass(frozen=True)
class YarnScaling(RopeScaling):
    """YaRN (Peng et al., 2023): interpolate the low frequencies, keep the high ones, ramp
    linearly in between; attention factor :math:`0.1 \\ln s + 1` (or the ``mscale`` ratio)."""

    factor: float = 1.0
    original_max: int = 1
    yarn_attention_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True

    rope_type: ClassVar[str] = "yarn"
    keys: ClassVar[frozenset[str]] = frozenset(
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
    )

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> YarnScaling:
        original_max = p.original_max()
        factor = p.factor_or_ratio(original_max)
        if base == 1.0:
            raise ValueError("base must differ from 1 for rope_type='yarn' (it divides by log(base))")
        attention_factor = p.get("attention_factor", check_positive_float)
        if attention_factor is None:
            mscale = p.get("mscale", _real)
            mscale_all_dim = p.get("mscale_all_dim", _real)
            # As in Hugging Face: the mscale ratio is used only when both are given and non-zero.
            if mscale and mscale_all_dim:
                attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
            else:
                attention_factor = yarn_mscale(factor, 1.0)
        truncate = p.params.get("truncate")
        if truncate is not None:
            check_bool("scaling['truncate']", truncate)
        return cls(
            rotary_dim,
            base,
            factor=factor,
            original_max=original_max,
            yarn_attention_factor=attention_factor,
            beta_fast=p.get("beta_fast", check_positive_float) or 32.0,
            beta_slow=p.get("beta_slow", check_positive_float) or 1.0,
            truncate=True if truncate is None else truncate,
        )

    @property
    def attention_factor(self) -> float:
        return self.yarn_attention_factor

    def correction_dim(self, num_rotations: float) -> float:
        """The (fractional) pair index whose wavelength fits ``num_rotations`` times in the
        original context."""
        return (
            self.rotary_dim
            * math.log(self.original_max / (num_rotations * 2 * math.pi))
            / (2 * math.log(self.base))
        )

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        low, high = self.correction_dim(self.beta_fast), self.correction_dim(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, self.rotary_dim - 1)
        if low == high:
            high += 0.001  # as in the reference, avoids a zero-width ramp
        pair = torch.arange(self.rotary_dim // 2, dtype=torch.float64, device=inv_freq.device)
        ramp = ((pair - low) / (high - low)).clamp(0, 1)
        return (inv_freq / self.factor) * ramp + inv_freq * (1 - ramp)


@dataclass(frozen=True)
class LongRopeScaling(RopeScaling):
    """LongRoPE (Ding et al., 2024): :math:`\\theta_i / \\lambda_i` with per-frequency
    ``short_factor`` up to the original context and ``long_factor`` past it; attention factor
    :math:`\\sqrt{1 + \\ln s / \\ln L_0}`."""

    factor: float = 1.0
    original_max: int = 1
    longrope_attention_factor: float = 1.0
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()

    rope_type: ClassVar[str] = "longrope"
    keys: ClassVar[frozenset[str]] = frozenset(
        {"short_factor", "long_factor", "factor", "original_max_position_embeddings", "attention_factor"}
    )

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> LongRopeScaling:
        original_max = p.original_max()
        factor = p.factor_or_ratio(original_max)
        attention_factor = p.get("attention_factor", check_positive_float)
        if attention_factor is None:
            if factor > 1.0 and original_max == 1:
                raise ValueError(
                    "scaling['original_max_position_embeddings'] must be >= 2 for the default "
                    "LongRoPE attention factor sqrt(1 + ln(factor) / ln(original max))"
                )
            attention_factor = (
                1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original_max))
            )
        return cls(
            rotary_dim,
            base,
            factor=factor,
            original_max=original_max,
            longrope_attention_factor=attention_factor,
            short_factor=p.factor_list("short_factor", rotary_dim // 2),
            long_factor=p.factor_list("long_factor", rotary_dim // 2),
        )

    @property
    def attention_factor(self) -> float:
        return self.longrope_attention_factor

    @property
    def length_threshold(self) -> int | None:
        return self.original_max

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        short = torch.tensor(self.short_factor, dtype=torch.float64, device=inv_freq.device)
        long = torch.tensor(self.long_factor, dtype=torch.float64, device=inv_freq.device)
        if isinstance(seq_len, torch.Tensor):
            ext = torch.where(seq_len.to(inv_freq.device) > self.original_max, long, short)
        else:
            ext = long if seq_len and seq_len > self.original_max else short
        return inv_freq / ext


@dataclass(frozen=True)
class Llama3Scaling(RopeScaling):
    """Llama 3.1: low frequencies divided by :math:`s`, high ones kept, a smooth blend in between."""

    factor: float = 1.0
    original_max: int = 1
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    rope_type: ClassVar[str] = "llama3"
    keys: ClassVar[frozenset[str]] = frozenset(
        {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}
    )

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> Llama3Scaling:
        original_max = p.original_max()
        low = p.require("low_freq_factor", check_positive_float)
        high = p.require("high_freq_factor", check_positive_float)
        if high <= low:
            raise ValueError(
                f"scaling['high_freq_factor'] must exceed scaling['low_freq_factor'], got {high} <= {low}"
            )
        return cls(
            rotary_dim,
            base,
            factor=p.require("factor", check_positive_float),
            original_max=original_max,
            low_freq_factor=low,
            high_freq_factor=high,
        )

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        wavelen = 2 * math.pi / inv_freq
        low_wavelen = self.original_max / self.low_freq_factor
        high_wavelen = self.original_max / self.high_freq_factor
        scaled = torch.where(wavelen > low_wavelen, inv_freq / self.factor, inv_freq)
        # Between the two wavelengths, blend linearly in 1/wavelen (continuous at both ends).
        smooth = (self.original_max / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        blended = (1 - smooth) * scaled / self.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, blended, scaled)


@dataclass(frozen=True)
class ProportionalScaling(RopeScaling):
    r"""Proportional RoPE (Gemma 4's global layers): the first
    :math:`k = \lfloor p\,d/2 \rfloor` pairs of the whole ``d``-wide head turn at
    :math:`\mathrm{base}^{-2i/d} / s`, the exponent divided by the *head* width, not by the
    rotated width; the other pairs have frequency 0 (they do not turn). ``rotary_dim`` is the
    whole head, so the pairs are ``(i, i + d/2)`` in the half layout.
    """

    factor: float = 1.0
    rotated_pairs: int = 0

    rope_type: ClassVar[str] = "proportional"
    keys: ClassVar[frozenset[str]] = frozenset({"factor"})

    @classmethod
    def rotary_width(cls, dim: int, p: ScalingParams) -> int:
        return check_even("dim", dim)

    @classmethod
    def from_params(cls, p: ScalingParams, rotary_dim: int, base: float) -> ProportionalScaling:
        proportion = p.get("partial_rotary_factor", check_positive_float)
        proportion = 1.0 if proportion is None else proportion
        if proportion > 1.0:
            raise ValueError(f"scaling['partial_rotary_factor'] must be in (0, 1], got {proportion}")
        # As in transformers: int(proportion * head_dim // 2) pairs turn.
        rotated = int(proportion * rotary_dim // 2)
        if rotated < 1:
            raise ValueError(
                f"scaling['partial_rotary_factor']={proportion} rotates no pair of a {rotary_dim}-wide head")
        factor = p.get("factor", check_positive_float)
        return cls(rotary_dim, base, factor=1.0 if factor is None else factor, rotated_pairs=rotated)

    def unscaled_inv_freq(self, device: torch.device | str | None = None) -> torch.Tensor:
        inv_freq = inverse_frequencies(self.rotary_dim, self.base, device=device)
        return torch.where(torch.arange(inv_freq.numel(), device=inv_freq.device) < self.rotated_pairs,
                           inv_freq, torch.zeros_like(inv_freq))

    def scale(self, inv_freq: torch.Tensor, seq_len: int | torch.Tensor | None) -> torch.Tensor:
        return inv_freq / self.factor


#: The scaling class of each ``rope_type``.
SCALING_TYPES: dict[str, type[RopeScaling]] = {
    cls.rope_type: cls
    for cls in (RopeScaling, LinearScaling, DynamicNTKScaling, YarnScaling, LongRopeScaling, Llama3Scaling,
                ProportionalScaling)
}
#: Values of ``scaling["rope_type"]`` (Hugging Face ``rope_parameters``).
ROPE_TYPES = tuple(SCALING_TYPES)


def _rotary_dim(dim: int, p: ScalingParams) -> int:
    partial = p.get("partial_rotary_factor", check_positive_float)
    if partial is None:
        return check_even("dim", dim)
    # Hugging Face truncates: rotary_dim = int(head_dim * partial_rotary_factor).
    rotary_dim = int(dim * partial)
    if partial > 1.0 or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be in (0, 1] and give an even rotary "
            f"width int(dim * factor) >= 2; got {partial} (dim={dim}, width {rotary_dim})"
        )
    return rotary_dim


def scaling_and_type(scaling: Any) -> tuple[Mapping[str, Any], str]:
    """``scaling`` (``None`` read as no scaling) and its ``rope_type`` (or legacy ``type``), checked."""
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
    return scaling, rope_type


def parse_scaling(dim: Any, base: Any, scaling: Any) -> RopeScaling:
    """Validate ``dim``, ``base`` and ``scaling``; fill in the defaults Hugging Face fills in."""
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    scaling, rope_type = scaling_and_type(scaling)
    kind = SCALING_TYPES[rope_type]
    allowed = COMMON_KEYS | kind.keys
    unknown = sorted(str(k) for k in scaling if k not in allowed)
    if unknown:
        raise ValueError(
            f"scaling has keys {unknown} that rope_type={rope_type!r} does not use; "
            f"allowed keys: {sorted(allowed)}"
        )
    p = ScalingParams(scaling, rope_type)
    theta = p.get("rope_theta", check_positive_float)
    if theta is not None and theta != base:
        raise ValueError(
            f"scaling['rope_theta']={theta} disagrees with base={base}; pass the same value "
            f"as base (or drop rope_theta from scaling)"
        )
    # Validate the shared keys even where the type does not read them (e.g. default + max_pos).
    p.get("max_position_embeddings", check_positive_int)
    return kind.from_params(p, kind.rotary_width(dim, p), base)
