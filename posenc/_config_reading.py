"""Reading a Hugging Face ``config.json`` into RoPE settings, the way transformers reads it.

:func:`read_config` turns a config (a dict, a ``config.json`` path or a model directory) into a
:class:`ModelRope`: the head width, the layers and their attention kinds (and which of them rotate),
one ``rope_parameters`` dict per RoPE setting, and the notes and warnings met on the way. The
family-specific parts (defaults, aliases, layer-type rules) come from
``posenc/data/model_families.json``; :mod:`posenc.rope_config` computes the frequencies.

Warnings are for mistakes only: a config read differently from what its makers meant, a default
that replaces a missing value with a surprising one, an unknown or misspelt key, two spellings
that disagree. Legacy spellings and explanations are notes.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from posenc._checks import check_positive_int

__all__ = ["ModelRope", "load_config", "model_families", "read_config"]

# Layer-type names under which transformers 5 nests ``rope_parameters``.
LAYER_TYPE_NAMES = ("full_attention", "sliding_attention", "chunked_attention")
# Keys whose misspelling is worth a warning (top level of a config).
_ROPE_KEYS = (
    "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "head_dim",
    "max_position_embeddings", "original_max_position_embeddings", "rope_local_base_freq",
    "sliding_window", "layer_types", "no_rope_layers", "qk_rope_head_dim", "qk_nope_head_dim",
)
# Layer types that mix tokens without softmax attention, and so without RoPE (Qwen3.5's
# Gated DeltaNet layers, hybrid Mamba models).
_LAYERS_WITHOUT_ATTENTION = ("linear_attention", "mamba")
# Real keys that come close to one of those (DeepSeek's value-head width).
_NOT_MISSPELT = frozenset({"v_head_dim"})


@cache
def model_families() -> dict[str, dict[str, Any]]:
    """The family table (``posenc/data/model_families.json``), keyed by ``model_type``."""
    text = resources.files("posenc").joinpath("data/model_families.json").read_text(encoding="utf-8")
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


@dataclass
class ModelRope:
    """A config's RoPE settings, read as transformers reads them (before any frequency is computed).

    ``parameters`` maps a setting's name (a layer type, or ``"all"`` when one setting serves
    every RoPE layer) to its ``rope_parameters`` dict, ``rope_theta`` included.
    ``layer_types[i]`` is layer ``i``'s attention kind and ``rope_layers[i]`` whether it rotates.
    ``scheme_head_dims`` gives the head width of settings whose layers have their own (Gemma 4's
    global layers); the others use ``rotary_head_dim``.
    """

    source: str | None
    model_type: str | None
    read_from: str | None
    head_dim: int
    query_width: int
    rotary_head_dim: int
    scheme_head_dims: dict[str, int]
    max_position_embeddings: int | None
    num_layers: int | None
    parameters: dict[str, dict[str, Any]]
    layer_types: list[str] | None
    rope_layers: list[bool] | None
    sliding_window: int | None
    attention_chunk_size: int | None
    softmax_scale_rule: str
    query_pre_attn_scalar: float | None
    layout: str
    mrope_section: tuple[int, ...] | None
    mrope_interleaved: bool
    temperature_tuning: dict[str, Any] | None
    towers: dict[str, str]
    defaults: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[Mapping[str, Any], str | None]:
    """The config as a dict, and the file it came from (``None`` for a dict)."""
    if isinstance(config, Mapping):
        return config, None
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config must be a dict (a parsed config.json), a path or a model directory, "
                        f"got {type(config).__name__}")
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    with open(path, encoding="utf-8") as file:
        try:
            loaded = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not JSON ({error})") from None
    if not isinstance(loaded, Mapping):
        raise TypeError(f"{path} holds a JSON {type(loaded).__name__}, not an object (config must be a dict)")
    return loaded, str(path)


class _Reader:
    """Reads one (text) config; collects what came from defaults, notes and warnings."""

    def __init__(self, config: Mapping[str, Any], family: Mapping[str, Any]) -> None:
        self.config = config
        self.family = family
        self.defaults: dict[str, Any] = {}
        self.notes: list[str] = []
        self.warnings: list[str] = []

    def get(self, key: str, fallback: Any = None) -> Any:
        """The config's value, else the family default (recorded), else ``fallback``."""
        value = self.config.get(key)
        if value is not None:
            return value
        family_defaults = self.family.get("defaults", {})
        if key in family_defaults:
            self.defaults[key] = family_defaults[key]
            return family_defaults[key]
        return fallback


