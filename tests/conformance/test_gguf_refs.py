"""llama.cpp's side of a port, through its GGUF files (gguf 0.19.0), without building llama.cpp.

A Llama checkpoint from transformers 5.24 is converted to GGUF here with the ``gguf`` package,
following the rules of llama.cpp's converter (``conversion/llama.py`` and ``conversion/base.py``
of the llama.cpp sources vendored in llama-cpp-python 0.3.36): the q/k rows permuted within each
head (with the key/value head count for k) so that transformers' half-layout pairs become
adjacent pairs; ``rope.freq_base`` and ``rope.dimension_count``; for linear and YaRN, the scaling
type, factor and original context; for llama3, no scaling keys but a ``rope_freqs`` tensor of
per-pair divisors; nothing for dynamic scaling.

The file is read back with ``gguf.GGUFReader`` and turned into rotations as llama.cpp reads it,
transcribed from the same sources: ``llama-model.cpp`` (keys and defaults: base 10000, type
"linear", factor 0 meaning none, original context = the training context, YaRN's betas 32 and 1
for this architecture), ``llama-context.cpp`` (YaRN's attention factor) and
``ggml-cpu/ops.cpp`` (``ggml_rope_cache_init``, ``rope_yarn``: float32, adjacent pairs,
:math:`\\theta_i = p \\cdot (\\mathrm{base}^{-2/d})^i / f_i` by repeated multiplication).
llama.cpp itself is not run: building it takes about 21 minutes here (the closing note of the
engine issue gives the measurement). :func:`posenc.rope_parity` judges each result.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb  # noqa: E402

from posenc import half_to_interleaved, rope_inv_freq  # noqa: E402
from posenc.parity import rope_parity  # noqa: E402

HEAD, HEADS, KV_HEADS, BASE, CONTEXT, TARGET = 16, 4, 2, 10000.0, 1024, 4096
HIDDEN = HEAD * HEADS
ROPES = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": CONTEXT},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": CONTEXT},
}
POSITIONS = torch.arange(0, TARGET, 29)
ROPE_FREQS = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight"  # llama.cpp's name for the tensor


def hf_config(rope: dict) -> dict:
    """The config.json of the checkpoint (transformers 5 keeps the RoPE settings in rope_parameters)."""
    return {"model_type": "llama", "hidden_size": HIDDEN, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "max_position_embeddings": TARGET,
            "rope_parameters": {**rope, "rope_theta": BASE}}


def projections() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"q_proj": torch.randn(HEADS * HEAD, HIDDEN, generator=g) / 8,
            "k_proj": torch.randn(KV_HEADS * HEAD, HIDDEN, generator=g) / 8}


def permute_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """The converter's q/k permutation: within each head, row i -> 2i and i + d/2 -> 2i + 1."""
    rows = weight.reshape(heads, HEAD, -1).transpose(1, 2)  # (heads, hidden, head_dim)
    return half_to_interleaved(rows).transpose(1, 2).reshape(weight.shape)


