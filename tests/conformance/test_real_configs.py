"""rope_report on real public configs (tests/data/configs) against transformers 5.x reading the same files.

For each stored config: the inverse frequencies of every RoPE setting, its attention factor, the
rotated width, each layer's attention kind, whether it rotates and with which base, and the
softmax scale of the attention module. Then every default in posenc's family table
(``posenc/data/model_families.json``) against transformers' configuration classes.

transformers computes the frequencies in float32, posenc in float64: they agree to float32
rounding.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

import transformers  # noqa: E402
from transformers import AutoConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, model_type_to_module_name  # noqa: E402

from posenc import rope_report  # noqa: E402
from posenc._config_reading import model_families  # noqa: E402

CONFIGS = Path(__file__).parent.parent / "data" / "configs"
CONFIG_FILES = sorted(CONFIGS.glob("*.json"))


def _remote_code_inv_freq(config: dict[str, Any]) -> torch.Tensor:
    """The frequencies of models that run their own code, transcribed from it (float32).

    GLM-4 (modeling_chatglm.py, ``RotaryEmbedding.forward_impl``): half of ``kv_channels``
    rotates, base ``10000 * rope_ratio``. Qwen (modeling_qwen.py, ``RotaryEmbedding``):
    ``kv_channels * rotary_pct`` channels rotate, base ``rotary_emb_base``.
    """
    if config["model_type"] == "chatglm":
        width, base = config["kv_channels"] // 2, 10000 * config.get("rope_ratio", 1)
    else:
        width, base = int(config["kv_channels"] * config.get("rotary_pct", 1.0)), config.get("rotary_emb_base", 10000)
    return 1.0 / (base ** (torch.arange(0, width, 2, dtype=torch.float) / width))


def _transformers_text_config(path: Path, tmp_path: Path) -> Any:
    shutil.copy(path, tmp_path / "config.json")
    config = AutoConfig.from_pretrained(tmp_path)
    return config.get_text_config(decoder=True)


def _module_class(config: Any, suffix: str) -> type:
    """The model's own ``...RotaryEmbedding`` or ``...Attention`` class (not a vision tower's)."""
    module = importlib.import_module(
        f"transformers.models.{model_type_to_module_name(config.model_type)}."
        f"modeling_{model_type_to_module_name(config.model_type)}"
    )
    candidates = [
        getattr(module, name) for name in dir(module)
        if name.endswith(suffix) and "Vision" not in name and "Audio" not in name and not name.startswith("_")
        and isinstance(getattr(module, name), type) and getattr(module, name).__module__ == module.__name__
    ]
    text = [c for c in candidates if "Text" in c.__name__]
    chosen = text or candidates
    # The shortest name is the model's own class (LlamaAttention, not LlamaFlashAttention2).
    return min(chosen, key=lambda c: len(c.__name__))


def _reference_inv_freq(config: Any, layer_type: str | None, rope_type: str) -> tuple[torch.Tensor, float]:
    """transformers' frequencies at the target context (max_position_embeddings)."""
    rotary = _module_class(config, "RotaryEmbedding")(config=config)
    prefix = "" if layer_type is None else f"{layer_type}_"
    inv_freq = getattr(rotary, f"{prefix}inv_freq")
    attention = getattr(rotary, f"{prefix}attention_scaling")
    if rope_type in ("dynamic", "longrope"):
        # Their frequencies depend on the sequence length; the report states them at the target.
        kwargs = {} if layer_type is None else {"layer_type": layer_type}
        inv_freq, attention = ROPE_INIT_FUNCTIONS[rope_type](
            config, None, seq_len=config.max_position_embeddings, **kwargs)
    return inv_freq, attention


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[p.stem for p in CONFIG_FILES])
def test_report_matches_transformers(path: Path, tmp_path: Path) -> None:
    report = rope_report(path)
    if model_families().get(report.model_type, {}).get("remote_code"):  # no transformers class to compare
        raw = json.loads(path.read_text(encoding="utf-8"))
        torch.testing.assert_close(report.scheme.inv_freq, _remote_code_inv_freq(raw).double(), rtol=1e-6, atol=0)
        assert report.softmax_scale == raw["kv_channels"] ** -0.5
        return
    config = _transformers_text_config(path, tmp_path)
    assert report.model_type == config.model_type
    nested = set(report.schemes) != {"all"}
    for name, scheme in report.schemes.items():
        layer_type = name if nested else None
        params = config.rope_parameters[name] if nested else config.rope_parameters
        assert scheme.rope_type == params["rope_type"]
        assert scheme.base == float(params["rope_theta"])
        inv_freq, attention = _reference_inv_freq(config, layer_type, scheme.rope_type)
        assert scheme.rotary_dim == 2 * inv_freq.numel(), name
        torch.testing.assert_close(scheme.inv_freq, inv_freq.double(), rtol=1e-6, atol=0)
        assert scheme.attention_factor == pytest.approx(attention, rel=1e-12), name

    # Each layer: its attention kind, whether it rotates, and the setting it uses.
    kinds = getattr(config, "layer_types", None)
    rotates = getattr(config, "no_rope_layers", None)
    for group in report.layers:
        for i in group.layers:
            if kinds is not None:
                assert group.attention == kinds[i], f"layer {i}"
            if rotates is not None:
                assert (group.scheme is not None) == bool(rotates[i]), f"layer {i}"
            if group.window is not None and group.attention == "sliding_attention":
                assert group.window == config.sliding_window

    # The softmax scale of the model's attention module (built on the meta device: no weights).
    attention_class = _module_class(config, "Attention")
    with torch.device("meta"):
        module = attention_class(config=config, layer_idx=0)
    assert report.softmax_scale == pytest.approx(module.scaling, rel=1e-12)


