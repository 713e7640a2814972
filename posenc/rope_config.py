"""Reading a Hugging Face ``config.json``: what its RoPE settings mean, and the usual mistakes.

:func:`rope_report` takes the config as a dict (``rope_parameters``, or the legacy
``rope_scaling`` with a top-level ``rope_theta``) and returns a :class:`RopeReport`: the scaling
type, factor, original and target context, which frequency bands are touched, the attention
factor, and warnings for the mistakes users hit. ``python -m posenc rope CONFIG.json`` prints it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from posenc._checks import check_positive_float, check_positive_int
from posenc._frequencies import inverse_frequencies
from posenc._rope_scaling import COMMON_KEYS, SCALING_TYPES, parse_scaling

__all__ = ["RopeReport", "rope_report"]

# Types whose "original context" is original_max_position_embeddings (with a fallback).
_ORIGINAL_CONTEXT_TYPES = ("yarn", "longrope", "llama3")


@dataclass
class RopeReport:
    """What a config's RoPE settings mean. ``str(report)`` is the readable form.

    Attributes
    ----------
    rope_type : str
        The scaling type (``"default"`` when there is none).
    base : float
        ``rope_theta``.
    head_dim, rotary_dim : int
        Head width and the number of channels that rotate.
    factor : float or None
        The scaling factor, where the type has one.
    original_context : int or None
        The context the model was trained on, as the type reads it.
    target_context : int or None
        ``max_position_embeddings``.
    attention_factor : float
        Factor applied to cos and sin.
    pairs : int
        Number of rotated channel pairs.
    unchanged, interpolated, in_between : int
        Pairs whose frequency is kept, divided by the full factor, or changed by less (at the
        target context).
    longer_than_original : int or None
        Pairs whose wavelength exceeds the original context (they never completed a turn in
        training); ``None`` when the config does not state an original context.
    wavelength : torch.Tensor
        Float64 ``(pairs,)``: each pair's wavelength before scaling, in positions.
    slow_down : torch.Tensor
        Float64 ``(pairs,)``: how much slower each pair turns after scaling, at the target
        context.
    warnings : list of str
        Mistakes and surprises found in the config.
    """

    rope_type: str
    base: float
    head_dim: int
    rotary_dim: int
    factor: float | None
    original_context: int | None
    target_context: int | None
    attention_factor: float
    pairs: int
    unchanged: int
    interpolated: int
    in_between: int
    longer_than_original: int | None
    wavelength: torch.Tensor
    slow_down: torch.Tensor
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        def show(value: Any) -> str:
            return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

        lines = [
            f"rope_type          {self.rope_type}",
            f"base (rope_theta)  {int(self.base) if self.base.is_integer() else self.base}",
            f"head_dim           {self.head_dim} ({self.rotary_dim} channels rotate, {self.pairs} pairs)",
            f"factor             {show(self.factor)}",
            f"original context   {show(self.original_context)}",
            f"target context     {show(self.target_context)}",
            f"attention factor   {self.attention_factor:.6g}",
            f"frequency pairs    {self.unchanged} unchanged, {self.interpolated} divided by the factor, "
            f"{self.in_between} in between",
            f"                   {show(self.longer_than_original)} with a wavelength longer than the "
            f"original context",
        ]
        if self.warnings:
            lines.append("warnings")
            lines += [f"  - {w}" for w in self.warnings]
        else:
            lines.append("warnings           none")
        return "\n".join(lines)


def _rope_parameters(config: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The rope parameters as one dict (new or legacy form), ``rope_theta`` included."""
    params = config.get("rope_parameters")
    if params is None and config.get("rope_scaling") is not None:
        params = config["rope_scaling"]
        warnings.append(
            "legacy 'rope_scaling' (transformers 5 reads 'rope_parameters', with rope_theta inside)"
        )
    params = dict(params or {})
    if "rope_theta" not in params and "rope_theta" in config:
        params["rope_theta"] = config["rope_theta"]
    if "type" in params and "rope_type" not in params:
        warnings.append(
            f"legacy key 'type': {params['type']!r} (write 'rope_type'; 'type' is still read as a fallback)"
        )
        params["rope_type"] = params.pop("type")
    elif "type" in params:
        warnings.append("both 'type' and 'rope_type' are set: 'rope_type' wins, 'type' is ignored")
        params.pop("type")
    if "partial_rotary_factor" not in params and "partial_rotary_factor" in config:
        params["partial_rotary_factor"] = config["partial_rotary_factor"]
    if "max_position_embeddings" in config:
        params["max_position_embeddings"] = config["max_position_embeddings"]
    # Phi-3 keeps original_max_position_embeddings at the top level; transformers reads it there.
    if "original_max_position_embeddings" not in params and "original_max_position_embeddings" in config:
        params["original_max_position_embeddings"] = config["original_max_position_embeddings"]
    return params


def _missing_original_warning(rope_type: str, target: int | None, params: Mapping[str, Any]) -> str:
    """What a missing ``original_max_position_embeddings`` does to a yarn, llama3 or longrope config."""
    head = (f"no 'original_max_position_embeddings': {rope_type} takes max_position_embeddings "
            f"({target}) as the trained context; ")
    factor = params.get("factor")
    if rope_type == "longrope":
        if "attention_factor" in params:
            attention = f"the attention factor is the one given ({params['attention_factor']:g})"
        elif factor is not None:
            attention = f"the attention factor follows factor {factor:g}"
        else:
            attention = "the attention factor is 1 (no extension)"
        return head + f"long_factor applies only to sequences longer than {target}, and {attention}"
    if factor is None:
        return head + "with no 'factor' either, the factor is their ratio, 1: nothing is scaled"
    return head + (f"the frequencies are still scaled by the factor, as if a model trained on "
                   f"{target} positions were extended {factor:g}x beyond it")


