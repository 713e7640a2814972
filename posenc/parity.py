"""Does an engine's RoPE match the model's config? Compare what it produced, and name the bug.

A port of a model to an inference engine reads the config again and implements RoPE again. The
usual mistakes leave the model running and its outputs wrong. :func:`posenc.rope_parity` takes what an
engine produced for some positions, either its cos/sin tables or the queries (or keys) before and
after its rotation, and compares them with what :func:`posenc.rope_report` reads from the config.
When they differ, it recomputes the expected values under each known porting bug and says which
one the engine's numbers match.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from posenc._checks import check_choice, check_finite, check_floating_tensor, check_positive_float
from posenc.rope import apply_rope, half_to_interleaved, interleaved_to_half, rope_inv_freq
from posenc.rope_config import RopeReport, RopeScheme, rope_report

__all__ = ["KNOWN_BUGS", "RopeParityReport", "rope_parity"]

#: The porting bugs :func:`posenc.rope_parity` recognises, by name.
KNOWN_BUGS: dict[str, str] = {
    "permutation": "the other pairing of channels: the engine rotates pairs the checkpoint does not hold "
    "(the Q/K permutation at conversion skipped, or done where it is not needed)",
    "base": "rope_theta defaulted to 10000 instead of the config's value",
    "scaling": "the config's RoPE scaling ignored (plain RoPE at the config's base; for llama3, its rule dropped)",
    "base and scaling": "rope_theta defaulted and the scaling ignored: a config that keeps both in "
    "rope_parameters (transformers 5) read by code that looks for rope_theta and rope_scaling",
    "factor twice": "the attention factor applied twice",
    "factor dropped": "the attention factor left out (or applied somewhere else, such as the softmax "
    "scale; check it there)",
    "denominator": "the partial-rotary exponents divided by the whole head width instead of the rotated width",
}
_LAYOUTS = ("half", "interleaved")
_DEFAULT_BASE = 10000.0


@dataclass
class RopeParityReport:
    """The outcome of :func:`posenc.rope_parity`. ``str(report)`` is the readable form.

    Attributes
    ----------
    compared : str
        ``"cos/sin"`` or ``"rotated"`` (queries or keys before and after the engine's rotation).
    matches : bool
        Whether the engine's values equal posenc's reading of the config within ``tolerance``.
    diagnosis : str or None
        When they do not match: the key of :data:`posenc.parity.KNOWN_BUGS` whose values the engine's match,
        or ``None`` when no known bug explains the difference.
    errors : dict of str to float
        Largest absolute difference between the engine's values and each candidate:
        ``"config"`` (posenc's reading) and every bug that applies to this config.
    tolerance : float
        The largest difference counted as equal.
    positions : int
        Number of positions compared; ``max_position`` is the largest.
    max_position : float
        The largest position compared.
    layout : str
        The pairing the expected values use (``"half"`` or ``"interleaved"``); for cos/sin, the
        way the engine's table repeats its values (``"pairs"`` for one value per pair; the
        config's layout when the table fits both, as at position 0).
    also_within_tolerance : list of str
        Bugs whose values are within tolerance too: these positions cannot tell them apart from
        the diagnosis (compare more, or later, positions).
    notes : list of str
        What could not be checked, and why.
    """

    compared: str
    matches: bool
    diagnosis: str | None
    errors: dict[str, float]
    tolerance: float
    positions: int
    max_position: float
    layout: str
    also_within_tolerance: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        return dict(vars(self), explanation=KNOWN_BUGS.get(self.diagnosis or ""))

    def __str__(self) -> str:
        what = {"cos/sin": "cos/sin tables", "rotated": "rotated queries/keys"}[self.compared]
        if self.matches:
            lines = [f"match: the engine's {what} equal posenc's reading of the config"]
        elif self.diagnosis is not None:
            lines = [f"mismatch, looks like '{self.diagnosis}': {KNOWN_BUGS[self.diagnosis]}"]
        else:
            lines = [f"mismatch: the engine's {what} match neither the config nor a known bug"]
        lines.append(f"  compared {self.positions} position{'s' if self.positions != 1 else ''} (up to "
                     f"{self.max_position:g}), {self.layout} layout, tolerance {self.tolerance:.3g}")
        if self.also_within_tolerance:
            lines.append(f"  cannot be told apart at these positions: {', '.join(self.also_within_tolerance)}")
        lines.append("  largest difference from each candidate:")
        lines += [f"    {name:<18} {error:.3g}" for name, error in self.errors.items()]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


@dataclass
class _Candidate:
    inv_freq: torch.Tensor  # float64 (pairs,)
    attention_factor: float


def _candidates(scheme: RopeScheme, seq_len: int) -> dict[str, _Candidate]:
    """posenc's frequencies for the scheme (``"config"``) and those of every bug that applies."""
    params = dict(scheme.parameters)
    base = params.pop("rope_theta")

    def frequencies(base: float, params: dict[str, Any]) -> _Candidate:
        return _Candidate(*rope_inv_freq(scheme.head_dim, base=base, scaling=params, seq_len=seq_len))

    right = frequencies(base, params)
    found = {"config": right}
    partial = {k: params[k] for k in ("partial_rotary_factor",) if k in params}
    plain = {"rope_type": "default", **partial}
    if base != _DEFAULT_BASE:
        found["base"] = frequencies(_DEFAULT_BASE, params)
    if scheme.rope_type != "default":
        found["scaling"] = frequencies(base, plain)
        if base != _DEFAULT_BASE:
            found["base and scaling"] = frequencies(_DEFAULT_BASE, plain)
    if right.attention_factor != 1.0:
        found["factor twice"] = _Candidate(right.inv_freq, right.attention_factor**2)
        found["factor dropped"] = _Candidate(right.inv_freq, 1.0)
    if scheme.rotary_dim < scheme.head_dim:
        whole = {k: v for k, v in params.items() if k != "partial_rotary_factor"}
        inv_freq, attention = rope_inv_freq(scheme.head_dim, base=base, scaling=whole, seq_len=seq_len)
        found["denominator"] = _Candidate(inv_freq[: scheme.rotary_dim // 2], attention)
    return found


def _cos_sin(candidate: _Candidate, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 cos and sin, one per pair: ``(seq, pairs)``."""
    angles = positions.unsqueeze(-1) * candidate.inv_freq  # (seq, pairs)
    return torch.cos(angles) * candidate.attention_factor, torch.sin(angles) * candidate.attention_factor


def _per_channel(values: torch.Tensor, layout: str) -> torch.Tensor:
    return torch.cat((values, values), -1) if layout == "half" else values.repeat_interleave(2, -1)


def _check_values(name: str, value: Any) -> torch.Tensor:
    check_floating_tensor(name, value)
    check_finite(name, value)
    return value


def _float32_angle_tolerance(max_angle: float, dtype: torch.dtype) -> float:
    """What an engine that computes angles in float32 and rounds cos/sin to ``dtype`` may differ by."""
    float32 = torch.finfo(torch.float32).eps
    return 4.0 * (float32 * (1.0 + max_angle) + torch.finfo(dtype).eps)


def rope_parity(
    config: RopeReport | Mapping[str, Any] | str | os.PathLike[str],
    *,
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
    reference: torch.Tensor | None = None,
    rotated: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    scheme: str | None = None,
    layout: str | None = None,
    tolerance: float | None = None,
) -> RopeParityReport:
    r"""Compare an engine's RoPE with the model's config, and name the known bug it looks like.

    Give either the engine's ``cos`` and ``sin`` tables, or a query (or key) tensor before RoPE
    as the reference model computes it (``reference``, in the checkpoint's channel order) with the
    engine's result of rotating it (``rotated``). The expected values are computed in float64 from
    :func:`posenc.rope_report`'s reading of the config, then again under each bug of
    :data:`posenc.parity.KNOWN_BUGS` that can apply to this config (``"base"`` only if the base is not 10000,
    ``"factor …"`` only if the attention factor is not 1, and so on). The engine matches when
    its largest difference from the config's values is within ``tolerance``; otherwise the
    diagnosis is the bug whose values are within it, if one is.

    Cos/sin tables may hold one value per rotated pair, or one per rotated channel in either
    layout (``cat(f, f)`` or each value twice). They cannot show the Q/K permutation: that needs
    ``reference`` and ``rotated``. The engine's rotated tensor may be in the checkpoint's channel
    order, or in the order of an engine that permuted the weights at conversion to rotate the
    other pairing (llama.cpp holds Llama's queries and keys that way); both are accepted.

    The attention factor (YaRN, LongRoPE) is expected on cos and sin, as transformers applies it.
    An engine that puts it in the softmax scale instead shows ``"factor dropped"``: check its
    softmax scale before calling it a bug.

    Parameters
    ----------
    config : posenc.rope_config.RopeReport, dict, str or os.PathLike
        The model's ``config.json`` (path, directory or parsed dict), or its report.
    cos, sin : torch.Tensor, optional
        The engine's tables, shape ``(..., seq, w)`` with leading axes of size 1 and ``w`` the
        number of rotated pairs or channels.
    reference, rotated : torch.Tensor, optional
        Queries or keys of one head or many, shape ``(..., seq, head_dim)``, before RoPE (from the
        reference model) and after the engine's RoPE (for DeepSeek's MLA, the rope part:
        ``qk_rope_head_dim`` wide).
    positions : torch.Tensor, optional
        The positions of the ``seq`` rows, shape ``(seq,)``, integer or float; default
        ``0 … seq-1``. Dynamic and LongRoPE scaling use ``max(positions) + 1`` as the length.
    scheme : str, optional
        Which of the config's RoPE settings to check (a key of ``rope_report(config).schemes``,
        such as ``"sliding_attention"``); default the global one.
    layout : str, optional
        ``"half"`` or ``"interleaved"``: the pairing of the checkpoint's channels. Default: the
        config's (interleaved for the families posenc knows to use it, half otherwise).
    tolerance : float, optional
        Largest difference counted as equal. Default: what an engine computing angles in float32
        and rounding to the input's dtype can differ by, :math:`4(\epsilon_{32}(1 + \max
        p\,\theta) + \epsilon)`, times the largest input value for ``reference``/``rotated``.

    Returns
    -------
    posenc.parity.RopeParityReport
        ``matches``, ``diagnosis`` and the difference from every candidate.

    Raises
    ------
    TypeError
        If an array is not a floating-point tensor, or ``positions`` is not a real tensor.
    ValueError
        If neither or both kinds of input are given, or one of a pair is missing; if shapes do
        not fit the config (width, head width, number of positions); if values are not finite;
        if ``scheme``, ``layout`` or ``tolerance`` is invalid; or for proportional RoPE (Gemma 4),
        which this comparison does not model. The config's own errors are
        those of :func:`posenc.rope_report`.
    """
    report = config if isinstance(config, RopeReport) else rope_report(config)
    tables, tensors = (cos is not None or sin is not None), (reference is not None or rotated is not None)
    if tables == tensors:
        raise ValueError("give either cos and sin, or reference and rotated (not both, not neither)")
    if tables and (cos is None or sin is None):
        raise ValueError("cos and sin go together: give both")
    if tensors and (reference is None or rotated is None):
        raise ValueError("reference and rotated go together: give both")
    if scheme is None:
        chosen = report.scheme
    elif scheme in report.schemes:
        chosen = report.schemes[scheme]
    else:
        raise ValueError(f"scheme must be one of {sorted(report.schemes)}, got {scheme!r}")
    if chosen.rope_type == "proportional":
        # Its frequency table pads the head with pairs that do not turn; the engines lay those out
        # in ways this comparison does not model.
        raise ValueError("rope_type 'proportional' (Gemma 4) is not supported by rope_parity")
    if layout is None:
        layout = "interleaved" if report.layout.startswith("interleaved") else "half"
    check_choice("layout", layout, _LAYOUTS)
    if tolerance is not None:
        tolerance = check_positive_float("tolerance", tolerance)

    first, second = (cos, sin) if tables else (reference, rotated)
    names = ("cos", "sin") if tables else ("reference", "rotated")
    first, second = _check_values(names[0], first), _check_values(names[1], second)
    if first.shape != second.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape, got "
                         f"{tuple(first.shape)} and {tuple(second.shape)}")
    if first.ndim < 2:
        raise ValueError(f"{names[0]} must have at least 2 dimensions (..., seq, width), got shape "
                         f"{tuple(first.shape)}")
    seq = first.shape[-2]
    positions = _check_positions(positions, seq)
    notes: list[str] = []
    candidates = _candidates(chosen, math.floor(positions.max().item()) + 1)
    max_angle = float(positions.abs().max()) * max(float(c.inv_freq.abs().max()) for c in candidates.values())
    angle_tolerance = _float32_angle_tolerance(max_angle, first.dtype)
    if tables:
        errors, used_layout = _table_errors(cos, sin, chosen, positions, candidates, layout)
        default_tolerance = angle_tolerance * max(1.0, max(c.attention_factor for c in candidates.values()))
        notes.append("cos/sin cannot show the Q/K permutation: compare rotated queries or keys for that")
    else:
        errors = _rotated_errors(reference, rotated, chosen, positions, candidates, layout)
        used_layout = layout
        size = float(reference.abs().max())
        default_tolerance = 2 * angle_tolerance * max(1.0, size) * max(c.attention_factor for c in candidates.values())
    tolerance = default_tolerance if tolerance is None else tolerance
    within = [name for name, error in errors.items() if error <= tolerance]
    matches = "config" in within
    diagnosis = None
    if not matches and within:
        diagnosis = min(within, key=errors.__getitem__)
    others = [name for name in within if name not in ("config", diagnosis)]
    return RopeParityReport(
        compared="cos/sin" if tables else "rotated",
        matches=matches,
        diagnosis=diagnosis,
        errors=errors,
        tolerance=tolerance,
        positions=seq,
        max_position=float(positions.max()),
        layout=used_layout,
        also_within_tolerance=others,
        notes=notes,
    )


def _check_positions(positions: torch.Tensor | None, seq: int) -> torch.Tensor:
    if positions is None:
        return torch.arange(seq, dtype=torch.float64)
    if not isinstance(positions, torch.Tensor) or positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must be a real tensor of shape ({seq},), got {positions!r}")
    if positions.shape != (seq,):
        raise ValueError(f"positions must have shape ({seq},) (one per row of the inputs), got "
                         f"{tuple(positions.shape)}")
    check_finite("positions", positions)
    return positions.to(torch.float64)


def _squeezed(x: torch.Tensor, name: str) -> torch.Tensor:
    """``(1, …, 1, seq, w)`` -> ``(seq, w)``; tables that differ across leading axes are refused."""
    if any(size != 1 for size in x.shape[:-2]):
        raise ValueError(f"{name} of shape {tuple(x.shape)}: leading axes must have size 1 (one table for "
                         f"all rows); give the table of one sequence")
    return x.reshape(x.shape[-2:]).to(torch.float64)  # (seq, w)


def _table_errors(
    cos: torch.Tensor, sin: torch.Tensor, scheme: RopeScheme, positions: torch.Tensor,
    candidates: Mapping[str, _Candidate], layout: str,
) -> tuple[dict[str, float], str]:
    """Each candidate's largest difference from the tables, in the layout that fits them best (the
    config's ``layout`` when both fit equally, as at position 0), and that layout."""
    cos, sin = _squeezed(cos, "cos"), _squeezed(sin, "sin")
    width, pairs = cos.shape[-1], scheme.rotary_dim // 2
    layouts: tuple[str, ...]
    if width == pairs:
        layouts = ("pairs",)
    elif width == 2 * pairs:
        layouts = (layout, *(other for other in _LAYOUTS if other != layout))
    else:
        raise ValueError(f"cos/sin width {width} must be the {pairs} rotated pairs or the "
                         f"{2 * pairs} rotated channels of this config")
    best: tuple[dict[str, float], str] | None = None
    for repeat in layouts:
        errors = {}
        for name, candidate in candidates.items():
            want_cos, want_sin = _cos_sin(candidate, positions)  # (seq, pairs)
            if repeat != "pairs":
                want_cos, want_sin = _per_channel(want_cos, repeat), _per_channel(want_sin, repeat)
            errors[name] = max(float((cos - want_cos).abs().max()), float((sin - want_sin).abs().max()))
        if best is None or min(errors.values()) < min(best[0].values()):  # the layout the table is in
            best = errors, repeat
    assert best is not None
    return best


def _rotated_errors(
    reference: torch.Tensor, rotated: torch.Tensor, scheme: RopeScheme,
    positions: torch.Tensor, candidates: Mapping[str, _Candidate], layout: str,
) -> dict[str, float]:
    if reference.shape[-1] != scheme.head_dim:
        raise ValueError(f"reference and rotated must be {scheme.head_dim} wide (the config's head width), "
                         f"got {reference.shape[-1]}")
    x, y = reference.to(torch.float64), rotated.to(torch.float64)
    width = scheme.rotary_dim
    other = "interleaved" if layout == "half" else "half"
    # The pairing an engine uses after permuting the weights at conversion: the rotated channels in
    # the other order, the rest unchanged.
    to_other = half_to_interleaved if layout == "half" else interleaved_to_half

    def reordered(t: torch.Tensor) -> torch.Tensor:
        return torch.cat((to_other(t[..., :width]), t[..., width:]), -1)

    def rotate(t: torch.Tensor, candidate: _Candidate, pairing: str) -> torch.Tensor:
        cos, sin = _cos_sin(candidate, positions)  # (seq, pairs)
        return apply_rope(t, _per_channel(cos, pairing), _per_channel(sin, pairing), layout=pairing)

    def error(want: torch.Tensor) -> float:
        return float((y - want).abs().max())

    errors = {}
    for name, candidate in candidates.items():
        expected = rotate(x, candidate, layout)
        # As the checkpoint holds the channels, or as an engine that permuted them holds them.
        errors[name] = min(error(expected), error(reordered(expected)))
    right = candidates["config"]
    # The permutation skipped: the engine's pairing on unpermuted channels. Or done where the engine
    # needs none: the checkpoint's pairing on permuted channels.
    errors["permutation"] = min(error(rotate(x, right, other)), error(rotate(reordered(x), right, layout)))
    return errors
