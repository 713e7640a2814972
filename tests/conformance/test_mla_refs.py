"""DeepSeek's MLA against transformers 5.24 ``DeepseekV3Attention``: the decoupled rotary part
(interleaved or not), YaRN's two temperatures, the softmax scale, and the weight permutation that
removes the run-time layout conversion."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AttentionInterface  # noqa: E402
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (  # noqa: E402
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
    eager_attention_forward,
)

from posenc import mla_permute_for_half_layout, mla_rope, mla_softmax_scale, rope_cos_sin  # noqa: E402

HIDDEN, HEADS, KV_RANK, NOPE, ROPE, V = 64, 4, 16, 16, 8, 16
THETA = 10000.0
ROPES = {
    "default": {"rope_type": "default", "rope_theta": THETA},
    # mscale != mscale_all_dim: cos/sin carry yarn(0.707) / yarn(1.0), the softmax scale yarn(1.0)**2.
    "yarn": {"rope_type": "yarn", "rope_theta": THETA, "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0,
             "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1},
    # DeepSeek-V3's kind (mscale = mscale_all_dim = 1): cos/sin unscaled, the softmax scale yarn(1.0)**2.
    "yarn_v3": {"rope_type": "yarn", "rope_theta": THETA, "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1},
}
POSITIONS = torch.tensor([[0, 1, 2, 7, 63, 64, 65, 300, 1000, 2559]])  # inside and past the original 64


def config(rope: str, interleave: bool, q_lora_rank: int | None) -> DeepseekV3Config:
    cfg = DeepseekV3Config(
        hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=q_lora_rank,
        kv_lora_rank=KV_RANK, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V,
        rope_parameters=dict(ROPES[rope]), rope_interleave=interleave, max_position_embeddings=2560,
        num_hidden_layers=1, vocab_size=10,
    )
    cfg._attn_implementation = "posenc_mla_capture"
    return cfg


captured: dict[str, object] = {}


def _capture(module, query, key, value, attention_mask, scaling, **kwargs):  # type: ignore[no-untyped-def]
    captured.update(query=query, key=key, value=value, scaling=scaling)
    return eager_attention_forward(module, query, key, value, attention_mask, scaling, **kwargs)


AttentionInterface.register("posenc_mla_capture", _capture)


def attention_module(cfg: DeepseekV3Config, dtype: torch.dtype) -> DeepseekV3Attention:
    torch.manual_seed(0)
    module = DeepseekV3Attention(cfg, 0).to(dtype).eval()
    with torch.no_grad():
        for p in module.parameters():  # random weights, RMSNorm gains included
            p.copy_(torch.randn_like(p) * (0.3 if p.ndim == 2 else 1.0))
    return module


def causal_mask(seq: int, dtype: torch.dtype) -> torch.Tensor:
    # (1, 1, seq, seq): 0 where a query may attend, the dtype's minimum above the diagonal
    upper = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return torch.zeros(seq, seq, dtype=dtype).masked_fill(upper, torch.finfo(dtype).min)[None, None]


def posenc_attention(module: DeepseekV3Attention, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     *, interleaved: bool) -> dict[str, torch.Tensor | float]:
    """MLA written out with posenc's rotary part, from the module's own weights."""
    batch, seq, _ = hidden.shape
    if module.q_lora_rank is None:
        q = module.q_proj(hidden)
    else:
        q = module.q_b_proj(module.q_a_layernorm(module.q_a_proj(hidden)))
    q = q.view(batch, seq, HEADS, NOPE + ROPE).transpose(1, 2)  # -> (batch, heads, seq, d_qk)
    kv_latent, k_pe = module.kv_a_proj_with_mqa(hidden).split([KV_RANK, ROPE], dim=-1)
    k_pe = k_pe.view(batch, 1, seq, ROPE)  # one rotary key head shared by all heads
    q, k_pe = mla_rope(q, k_pe, cos, sin, interleaved=interleaved)
    kv = module.kv_b_proj(module.kv_a_layernorm(kv_latent))
    kv = kv.view(batch, seq, HEADS, NOPE + V).transpose(1, 2)  # -> (batch, heads, seq, d_nope + d_v)
    k_nope, value = kv.split([NOPE, V], dim=-1)
    key = torch.cat((k_nope, k_pe.expand(-1, HEADS, -1, -1)), dim=-1)
    scale = mla_softmax_scale(NOPE + ROPE, scaling=module.config.rope_parameters)
    weights = torch.softmax(q @ key.transpose(-1, -2) * scale + causal_mask(seq, q.dtype), dim=-1)
    out = (weights @ value).transpose(1, 2).reshape(batch, seq, HEADS * V)  # (batch, seq, heads * d_v)
    return {"query": q, "key": key, "value": value, "scaling": scale, "output": module.o_proj(out)}


def posenc_cos_sin(rope: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return rope_cos_sin(POSITIONS[0], ROPE, base=THETA, scaling=ROPES[rope], layout="half", dtype=dtype)


@pytest.mark.parametrize("rope", sorted(ROPES))
def test_cos_sin_equal_the_rotary_module(rope: str) -> None:
    cfg = config(rope, True, None)
    want_cos, want_sin = DeepseekV3RotaryEmbedding(cfg)(torch.zeros(1), POSITIONS)  # float32 in transformers
    cos, sin = posenc_cos_sin(rope, torch.float64)
    # transformers' angles are float32 products p * theta, each rounded by up to 2**-24 of itself
    # (9.1e-6 at most here, measured with transformers 5.24); posenc's are float64.
    torch.testing.assert_close(cos[None].float(), want_cos, rtol=0, atol=3e-5)
    torch.testing.assert_close(sin[None].float(), want_sin, rtol=0, atol=3e-5)


@pytest.mark.parametrize("rope", sorted(ROPES))
@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("q_lora_rank", [None, 8])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_queries_keys_scale_and_output_equal_transformers(
    rope: str, interleave: bool, q_lora_rank: int | None, dtype: torch.dtype, tol: float
) -> None:
    module = attention_module(config(rope, interleave, q_lora_rank), dtype)
    hidden = torch.randn(1, POSITIONS.shape[1], HIDDEN, dtype=dtype)
    # The same cos/sin on both sides (the rotary module itself is compared above, in float32).
    cos, sin = posenc_cos_sin(rope, dtype)
    with torch.no_grad():
        want_output, _ = module(hidden, (cos[None], sin[None]), causal_mask(POSITIONS.shape[1], dtype))
        got = posenc_attention(module, hidden, cos, sin, interleaved=interleave)
    assert got["scaling"] == captured["scaling"]
    for name in ("query", "key", "value"):
        torch.testing.assert_close(got[name], captured[name], rtol=tol, atol=tol)
    # The unrotated channels are the projections themselves: equal bit for bit.
    assert torch.equal(got["query"][..., :NOPE], captured["query"][..., :NOPE])  # type: ignore[index]
    assert torch.equal(got["key"][..., :NOPE], captured["key"][..., :NOPE])  # type: ignore[index]
    # transformers' eager attention takes its softmax in float32 whatever the dtype: float32's tolerance.
    torch.testing.assert_close(got["output"], want_output, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rope", sorted(ROPES))
def test_with_the_rotary_module_of_transformers(rope: str) -> None:
    """The whole float32 path: transformers' own cos/sin against posenc's."""
    module = attention_module(config(rope, True, 8), torch.float32)
    hidden = torch.randn(1, POSITIONS.shape[1], HIDDEN)
    with torch.no_grad():
        position_embeddings = DeepseekV3RotaryEmbedding(module.config)(hidden, POSITIONS)
        want_output, _ = module(hidden, position_embeddings, causal_mask(POSITIONS.shape[1], torch.float32))
        got = posenc_attention(module, hidden, *posenc_cos_sin(rope, torch.float32), interleaved=True)
    # cos/sin differ by transformers' float32 angles (see above): 1.7e-5 at most on the queries here.
    torch.testing.assert_close(got["query"], captured["query"], rtol=0, atol=1e-4)
    torch.testing.assert_close(got["output"], want_output, rtol=0, atol=1e-4)


@pytest.mark.parametrize("rope", sorted(ROPES))
def test_softmax_scale_and_cos_sin_factor(rope: str) -> None:
    module = attention_module(config(rope, True, None), torch.float32)
    params = ROPES[rope]
    assert mla_softmax_scale(NOPE + ROPE, scaling=params) == module.scaling
    attention_factor = DeepseekV3RotaryEmbedding(module.config).attention_scaling
    if rope == "default":
        assert module.scaling == (NOPE + ROPE) ** -0.5 and attention_factor == 1.0
        return
    yarn = {m: 0.1 * m * math.log(40.0) + 1 for m in (params["mscale"], params["mscale_all_dim"])}
    assert module.scaling == pytest.approx((NOPE + ROPE) ** -0.5 * yarn[1.0] ** 2, rel=1e-15)
    assert attention_factor == pytest.approx(yarn[params["mscale"]] / yarn[1.0], rel=1e-15)
    cos, _ = posenc_cos_sin(rope, torch.float64)
    assert float(cos[0, 0]) == pytest.approx(attention_factor, rel=1e-15)  # position 0: cos = the factor
    if rope == "yarn_v3":
        assert attention_factor == 1.0


@pytest.mark.parametrize("q_lora_rank", [None, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_permuted_weights_with_half_layout_equal_interleaved_weights(q_lora_rank: int | None,
                                                                    dtype: torch.dtype) -> None:
    interleaved = attention_module(config("yarn", True, q_lora_rank), dtype)
    half = attention_module(config("yarn", False, q_lora_rank), dtype)
    q_name = "q_proj" if q_lora_rank is None else "q_b_proj"
    state = interleaved.state_dict()
    state[f"{q_name}.weight"] = mla_permute_for_half_layout(state[f"{q_name}.weight"], HEADS, ROPE)
    state["kv_a_proj_with_mqa.weight"] = mla_permute_for_half_layout(state["kv_a_proj_with_mqa.weight"], 1, ROPE)
    half.load_state_dict(state)
    hidden = torch.randn(1, POSITIONS.shape[1], HIDDEN, dtype=dtype)
    cos, sin = posenc_cos_sin("yarn", dtype)
    mask = causal_mask(POSITIONS.shape[1], dtype)
    with torch.no_grad():
        want_output, _ = interleaved(hidden, (cos[None], sin[None]), mask)
        want = {k: captured[k] for k in ("query", "key")}
        got_output, _ = half(hidden, (cos[None], sin[None]), mask)
        ours = posenc_attention(half, hidden, cos, sin, interleaved=False)
    # The permutation moves rows; the run-time conversion moves channels: the same numbers.
    for name in ("query", "key"):
        torch.testing.assert_close(captured[name], want[name], rtol=0, atol=0)
        torch.testing.assert_close(ours[name], want[name], rtol=0, atol=0)
    logits = want["query"] @ want["key"].transpose(-1, -2)  # type: ignore[operator]
    torch.testing.assert_close(ours["query"] @ ours["key"].transpose(-1, -2), logits, rtol=0, atol=0)
    torch.testing.assert_close(got_output, want_output, rtol=0, atol=0)
    # Without the permutation the half-layout module rotates the wrong pairs.
    half.load_state_dict(interleaved.state_dict())
    with torch.no_grad():
        half(hidden, (cos[None], sin[None]), mask)
    assert not torch.allclose(captured["query"], want["query"], atol=1e-3)  # type: ignore[arg-type]
