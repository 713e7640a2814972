"""Reading a Hugging Face ``config.json``: what its RoPE settings mean, layer by layer.

:func:`rope_report` takes a config (a dict, a ``config.json`` path or a model directory) and
returns a :class:`RopeReport`: for each RoPE setting of the model (one, or one per layer type as
in Gemma 3), the scaling type, base, rotated width, factor, original and target context, which
frequency bands are touched and the attention factor; the softmax scale; which layers use which
setting (NoPE layers included); the values that came from defaults; notes; and warnings for real
mistakes only. ``python -m posenc rope PATH [--json]`` prints it.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from posenc._checks import check_positive_float
from posenc._config_reading import ModelRope, read_config
from posenc._rope_scaling import COMMON_KEYS, SCALING_TYPES, RopeScaling, parse_scaling
from posenc.mla import _softmax_mscale, mla_softmax_scale

__all__ = ["LayerGroup", "RopeReport", "RopeScheme", "rope_report"]

# Keys that a model's own code reads and transformers does not: not typos, so notes.
_KEYS_OF_OTHER_CODE = {
    "finetuned": "read by the YaRN authors' own modelling code (NousResearch's Yarn-Llama and "
    "Yarn-Mistral)",
}

# Types whose "original context" is original_max_position_embeddings (with a fallback).
_ORIGINAL_CONTEXT_TYPES = ("yarn", "longrope", "llama3")


@dataclass(frozen=True)
class RopeScheme:
    """One RoPE setting of a model and what it does to the frequencies.

    Attributes
    ----------
    name : str
        The layer type it serves (``"full_attention"``, ``"sliding_attention"``…), or ``"all"``
        when one setting serves every RoPE layer.
    rope_type : str
        The scaling type (``"default"`` when there is none).
    base : float
        ``rope_theta`` (after any family multiplier).
    head_dim : int
        The head width the frequencies are computed for (DeepSeek's MLA: the rope part,
        ``qk_rope_head_dim``).
    rotary_dim : int
        Number of channels that rotate.
    factor : float or None
        The scaling factor, where the type has one.
    original_context, target_context : int or None
        The context the model was trained on, as the type reads it, and
        ``max_position_embeddings``.
    attention_factor : float
        Factor applied to cos and sin.
    inv_freq : torch.Tensor
        Float64 ``(rotary_dim // 2,)``: the inverse frequencies at the target context (for
        proportional RoPE one per pair of the whole head, 0 for the pairs that do not turn).
    pairs, unchanged, interpolated, in_between : int
        Rotated pairs, and those whose frequency is kept, divided by the full factor, or changed
        by less (at the target context).
    longer_than_original : int or None
        Pairs whose wavelength exceeds the original context; ``None`` when no original context
        is stated.
    wavelength, slow_down : torch.Tensor
        Float64 ``(pairs,)``: each pair's wavelength before scaling, in positions, and how much
        slower it turns after scaling.
    parameters : dict
        The ``rope_parameters`` as read (``rope_theta`` and the model-level keys filled in).
    """

    name: str
    rope_type: str
    base: float
    head_dim: int
    rotary_dim: int
    factor: float | None
    original_context: int | None
    target_context: int | None
    attention_factor: float
    inv_freq: torch.Tensor
    pairs: int
    unchanged: int
    interpolated: int
    in_between: int
    longer_than_original: int | None
    wavelength: torch.Tensor
    slow_down: torch.Tensor
    parameters: dict[str, Any]


@dataclass(frozen=True)
class LayerGroup:
    """Layers that share an attention kind and a RoPE setting.

    ``scheme`` is the name of a :class:`~posenc.rope_config.RopeScheme` in the report, or ``None`` for layers
    without RoPE (NoPE). ``window`` is the sliding window or attention chunk, in positions.
    """

    layers: tuple[int, ...]
    attention: str
    scheme: str | None
    window: int | None


@dataclass
class RopeReport:
    """What a config's RoPE settings mean. ``str(report)`` is the readable form,
    :meth:`~posenc.rope_config.RopeReport.to_dict` the machine-readable one.

    Attributes
    ----------
    source : str or None
        The file read (``None`` for a dict).
    model_type : str or None
        The language model's ``model_type``.
    read_from : str or None
        ``"text_config"`` when the settings were read from a nested language-model config.
    head_dim, query_width : int
        Head width, and the query/key width that the softmax scale divides by (they differ in
        DeepSeek's MLA, where the query is ``qk_nope_head_dim + qk_rope_head_dim`` wide).
    softmax_scale : float
        The factor applied to :math:`q \\cdot k` before the softmax.
    softmax_scale_rule : str
        How it was computed.
    layout : str
        Which channels form a rotated pair in the model's code.
    schemes : dict of str to posenc.rope_config.RopeScheme
        The model's RoPE settings, by name.
    layers : list of posenc.rope_config.LayerGroup
        Which layers use which setting; one group when every layer is the same.
    mrope_section : tuple of int or None
        M-RoPE's (time, height, width) frequency sections, for Qwen-VL models.
    mrope_interleaved : bool
        Whether those sections are interleaved (Qwen3-VL) rather than blocked (Qwen2-VL).
    temperature_tuning : dict or None
        Llama 4's attention-temperature settings for its NoPE layers.
    towers : dict of str to str
        RoPE settings of vision or audio towers, listed but not analysed.
    defaults : dict
        Values the config omits, filled in with the model family's defaults.
    notes, warnings : list of str
        Explanations, and mistakes (a warning means the config is likely read differently
        from what its makers meant).
    """

    source: str | None
    model_type: str | None
    read_from: str | None
    head_dim: int
    query_width: int
    softmax_scale: float
    softmax_scale_rule: str
    layout: str
    schemes: dict[str, RopeScheme]
    layers: list[LayerGroup]
    mrope_section: tuple[int, ...] | None
    mrope_interleaved: bool
    temperature_tuning: dict[str, Any] | None
    towers: dict[str, str]
    defaults: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def scheme(self) -> RopeScheme:
        """The setting of the global (full-attention) layers, or the only one."""
        return _global_scheme(self.schemes)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready values (tensors become lists of floats)."""

        def plain(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return value.tolist()
            if isinstance(value, Mapping):
                return {str(k): plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            return value

        return {
            "source": self.source, "model_type": self.model_type, "read_from": self.read_from,
            "head_dim": self.head_dim, "query_width": self.query_width,
            "softmax_scale": self.softmax_scale, "softmax_scale_rule": self.softmax_scale_rule,
            "layout": self.layout,
            "schemes": {name: plain(vars(s)) for name, s in self.schemes.items()},
            "layers": [plain(vars(g)) for g in self.layers],
            "mrope_section": plain(self.mrope_section), "mrope_interleaved": self.mrope_interleaved,
            "temperature_tuning": self.temperature_tuning, "towers": self.towers,
            "defaults": self.defaults, "notes": self.notes, "warnings": self.warnings,
        }

    def __str__(self) -> str:
        lines = []
        if self.model_type is not None:
            where = " (read under text_config)" if self.read_from else ""
            lines.append(f"model_type         {self.model_type}{where}")
        width = "" if self.query_width == self.head_dim else f" (query width {self.query_width})"
        lines.append(f"head_dim           {self.head_dim}{width}")
        lines.append(f"softmax scale      {self.softmax_scale:.6g} = {self.softmax_scale_rule}")
        lines.append(f"layout             {self.layout}")
        if self.mrope_section is not None:
            kind = "interleaved" if self.mrope_interleaved else "blocked"
            lines.append(f"M-RoPE sections    {list(self.mrope_section)} (time, height, width; {kind})")
        for scheme in self.schemes.values():
            if len(self.schemes) > 1:
                lines.append(f"setting {scheme.name}")
            lines += [("  " if len(self.schemes) > 1 else "") + line for line in _scheme_lines(scheme)]
        if len(self.layers) > 1:
            lines.append("layers")
            lines += _layer_table(self.layers, self.schemes)
        if self.temperature_tuning is not None:
            settings = ", ".join(f"{k}={v}" for k, v in self.temperature_tuning.items())
            lines.append(f"NoPE temperature   {settings}")
        for name, summary in self.towers.items():
            lines += _wrapped(f"tower {name}: {summary} (not analysed)", "", "  ")
        if self.defaults:
            shown = ", ".join(f"{k} = {_number(v)}" for k, v in self.defaults.items())
            lines += _wrapped(f"defaults           {shown} (not in the config; the family's defaults)",
                              "", " " * 19)
        if self.notes:
            lines.append("notes")
            for note in self.notes:
                lines += _wrapped(note, "  - ", "    ")
        if self.warnings:
            lines.append("warnings")
            for warning in self.warnings:
                lines += _wrapped(warning, "  - ", "    ")
        else:
            lines.append("warnings           none")
        return "\n".join(lines)


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    """``text`` in lines of at most 80 characters (a terminal's, and the site's output blocks)."""
    return textwrap.wrap(text, 80, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)


def _global_scheme(schemes: Mapping[str, RopeScheme]) -> RopeScheme:
    for name in ("all", "full_attention"):
        if name in schemes:
            return schemes[name]
    return next(iter(schemes.values()))


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    return str(value)


def _scheme_lines(s: RopeScheme) -> list[str]:
    return [
        f"rope_type          {s.rope_type}",
        f"base (rope_theta)  {_number(s.base)}",
        f"rotated channels   {s.rotary_dim} ({s.pairs} pairs)",
        f"factor             {_number(s.factor)}",
        f"original context   {_number(s.original_context)}",
        f"target context     {_number(s.target_context)}",
        f"attention factor   {s.attention_factor:.6g}",
        f"frequency pairs    {s.unchanged} unchanged, {s.interpolated} divided by the factor, "
        f"{s.in_between} in between",
        f"                   {_number(s.longer_than_original)} with a wavelength longer than the "
        f"original context",
    ]


def _layer_list(layers: tuple[int, ...], total: int) -> str:
    if len(layers) <= 8:
        return ", ".join(map(str, layers))
    return f"{len(layers)} of {total}"


def _layer_table(groups: list[LayerGroup], schemes: Mapping[str, RopeScheme]) -> list[str]:
    total = sum(len(g.layers) for g in groups)
    rows = [("layers", "attention", "window", "RoPE", "base", "scaling", "rotated")]
    for g in groups:
        scheme = None if g.scheme is None else schemes[g.scheme]
        rows.append((
            _layer_list(g.layers, total), g.attention, _number(g.window),
            "none (NoPE)" if g.scheme is None else g.scheme,
            "-" if scheme is None else _number(scheme.base),
            "-" if scheme is None else scheme.rope_type,
            "0" if scheme is None else str(scheme.rotary_dim),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _scheme(name: str, head_dim: int, params: dict[str, Any], warnings: list[str],
            notes: list[str]) -> RopeScheme:
    """Frequencies and their analysis for one ``rope_parameters`` dict."""
    params = dict(params)
    rope_type = params["rope_type"]
    label = "" if name == "all" else f"{name}: "
    kind = SCALING_TYPES.get(rope_type)
    for key in sorted(set(params) & set(_KEYS_OF_OTHER_CODE)):
        notes.append(f"{label}'{key}': {_KEYS_OF_OTHER_CODE[key]}; transformers does not read it")
        params.pop(key)
    if kind is not None:
        unknown = sorted(set(params) - COMMON_KEYS - kind.keys)
        if unknown:
            warnings.append(f"{label}keys that rope_type={rope_type!r} does not use (ignored here): {unknown}")
            params = {k: v for k, v in params.items() if k not in unknown}
    target = params.get("max_position_embeddings")
    factor_given = params.get("factor")
    original = params.get("original_max_position_embeddings")
    if rope_type in _ORIGINAL_CONTEXT_TYPES:
        if original is None:
            warnings.append(label + _missing_original_warning(rope_type, target, params))
        elif rope_type == "yarn" and target is not None and factor_given is not None:
            ratio = target / original
            if not math.isclose(ratio, factor_given, rel_tol=1e-6):
                notes.append(
                    f"{label}yarn factor {factor_given:g}, while max_position_embeddings / "
                    f"original_max_position_embeddings = {target} / {original} = {ratio:g}; the "
                    f"frequencies and the attention factor use the factor")
    elif rope_type == "dynamic":
        original = target
        notes.append(f"{label}dynamic reads max_position_embeddings ({target}) as the trained context: "
                     f"frequencies change only for sequences longer than that")
    elif rope_type == "linear":
        notes.append(f"{label}linear: max_position_embeddings does not enter the frequencies; the factor "
                     f"alone divides every frequency")
    base = check_positive_float("rope_theta" if name == "all" else f"{name} rope_theta", params.pop("rope_theta"))
    scaling: RopeScaling = parse_scaling(head_dim, base, params)  # raises for an invalid config
    if original is None and rope_type in _ORIGINAL_CONTEXT_TYPES:
        original = target
    factor = getattr(scaling, "factor", None)
    seq_len = target if target is not None else (
        int(factor * original) if factor is not None and original is not None else None
    )
    inv_freq = scaling.inv_freq(seq_len, None)
    # Proportional RoPE pads the head with pairs of frequency 0: they do not turn, and are left
    # out of the analysis.
    unscaled = scaling.unscaled_inv_freq()
    turning = unscaled > 0
    if not bool(turning.all()):
        notes.append(f"{label}{int(turning.sum())} of {turning.numel()} pairs turn, (i, i + {head_dim // 2}) for "
                     f"i < {int(turning.sum())}; their exponents divide by the head width {head_dim}, "
                     f"not by the rotated width")
    unscaled = unscaled[turning]
    slow_down = unscaled / inv_freq[turning]
    unchanged = int(torch.isclose(slow_down, torch.ones_like(slow_down), rtol=1e-12, atol=0).sum())
    full = 0
    if factor is not None and factor != 1.0:
        full = int(torch.isclose(slow_down, torch.full_like(slow_down, factor), rtol=1e-9, atol=0).sum())
    wavelength = 2 * math.pi / unscaled
    return RopeScheme(
        name=name,
        rope_type=rope_type,
        base=float(base),
        head_dim=head_dim,
        rotary_dim=2 * int(turning.sum()),
        factor=factor,
        original_context=original,
        target_context=target,
        attention_factor=scaling.attention_factor,
        inv_freq=inv_freq,
        pairs=slow_down.numel(),
        unchanged=unchanged,
        interpolated=full,
        in_between=slow_down.numel() - unchanged - full,
        longer_than_original=int((wavelength > original).sum()) if original is not None else None,
        wavelength=wavelength,
        slow_down=slow_down,
        parameters={**params, "rope_theta": base},
    )


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


def _softmax_scale(model: ModelRope, main: RopeScheme) -> tuple[float, str]:
    """The factor on q·k, and how it was computed (the model family's rule)."""
    width = model.query_width
    if model.softmax_scale_rule == "one":
        return 1.0, "1 (queries and keys are RMS-normalised instead)"
    if model.softmax_scale_rule == "query_pre_attn_scalar":
        scalar = model.query_pre_attn_scalar
        return float(scalar) ** -0.5, f"query_pre_attn_scalar ** -0.5 ({scalar})"
    if model.softmax_scale_rule == "mla":
        params = main.parameters
        scale = mla_softmax_scale(width, scaling=params)
        if params.get("mscale_all_dim"):
            m = _softmax_mscale(params)
            return scale, (
                f"(qk_nope_head_dim + qk_rope_head_dim) ** -0.5 x mscale**2 ({width}, mscale {m:.6g} "
                f"from factor {main.factor:g} and mscale_all_dim {params['mscale_all_dim']:g})")
        return scale, f"(qk_nope_head_dim + qk_rope_head_dim) ** -0.5 ({width})"
    return width ** -0.5, f"head_dim ** -0.5 ({width})"


def _layer_groups(model: ModelRope) -> list[LayerGroup]:
    """Layers grouped by (attention kind, RoPE setting, window)."""
    n = model.num_layers
    if n is None:
        return [LayerGroup(layers=(), attention="full_attention", scheme=next(iter(model.parameters)),
                           window=None)]
    kinds = model.layer_types or ["full_attention"] * n
    rope = model.rope_layers or [True] * n
    groups: dict[tuple[str, str | None, int | None], list[int]] = {}
    for i in range(n):
        scheme = None
        if rope[i]:
            # A layer kind without a setting of its own uses the model's one setting ("all").
            scheme = kinds[i] if kinds[i] in model.parameters else next(iter(model.parameters))
        window = {"sliding_attention": model.sliding_window,
                  "chunked_attention": model.attention_chunk_size}.get(kinds[i])
        groups.setdefault((kinds[i], scheme, window), []).append(i)
    return [LayerGroup(tuple(layers), kind, scheme, window) for (kind, scheme, window), layers in groups.items()]


def rope_report(config: Mapping[str, Any] | str | os.PathLike[str]) -> RopeReport:
    r"""Explain the RoPE settings of a Hugging Face model config.

    Reads the config as transformers 5 does: ``rope_parameters`` (one dict, or one per layer
    type) or the legacy ``rope_scaling`` beside ``rope_theta``; a multimodal model's
    ``text_config``; and the model family's own keys and defaults (GPT-NeoX's ``rotary_pct``,
    DeepSeek's ``qk_rope_head_dim``, Gemma 3's ``rope_local_base_freq`` and layer pattern,
    Llama 4's NoPE layers, Qwen-VL's ``mrope_section``…; the table is
    ``posenc/data/model_families.json``). The frequencies are those of
    :func:`posenc.rope_inv_freq` at the target context.

    Warnings are for mistakes only: a missing ``original_max_position_embeddings`` for YaRN,
    LongRoPE or Llama 3 (the target context is then taken as the trained one); a missing
    ``rope_theta`` under the Llama 3 rule (the default 10000 replaces 500000); keys the scaling
    type does not use, and
    top-level keys that look like a misspelt RoPE key; two spellings of one value that
    disagree; and a family key that transformers does not read while its default differs.
    Legacy spellings and how each type reads its lengths are notes.

    Parameters
    ----------
    config : dict, str or os.PathLike
        The parsed ``config.json``, its path, or a model directory holding it.

    Returns
    -------
    posenc.rope_config.RopeReport
        ``str()`` of it is a readable report, ``to_dict()`` a JSON-ready one.

    Raises
    ------
    OSError
        If ``config`` is a path that cannot be read.
    TypeError
        If ``config`` is not a dict or a path (or the file holds no JSON object), or a value has
        the wrong type.
    ValueError
        If the file is not JSON, the config has no RoPE settings, or a head width, base or
        scaling is invalid (message from :func:`posenc.rope_inv_freq`'s checks).

    References
    ----------
    Hugging Face transformers 5.24, ``modeling_rope_utils.py`` (``standardize_rope_params``, the
    ``_compute_*_parameters`` functions and the ``_validate_*_rope_parameters`` checks) and the
    models' configuration classes, whose reading of a config this reproduces.
    """
    model = read_config(config)
    schemes = {
        name: _scheme(name, model.scheme_head_dims.get(name, model.rotary_head_dim), params, model.warnings,
                      model.notes)
        for name, params in model.parameters.items()
    }
    main = _global_scheme(schemes)
    softmax_scale, softmax_scale_rule = _softmax_scale(model, main)
    if model.mrope_section is not None and sum(model.mrope_section) != main.pairs:
        model.warnings.append(f"mrope_section {list(model.mrope_section)} sums to {sum(model.mrope_section)}, "
                              f"not to the {main.pairs} rotated pairs")
    return RopeReport(
        source=model.source,
        model_type=model.model_type,
        read_from=model.read_from,
        head_dim=model.head_dim,
        query_width=model.query_width,
        softmax_scale=softmax_scale,
        softmax_scale_rule=softmax_scale_rule,
        layout=model.layout,
        schemes=schemes,
        layers=_layer_groups(model),
        mrope_section=model.mrope_section,
        mrope_interleaved=model.mrope_interleaved,
        temperature_tuning=model.temperature_tuning,
        towers=model.towers,
        defaults=model.defaults,
        notes=model.notes,
        warnings=model.warnings,
    )
