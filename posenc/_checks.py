"""Argument checks shared by every encoding.

Each check raises a ``ValueError`` or ``TypeError`` whose message names the argument, the value
received and what is allowed (docs/dev/spec.md, General rules). None of them reads tensor *values* except
:func:`check_finite`, which is used only outside ``forward``/``apply_rope`` so that those stay free
of host-device synchronisation.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import torch

__all__ = [
    "check_positive_int",
    "check_nonnegative_int",
    "check_int",
    "check_positive_float",
    "check_choice",
    "check_float_dtype",
    "check_floating_tensor",
    "check_ndim",
    "check_last_dim",
    "check_even",
    "check_multiple_of",
    "check_integer_tensor",
    "check_keys_cover_queries",
    "check_finite",
    "check_probability",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value: Any) -> int:
    """Return ``value`` as ``int``; raise ``TypeError`` if it is not an integer (bool excluded)."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    return int(value)


def check_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as ``int``; raise if it is not an integer ``>= 1``."""
    value = check_int(name, value)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def check_nonnegative_int(name: str, value: Any) -> int:
    """Return ``value`` as ``int``; raise if it is not an integer ``>= 0``."""
    value = check_int(name, value)
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return ``value``; raise ``TypeError`` if it is not a bool (``1``, ``"no"`` and the like are
    refused rather than read by their truth value)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r} of type {type(value).__name__}")
    return value


def check_positive_float(name: str, value: Any) -> float:
    """Return ``value`` as ``float``; raise if it is not a finite real number ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not (value > 0.0 and value != float("inf")):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_nonnegative_float(name: str, value: Any) -> float:
    """Return ``value`` as ``float``; raise if it is not a finite real number ``>= 0``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not (value >= 0.0 and value != float("inf")):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def check_probability(name: str, value: Any) -> float:
    """Return ``value`` as ``float``; raise if it is not in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
    return value


def check_float_dtype(name: str, dtype: torch.dtype | None) -> torch.dtype | None:
    """Raise ``TypeError`` if ``dtype`` is given and is not a floating-point dtype."""
    if dtype is None:
        return None
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {dtype!r}")
    if not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point dtype, got {dtype}")
    return dtype


def check_floating_tensor(name: str, x: Any) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a floating-point tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must have a floating-point dtype, got {x.dtype}")
    return x


def check_integer_tensor(name: str, x: Any) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a tensor of an integer dtype (bool excluded)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {x.dtype}")
    return x


def check_ndim(name: str, x: torch.Tensor, ndim: int, axes: str) -> None:
    """Raise ``ValueError`` unless ``x`` has exactly ``ndim`` dimensions (``axes`` names them)."""
    if x.ndim != ndim:
        raise ValueError(
            f"{name} must be {ndim}-D {axes}, got a {x.ndim}-D tensor of shape {tuple(x.shape)}"
        )


def check_last_dim(name: str, x: torch.Tensor, dim: int) -> None:
    """Raise ``ValueError`` unless ``x.shape[-1] == dim``."""
    if x.ndim == 0 or x.shape[-1] != dim:
        raise ValueError(
            f"{name}.shape[-1] must equal dim={dim}, got shape {tuple(x.shape)}"
        )


def check_even(name: str, value: int) -> int:
    """Raise ``ValueError`` unless ``value`` is even (methods that rotate channel pairs)."""
    if value % 2:
        raise ValueError(f"{name} must be even (channels are rotated in pairs), got {value}")
    return value


def check_multiple_of(name: str, value: int, divisor: int, why: str) -> int:
    """Raise ``ValueError`` unless ``value`` is a multiple of ``divisor`` (``why`` says why)."""
    if value % divisor:
        raise ValueError(f"{name} must be divisible by {divisor} ({why}), got {value}")
    return value


def check_keys_cover_queries(q_len: int, k_len: int) -> None:
    """Raise ``ValueError`` if ``k_len < q_len``: queries are the last ``q_len`` key positions."""
    if k_len < q_len:
        raise ValueError(
            f"k_len must be >= q_len (queries are the last q_len of the k_len positions), "
            f"got k_len={k_len} and q_len={q_len}"
        )


def check_finite(name: str, x: torch.Tensor) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or inf. Reads values: not for use in ``forward``."""
    if x.dtype.is_floating_point and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite; got a tensor containing NaN or inf")
