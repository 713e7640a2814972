"""posenc RoPE against Hugging Face transformers 5.x.

* ``rope_inv_freq`` against every entry of ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``
  (and the models' ``compute_default_rope_parameters`` for ``"default"``), for several configs each.
* ``rope_cos_sin`` / ``apply_rope`` / ``RotaryEmbedding`` against ``LlamaRotaryEmbedding`` and
  ``apply_rotary_pos_emb`` (Llama) and the partial-rotary variant of GPT-NeoX.

Hugging Face computes in float32, posenc in float64, so values agree to float32 rounding.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

pytest.importorskip("transformers")

from transformers import GPTNeoXConfig, LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

from posenc.rope import (  # noqa: E402
    ROPE_TYPES,
    RotaryEmbedding,
    apply_rope,
    rope_cos_sin,
    rope_inv_freq,
)

HEAD_DIM = 64
MAX_POS = 4096
THETA = 10000.0


def _longrope(dim: int, scale: float) -> list[float]:
    """A smooth, non-trivial per-frequency factor list of length dim // 2."""
    return [1.0 + scale * i / (dim // 2) for i in range(dim // 2)]


# (id, rope_parameters without rope_theta, head_dim, rope_theta, max_position_embeddings)
CONFIGS = [
    ("default", {"rope_type": "default"}, 64, THETA, MAX_POS),
    ("default-theta5e5", {"rope_type": "default"}, 128, 500000.0, MAX_POS),
    ("linear-2", {"rope_type": "linear", "factor": 2.0}, 64, THETA, MAX_POS),
    ("linear-8-partial", {"rope_type": "linear", "factor": 8.0, "partial_rotary_factor": 0.5}, 64, THETA, MAX_POS),
    ("dynamic-2", {"rope_type": "dynamic", "factor": 2.0}, 64, THETA, 2048),
    ("dynamic-4-partial", {"rope_type": "dynamic", "factor": 4.0, "partial_rotary_factor": 0.25}, 128, THETA, 2048),
    ("yarn-4", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}, 64, THETA, MAX_POS),
    (
        "yarn-beta",
        {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048, "beta_fast": 16, "beta_slow": 2},
        128,
        1e6,
        16384,
    ),
    (
        "yarn-mscale",
        {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 1.0,
         "mscale_all_dim": 0.707},
        64,
        THETA,
        163840,
    ),
    (
        "yarn-mscale-only",  # HF ignores mscale without mscale_all_dim
        {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 1024, "mscale": 0.5},
        64,
        THETA,
        MAX_POS,
    ),
    (
        "yarn-attention-factor-no-truncate",
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "attention_factor": 1.5,
         "truncate": False},
        64,
        THETA,
        MAX_POS,
    ),
    (
        "yarn-partial",
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "partial_rotary_factor": 0.5},
        128,
        THETA,
        MAX_POS,
    ),
    (
        # original context > 2*pi*base: the ramp's upper end is clamped to rotary_dim - 1
        "yarn-clamped-range",
        {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 131072},
        64,
        THETA,
        262144,
    ),
    (
        "yarn-no-factor",  # factor = max_position_embeddings / original_max_position_embeddings
        {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 1024},
        64,
        THETA,
        8192,
    ),
    (
        "longrope",
        {"rope_type": "longrope", "short_factor": _longrope(64, 0.5), "long_factor": _longrope(64, 8.0),
         "original_max_position_embeddings": 1024},
        64,
        THETA,
        MAX_POS,
    ),
    (
        "longrope-factor-attention",
        {"rope_type": "longrope", "short_factor": _longrope(64, 0.1), "long_factor": _longrope(64, 3.0),
         "original_max_position_embeddings": 2048, "factor": 16.0, "attention_factor": 1.2},
        64,
        THETA,
        MAX_POS,
    ),
    (
        "longrope-partial",
        {"rope_type": "longrope", "short_factor": _longrope(32, 0.5), "long_factor": _longrope(32, 4.0),
         "original_max_position_embeddings": 1024, "partial_rotary_factor": 0.5},
        64,
        THETA,
        MAX_POS,
    ),
    (
        "llama3.1",
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192},
        128,
        500000.0,
        131072,
    ),
    (
        "llama3.2-3b",
        {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192},
        128,
        500000.0,
        131072,
    ),
    (
        "llama3-partial",
        {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
         "original_max_position_embeddings": 1024, "partial_rotary_factor": 0.5},
        64,
        THETA,
        MAX_POS,
    ),
]
CONFIGS += [
    # A tiny beta_slow pushes the top of YaRN's ramp past rotary_dim - 1, where it is clamped.
    ("yarn-clamped", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
                      "beta_slow": 0.01}, 16, 122.0, 16384),
    # Factors at and below 1: the attention factors' own branches.
    ("yarn-below-one", {"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 4096}, 16, THETA,
     2048),
    ("longrope-1.5", {"rope_type": "longrope", "short_factor": _longrope(16, 0.5), "long_factor": _longrope(16, 2.0),
                      "original_max_position_embeddings": 1024, "factor": 1.5}, 16, THETA, 1536),
    ("longrope-below-one", {"rope_type": "longrope", "short_factor": _longrope(16, 0.5),
                            "long_factor": _longrope(16, 2.0), "original_max_position_embeddings": 1024,
                            "factor": 0.5}, 16, THETA, 512),
    # Gemma 4's global layers: a quarter of the pairs turn, exponents over the whole head.
    ("proportional-quarter", {"rope_type": "proportional", "partial_rotary_factor": 0.25}, 512, 1e6, MAX_POS),
    ("proportional-factor", {"rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 8.0}, 128,
     THETA, MAX_POS),
]
CONFIG_IDS = [c[0] for c in CONFIGS]


def _hf_config(params: dict, head_dim: int, theta: float, max_pos: int) -> LlamaConfig:
    return LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        rope_parameters={**copy.deepcopy(params), "rope_theta": theta},
    )


