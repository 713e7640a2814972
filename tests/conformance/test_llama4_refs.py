"""Llama 4 against transformers 5.x: its complex (interleaved) rotary form and the NoPE layers'
attention temperature."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AttentionInterface  # noqa: E402
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig  # noqa: E402
from transformers.models.llama4.modeling_llama4 import (  # noqa: E402
    Llama4TextAttention,
    Llama4TextRotaryEmbedding,
    apply_rotary_emb,
)

from posenc import apply_rope, attention_temperature, rope_cos_sin  # noqa: E402

HEAD_DIM, HEADS = 16, 4
SCALING = {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 64}  # Llama 4 Scout's kind, scaled down


def config(**options) -> Llama4TextConfig:  # type: ignore[no-untyped-def]
    return Llama4TextConfig(hidden_size=HEAD_DIM * HEADS, num_attention_heads=HEADS, num_key_value_heads=2,
                            head_dim=HEAD_DIM, num_hidden_layers=4, intermediate_size=32, intermediate_size_mlp=32,
                            vocab_size=10, rope_parameters={"rope_theta": 500000.0, **SCALING}, **options)


def test_rotary_equals_posenc_interleaved_layout() -> None:
    positions = torch.tensor([[0, 1, 5, 63, 64, 300]])
    freqs_cis = Llama4TextRotaryEmbedding(config())(torch.zeros(1), positions)
    q, k = torch.randn(2, 1, 6, HEADS, HEAD_DIM).unbind(0)  # (batch, seq, heads, head_dim), as Llama 4
    want_q, want_k = apply_rotary_emb(q, k, freqs_cis)
    cos, sin = rope_cos_sin(positions[0], HEAD_DIM, base=500000.0, scaling=SCALING, layout="interleaved")
    # (batch, seq, heads, head_dim) -> (batch, heads, seq, head_dim) for posenc, and back
    got_q = apply_rope(q.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    got_k = apply_rope(k.transpose(1, 2), cos, sin, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=5e-5)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=5e-5)


captured: dict[str, torch.Tensor] = {}


def _capture(module, query, key, value, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
    captured["query"] = query
    return torch.zeros_like(query).transpose(1, 2), None


AttentionInterface.register("posenc_capture", _capture)


@pytest.mark.parametrize("cached", [0, 5])
def test_nope_layer_queries_are_scaled_by_the_temperature(cached: int) -> None:
    cfg = config(floor_scale=4, attn_scale=0.3, attn_temperature_tuning=True)
    cfg._attn_implementation = "posenc_capture"
    layer = 3  # no_rope_layers = [1, 1, 1, 0]: the fourth layer has no RoPE
    attention = Llama4TextAttention(cfg, layer).double().eval()
    assert not attention.use_rope
    hidden = torch.randn(1, 11, HEAD_DIM * HEADS, dtype=torch.float64)
    cache = SimpleNamespace(get_seq_length=lambda idx: cached, update=lambda k, v, idx, kwargs=None: (k, v))
    attention(hidden, None, None, cache=cache if cached else None)
    plain = attention.q_proj(hidden).view(1, 11, HEADS, HEAD_DIM)  # (batch, seq, heads, head_dim)
    scale = attention_temperature(torch.arange(11) + cached, floor_scale=4, attn_scale=0.3, dtype=torch.float64)
    want = (plain * scale[None, :, None, None]).transpose(1, 2)  # -> (batch, heads, seq, head_dim)
    # transformers computes the factor in float32: equal to float32 rounding of the factor.
    torch.testing.assert_close(captured["query"], want, rtol=1e-6, atol=0)
    early = torch.arange(11) + cached + 1 < 4  # below floor_scale the factor is exactly 1
    assert bool((scale[early] == 1).all()) and scale[-1] > 1
