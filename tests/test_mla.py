"""posenc.mla: MLA's decoupled rotary part, its softmax scale and its weight permutation."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import (
    apply_rope,
    interleaved_to_half,
    mla_permute_for_half_layout,
    mla_rope,
    mla_softmax_scale,
    rope_cos_sin,
    rope_report,
)

YARN = {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096}


# --------------------------------------------------------------------------------------------
# mla_softmax_scale
# --------------------------------------------------------------------------------------------


def test_softmax_scale_values() -> None:
    assert mla_softmax_scale(192) == 192**-0.5
    assert mla_softmax_scale(192, scaling={"rope_type": "default"}) == 192**-0.5
    m = 0.1 * 1.0 * math.log(40.0) + 1.0  # yarn(mscale_all_dim = 1)
    assert mla_softmax_scale(192, scaling=YARN) == pytest.approx(192**-0.5 * m * m, rel=1e-15)
    # DeepSeek-V2's values, legacy "type" key: the scale reads mscale_all_dim only.
    v2 = {"type": "yarn", "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
          "original_max_position_embeddings": 4096}
    m = 0.1 * 0.707 * math.log(40.0) + 1.0
    assert mla_softmax_scale(192, scaling=v2) == pytest.approx(192**-0.5 * m * m, rel=1e-15)
    assert mla_softmax_scale(192, scaling={**v2, "mscale": 5.0}) == mla_softmax_scale(192, scaling=v2)


def test_softmax_scale_without_mscale_all_dim_or_extension() -> None:
    for missing in ({k: v for k, v in YARN.items() if k != "mscale_all_dim"}, {**YARN, "mscale_all_dim": 0},
                    {**YARN, "mscale_all_dim": None}, {**YARN, "factor": 1.0}, {**YARN, "factor": 0.5}):
        assert mla_softmax_scale(24, scaling=missing) == 24**-0.5


def test_softmax_scale_factor_from_the_context_ratio() -> None:
    # Without factor, YaRN's frequencies use max / original max: so does the scale.
    ratio = {k: v for k, v in YARN.items() if k != "factor"} | {"max_position_embeddings": 4096 * 8}
    assert mla_softmax_scale(24, scaling=ratio) == mla_softmax_scale(24, scaling={**YARN, "factor": 8.0})


def test_softmax_scale_reads_the_given_factor_before_the_context_ratio() -> None:
    # A factor that differs from max / original max: the factor wins, as for the frequencies.
    given = {**YARN, "max_position_embeddings": 4096 * 8}
    m = 0.1 * math.log(40.0) + 1.0
    assert mla_softmax_scale(24, scaling=given) == pytest.approx(24**-0.5 * m * m, rel=1e-15)
    # A given factor needs no context lengths.
    bare = {"rope_type": "yarn", "factor": 40.0, "mscale_all_dim": 1.0}
    assert mla_softmax_scale(24, scaling=bare) == pytest.approx(24**-0.5 * m * m, rel=1e-15)


def test_softmax_scale_of_parameters_without_a_type_is_the_plain_scale() -> None:
    # No rope_type and no type: transformers' "default", whatever else the dict holds.
    assert mla_softmax_scale(24, scaling={"factor": 40.0}) == 24**-0.5


def test_rope_report_uses_it() -> None:
    deepseek = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                "num_hidden_layers": 61, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "max_position_embeddings": 163840, "rope_theta": 10000,
                "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                 "beta_fast": 32, "beta_slow": 1, "original_max_position_embeddings": 4096}}
    report = rope_report(deepseek)
    assert report.softmax_scale == mla_softmax_scale(192, scaling=deepseek["rope_scaling"])
    assert "mscale 1.36889 from factor 40 and mscale_all_dim 1" in report.softmax_scale_rule


def test_softmax_scale_bad_input() -> None:
    with pytest.raises(TypeError, match=r"^qk_head_dim must be an int, got 192.0 of type float$"):
        mla_softmax_scale(192.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^qk_head_dim must be a positive integer, got 0$"):
        mla_softmax_scale(0)
    with pytest.raises(TypeError, match=r"^scaling must be a dict in Hugging Face rope_parameters form or None, "
                                        r"got list$"):
        mla_softmax_scale(24, scaling=[("rope_type", "yarn")])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^scaling\['rope_type'\] must be one of .*; got 'yarm'$"):
        mla_softmax_scale(24, scaling={**YARN, "rope_type": "yarm"})
    with pytest.raises(TypeError, match=r"^scaling\['mscale_all_dim'\] must be a real number, got '1' of type str$"):
        mla_softmax_scale(24, scaling={**YARN, "mscale_all_dim": "1"})
    with pytest.raises(ValueError, match=r"^scaling\['mscale_all_dim'\] must be finite, got inf$"):
        mla_softmax_scale(24, scaling={**YARN, "mscale_all_dim": math.inf})
    with pytest.raises(ValueError, match=r"^scaling\['mscale_all_dim'\] is a key of rope_type='yarn', "
                                         r"got it with rope_type='linear'$"):
        mla_softmax_scale(24, scaling={"rope_type": "linear", "factor": 2.0, "mscale_all_dim": 1.0})
    with pytest.raises(ValueError, match=r"^scaling\['factor'\] must be a finite number > 0, got -40.0$"):
        mla_softmax_scale(24, scaling={**YARN, "factor": -40.0})
    with pytest.raises(ValueError, match=r"^rope_type='yarn' without scaling\['factor'\] needs "
                                         r"scaling\['max_position_embeddings'\] \(factor = max / original max\)$"):
        mla_softmax_scale(24, scaling={k: v for k, v in YARN.items() if k != "factor"})


# --------------------------------------------------------------------------------------------
# mla_rope
# --------------------------------------------------------------------------------------------

NOPE, ROPE, HEADS, SEQ = 6, 8, 3, 5


def _inputs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    q = torch.randn(2, HEADS, SEQ, NOPE + ROPE, dtype=dtype)  # (batch, heads, seq, d_qk)
    k_pe = torch.randn(2, 1, SEQ, ROPE, dtype=dtype)  # (batch, 1, seq, r)
    cos, sin = rope_cos_sin(SEQ, ROPE, dtype=dtype)
    return q, k_pe, cos, sin


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("interleaved", [True, False])
def test_mla_rope_shapes_dtype_and_parts(dtype: torch.dtype, interleaved: bool) -> None:
    q, k_pe, cos, sin = _inputs(dtype)
    got_q, got_k = mla_rope(q, k_pe, cos, sin, interleaved=interleaved)
    assert got_q.shape == q.shape and got_k.shape == k_pe.shape
    assert got_q.dtype == dtype and got_k.dtype == dtype
    assert torch.equal(got_q[..., :NOPE], q[..., :NOPE])  # the nope part passes through
    convert = interleaved_to_half if interleaved else (lambda x: x)
    assert torch.equal(got_q[..., NOPE:], apply_rope(convert(q[..., NOPE:]), cos, sin))
    assert torch.equal(got_k, apply_rope(convert(k_pe), cos, sin))


def test_mla_rope_interleaved_scores_equal_the_interleaved_rotation() -> None:
    q, k_pe, _, _ = _inputs(torch.float64)
    cos, sin = rope_cos_sin(SEQ, ROPE, dtype=torch.float64)
    cos_i, sin_i = rope_cos_sin(SEQ, ROPE, layout="interleaved", dtype=torch.float64)
    got_q, got_k = mla_rope(q, k_pe, cos, sin)
    want_q = apply_rope(q[..., NOPE:], cos_i, sin_i, layout="interleaved")
    want_k = apply_rope(k_pe, cos_i, sin_i, layout="interleaved")
    torch.testing.assert_close(got_q[..., NOPE:] @ got_k.transpose(-1, -2), want_q @ want_k.transpose(-1, -2),
                               rtol=1e-13, atol=1e-13)
    # Relative: the rotary score of (m, n) depends on n - m only.
    q0 = q[:, :, :1, NOPE:].expand(-1, -1, SEQ, -1)  # the same query at every position
    k0 = k_pe[:, :, :1].expand(-1, -1, SEQ, -1)
    rq, rk = mla_rope(torch.cat((q[..., :NOPE], q0), -1), k0, cos, sin)
    scores = rq[..., NOPE:] @ rk.transpose(-1, -2)  # (batch, heads, seq, seq)
    torch.testing.assert_close(torch.diagonal(scores, 1, -2, -1)[..., 1:], torch.diagonal(scores, 1, -2, -1)[..., :-1])


def test_mla_rope_rotary_part_only_and_broadcast_cos() -> None:
    q, k_pe, cos, sin = _inputs()
    # Per-sample cos/sin with the heads axis: (batch, 1, seq, r).
    got = mla_rope(q, k_pe, cos.expand(2, 1, SEQ, ROPE), sin.expand(2, 1, SEQ, ROPE))
    want = mla_rope(q, k_pe, cos, sin)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    # No nope part at all (qk_nope_head_dim = 0) is allowed.
    only = mla_rope(q[..., NOPE:].contiguous(), k_pe, cos, sin, interleaved=False)
    assert torch.equal(only[0], apply_rope(q[..., NOPE:], cos, sin))
    # Without a heads axis on k_pe.
    flat = mla_rope(q, k_pe[:, 0], cos, sin)
    assert torch.equal(flat[1], want[1][:, 0])


def test_mla_rope_gradients() -> None:
    q, k_pe, cos, sin = (t.double() for t in _inputs())
    q.requires_grad_(True)
    k_pe.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: mla_rope(a, b, cos, sin), (q, k_pe))


def test_mla_rope_bad_input() -> None:
    q, k_pe, cos, sin = _inputs()
    with pytest.raises(TypeError, match=r"^q must be a torch.Tensor, got list$"):
        mla_rope([1.0], k_pe, cos, sin)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^k_pe must have a floating-point dtype, got torch.int64$"):
        mla_rope(q, k_pe.long(), cos, sin)
    with pytest.raises(TypeError, match=r"^cos must be a torch.Tensor, got list$"):
        mla_rope(q, k_pe, [1.0], sin)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^sin must have a floating-point dtype, got torch.int64$"):
        mla_rope(q, k_pe, cos, sin.long())
    with pytest.raises(TypeError, match=r"^interleaved must be a bool, got 1 of type int$"):
        mla_rope(q, k_pe, cos, sin, interleaved=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^q and k_pe must have at least 1 dimension, got shapes \(\) and "
                                         r"\(2, 1, 5, 8\)$"):
        mla_rope(torch.tensor(1.0), k_pe, cos, sin)
    with pytest.raises(ValueError, match=r"^k_pe.shape\[-1\] must be even and in \[2, q.shape\[-1\]=14\] \(the "
                                         r"rotary width qk_rope_head_dim; channels rotate in pairs\), got 7$"):
        mla_rope(q, k_pe[..., :7], cos, sin)
    with pytest.raises(ValueError, match=r"^k_pe.shape\[-1\] must be even and in \[2, q.shape\[-1\]=6\] .*, got 8$"):
        mla_rope(q[..., :6], k_pe, cos, sin)
    with pytest.raises(ValueError, match=r"^k_pe.shape\[-1\] must be even and in \[2, q.shape\[-1\]=14\] .*, got 0$"):
        mla_rope(q, k_pe[..., :0], cos, sin)
    with pytest.raises(ValueError, match=r"^q and k_pe must have the same dtype, got torch.float32 and "
                                         r"torch.float64$"):
        mla_rope(q, k_pe.double(), cos, sin)
    with pytest.raises(ValueError, match=r"^cos.shape\[-1\] must equal k_pe.shape\[-1\]=8 \(the rotary width\), "
                                         r"got shape \(5, 4\)$"):
        mla_rope(q, k_pe, cos[:, :4], sin[:, :4])  # a partial rotary width is not MLA's
    with pytest.raises(ValueError, match=r"^cos.shape\[-1\] must equal k_pe.shape\[-1\]=8 \(the rotary width\), "
                                         r"got shape \(\)$"):
        mla_rope(q, k_pe, torch.tensor(1.0), sin)
    with pytest.raises(ValueError, match=r"^cos and sin must have the same shape, got \(5, 8\) and \(4, 8\)$"):
        mla_rope(q, k_pe, cos, sin[:4])  # the rest of the cos/sin checks are apply_rope's


# --------------------------------------------------------------------------------------------
# mla_permute_for_half_layout
# --------------------------------------------------------------------------------------------


def test_permutation_moves_only_the_rotary_rows() -> None:
    weight = torch.arange(2 * (3 + 4), dtype=torch.float32)[:, None].expand(-1, 5)  # rows numbered
    got = mla_permute_for_half_layout(weight, 2, 4)
    assert got.shape == weight.shape
    assert got[:, 0].tolist() == [0, 1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 12, 11, 13]
    bias = torch.arange(16 + 8, dtype=torch.float32)  # kv_a_proj_with_mqa: one block, latent then rope
    assert mla_permute_for_half_layout(bias, 1, 8).tolist() == list(range(16)) + [16, 18, 20, 22, 17, 19, 21, 23]


def test_permuted_projection_gives_the_converted_channels() -> None:
    torch.manual_seed(1)
    weight = torch.randn(HEADS * (NOPE + ROPE), 10, dtype=torch.float64)
    hidden = torch.randn(4, 10, dtype=torch.float64)
    q = (hidden @ weight.T).view(4, HEADS, NOPE + ROPE)  # (tokens, heads, d_qk)
    permuted = (hidden @ mla_permute_for_half_layout(weight, HEADS, ROPE).T).view(4, HEADS, NOPE + ROPE)
    torch.testing.assert_close(permuted, torch.cat((q[..., :NOPE], interleaved_to_half(q[..., NOPE:])), -1))


def test_permutation_bad_input() -> None:
    weight = torch.zeros(2 * (NOPE + ROPE), 4)
    with pytest.raises(TypeError, match=r"^weight must be a torch.Tensor, got list$"):
        mla_permute_for_half_layout([[0.0]], 1, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^num_heads must be an int, got 2.0 of type float$"):
        mla_permute_for_half_layout(weight, 2.0, ROPE)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^num_heads must be a positive integer, got 0$"):
        mla_permute_for_half_layout(weight, 0, ROPE)
    with pytest.raises(ValueError, match=r"^rope_dim must be a positive integer, got -2$"):
        mla_permute_for_half_layout(weight, 2, -2)
    with pytest.raises(ValueError, match=r"^rope_dim must be even \(channels are rotated in pairs\), got 3$"):
        mla_permute_for_half_layout(weight, 2, 3)
    with pytest.raises(ValueError, match=r"^weight must be 2-D \(out_features, in_features\) or a 1-D bias, got "
                                         r"shape \(28, 4, 1\)$"):
        mla_permute_for_half_layout(weight[..., None], 2, ROPE)
    with pytest.raises(ValueError, match=r"^weight.shape\[0\]=28 must be num_heads=3 blocks of at least "
                                         r"rope_dim=8 rows$"):
        mla_permute_for_half_layout(weight, 3, ROPE)
    with pytest.raises(ValueError, match=r"^weight.shape\[0\]=28 must be num_heads=2 blocks of at least "
                                         r"rope_dim=16 rows$"):
        mla_permute_for_half_layout(weight, 2, 16)


def test_one_dimensional_inputs_rotate_like_a_batch_of_one() -> None:
    torch.manual_seed(0)
    q, k_pe = torch.randn(6, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.tensor([3]), 4, dtype=torch.float64)  # (1, 4)
    q1, k1 = mla_rope(q, k_pe, cos[0], sin[0])
    q2, k2 = mla_rope(q[None], k_pe[None], cos, sin)
    assert torch.equal(q1, q2[0]) and torch.equal(k1, k2[0])


def test_a_block_of_rotary_rows_only_is_permuted_whole() -> None:
    # A block with no unrotated rows (block == rope_dim) is the plain per-head permutation.
    from posenc import permute_for_half_layout

    weight = torch.randn(2 * 8, 5, dtype=torch.float64)
    assert torch.equal(mla_permute_for_half_layout(weight, 2, 8), permute_for_half_layout(weight, 2))