def _scaling(params: dict, theta: float, max_pos: int) -> dict:
    """The same parameters in posenc form: None entries dropped, the context length added."""
    clean = {k: v for k, v in params.items() if v is not None}
    return {**clean, "rope_theta": theta, "max_position_embeddings": max_pos}


def _hf_inv_freq(config: LlamaConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":
        return modeling_gpt_neox.GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)


def _seq_lens(params: dict, max_pos: int) -> list[int | None]:
    """Lengths at which to compare: below, at and above the type's threshold."""
    threshold = params.get("original_max_position_embeddings", max_pos)
    return [None, 1, threshold - 1, threshold, threshold + 1, 4 * threshold]


def test_every_hf_rope_type_is_covered() -> None:
    # A rope_type added to transformers shows up here.
    tested = {c[1]["rope_type"] for c in CONFIGS}
    assert set(ROPE_INIT_FUNCTIONS) <= tested
    assert tested == set(ROPE_TYPES)


@pytest.mark.parametrize(("name", "params", "head_dim", "theta", "max_pos"), CONFIGS, ids=CONFIG_IDS)
def test_inv_freq_and_attention_factor_equal_hf(
    name: str, params: dict, head_dim: int, theta: float, max_pos: int
) -> None:
    config = _hf_config(params, head_dim, theta, max_pos)
    for seq_len in _seq_lens(params, max_pos):
        hf_inv, hf_factor = _hf_inv_freq(config, seq_len)
        ours, factor = rope_inv_freq(
            head_dim, base=theta, scaling=_scaling(params, theta, max_pos), seq_len=seq_len
        )
        assert ours.dtype == torch.float64
        assert ours.shape == hf_inv.shape
        torch.testing.assert_close(ours.float(), hf_inv.float(), rtol=2e-6, atol=0)
        assert math.isclose(factor, float(hf_factor), rel_tol=1e-12)


def test_dynamic_and_longrope_depend_on_seq_len_like_hf() -> None:
    # Guards the comparison above against a seq_len that is silently ignored.
    for name in ("dynamic-2", "longrope"):
        _, params, head_dim, theta, max_pos = CONFIGS[CONFIG_IDS.index(name)]
        threshold = params.get("original_max_position_embeddings", max_pos)
        scaling = _scaling(params, theta, max_pos)
        short, _ = rope_inv_freq(head_dim, base=theta, scaling=scaling, seq_len=threshold)
        long, _ = rope_inv_freq(head_dim, base=theta, scaling=scaling, seq_len=threshold + 1)
        assert not torch.equal(short, long)