def _tower_summary(name: str, tower: Mapping[str, Any]) -> str | None:
    """A one-line summary of a vision or audio tower's own RoPE settings, if it has any."""
    keys = ("rope_theta", "rope_parameters", "rope_scaling", "rope_type")
    found = {k: tower[k] for k in keys if tower.get(k) is not None}
    if not found:
        return None
    kind = tower.get("model_type", name)
    return f"{kind}: " + ", ".join(f"{k}={v!r}" for k, v in found.items())


def _text_part(config: Mapping[str, Any], notes: list[str]) -> tuple[Mapping[str, Any], str | None, dict[str, str]]:
    """The language model's config (``text_config`` where there is one) and the towers' RoPE."""
    towers = {}
    for key, value in config.items():
        if key != "text_config" and key.endswith("_config") and isinstance(value, Mapping):
            summary = _tower_summary(key, value)
            if summary is not None:
                towers[key] = summary
    text = config.get("text_config")
    outer = model_families().get(str(config.get("model_type")), {})
    if not isinstance(text, Mapping):
        if "text_model_type" not in outer:
            return config, None, towers
        # An older multimodal config keeps the language model's keys at the top level.
        notes.append(f"the language model's settings are at the top level (read as model_type "
                     f"{outer['text_model_type']!r})")
        return {**config, "model_type": outer["text_model_type"]}, None, towers
    text = dict(text)
    if "model_type" not in text and "text_model_type" in outer:
        text["model_type"] = outer["text_model_type"]
    notes.append(f"read the language model's settings under 'text_config' "
                 f"(model_type {text.get('model_type')!r} inside {config.get('model_type')!r})")
    return text, "text_config", towers


def _misspelt_keys(config: Mapping[str, Any], known: set[str]) -> list[str]:
    """Top-level keys that look like a misspelling of a RoPE key."""
    found = []
    for key in config:
        if key in known or key in _ROPE_KEYS or key in _NOT_MISSPELT:
            continue
        close = difflib.get_close_matches(key, _ROPE_KEYS, n=1, cutoff=0.9)
        if close:
            found.append(f"unknown key {key!r}: did you mean {close[0]!r}? (it is not read)")
    return found


def _head_widths(reader: _Reader) -> tuple[int, int, int]:
    """(head_dim, query width for the softmax scale, head width that RoPE's frequencies use)."""
    config = reader.config
    if reader.family.get("softmax_scale") == "mla":
        rope = check_positive_int("qk_rope_head_dim", reader.get("qk_rope_head_dim"))
        nope = reader.get("qk_nope_head_dim")
        nope = 0 if nope is None else int(nope)
        return rope + nope, rope + nope, rope
    head_dim = config.get(reader.family.get("head_dim_key", "head_dim"))
    if head_dim is None:
        # A family whose config class fixes head_dim (Gemma: 256) uses it; otherwise transformers'
        # rule, floor division included.
        head_dim = reader.get("head_dim")
        if head_dim is None and "hidden_size" in config and "num_attention_heads" in config:
            head_dim = (check_positive_int("hidden_size", config["hidden_size"])
                        // check_positive_int("num_attention_heads", config["num_attention_heads"]))
        if head_dim is None:
            raise ValueError("config needs 'head_dim', or 'hidden_size' and 'num_attention_heads'"
                             + (" (its language model may be under 'text_config')" if "vision_config" in config else ""))
    head_dim = check_positive_int("head_dim", head_dim)
    return head_dim, head_dim, head_dim


def _legacy_parameters(reader: _Reader) -> dict[str, Any]:
    """One ``rope_parameters`` dict from the legacy ``rope_scaling`` (or the new key, unnested)."""
    config = reader.config
    new, legacy = config.get("rope_parameters"), config.get("rope_scaling")
    if new is not None and legacy is not None and dict(new) != dict(legacy):
        reader.warnings.append(
            f"both 'rope_parameters' and 'rope_scaling' are set and differ; transformers 5 reads "
            f"'rope_scaling' and ignores 'rope_parameters': {dict(legacy)} against {dict(new)}")
        new = None
    if legacy is not None and new is None:
        if not isinstance(legacy, Mapping):
            raise TypeError(f"'rope_scaling' must be a dict or null, got {legacy!r}")
        reader.notes.append("legacy 'rope_scaling' (transformers 5 writes 'rope_parameters'; both are read)")
    params = new if new is not None else legacy
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"'rope_parameters' must be a dict or null, got {params!r}")
    params = dict(params or {})
    if "type" in params:
        kind = params.pop("type")
        if "rope_type" not in params:
            reader.notes.append(f"legacy key 'type': {kind!r} (read as 'rope_type')")
            params["rope_type"] = kind
        elif params["rope_type"] != kind:
            reader.warnings.append(
                f"'type' ({kind!r}) and 'rope_type' ({params['rope_type']!r}) disagree; 'rope_type' "
                f"wins and 'type' is ignored")
    return params