def rope_report(config: Mapping[str, Any] | str | os.PathLike[str]) -> RopeReport:
    r"""Explain the RoPE settings of a Hugging Face model config.

    Reads ``rope_parameters`` (transformers 5) or the legacy ``rope_scaling`` with a top-level
    ``rope_theta``, plus ``max_position_embeddings``, ``head_dim`` (or ``hidden_size /
    num_attention_heads``) and ``partial_rotary_factor``. The frequencies are those of
    :func:`posenc.rope_inv_freq` at the target context. Warnings cover:

    * the legacy ``rope_scaling`` dict and its ``"type"`` key;
    * keys the scaling type does not use (they are left out of the computation);
    * a missing ``original_max_position_embeddings`` (YaRN, LongRoPE, Llama 3 then take
      ``max_position_embeddings`` as the trained context; a ``factor``, if given, still applies);
    * a ``factor`` that disagrees with ``max_position_embeddings / original_max_position_embeddings``;
    * ``dynamic``, which reads ``max_position_embeddings`` as the *trained* context, so raising it
      delays the scaling; and ``linear``, where ``max_position_embeddings`` changes nothing.

    Parameters
    ----------
    config : dict, str or os.PathLike
        The parsed ``config.json``, or the path of one.

    Returns
    -------
    posenc.rope_config.RopeReport
        ``str()`` of it is a readable report.

    Raises
    ------
    OSError
        If ``config`` is a path that cannot be read.
    TypeError
        If ``config`` is not a dict or a path (or the file holds no JSON object), or a value has
        the wrong type.
    ValueError
        If the file is not JSON, or the config has no usable head width, base or scaling (message
        from :func:`posenc.rope_inv_freq`'s checks).

    References
    ----------
    Hugging Face transformers, ``modeling_rope_utils.py`` (``standardize_rope_params`` and the
    ``_validate_*_rope_parameters`` checks), whose reading of a config this reproduces.
    """
    if isinstance(config, (str, os.PathLike)):
        with open(config, encoding="utf-8") as file:
            config = json.load(file)  # json.JSONDecodeError is a ValueError
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict (a parsed config.json) or a path, got {type(config).__name__}")
    warnings: list[str] = []
    params = _rope_parameters(config, warnings)
    rope_type = params.get("rope_type", "default")
    head_dim = config.get("head_dim")
    if head_dim is None:
        if "hidden_size" not in config or "num_attention_heads" not in config:
            raise ValueError("config needs 'head_dim', or 'hidden_size' and 'num_attention_heads'")
        # transformers' rule, floor division included.
        head_dim = (check_positive_int("hidden_size", config["hidden_size"])
                    // check_positive_int("num_attention_heads", config["num_attention_heads"]))
    head_dim = check_positive_int("head_dim", head_dim)
    base = check_positive_float("rope_theta", params.get("rope_theta", 10000.0))

    kind = SCALING_TYPES.get(rope_type)
    if kind is not None:
        unknown = sorted(set(params) - COMMON_KEYS - kind.keys)
        if unknown:
            warnings.append(f"keys that rope_type={rope_type!r} does not use (ignored here): {unknown}")
            params = {k: v for k, v in params.items() if k not in unknown}
    target = params.get("max_position_embeddings")
    if rope_type in _ORIGINAL_CONTEXT_TYPES:
        original = params.get("original_max_position_embeddings")
        if original is None:
            warnings.append(_missing_original_warning(rope_type, target, params))
        elif target is not None and params.get("factor") is not None:
            ratio = target / original
            if not math.isclose(ratio, params["factor"], rel_tol=1e-6):
                warnings.append(
                    f"factor {params['factor']:g} disagrees with max_position_embeddings / "
                    f"original_max_position_embeddings = {target} / {original} = {ratio:g}; "
                    f"the frequencies use the factor"
                )
    elif rope_type == "dynamic":
        original = target
        warnings.append(
            f"dynamic reads max_position_embeddings ({target}) as the trained context: frequencies "
            f"change only for sequences longer than that; raising it to the target length delays "
            f"the scaling"
        )
    elif rope_type == "linear":
        original = None
        warnings.append(
            "linear: max_position_embeddings does not enter the frequencies, so raising it does "
            "not scale twice; the factor alone divides every frequency"
        )
    else:
        original = None

    scaling = parse_scaling(head_dim, base, params)  # raises for an invalid config
    if original is None and rope_type in _ORIGINAL_CONTEXT_TYPES:
        original = target
    factor = getattr(scaling, "factor", None)
    seq_len = target if target is not None else (
        int(factor * original) if factor is not None and original is not None else None
    )
    inv_freq = scaling.inv_freq(seq_len, None)
    unscaled = inverse_frequencies(scaling.rotary_dim, scaling.base)
    slow_down = unscaled / inv_freq
    unchanged = int(torch.isclose(slow_down, torch.ones_like(slow_down), rtol=1e-12, atol=0).sum())
    full = 0
    if factor is not None and factor != 1.0:
        full = int(torch.isclose(slow_down, torch.full_like(slow_down, factor), rtol=1e-9, atol=0).sum())
    wavelength = 2 * math.pi / unscaled
    longer = int((wavelength > original).sum()) if original is not None else None
    return RopeReport(
        rope_type=rope_type,
        base=base,
        head_dim=head_dim,
        rotary_dim=scaling.rotary_dim,
        factor=factor,
        original_context=original,
        target_context=target,
        attention_factor=scaling.attention_factor,
        pairs=slow_down.numel(),
        unchanged=unchanged,
        interpolated=full,
        in_between=slow_down.numel() - unchanged - full,
        longer_than_original=longer,
        wavelength=wavelength,
        slow_down=slow_down,
        warnings=warnings,
    )