def to_gguf(rope: dict, weights: dict[str, torch.Tensor], path: Path, *, permute: bool = True,
            k_heads: int = KV_HEADS, rope_freqs: bool = True) -> Path:
    """Convert as llama.cpp's converter does (its rules, written with the gguf package)."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(TARGET)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(1)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HEAD)
    writer.add_rope_freq_base(BASE)
    kind = rope["rope_type"]
    if kind in ("linear", "yarn"):
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR if kind == "linear" else gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        if kind == "yarn":
            writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            if "attention_factor" in rope:
                writer.add_rope_scaling_yarn_attn_factor(rope["attention_factor"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 1)
    for hf_name, weight in weights.items():
        heads = HEADS if hf_name == "q_proj" else k_heads
        weight = permute_rows(weight, heads) if permute else weight
        name = names.get_name(f"model.layers.0.self_attn.{hf_name}.weight", try_suffixes=(".weight",))
        writer.add_tensor(name, weight.numpy().astype(np.float32))
    if kind == "llama3" and rope_freqs:
        # Per-pair divisors of the frequencies: plain / llama3 (the converter's generate_extra_tensors).
        plain, scaled = rope_inv_freq(HEAD, base=BASE)[0], rope_inv_freq(HEAD, base=BASE, scaling=rope)[0]
        writer.add_tensor(ROPE_FREQS, (plain / scaled).numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def read_gguf(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    reader = gguf.GGUFReader(path)
    meta = {key.removeprefix("llama."): field.contents() for key, field in reader.fields.items()}
    return meta, {t.name: np.array(t.data) for t in reader.tensors}


def llama_cpp_cos_sin(meta: dict, tensors: dict[str, np.ndarray], positions: torch.Tensor) -> tuple[np.ndarray, ...]:
    """cos and sin, (seq, pairs) float32, as llama.cpp computes them from this GGUF (transcribed)."""
    f32 = np.float32
    dims = meta["rope.dimension_count"]
    base = f32(meta.get("rope.freq_base", 10000.0))
    kind = meta.get("rope.scaling.type", "linear")
    factor = meta.get("rope.scaling.factor", 0.0)
    freq_scale = f32(1.0) if factor == 0.0 or kind == "none" else f32(1.0 / factor)
    ext_factor = f32(1.0) if kind == "yarn" else f32(0.0)
    original = meta.get("rope.scaling.original_context_length", meta["context_length"])
    attn_factor = f32(1.0)  # hparams.yarn_attn_factor: the llama architecture reads no key for it
    if ext_factor != 0:
        scale = 1.0 / float(freq_scale)
        attn_factor = f32(1.0 + 0.1 * math.log(scale) if scale > 1 else 1.0)  # get_mscale(factor, 1)
        attn_factor *= f32(1.0 / (1.0 + 0.1 * math.log(scale)))  # cancelled: rope_yarn applies it
    attn_factor *= f32(meta.get("rope.scaling.attn_factor", 1.0))

    def corr_dim(rotations: float) -> float:
        return dims * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(float(base)))

    low, high = max(0.0, math.floor(corr_dim(32.0))), min(dims - 1.0, math.ceil(corr_dim(1.0)))
    theta_scale = f32(base ** f32(-2.0 / dims))
    freq_factors = tensors.get(ROPE_FREQS, np.ones(dims // 2, np.float32))
    theta = positions.numpy().astype(np.float32)  # theta_base = p
    cos, sin = [], []
    for i in range(dims // 2):
        extrapolated = theta / f32(freq_factors[i])
        interpolated = freq_scale * extrapolated
        mscale = attn_factor
        angle = interpolated
        if ext_factor != 0:
            ramp = 1 - min(1.0, max(0.0, (i - low) / max(0.001, high - low)))
            mix = f32(ramp) * ext_factor
            angle = interpolated * (1 - mix) + extrapolated * mix
            mscale = mscale * f32(1.0 + 0.1 * math.log(1.0 / float(freq_scale)))
        cos.append(np.cos(angle) * mscale)
        sin.append(np.sin(angle) * mscale)
        theta = theta * theta_scale
    return np.stack(cos, -1), np.stack(sin, -1)  # (seq, pairs)


def llama_cpp_rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """ggml's normal mode (the llama architecture's): adjacent pairs (2i, 2i+1). x: (heads, seq, dim)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def hidden_states() -> torch.Tensor:
    return torch.randn(len(POSITIONS), HIDDEN, generator=torch.Generator().manual_seed(1))


def engine_and_reference(rope: dict, tmp_path: Path, **conversion):
    """(reference q, k before RoPE as (heads, seq, dim)), (engine q, k after RoPE), transformers' rotated q, k."""
    weights, x = projections(), hidden_states()
    meta, tensors = read_gguf(to_gguf(rope, weights, tmp_path / "model.gguf", **conversion))
    cos, sin = llama_cpp_cos_sin(meta, tensors, POSITIONS)
    engine, reference = [], []
    for hf_name, gguf_name, heads in (("q_proj", "blk.0.attn_q.weight", HEADS), ("k_proj", "blk.0.attn_k.weight", KV_HEADS)):
        projected = x.numpy().astype(np.float32) @ tensors[gguf_name].T  # (seq, heads * dim)
        engine.append(torch.from_numpy(llama_cpp_rotate(projected.reshape(-1, heads, HEAD).transpose(1, 0, 2), cos, sin)))
        reference.append((x @ weights[hf_name].T).view(-1, heads, HEAD).transpose(0, 1))  # (heads, seq, dim)
    rotary = LlamaRotaryEmbedding(LlamaConfig(**hf_config(rope)))
    hf_cos, hf_sin = rotary(x, POSITIONS[None])
    hf_q, hf_k = apply_rotary_pos_emb(reference[0][None], reference[1][None], hf_cos, hf_sin)
    return reference, engine, (hf_q[0], hf_k[0])


@pytest.mark.parametrize("name", ROPES)
def test_a_converted_checkpoint_rotates_as_transformers(name: str, tmp_path: Path) -> None:
    reference, engine, hf = engine_and_reference(ROPES[name], tmp_path)
    for ref, got, want in zip(reference, engine, hf):
        result = rope_parity(hf_config(ROPES[name]), reference=ref, rotated=got, positions=POSITIONS)
        assert result.matches, result
        # The engine holds the permuted order: transformers' rotated rows, permuted, are its rows.
        torch.testing.assert_close(got.double(), half_to_interleaved(want).double(), rtol=0, atol=result.tolerance)