def _set_theta(reader: _Reader, params: dict[str, Any], top_key: str) -> None:
    """``rope_theta`` inside ``params``: its own, else the top-level ``top_key``, else that key's
    family default."""
    top = reader.config.get(top_key)
    inside = params.get("rope_theta")
    if inside is not None:
        if top is not None and float(top) != float(inside):
            reader.warnings.append(f"rope_theta is {inside} inside the rope parameters and {top} at the top "
                                   f"level; the one inside wins")
        return
    if top is not None:
        params["rope_theta"] = top
        return
    default = reader.family.get("defaults", {}).get(top_key, 10000.0)
    reader.defaults[top_key] = default
    params["rope_theta"] = default


def _partial_rotary(reader: _Reader) -> float | None:
    """The fraction of each head that rotates, from the family's keys or its default."""
    config = reader.config
    value = config.get("partial_rotary_factor")
    for ignored, target in reader.family.get("ignored_by_transformers", {}).items():
        if config.get(ignored) is not None and value is None:
            default = reader.family.get("defaults", {}).get(target)
            if default is not None and float(config[ignored]) != float(default):
                reader.warnings.append(
                    f"'{ignored}' ({config[ignored]}) is not read by transformers, which rotates its default "
                    f"{target} = {default} instead")
            else:
                reader.notes.append(f"'{ignored}' ({config[ignored]}) is not read by transformers; its default "
                                    f"{target} = {default} is the same value")
    if value is None:
        value = reader.get("partial_rotary_factor")
    return None if value is None else float(value)


def _layer_types(reader: _Reader, num_layers: int | None, rope_layers: list[bool] | None) -> list[str] | None:
    """Each layer's attention kind: the config's ``layer_types``, else the family's rule."""
    config = reader.config
    given = config.get("layer_types")
    if given is not None:
        if num_layers is not None and len(given) != num_layers:
            raise ValueError(f"'layer_types' has {len(given)} entries for num_hidden_layers={num_layers}")
        kinds = [str(t) for t in given]
        if reader.family.get("last_layer_full") and kinds and kinds[-1] != "full_attention":
            reader.warnings.append(f"the last layer is {kinds[-1]!r}; transformers forces it to 'full_attention'")
            kinds[-1] = "full_attention"
        return kinds
    rule = reader.family.get("layer_types")
    if rule is None or num_layers is None:
        return None
    if rule == "alternating":
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)]
    if rule == "sliding_window_pattern":
        pattern = check_positive_int("sliding_window_pattern", reader.get("sliding_window_pattern"))
        kinds = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(num_layers)]
        if reader.family.get("last_layer_full"):
            kinds[-1] = "full_attention"
        return kinds
    if rule == "max_window_layers":
        if not config.get("use_sliding_window") or config.get("sliding_window") is None:
            return None
        first = int(reader.get("max_window_layers"))
        return ["sliding_attention" if i >= first else "full_attention" for i in range(num_layers)]
    if rule == "sliding_window_all":
        return None if config.get("sliding_window") is None else ["sliding_attention"] * num_layers
    if rule == "no_rope_layers_chunked":
        chunk = config.get("attention_chunk_size")
        assert rope_layers is not None
        return ["chunked_attention" if rope and chunk is not None else "full_attention" for rope in rope_layers]
    raise AssertionError(f"unknown layer_types rule {rule!r} in model_families.json")


def _rope_layers(reader: _Reader, num_layers: int | None) -> list[bool] | None:
    """Which layers rotate (``None``: all of them)."""
    if not reader.family.get("no_rope_layers"):
        return None
    given = reader.config.get("no_rope_layers")
    if num_layers is None:
        return None
    if given:  # transformers' flag list: 1 = this layer uses RoPE
        if len(given) != num_layers:
            raise ValueError(f"'no_rope_layers' has {len(given)} entries for num_hidden_layers={num_layers}")
        return [bool(flag) for flag in given]
    interval = check_positive_int("no_rope_layer_interval", reader.get("no_rope_layer_interval"))
    return [(i + 1) % interval != 0 for i in range(num_layers)]