@pytest.mark.parametrize(("name", "params", "head_dim", "theta", "max_pos"), CONFIGS, ids=CONFIG_IDS)
def test_cos_sin_equal_hf_rotary_embedding(
    name: str, params: dict, head_dim: int, theta: float, max_pos: int
) -> None:
    partial = "partial_rotary_factor" in params
    module = modeling_gpt_neox if partial else modeling_llama
    if partial:
        # Llama's default rope ignores partial_rotary_factor; GPT-NeoX honours it everywhere.
        config = GPTNeoXConfig(
            hidden_size=4 * head_dim,
            num_attention_heads=4,
            max_position_embeddings=max_pos,
            rope_parameters={**copy.deepcopy(params), "rope_theta": theta},
        )
        hf_rotary = module.GPTNeoXRotaryEmbedding(config)
    else:
        hf_rotary = module.LlamaRotaryEmbedding(_hf_config(params, head_dim, theta, max_pos))
    threshold = params.get("original_max_position_embeddings", max_pos)
    positions = torch.tensor([[0, 1, 2, 7, 100, 255], [3, 4, 5, 6, 300, threshold - 1]])
    x = torch.zeros(1, dtype=torch.float32)
    hf_cos, hf_sin = hf_rotary(x, positions)
    cos, sin = rope_cos_sin(positions, head_dim, base=theta, scaling=_scaling(params, theta, max_pos))
    assert cos.shape == hf_cos.shape and cos.dtype == torch.float32
    # HF rounds inv_freq and the angle to float32: error up to about |angle| * 2**-23.
    atol = 1.2e-7 * float(positions.max()) + 1e-6
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=atol)
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=atol)


@pytest.mark.parametrize("name", ["dynamic-2", "longrope"])
def test_module_beyond_threshold_matches_hf(name: str) -> None:
    """Past the threshold both recompute the frequencies for L = max(position) + 1."""
    _, params, head_dim, theta, max_pos = CONFIGS[CONFIG_IDS.index(name)]
    threshold = params.get("original_max_position_embeddings", max_pos)
    hf_rotary = modeling_llama.LlamaRotaryEmbedding(_hf_config(params, head_dim, theta, max_pos))
    ours = RotaryEmbedding(head_dim, base=theta, scaling=_scaling(params, theta, max_pos), max_len=64)
    seq = threshold + 37
    q = torch.randn(1, 2, seq, head_dim, dtype=torch.float64)
    k = torch.randn(1, 2, seq, head_dim, dtype=torch.float64)
    positions = torch.arange(seq)[None]
    hf_cos, hf_sin = hf_rotary(q.float(), positions)
    torch.testing.assert_close(
        hf_rotary.inv_freq.double(),
        rope_inv_freq(head_dim, base=theta, scaling=_scaling(params, theta, max_pos), seq_len=seq)[0],
        rtol=2e-6,
        atol=0,
    )
    ours_q, ours_k = ours(q, k, positions=positions)
    ref_q, ref_k = modeling_llama.apply_rotary_pos_emb(q, k, hf_cos.double(), hf_sin.double())
    # HF's float32 angles at positions ~2000: error ~1e-4.
    torch.testing.assert_close(ours_q, ref_q, rtol=0, atol=2e-3)
    torch.testing.assert_close(ours_k, ref_k, rtol=0, atol=2e-3)
    # Without positions: the same frequencies, from offset + seq.
    torch.testing.assert_close(ours(q, k)[0], ours_q, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_apply_rope_equals_llama_apply_rotary_pos_emb(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    batch, heads, kv_heads, seq = 2, 4, 2, 33
    q = torch.randn(batch, heads, seq, HEAD_DIM).to(dtype)
    k = torch.randn(batch, kv_heads, seq, HEAD_DIM).to(dtype)
    positions = torch.arange(seq).expand(batch, seq) + torch.tensor([[0], [17]])
    hf_rotary = modeling_llama.LlamaRotaryEmbedding(_hf_config({"rope_type": "default"}, HEAD_DIM, THETA, MAX_POS))
    cos, sin = rope_cos_sin(positions, HEAD_DIM, dtype=dtype)  # (batch, seq, dim)
    hf_cos, hf_sin = hf_rotary(q, positions)
    eps = torch.finfo(dtype).eps
    # HF's float32 angles, then rounded to dtype.
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=max(eps, 1e-5))
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=max(eps, 1e-5))
    ref_q, ref_k = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    ours_q = apply_rope(q, cos[:, None], sin[:, None])
    ours_k = apply_rope(k, cos[:, None], sin[:, None])
    assert ours_q.dtype == dtype and ours_k.dtype == dtype
    # The same bits: both round each product, then the sum (no fused multiply-add).
    assert torch.equal(ours_q, ref_q) and torch.equal(ours_k, ref_k)