def test_stored_configs_are_documented_and_unedited_json() -> None:
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    assert len(CONFIG_FILES) >= 20
    for path in CONFIG_FILES:
        assert f"`{path.name}`" in readme, f"{path.name} has no source in README.md"
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)


def test_popular_configs_get_no_warning() -> None:
    for path in CONFIG_FILES:
        assert rope_report(path).warnings == [], path.name


def _transformers_default(model_type: str, key: str) -> Any:
    """What transformers' config class uses for ``key`` when a config omits it."""
    config_class = CONFIG_MAPPING[model_type]
    fields = {f.name: f for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else {}
    if key == "rope_theta":
        theta = config_class.default_theta
        return theta["global"] if isinstance(theta, dict) else theta
    if key == "rope_local_base_freq":
        return config_class.default_theta["local"]
    if key == "partial_rotary_factor":
        return config_class().rope_parameters.get("partial_rotary_factor")
    if key == "sliding_window_pattern":
        config = config_class(num_hidden_layers=24)
        full = [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]
        return full[0] + 1
    if key == "global_head_dim":  # Gemma 4: the head width of the global layers
        return config_class(num_hidden_layers=6).per_layer_config["full_attention"].head_dim
    if key == "original_max_position_embeddings" and key not in fields:
        return getattr(config_class(), key)
    if key in fields:
        return fields[key].default
    return getattr(config_class(), key)


FAMILY_DEFAULTS = [
    (model_type, key, value)
    for model_type, family in model_families().items() if not family.get("remote_code")
    for key, value in family.get("defaults", {}).items()
]


@pytest.mark.parametrize(("model_type", "key", "value"), FAMILY_DEFAULTS,
                         ids=[f"{m}-{k}" for m, k, _ in FAMILY_DEFAULTS])
def test_family_defaults_match_transformers(model_type: str, key: str, value: Any) -> None:
    assert _transformers_default(model_type, key) == value, (model_type, key, transformers.__version__)


def test_family_default_rope_parameters_match_transformers() -> None:
    for model_type, family in model_families().items():
        if "default_rope_parameters" in family:
            assert CONFIG_MAPPING[model_type]().rope_parameters == family["default_rope_parameters"], model_type


def test_gemma4_proportional_rope_matches_transformers(tmp_path: Path) -> None:
    """Gemma 4's global layers (proportional RoPE, their own head width) and its local layers.

    No public Gemma 4 config is stored, so this one is written here in the family's shape: the
    language model under ``text_config``, its RoPE left to the class defaults.
    """
    config = {"model_type": "gemma4", "text_config": {
        "model_type": "gemma4_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 2,
        "num_hidden_layers": 12, "vocab_size": 1024, "vocab_size_per_layer_input": 1024}}
    path = tmp_path / "in" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    report = rope_report(path)
    text = _transformers_text_config(path, tmp_path)
    full, local = report.schemes["full_attention"], report.schemes["sliding_attention"]
    assert (full.rope_type, full.rotary_dim, local.rotary_dim) == ("proportional", 128, 256)
    rotary = _module_class(text, "RotaryEmbedding")(config=text)
    for scheme in (full, local):
        torch.testing.assert_close(scheme.inv_freq, getattr(rotary, f"{scheme.name}_inv_freq").double(),
                                   rtol=1e-6, atol=0)
    assert [g.attention for g in report.layers for _ in g.layers] != [] and all(
        text.layer_types[i] == g.attention for g in report.layers for i in g.layers)
    assert report.softmax_scale == 1.0


def test_text_model_types_exist_in_transformers() -> None:
    for model_type, family in model_families().items():
        if "text_model_type" in family:
            assert family["text_model_type"] in CONFIG_MAPPING, model_type