def _apply_aliases(config: Mapping[str, Any], family: Mapping[str, Any], notes: list[str],
                   warnings: list[str]) -> dict[str, Any]:
    """The config with the family's own key names read as the standard ones."""
    config = dict(config)
    for alias, standard in family.get("aliases", {}).items():
        if config.get(alias) is None:
            continue
        if config.get(standard) is None:
            notes.append(f"'{alias}' ({config[alias]}) read as {standard}, this family's name for it")
            config[standard] = config[alias]
        elif config[standard] != config[alias]:
            warnings.append(f"'{alias}' ({config[alias]}) and '{standard}' ({config[standard]}) disagree; "
                            f"transformers reads '{standard}'")
    return config


def read_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> ModelRope:
    """Read a config's RoPE settings as transformers does (see the module docstring)."""
    loaded, source = load_config(config)
    notes: list[str] = []
    text, read_from, towers = _text_part(loaded, notes)
    model_type = text.get("model_type")
    families = model_families()
    family = families.get(str(model_type), {})
    warnings: list[str] = []
    text = _apply_aliases(text, family, notes, warnings)
    reader = _Reader(text, family)
    reader.notes += notes
    reader.warnings += warnings
    if not family:
        if all(text.get(k) is None for k in ("rope_theta", "rope_parameters", "rope_scaling")):
            raise ValueError(
                f"no RoPE settings found (no rope_parameters, rope_scaling or rope_theta), and "
                f"model_type {model_type!r} is not a RoPE model posenc knows")
        if model_type is not None:
            reader.notes.append(f"model_type {model_type!r} is not in posenc's family table; read with "
                                f"the generic rules (defaults: rope_theta 10000, every channel rotates)")
    if family.get("remote_code"):
        reader.notes.append(f"transformers has no class for model_type {model_type!r}: the model runs its own "
                            f"code (trust_remote_code), whose reading of the config this follows")
    known = set(family.get("defaults", {})) | set(family.get("aliases", {}))
    known |= set(family.get("ignored_by_transformers", {}))
    reader.warnings += _misspelt_keys(text, known)

    head_dim, query_width, rotary_head_dim = _head_widths(reader)
    num_layers = text.get("num_hidden_layers")
    num_layers = None if num_layers is None else check_positive_int("num_hidden_layers", num_layers)
    max_pos = reader.get("max_position_embeddings")
    max_pos = None if max_pos is None else check_positive_int("max_position_embeddings", max_pos)
    partial = _partial_rotary(reader)

    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved = False
    parameters: dict[str, dict[str, Any]] = {}
    nested = text.get("rope_parameters")
    if nested is None and text.get("rope_scaling") is None and "default_rope_parameters" in family:
        nested = family["default_rope_parameters"]
        reader.defaults["rope_parameters"] = nested
    if isinstance(nested, Mapping) and nested and all(k in LAYER_TYPE_NAMES for k in nested):
        for name, params in nested.items():
            params = dict(params or {})
            if "type" in params and "rope_type" not in params:
                params["rope_type"] = params.pop("type")
            _set_theta(reader, params, "rope_theta")
            parameters[name] = params
        reader.notes.append(f"one RoPE setting per layer type: {sorted(parameters)}")
    else:
        params = _legacy_parameters(reader)
        for key in ("mrope_section", "mrope_interleaved"):
            if key in params:
                value = params.pop(key)
                if key == "mrope_section":
                    mrope_section = tuple(int(v) for v in value)
                else:
                    mrope_interleaved = bool(value)
        if params.get("rope_type") == "mrope":
            reader.notes.append("rope_type 'mrope' (Qwen2-VL's old name) is read as 'default' with M-RoPE sections")
            params["rope_type"] = "default"
        legacy_types = family.get("legacy_rope_types", {})
        if params.get("rope_type") in legacy_types:
            old = params["rope_type"]
            params["rope_type"] = legacy_types[old]
            reader.notes.append(f"rope_type {old!r} is read as {legacy_types[old]!r} for model_type {model_type!r}")
        if family.get("local_base"):
            # Gemma 3: the scaling block belongs to the global layers; local layers have their own base.
            _set_theta(reader, params, "rope_theta")
            local = {"rope_type": "default"}
            _set_theta(reader, local, family["local_base"])
            parameters = {"sliding_attention": local, "full_attention": params}
            if params.get("rope_type", "default") != "default":
                reader.notes.append("the scaling applies to the global (full-attention) layers only; the local "
                                    "layers keep their own base, unscaled")
        else:
            _set_theta(reader, params, "rope_theta")
            parameters = {"all": params}
    # Every Llama 3 model uses base 500000: the Llama 3 rule with the default 10000 is how a lost
    # rope_theta looks (it happened in public Llama 3.1 copies). Elsewhere a defaulted base is
    # listed among the defaults; some models scale base 10000 on purpose (MiniCPM3's LongRoPE).
    if reader.defaults.get("rope_theta") == 10000.0 and any(
        p.get("rope_type") == "llama3" for p in parameters.values()
    ):
        reader.warnings.append(
            "no rope_theta: the base defaults to 10000 under the Llama 3 rule, whose models use "
            "500000; check the model's documented base")
    for flag, meaning in family.get("runtime_flags", {}).items():
        if text.get(flag):
            reader.notes.append(f"{flag}: {meaning}")
    multiplier = family.get("base_multiplier")
    if multiplier and text.get(multiplier) is not None:
        for params in parameters.values():
            params["rope_theta"] = float(params["rope_theta"]) * float(text[multiplier])
        reader.notes.append(f"base = rope_theta x {multiplier} ({text[multiplier]})")

    for params in parameters.values():
        params.setdefault("rope_type", "default")
        if partial is not None and "partial_rotary_factor" not in params:
            params["partial_rotary_factor"] = partial
        if max_pos is not None:
            params["max_position_embeddings"] = max_pos
        if family.get("original_context_at_top_level"):
            original = reader.get("original_max_position_embeddings")
            if original is not None and params.get("rope_type") in ("longrope", "yarn", "llama3"):
                params["original_max_position_embeddings"] = original
        elif (text.get("original_max_position_embeddings") is not None
              and params.get("rope_type") in ("longrope", "yarn", "llama3")):
            params.setdefault("original_max_position_embeddings", text["original_max_position_embeddings"])

    rope_layers = _rope_layers(reader, num_layers)
    layer_types = _layer_types(reader, num_layers, rope_layers)
    rope_on = family.get("rope_on")
    if rope_on is not None and layer_types is not None:
        rope_layers = [kind == rope_on for kind in layer_types]
    if layer_types is not None and any(kind in _LAYERS_WITHOUT_ATTENTION for kind in layer_types):
        rope_layers = [(rope_layers is None or rope_layers[i]) and kind not in _LAYERS_WITHOUT_ATTENTION
                       for i, kind in enumerate(layer_types)]
    window = text.get("sliding_window")
    if window is None and layer_types is not None and "sliding_attention" in layer_types:
        window = reader.get("sliding_window")

    scheme_head_dims = {}
    for name, key in family.get("layer_head_dim", {}).items():
        if name in parameters:
            scheme_head_dims[name] = check_positive_int(key, reader.get(key))

    scale_rule = family.get("softmax_scale", "head_dim")
    scalar = reader.get("query_pre_attn_scalar") if scale_rule == "query_pre_attn_scalar" else None
    temperature = None
    if family.get("temperature_tuning"):
        temperature = {k: reader.get(k) for k in ("attn_temperature_tuning", "floor_scale", "attn_scale")}
    return ModelRope(
        source=source,
        model_type=None if model_type is None else str(model_type),
        read_from=read_from,
        head_dim=head_dim,
        query_width=query_width,
        rotary_head_dim=rotary_head_dim,
        scheme_head_dims=scheme_head_dims,
        max_position_embeddings=max_pos,
        num_layers=num_layers,
        parameters=parameters,
        layer_types=layer_types,
        rope_layers=rope_layers,
        sliding_window=None if window is None else int(window),
        attention_chunk_size=text.get("attention_chunk_size"),
        softmax_scale_rule=scale_rule,
        query_pre_attn_scalar=scalar,
        layout=family.get("layout", "half (rotate_half)"),
        mrope_section=mrope_section,
        mrope_interleaved=mrope_interleaved,
        temperature_tuning=temperature,
        towers=towers,
        defaults=reader.defaults,
        notes=reader.notes,
        warnings=reader.warnings,
    )
