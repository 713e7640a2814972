"""The public contract of docs/dev/spec.md: every name importable from posenc with its arguments."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import posenc
import posenc.diagnostics
import posenc.models
import posenc.numpy

SPEC = {
    posenc: {
        "sinusoidal_table": ["length", "dim", "base", "style", "offset", "dtype", "device"],
        "SinusoidalPositionalEncoding": ["dim", "max_len", "dropout", "base", "style", "batch_first"],
        "LearnedPositionalEncoding": ["dim", "max_len", "dropout", "batch_first"],
        "TokenEmbedding": ["vocab_size", "dim", "padding_idx", "scale"],
        "relative_position_indices": ["q_len", "k_len", "max_relative_position"],
        "RelativePositionEmbedding": ["max_relative_position", "dim"],
        "t5_relative_position_bucket": ["relative_position", "bidirectional", "num_buckets", "max_distance"],
        "T5RelativePositionBias": ["num_heads", "bidirectional", "num_buckets", "max_distance"],
        "xl_relative_embedding": ["k_len", "dim", "clamp_len"],
        "xl_position_logits": ["query", "weight", "q_len", "k_len"],
        "packed_position_ids": ["cu_seqlens"],
        "cu_seqlens_from_position_ids": ["position_ids"],
        "document_ids": ["cu_seqlens"],
        "document_mask": ["cu_seqlens", "causal"],
        "rope_report": ["config"],
        "rope_parity": ["config", "cos", "sin", "reference", "rotated", "positions", "scheme", "layout", "tolerance"],
        "rel_shift": ["x"],
        "rope_inv_freq": ["dim", "base", "scaling", "seq_len"],
        "yarn_mscale": ["factor", "mscale"],
        "rope_cos_sin": ["positions", "dim", "base", "scaling", "layout", "dtype", "device"],
        "apply_rope": ["x", "cos", "sin", "layout"],
        "RotaryEmbedding": ["dim", "base", "scaling", "layout", "max_len"],
        "interleaved_to_half": ["x"],
        "half_to_interleaved": ["x"],
        "permute_for_half_layout": ["weight", "num_heads"],
        "alibi_slopes": ["num_heads"],
        "alibi_bias": ["num_heads", "q_len", "k_len", "dtype", "device"],
        "sinusoidal_nd": ["shape", "dim", "base"],
        "sinusoidal_2d": ["height", "width", "dim", "style", "base"],
        "VideoPositionalEncoding": ["dim", "max_frames", "spatial"],
        "axial_rope_cos_sin": ["height", "width", "dim"],
        "laplacian_pe": ["edge_index", "num_nodes", "k"],
        "random_walk_pe": ["edge_index", "num_nodes", "walk_length"],
        "CoPE": ["head_dim", "max_pos"],
        "mrope_cos_sin": ["position_ids", "dim", "sections", "base", "interleaved", "dtype", "device"],
        "mrope_position_ids": ["token_types", "image_grid_thw", "video_grid_thw", "spatial_merge_size"],
        "attention_temperature": ["positions", "floor_scale", "attn_scale", "dtype"],
        "mla_softmax_scale": ["qk_head_dim", "scaling"],
        "mla_rope": ["q", "k_pe", "cos", "sin", "interleaved"],
        "mla_permute_for_half_layout": ["weight", "num_heads", "rope_dim"],
    },
    posenc.numpy: {
        "sinusoidal_table_loop": ["length", "dim", "base"],
        "sinusoidal_table": ["length", "dim", "base"],
    },
    posenc.diagnostics: {
        "similarity_matrix": ["pe", "metric"],
        "relative_rotation": ["k", "dim", "base"],
        "dot_product_by_offset": ["pe"],
        "min_pairwise_distance": ["pe"],
        "collisions": ["length", "dim", "dtype"],
        "check_table": ["pe"],
    },
    posenc.models: {
        "Transformer": ["config"],
        "token_losses": ["model", "tokens"],
        "TransformerConfig": ["position", "sliding_window", "layer_types", "local_rope_base", "local_rope_scaling",
                              "nope_layers"],
    },
}
FORWARD = {
    "SinusoidalPositionalEncoding": ["x", "offset", "positions"],
    "LearnedPositionalEncoding": ["x", "offset", "positions"],
    "RelativePositionEmbedding": ["q_len", "k_len"],
    "T5RelativePositionBias": ["q_len", "k_len", "offset"],
    "RotaryEmbedding": ["q", "k", "positions", "offset"],
}
CASES = [(module, name, args) for module, names in SPEC.items() for name, args in names.items()]


@pytest.mark.parametrize(("module", "name", "args"), CASES, ids=[f"{m.__name__}.{n}" for m, n, _ in CASES])
def test_spec_name_and_arguments(module, name: str, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    obj = getattr(module, name)
    params = inspect.signature(obj).parameters
    assert [a for a in args if a not in params] == []


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_forward_arguments(name: str) -> None:
    params = inspect.signature(getattr(posenc, name).forward).parameters
    assert [a for a in FORWARD[name] if a not in params] == []


def test_from_pretrained_and_models_positions() -> None:
    assert "weight" in inspect.signature(posenc.TokenEmbedding.from_pretrained).parameters
    assert set(posenc.models.POSITIONS) == {"none", "sinusoidal", "learned", "shaw", "xl", "t5", "rope", "alibi", "cope"}


@pytest.mark.parametrize("name", sorted(posenc.__all__))
def test_public_names_are_documented(name: str) -> None:
    obj = getattr(posenc, name)
    doc = inspect.getdoc(obj) or ""
    if dataclasses.is_dataclass(obj):  # a result (RopeReport): its fields are its documentation
        fields = {f.name for f in dataclasses.fields(obj)}
        assert "Attributes" in doc and all(f in doc for f in fields), (name, fields)
        return
    assert "Parameters" in doc
    if inspect.isclass(obj):
        assert "Returns" in (inspect.getdoc(obj.forward) or "")
    else:
        assert "Returns" in doc