@pytest.mark.reference_doc
def test_llama_rotary_embedding_angles_stay_float32_in_a_float64_model() -> None:
    # forward() casts inv_freq and the positions to float32 before multiplying them, then casts
    # cos/sin to the input's dtype: a float64 model gets float64 tensors of float32 angles.
    hf_rotary = modeling_llama.LlamaRotaryEmbedding(_hf_config({"rope_type": "default"}, HEAD_DIM, THETA, MAX_POS))
    hf_rotary = hf_rotary.double()
    assert hf_rotary.inv_freq.dtype == torch.float64
    positions = torch.arange(MAX_POS, dtype=torch.float64)[None]
    hf_cos, hf_sin = hf_rotary(torch.zeros(1, dtype=torch.float64), positions.long())
    assert hf_cos.dtype == hf_sin.dtype == torch.float64
    inv_freq = THETA ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    angles = torch.cat([positions[..., None] * inv_freq] * 2, dim=-1)
    error = max((hf_cos - angles.cos()).abs().max().item(), (hf_sin - angles.sin()).abs().max().item())
    # float32 angles: off by up to about |angle| * 2**-23, far above float64 rounding.
    assert 1e-9 < error < 1.2e-7 * MAX_POS


def test_module_equals_llama_rotary_embedding_and_apply() -> None:
    torch.manual_seed(1)
    params = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 128}
    config = _hf_config(params, HEAD_DIM, 500000.0, 1024)
    hf_rotary = modeling_llama.LlamaRotaryEmbedding(config)
    ours = RotaryEmbedding(HEAD_DIM, base=500000.0, scaling=_scaling(params, 500000.0, 1024), max_len=16)
    q = torch.randn(2, 4, 40, HEAD_DIM)
    k = torch.randn(2, 2, 40, HEAD_DIM)
    positions = torch.arange(10, 50)[None].expand(2, 40)
    ref_q, ref_k = modeling_llama.apply_rotary_pos_emb(q, k, *hf_rotary(q, positions))
    for got_q, got_k in (ours(q, k, offset=10), ours(q, k, positions=positions)):
        torch.testing.assert_close(got_q, ref_q, rtol=0, atol=2e-5)
        torch.testing.assert_close(got_k, ref_k, rtol=0, atol=2e-5)


def test_partial_rotary_equals_gpt_neox() -> None:
    torch.manual_seed(2)
    config = GPTNeoXConfig(hidden_size=4 * HEAD_DIM, num_attention_heads=4, max_position_embeddings=MAX_POS,
                           rope_parameters={"rope_type": "default", "rope_theta": THETA,
                                            "partial_rotary_factor": 0.25})
    hf_rotary = modeling_gpt_neox.GPTNeoXRotaryEmbedding(config)
    q = torch.randn(2, 4, 20, HEAD_DIM)
    k = torch.randn(2, 4, 20, HEAD_DIM)
    positions = torch.arange(20)[None].expand(2, 20)
    ref_q, ref_k = modeling_gpt_neox.apply_rotary_pos_emb(q, k, *hf_rotary(q, positions))
    ours = RotaryEmbedding(HEAD_DIM, scaling={"partial_rotary_factor": 0.25})
    assert ours.rotary_dim == 16
    got_q, got_k = ours(q, k)
    torch.testing.assert_close(got_q, ref_q, rtol=0, atol=2e-6)
    torch.testing.assert_close(got_k, ref_k, rtol=0, atol=2e-6)
    assert torch.equal(got_q[..., 16:], q[..., 16:])