def test_the_gguf_holds_what_llama_cpp_reads(tmp_path: Path) -> None:
    meta, tensors = read_gguf(to_gguf(ROPES["yarn"], projections(), tmp_path / "yarn.gguf"))
    assert meta["general.architecture"] == "llama"
    assert meta["rope.freq_base"] == BASE and meta["rope.dimension_count"] == HEAD
    assert meta["rope.scaling.type"] == "yarn" and meta["rope.scaling.factor"] == 4.0
    assert meta["rope.scaling.original_context_length"] == CONTEXT
    meta, tensors = read_gguf(to_gguf(ROPES["llama3"], projections(), tmp_path / "llama3.gguf"))
    assert "rope.scaling.type" not in meta  # llama3 travels as a tensor, not as keys
    divisors = tensors[ROPE_FREQS]
    assert divisors.shape == (HEAD // 2,) and divisors[0] == 1.0 and divisors[-1] == pytest.approx(4.0)


def test_permutation_skipped(tmp_path: Path) -> None:
    reference, engine, _ = engine_and_reference(ROPES["default"], tmp_path, permute=False)
    result = rope_parity(hf_config(ROPES["default"]), reference=reference[0], rotated=engine[0], positions=POSITIONS)
    assert not result.matches and result.diagnosis == "permutation", result


def test_keys_permuted_with_the_query_head_count(tmp_path: Path) -> None:
    # Grouped-query attention: permuting k_proj with 4 heads of 8 rows instead of 2 of 16 mixes the
    # halves of different heads. Queries stay right; keys match neither the config nor a known bug.
    reference, engine, _ = engine_and_reference(ROPES["default"], tmp_path, k_heads=HEADS)
    config = hf_config(ROPES["default"])
    assert rope_parity(config, reference=reference[0], rotated=engine[0], positions=POSITIONS).matches
    keys = rope_parity(config, reference=reference[1], rotated=engine[1], positions=POSITIONS)
    assert not keys.matches and keys.diagnosis is None, keys


def test_llama3_without_its_frequency_tensor(tmp_path: Path) -> None:
    # A converter that misses the llama3 rule writes neither keys nor rope_freqs: plain RoPE.
    reference, engine, _ = engine_and_reference(ROPES["llama3"], tmp_path, rope_freqs=False)
    result = rope_parity(hf_config(ROPES["llama3"]), reference=reference[0], rotated=engine[0], positions=POSITIONS)
    assert not result.matches and result.diagnosis == "scaling", result


def test_dynamic_scaling_does_not_reach_the_gguf(tmp_path: Path) -> None:
    # The converter writes nothing for "dynamic" on this architecture; past max_position_embeddings
    # transformers changes the base, llama.cpp cannot.
    dynamic = {"rope_type": "dynamic", "factor": 4.0}
    config = {**hf_config(dynamic), "max_position_embeddings": CONTEXT}
    reference, engine, _ = engine_and_reference(dynamic, tmp_path)
    inside = POSITIONS < CONTEXT
    short = rope_parity(config, reference=reference[0][:, inside], rotated=engine[0][:, inside],
                        positions=POSITIONS[inside])
    assert short.matches  # within the trained context dynamic scaling changes nothing
    result = rope_parity(config, reference=reference[0], rotated=engine[0], positions=POSITIONS)
    assert not result.matches and result.diagnosis == "scaling", result


def test_yarn_attention_factor_from_the_config_is_not_read(tmp_path: Path) -> None:
    # The converter writes attention_factor as rope.scaling.yarn_attn_factor; the llama architecture
    # reads no such key, and the context set-up gives YaRN 0.1 ln s + 1 whatever the config said.
    yarn = {**ROPES["yarn"], "attention_factor": 0.9}
    meta, _ = read_gguf(to_gguf(yarn, projections(), tmp_path / "model.gguf"))
    assert meta["rope.scaling.yarn_attn_factor"] == pytest.approx(0.9)
    reference, engine, _ = engine_and_reference(yarn, tmp_path)
    result = rope_parity(hf_config(yarn), reference=reference[0], rotated=engine[0], positions=POSITIONS)
    assert not result.matches, result
    engine_factor = float(engine[0].norm() / reference[0].norm())
    assert engine_factor == pytest.approx(0.1 * math.log(4.0) + 1, rel=1e-5)
