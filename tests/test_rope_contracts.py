"""Contracts of posenc.rope that a reviewer's bug would break."""

from __future__ import annotations

import math
import re

import pytest
import torch

from posenc.rope import (
    RotaryEmbedding,
    apply_rope,
    apply_rope_qk,
    axial_rope_cos_sin,
    half_to_interleaved,
    interleaved_to_half,
    permute_for_half_layout,
    rope_cos_sin,
    rope_inv_freq,
)

DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 4}


def _raises(error: type, message: str):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


# --------------------------------------------------------------------------------------------
# rope_inv_freq
# --------------------------------------------------------------------------------------------


def test_inv_freq_refuses_bad_seq_len_by_name() -> None:
    with _raises(ValueError, "seq_len must be a positive integer, got 0"):
        rope_inv_freq(8, seq_len=0)
    with _raises(TypeError, "seq_len must be an int, got True of type bool"):
        rope_inv_freq(8, seq_len=True)


def test_inv_freq_refuses_integer_dtype_by_name() -> None:
    with _raises(TypeError, "dtype must be a floating-point dtype, got torch.int32"):
        rope_inv_freq(8, dtype=torch.int32)


def test_inv_freq_defaults_to_float64_whatever_the_default_dtype() -> None:
    inv_freq, factor = rope_inv_freq(8)
    assert inv_freq.dtype == torch.float64
    assert factor == 1.0
    assert rope_inv_freq(8, dtype=torch.float16)[0].dtype == torch.float16


def test_inv_freq_is_made_on_the_requested_device() -> None:
    inv_freq, _ = rope_inv_freq(8, device="meta")
    assert inv_freq.device.type == "meta"
    assert inv_freq.shape == (4,)


def test_inv_freq_dynamic_depends_on_the_given_seq_len() -> None:
    short, _ = rope_inv_freq(8, scaling=DYNAMIC, seq_len=4)
    long, _ = rope_inv_freq(8, scaling=DYNAMIC, seq_len=8)
    assert torch.equal(short, rope_inv_freq(8)[0])
    assert (long[1:] < short[1:]).all()


# --------------------------------------------------------------------------------------------
# rope_cos_sin
# --------------------------------------------------------------------------------------------


def test_cos_sin_refuse_bad_arguments_with_whole_messages() -> None:
    with _raises(ValueError, "layout must be one of 'half', 'interleaved'; got 'x'"):
        rope_cos_sin(3, 8, layout="x")
    with _raises(TypeError, "dtype must be a floating-point dtype, got torch.int32"):
        rope_cos_sin(3, 8, dtype=torch.int32)
    with _raises(ValueError, "positions must be a positive integer, got 0"):
        rope_cos_sin(0, 8)


@pytest.mark.parametrize(("positions", "name"), [
    (torch.tensor([True]), "torch.bool"),
    (torch.tensor([1j]), "torch.complex64"),
])
def test_cos_sin_refuse_bool_and_complex_positions(positions: torch.Tensor, name: str) -> None:
    with _raises(TypeError, f"positions must be an integer or float tensor, got {name}"):
        rope_cos_sin(positions, 8)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cos_sin_refuse_half_precision_positions(dtype: torch.dtype) -> None:
    with _raises(TypeError, f"positions must not be held in {dtype} (it cannot represent every integer "
                            "position); pass an integer tensor"):
        rope_cos_sin(torch.tensor([1.0], dtype=dtype), 8)


def test_cos_sin_refuse_non_finite_positions() -> None:
    with _raises(ValueError, "positions must be finite; got a tensor containing NaN or inf"):
        rope_cos_sin(torch.tensor([0.0, float("nan")]), 8)


@pytest.mark.parametrize(("positions", "shown"), [(True, "True of type bool"), (2.5, "2.5 of type float"),
                                                  ([0, 1], "[0, 1] of type list")])
def test_cos_sin_refuse_other_positions(positions: object, shown: str) -> None:
    with _raises(TypeError, "positions must be an int (a sequence length) or a torch.Tensor of positions, "
                            f"got {shown}"):
        rope_cos_sin(positions, 8)


def test_cos_sin_of_a_length_are_made_on_the_requested_device() -> None:
    cos, sin = rope_cos_sin(3, 8, device="meta")
    assert cos.device.type == sin.device.type == "meta"
    assert cos.shape == sin.shape == (3, 8)


def test_cos_sin_of_positions_move_to_the_requested_device() -> None:
    cos, sin = rope_cos_sin(torch.arange(3), 8, device="meta")
    assert cos.device.type == sin.device.type == "meta"
    # Without a device, the positions' device.
    cos, _ = rope_cos_sin(torch.arange(3, device="meta"), 8)
    assert cos.device.type == "meta"


def test_cos_sin_default_to_the_default_dtype() -> None:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        cos, sin = rope_cos_sin(3, 8)
    finally:
        torch.set_default_dtype(previous)
    assert cos.dtype == sin.dtype == torch.float64
    assert rope_cos_sin(3, 8)[0].dtype == previous


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cos_sin_of_two_dimensional_positions_lay_out_the_last_axis(layout: str) -> None:
    positions = torch.tensor([[0, 1, 2], [5, 6, 7]])
    cos, sin = rope_cos_sin(positions, 4, layout=layout)
    assert cos.shape == sin.shape == (2, 3, 4)
    inv_freq = [1.0, 0.01]
    pair = [0, 1, 0, 1] if layout == "half" else [0, 0, 1, 1]
    want_cos = torch.tensor([[[math.cos(p * inv_freq[j]) for j in pair] for p in row] for row in positions.tolist()])
    want_sin = torch.tensor([[[math.sin(p * inv_freq[j]) for j in pair] for p in row] for row in positions.tolist()])
    torch.testing.assert_close(cos, want_cos, rtol=0, atol=1e-7)
    torch.testing.assert_close(sin, want_sin, rtol=0, atol=1e-7)


def test_cos_sin_dynamic_length_is_the_last_float_position_floored_plus_one() -> None:
    # Positions up to 4.5: length floor(4.5) + 1 = 5 > 4, so the frequencies are those of length 5.
    cos, _ = rope_cos_sin(torch.tensor([0.0, 4.5]), 8, scaling=DYNAMIC)
    inv_freq, _ = rope_inv_freq(8, scaling=DYNAMIC, seq_len=5)
    torch.testing.assert_close(cos[1], torch.cos(4.5 * inv_freq).repeat(2).float(), rtol=0, atol=1e-7)
    # Positions up to 3.5: length 4, the threshold: the unscaled frequencies.
    cos, _ = rope_cos_sin(torch.tensor([0.0, 3.5]), 8, scaling=DYNAMIC)
    torch.testing.assert_close(cos[1], torch.cos(3.5 * rope_inv_freq(8)[0]).repeat(2).float(), rtol=0, atol=1e-7)


def test_cos_sin_of_no_positions_are_empty_even_with_dynamic_scaling() -> None:
    cos, sin = rope_cos_sin(torch.zeros(0, dtype=torch.long), 8, scaling=DYNAMIC)
    assert cos.shape == sin.shape == (0, 8)


def test_cos_sin_of_large_integer_positions_use_float64_angles() -> None:
    # 2**24 + 1 is not a float32: a float32 angle would be that of 2**24.
    position = 2**24 + 1
    cos, _ = rope_cos_sin(torch.tensor([position]), 2, dtype=torch.float64)
    assert cos[0, 0].item() == math.cos(position)


# --------------------------------------------------------------------------------------------
# axial_rope_cos_sin
# --------------------------------------------------------------------------------------------


def test_axial_refuses_bad_arguments_with_whole_messages() -> None:
    with _raises(ValueError, "height must be a positive integer, got 0"):
        axial_rope_cos_sin(0, 2, 8)
    with _raises(ValueError, "width must be a positive integer, got 0"):
        axial_rope_cos_sin(2, 0, 8)
    with _raises(ValueError, "dim must be a positive integer, got 0"):
        axial_rope_cos_sin(2, 2, 0)
    with _raises(ValueError, "dim must be divisible by 4 (a rotated pair per frequency for each of 2 axes), got 6"):
        axial_rope_cos_sin(2, 2, 6)
    with _raises(ValueError, "base must be a finite number > 0, got 0.0"):
        axial_rope_cos_sin(2, 2, 8, base=0.0)
    with _raises(ValueError, "layout must be one of 'half', 'interleaved'; got 'x'"):
        axial_rope_cos_sin(2, 2, 8, layout="x")
    with _raises(TypeError, "dtype must be a floating-point dtype, got torch.int64"):
        axial_rope_cos_sin(2, 2, 8, dtype=torch.int64)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_axial_angles_are_row_then_column_in_row_major_order(layout: str) -> None:
    base = 100.0
    cos, sin = axial_rope_cos_sin(2, 3, 8, base=base, layout=layout, dtype=torch.float64)
    omega = [1.0, base ** -0.5]
    want = []
    for t in range(6):
        r, c = divmod(t, 3)
        angles = [r * omega[0], r * omega[1], c * omega[0], c * omega[1]]
        want.append(angles + angles if layout == "half" else [a for a in angles for _ in range(2)])
    want = torch.tensor(want, dtype=torch.float64)
    torch.testing.assert_close(cos, torch.cos(want), rtol=0, atol=1e-15)
    torch.testing.assert_close(sin, torch.sin(want), rtol=0, atol=1e-15)


def test_axial_defaults_to_the_default_dtype_and_the_given_device() -> None:
    cos, sin = axial_rope_cos_sin(2, 2, 8)
    assert cos.dtype == sin.dtype == torch.get_default_dtype()
    cos, sin = axial_rope_cos_sin(2, 3, 8, device="meta")
    assert cos.device.type == sin.device.type == "meta"
    assert cos.shape == (6, 8)


def test_axial_default_base_is_ten_thousand() -> None:
    assert torch.equal(axial_rope_cos_sin(1, 2, 8)[1], axial_rope_cos_sin(1, 2, 8, base=10000.0)[1])
    assert not torch.equal(axial_rope_cos_sin(1, 2, 8)[1], axial_rope_cos_sin(1, 2, 8, base=100.0)[1])


# --------------------------------------------------------------------------------------------
# apply_rope: argument checks
# --------------------------------------------------------------------------------------------


def _x_cos_sin():
    torch.manual_seed(0)
    cos, sin = rope_cos_sin(3, 8)
    return torch.randn(2, 3, 8), cos, sin


def test_apply_rope_refuses_bad_choices_with_whole_messages() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "layout must be one of 'half', 'interleaved'; got 'x'"):
        apply_rope(x, cos, sin, layout="x")
    with _raises(ValueError, "backend must be one of 'auto', 'torch', 'triton'; got 'x'"):
        apply_rope(x, cos, sin, backend="x")


@pytest.mark.parametrize("which", ["x", "cos", "sin"])
def test_apply_rope_refuses_integer_tensors_by_name(which: str) -> None:
    args = dict(zip(("x", "cos", "sin"), _x_cos_sin()))
    args[which] = args[which].long()
    with _raises(TypeError, f"{which} must have a floating-point dtype, got torch.int64"):
        apply_rope(args["x"], args["cos"], args["sin"])


def test_apply_rope_refuses_cos_and_sin_of_different_shapes() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "cos and sin must have the same shape, got (3, 8) and (3, 6)"):
        apply_rope(x, cos, sin[:, :6])


def test_apply_rope_refuses_cos_or_sin_on_another_device() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "cos and sin must be on x's device cpu, got meta and cpu"):
        apply_rope(x, cos.to("meta"), sin)
    with _raises(ValueError, "cos and sin must be on x's device cpu, got cpu and meta"):
        apply_rope(x, cos, sin.to("meta"))


def test_apply_rope_refuses_zero_dimensional_tensors() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "x and cos must have at least 1 dimension, got shapes () and (3, 8)"):
        apply_rope(torch.tensor(1.0), cos, sin)
    with _raises(ValueError, "x and cos must have at least 1 dimension, got shapes (2, 3, 8) and ()"):
        apply_rope(x, torch.tensor(1.0), torch.tensor(1.0))


def test_apply_rope_refuses_cos_between_two_and_x_dimensions() -> None:
    x = torch.randn(2, 2, 3, 8)
    cos, sin = rope_cos_sin(torch.zeros(2, 3, dtype=torch.long), 8)  # (batch, seq, w): no heads axis
    with _raises(ValueError,
                 "cos/sin of shape (2, 3, 8) must have 2 dimensions (seq, w) or as many as x of shape "
                 "(2, 2, 3, 8) (4); with 3, their leading axes would align with the wrong axes of x (a batch "
                 "axis against heads). For per-sample positions and x of shape (batch, heads, seq, dim), pass "
                 "cos.unsqueeze(1) and sin.unsqueeze(1) (Hugging Face's unsqueeze_dim=1)"):
        apply_rope(x, cos, sin)
    # With the heads axis inserted, or with as many axes as x, it rotates.
    out = apply_rope(x, cos.unsqueeze(1), sin.unsqueeze(1))
    assert torch.equal(out, x)  # every position is 0
    assert torch.equal(apply_rope(x[0], cos, sin), x[0])


@pytest.mark.parametrize("width", [5, 0, 10])
def test_apply_rope_refuses_rotary_widths_outside_two_to_dim(width: int) -> None:
    x = torch.randn(2, 3, 8)
    cos = torch.ones(3, width)
    with _raises(ValueError, "cos.shape[-1] must be even and in [2, x.shape[-1]=8] (the rotary width; "
                             f"channels are rotated in pairs), got {width}"):
        apply_rope(x, cos, cos)


def test_apply_rope_rotates_with_the_smallest_width() -> None:
    x = torch.randn(3, 8)
    cos, sin = rope_cos_sin(3, 2)
    out = apply_rope(x, cos, sin)
    assert torch.equal(out[:, 2:], x[:, 2:])
    assert not torch.equal(out[1:, :2], x[1:, :2])


def test_apply_rope_refuses_cos_that_would_enlarge_x() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "cos/sin of shape (2, 8) must broadcast to x of shape (2, 3, 8) without enlarging it"):
        apply_rope(x, cos[:2], sin[:2])
    # A 1-D x has no sequence axis for 2-D cos/sin to align with.
    cos1, sin1 = rope_cos_sin(1, 8)
    with _raises(ValueError, "cos/sin of shape (1, 8) must broadcast to x of shape (8,) without enlarging it"):
        apply_rope(torch.randn(8), cos1, sin1)


def test_apply_rope_takes_cos_with_size_one_axes() -> None:
    x = torch.randn(2, 3, 8)
    cos, sin = rope_cos_sin(torch.arange(3)[None], 8)  # (1, 3, 8)
    assert torch.equal(apply_rope(x, cos, sin), apply_rope(x, cos[0], sin[0]))


def test_apply_rope_casts_cos_and_sin_to_the_dtype_of_x() -> None:
    x = torch.randn(2, 3, 8, dtype=torch.float16)
    cos, sin = rope_cos_sin(3, 8, dtype=torch.float64)
    out = apply_rope(x, cos, sin)
    assert out.dtype == torch.float16
    assert torch.equal(out, apply_rope(x, cos.half(), sin.half()))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_pairs_channels_as_the_layout_says(layout: str) -> None:
    # One pair (channel 0 with 2 in "half", with 1 in "interleaved") at angle pi/2: (a, b) -> (-b, a).
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    angle = torch.tensor([[math.pi / 2, 0.0]], dtype=torch.float64)
    per_channel = torch.cat([angle, angle], -1) if layout == "half" else angle.repeat_interleave(2, -1)
    out = apply_rope(x, torch.cos(per_channel).float(), torch.sin(per_channel).float(), layout=layout)
    want = [[-3.0, 2.0, 1.0, 4.0]] if layout == "half" else [[-2.0, 1.0, 3.0, 4.0]]
    torch.testing.assert_close(out, torch.tensor(want), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------------------------
# apply_rope_qk
# --------------------------------------------------------------------------------------------


def test_apply_rope_qk_refuses_bad_choices_with_whole_messages() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "layout must be one of 'half', 'interleaved'; got 'x'"):
        apply_rope_qk(x, x, cos, sin, layout="x")
    with _raises(ValueError, "backend must be one of 'auto', 'torch', 'triton'; got 'x'"):
        apply_rope_qk(x, x, cos, sin, backend="x")
    with _raises(TypeError, "inplace must be a bool, got 1 of type int"):
        apply_rope_qk(x, x, cos, sin, inplace=1)


def test_apply_rope_qk_checks_both_q_and_k() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(TypeError, "x must have a floating-point dtype, got torch.int64"):
        apply_rope_qk(x.long(), x, cos, sin)
    with _raises(TypeError, "x must have a floating-point dtype, got torch.int64"):
        apply_rope_qk(x, x.long(), cos, sin)


def test_apply_rope_qk_refuses_q_and_k_of_different_dtype_or_width() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "q and k must have the same dtype and last dimension, got torch.float32 of shape "
                             "(2, 3, 8) and torch.float64 of shape (2, 3, 8)"):
        apply_rope_qk(x, x.double(), cos, sin)
    with _raises(ValueError, "q and k must have the same dtype and last dimension, got torch.float32 of shape "
                             "(2, 3, 8) and torch.float32 of shape (2, 3, 6)"):
        apply_rope_qk(x, torch.randn(2, 3, 6), cos[:, :6], sin[:, :6])


def test_apply_rope_qk_equals_apply_rope_on_each_with_cos_cast() -> None:
    q, k = torch.randn(2, 3, 8, dtype=torch.float16), torch.randn(1, 3, 8, dtype=torch.float16)
    cos, sin = rope_cos_sin(3, 8, layout="interleaved", dtype=torch.float64)
    got_q, got_k = apply_rope_qk(q, k, cos, sin, layout="interleaved")
    assert got_q.dtype == got_k.dtype == torch.float16
    assert torch.equal(got_q, apply_rope(q, cos, sin, layout="interleaved"))
    assert torch.equal(got_k, apply_rope(k, cos, sin, layout="interleaved"))


def test_apply_rope_qk_in_place_refuses_gradients_of_cos() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "inplace=True cannot give gradients of cos/sin (they need the q and k that the "
                             "rotation overwrites); pass inplace=False, or detach cos and sin"):
        apply_rope_qk(x.clone(), x.clone(), cos.requires_grad_(), sin, inplace=True)


def test_apply_rope_qk_in_place_refuses_shared_memory_with_whole_message() -> None:
    x, cos, sin = _x_cos_sin()
    with _raises(ValueError, "inplace=True needs q and k in separate memory, got two views of the same elements "
                             "(each would be rotated twice); pass inplace=False or separate tensors"):
        apply_rope_qk(x, x, cos, sin, inplace=True)


def test_apply_rope_qk_in_place_refuses_contiguous_views_that_overlap_by_one_element() -> None:
    cos, sin = rope_cos_sin(4, 8)
    flat = torch.randn(64)
    q, k = flat[:32].view(4, 8), flat[31:63].view(4, 8)
    with pytest.raises(ValueError, match="separate memory"):
        apply_rope_qk(q, k, cos, sin, inplace=True)
    with pytest.raises(ValueError, match="separate memory"):
        apply_rope_qk(k, q, cos, sin, inplace=True)


def test_apply_rope_qk_in_place_takes_an_empty_view_of_the_same_storage() -> None:
    cos, sin = rope_cos_sin(4, 8)
    y = torch.randn(2, 4, 8)
    want = apply_rope(y, cos, sin)
    q, k = apply_rope_qk(y[:0], y, cos, sin, inplace=True)
    assert q.shape == (0, 4, 8)
    assert torch.equal(k, want)
    y = torch.randn(2, 4, 8)
    want = apply_rope(y, cos, sin)
    q, k = apply_rope_qk(y, y[:0], cos, sin, inplace=True)
    assert torch.equal(q, want)


def test_apply_rope_qk_in_place_takes_meta_tensors() -> None:
    cos, sin = rope_cos_sin(4, 8, device="meta")
    q, k = torch.empty(2, 4, 8, device="meta"), torch.empty(2, 4, 8, device="meta")
    out_q, out_k = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert out_q.device.type == out_k.device.type == "meta"
    assert out_q.shape == out_k.shape == (2, 4, 8)


def test_apply_rope_qk_in_place_rotates_both_and_returns_them() -> None:
    x, cos, sin = _x_cos_sin()
    q, k = x.clone(), x[:1].clone() * 2
    want_q, want_k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    got_q, got_k = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert got_q is q and got_k is k
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


@pytest.mark.parametrize("which", ["q", "k"])
def test_apply_rope_qk_in_place_refuses_expanded_tensors(which: str) -> None:
    x, cos, sin = _x_cos_sin()
    expanded = torch.randn(1, 3, 8).expand(2, 3, 8)
    q, k = (expanded, x.clone()) if which == "q" else (x.clone(), expanded)
    with _raises(ValueError, f"inplace=True needs {which} to own its memory, got an expanded tensor of shape "
                             "(2, 3, 8) and strides (0, 8, 1)"):
        apply_rope_qk(q, k, cos, sin, inplace=True)


def test_apply_rope_qk_in_place_takes_a_zero_stride_on_an_axis_of_size_one() -> None:
    x, cos, sin = _x_cos_sin()
    q = torch.empty_strided((1, 3, 8), (0, 8, 1))
    q.copy_(x[:1])
    want = apply_rope(x[:1], cos, sin)
    got_q, _ = apply_rope_qk(q, x.clone(), cos, sin, inplace=True)
    assert torch.equal(got_q, want)


# --------------------------------------------------------------------------------------------
# RotaryEmbedding
# --------------------------------------------------------------------------------------------


def test_module_refuses_bad_arguments_with_whole_messages() -> None:
    with _raises(ValueError, "layout must be one of 'half', 'interleaved'; got 'x'"):
        RotaryEmbedding(8, layout="x")
    with _raises(ValueError, "backend must be one of 'auto', 'torch', 'triton'; got 'x'"):
        RotaryEmbedding(8, backend="x")
    with _raises(ValueError, "max_len must be a positive integer, got 0"):
        RotaryEmbedding(8, max_len=0)


def test_module_defaults() -> None:
    module = RotaryEmbedding(8)
    assert module.cos_cached.shape == module.sin_cached.shape == (2048, 8)
    assert module.dim == 8
    assert module.layout == "half"
    assert module.backend == "auto"
    assert torch.equal(module.cos_cached, rope_cos_sin(2048, 8)[0])
    assert torch.equal(module.sin_cached, rope_cos_sin(2048, 8)[1])


def test_module_keeps_its_arguments() -> None:
    module = RotaryEmbedding(8, base=100.0, layout="interleaved", max_len=5, backend="torch")
    assert module.layout == "interleaved"
    assert module.backend == "torch"
    assert torch.equal(module.cos_cached, rope_cos_sin(5, 8, base=100.0, layout="interleaved")[0])
    assert torch.equal(module.sin_cached, rope_cos_sin(5, 8, base=100.0, layout="interleaved")[1])


def test_module_repr_lists_every_setting() -> None:
    module = RotaryEmbedding(8, base=100.0, scaling={"rope_type": "linear", "factor": 2.0,
                                                      "partial_rotary_factor": 0.5},
                             layout="interleaved", backend="torch")
    assert repr(module) == ("RotaryEmbedding(dim=8, rotary_dim=4, base=100.0, rope_type='linear', "
                            "layout='interleaved', backend='torch')")


def test_module_reset_parameters_recomputes_the_cache_in_place() -> None:
    module = RotaryEmbedding(8, max_len=6)
    want_cos, want_sin = module.cos_cached.clone(), module.sin_cached.clone()
    cos_buffer = module.cos_cached
    with torch.no_grad():
        module.cos_cached.zero_()
        module.sin_cached.zero_()
    module.reset_parameters()
    assert module.cos_cached is cos_buffer
    assert torch.equal(module.cos_cached, want_cos)
    assert torch.equal(module.sin_cached, want_sin)


def test_module_built_on_meta_is_ready_after_to_empty_and_reset() -> None:
    with torch.device("meta"):
        module = RotaryEmbedding(8, max_len=4)
    assert module.cos_cached.device.type == "meta"
    module = module.to_empty(device="cpu")
    module.reset_parameters()
    assert torch.equal(module.cos_cached, rope_cos_sin(4, 8)[0])
    assert torch.equal(module.sin_cached, rope_cos_sin(4, 8)[1])


@pytest.mark.parametrize("which", ["q", "k"])
def test_module_refuses_bad_q_or_k_by_name(which: str) -> None:
    module = RotaryEmbedding(8, max_len=4)
    good = torch.randn(1, 2, 3, 8)
    cases = [
        (good.long(), TypeError, f"{which} must have a floating-point dtype, got torch.int64"),
        (good[0], ValueError, f"{which} must be 4-D (batch, heads, seq, dim), got a 3-D tensor of shape (2, 3, 8)"),
        (good[..., :4], ValueError, f"{which}.shape[-1] must equal dim=8, got shape (1, 2, 3, 4)"),
    ]
    for bad, error, message in cases:
        q, k = (bad, good) if which == "q" else (good, bad)
        with _raises(error, message):
            module(q, k)


@pytest.mark.parametrize("k_shape", [(2, 2, 3, 8), (1, 2, 4, 8)])
def test_module_refuses_q_and_k_of_other_batch_or_seq(k_shape: tuple) -> None:
    module = RotaryEmbedding(8, max_len=4)
    q = torch.randn(1, 2, 3, 8)
    with _raises(ValueError, "q and k must have the same batch and seq sizes, got shapes (1, 2, 3, 8) and "
                             f"{k_shape}"):
        module(q, torch.randn(*k_shape))


def test_module_takes_k_with_other_heads() -> None:
    module = RotaryEmbedding(8, max_len=4)
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 1, 3, 8)
    cos, sin = rope_cos_sin(3, 8)
    out_q, out_k = module(q, k)
    assert torch.equal(out_q, apply_rope(q, cos, sin))
    assert torch.equal(out_k, apply_rope(k, cos, sin))


def test_module_refuses_bad_offsets_and_positions_with_whole_messages() -> None:
    module = RotaryEmbedding(8, max_len=4)
    q = torch.randn(2, 2, 3, 8)
    with _raises(ValueError, "offset must be a non-negative integer, got -1"):
        module(q, q, offset=-1)
    with _raises(ValueError, "offset must be 0 when positions are given, got 1"):
        module(q, q, positions=torch.arange(3), offset=1)
    with _raises(TypeError, "positions must have an integer dtype, got torch.float32"):
        module(q, q, positions=torch.arange(3.0))
    for shape in [(4,), (2, 4), (3, 3), (1, 1, 3)]:
        with _raises(ValueError, "positions must have shape (seq,) or (batch, seq) with seq=3 and batch=2 "
                                 f"(or 1), got {shape}"):
            module(q, q, positions=torch.zeros(shape, dtype=torch.long))


def test_module_positions_of_one_row_apply_to_every_sample() -> None:
    module = RotaryEmbedding(8, max_len=4)
    q = torch.randn(2, 2, 3, 8)
    positions = torch.tensor([[4, 1, 7]])
    cos, sin = rope_cos_sin(positions[0], 8)
    out_q, _ = module(q, q, positions=positions)
    assert torch.equal(out_q, apply_rope(q, cos, sin))


def test_module_positions_use_the_cache_dtype_and_device() -> None:
    module = RotaryEmbedding(8, max_len=4).to(torch.float64)
    q = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    positions = torch.tensor([5, 0, 9])
    cos, sin = rope_cos_sin(positions, 8, dtype=torch.float64)
    assert torch.equal(module(q, q, positions=positions)[0], apply_rope(q, cos, sin))
    meta = RotaryEmbedding(8, max_len=4).to("meta")
    out_q, out_k = meta(q.to("meta"), q.to("meta"), positions=positions.to("meta"))
    assert out_q.device.type == out_k.device.type == "meta"


def test_module_dynamic_positions_use_the_length_of_their_largest_position() -> None:
    module = RotaryEmbedding(8, scaling=DYNAMIC, max_len=4)
    q = torch.randn(1, 1, 2, 8, dtype=torch.float64)
    positions = torch.tensor([6, 2])  # length 7 > 4: frequencies of length 7
    cos, sin = rope_cos_sin(torch.tensor([6, 2, 0, 1, 3, 4, 5]), 8, scaling=DYNAMIC, dtype=torch.float32)
    out = module(q.float(), q.float(), positions=positions)[0]
    assert torch.equal(out, apply_rope(q.float(), cos[:2], sin[:2]))
    # Within the threshold the frequencies are the unscaled ones.
    positions = torch.tensor([3, 0])
    out = module(q.float(), q.float(), positions=positions)[0]
    assert torch.equal(out, apply_rope(q.float(), *rope_cos_sin(positions, 8)))


def test_module_dynamic_offset_beyond_the_threshold_uses_the_whole_length() -> None:
    module = RotaryEmbedding(8, scaling=DYNAMIC, max_len=8)
    q = torch.randn(1, 1, 2, 8)
    out = module(q, q, offset=3)[0]  # positions 3, 4: length 5 > 4
    cos, sin = rope_cos_sin(5, 8, scaling=DYNAMIC)
    assert torch.equal(out, apply_rope(q, cos[3:], sin[3:]))
    assert module.cos_cached.shape[0] == 8  # the cache is not touched
    assert torch.equal(module.cos_cached, rope_cos_sin(8, 8)[0])


def test_module_dynamic_with_no_positions_rotates_nothing() -> None:
    module = RotaryEmbedding(8, scaling=DYNAMIC, max_len=4)
    q = torch.randn(1, 1, 0, 8)
    out_q, out_k = module(q, q, positions=torch.zeros(0, dtype=torch.long))
    assert out_q.shape == out_k.shape == (1, 1, 0, 8)


# --------------------------------------------------------------------------------------------
# Layout conversion
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("convert", [interleaved_to_half, half_to_interleaved])
def test_layout_helpers_refuse_bad_input_with_whole_messages(convert) -> None:
    with _raises(TypeError, "x must be a torch.Tensor, got list"):
        convert([1.0, 2.0])
    with _raises(ValueError, "x must have at least 1 dimension, got a 0-D tensor"):
        convert(torch.tensor(1.0))
    with _raises(ValueError, "x.shape[-1] must be even (channels are rotated in pairs), got 3"):
        convert(torch.zeros(2, 3))


def test_layout_helpers_move_channels_as_documented() -> None:
    x = torch.arange(8.0)
    assert interleaved_to_half(x).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert half_to_interleaved(x).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_permute_refuses_bad_input_with_whole_messages() -> None:
    with _raises(TypeError, "weight must be a torch.Tensor, got list"):
        permute_for_half_layout([1.0], 1)
    with _raises(ValueError, "num_heads must be a positive integer, got 0"):
        permute_for_half_layout(torch.zeros(4), 0)
    with _raises(ValueError, "weight must be 2-D (out_features, in_features) or a 1-D bias, got shape (4, 4, 4)"):
        permute_for_half_layout(torch.zeros(4, 4, 4), 1)
    with _raises(ValueError, "weight must be 2-D (out_features, in_features) or a 1-D bias, got shape ()"):
        permute_for_half_layout(torch.tensor(1.0), 1)
    with _raises(ValueError, "weight.shape[0]=12 must be num_heads=5 times an even head_dim"):
        permute_for_half_layout(torch.zeros(12, 4), 5)
    with _raises(ValueError, "weight.shape[0]=12 must be num_heads=4 times an even head_dim"):
        permute_for_half_layout(torch.zeros(12, 4), 4)


def test_permute_moves_rows_within_each_head() -> None:
    bias = torch.arange(8.0)
    assert permute_for_half_layout(bias, 2).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    weight = torch.arange(16.0).reshape(8, 2)
    assert permute_for_half_layout(weight, 1)[:, 0].tolist() == [0, 4, 8, 12, 2, 6, 10, 14]


# --------------------------------------------------------------------------------------------
# Further contracts (from the first mutation run)
# --------------------------------------------------------------------------------------------


def test_apply_rope_qk_in_place_refuses_gradients_of_sin_alone() -> None:
    x, cos, sin = _x_cos_sin()
    with pytest.raises(ValueError, match="cannot give gradients of cos/sin"):
        apply_rope_qk(x.clone(), x.clone(), cos, sin.requires_grad_(), inplace=True)


def test_apply_rope_qk_in_place_refuses_torch_func_with_the_whole_message() -> None:
    x, cos, sin = _x_cos_sin()

    def rotate(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope_qk(q.clone(), k.clone(), cos, sin, inplace=True)

    with _raises(ValueError, "inplace=True does not work under torch.func transforms (vmap, grad, jvp, ...); "
                             "pass inplace=False"):
        torch.func.vmap(rotate)(x[None], x[None])


def test_apply_rope_qk_in_place_takes_a_strided_view_beside_a_contiguous_one() -> None:
    # q is row 1; k is rows 0 and 2 (strided): their byte ranges intersect, their elements do not.
    base = torch.randn(3, 2, 8)
    q, k = base[1:2], base[0::2]
    assert q.is_contiguous() and not k.is_contiguous()
    cos, sin = rope_cos_sin(2, 8)
    want_q, want_k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    got_q, got_k = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    base = torch.randn(3, 2, 8)
    q, k = base[0::2], base[1:2]
    want_q, want_k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    got_q, got_k = apply_rope_qk(q, k, cos, sin, inplace=True)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)


def test_apply_rope_qk_in_place_takes_q_right_after_k() -> None:
    cos, sin = rope_cos_sin(4, 8)
    rows = torch.randn(4, 4, 8)
    want = apply_rope(rows, cos, sin)
    apply_rope_qk(rows[2:], rows[:2], cos, sin, inplace=True)
    assert torch.equal(rows, want)


def test_apply_rope_rotates_one_vector_by_one_dimensional_cos() -> None:
    x = torch.tensor([1.0, 0.0, 0.0, 2.0])
    cos, sin = rope_cos_sin(torch.tensor(1), 4)  # a 0-D position: 1-D tables
    out = apply_rope(x, cos, sin)
    assert cos.shape == (4,)
    want = apply_rope(x[None], cos[None], sin[None])[0]
    assert torch.equal(out, want)
    assert not torch.equal(out, x)


def test_cos_sin_dynamic_length_of_a_single_position() -> None:
    cos, _ = rope_cos_sin(torch.tensor([6]), 8, scaling=DYNAMIC, dtype=torch.float64)
    inv_freq, _ = rope_inv_freq(8, scaling=DYNAMIC, seq_len=7)
    assert torch.equal(cos[0], torch.cos(6 * inv_freq).repeat(2))


def test_module_dynamic_length_of_a_single_position() -> None:
    module = RotaryEmbedding(8, scaling=DYNAMIC, max_len=4)
    q = torch.randn(1, 1, 1, 8)
    cos, sin = rope_cos_sin(torch.tensor([6]), 8, scaling=DYNAMIC)
    assert torch.equal(module(q, q, positions=torch.tensor([6]))[0], apply_rope(q, cos, sin))


def test_module_positions_give_cos_in_the_cache_dtype_whatever_the_dtype_of_q() -> None:
    module = RotaryEmbedding(8, max_len=4)  # float32 cache
    q = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    positions = torch.tensor([5, 0, 9])
    cos, sin = rope_cos_sin(positions, 8, dtype=torch.float32)
    assert torch.equal(module(q, q, positions=positions)[0], apply_rope(q, cos, sin))
    precise = rope_cos_sin(positions, 8, dtype=torch.float64)
    assert not torch.equal(module(q, q, positions=positions)[0], apply_rope(q, *precise))


def test_module_moves_positions_to_the_cache_device() -> None:
    module = RotaryEmbedding(8, max_len=4).to("meta")
    q = torch.empty(1, 1, 3, 8, device="meta")
    out_q, out_k = module(q, q, positions=torch.tensor([5, 0, 9]))
    assert out_q.device.type == out_k.device.type == "meta"


def test_module_on_meta_grows_its_cache_on_meta() -> None:
    module = RotaryEmbedding(8, max_len=2).to("meta")
    q = torch.empty(1, 1, 5, 8, device="meta")
    out_q, _ = module(q, q)
    assert out_q.device.type == "meta"
    assert module.cos_cached.device.type == module.sin_cached.device.type == "meta"
    assert module.cos_cached.shape == (5, 8)


def test_module_passes_its_backend_to_the_rotation() -> None:
    # The Triton kernel does not take float64 (the PyTorch path, "auto" on a CPU, does).
    module = RotaryEmbedding(8, max_len=4, backend="triton").double()
    q = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match="^backend='triton' supports float32, float16 and bfloat16, got torch.float64"):
        module(q, q)
    assert RotaryEmbedding(8, max_len=4).double()(q, q)[0].dtype == torch.float64


def test_module_dynamic_up_to_the_threshold_uses_the_cache() -> None:
    module = RotaryEmbedding(8, scaling=DYNAMIC, max_len=2)
    q = torch.randn(1, 1, 4, 8)
    out = module(q, q)[0]  # length 4 = the threshold: cached, unscaled frequencies
    assert module.cos_cached.shape == (4, 8)
    assert torch.equal(out, apply_rope(q, *rope_cos_sin(4, 8)))


def test_module_while_tracing_computes_missing_rows_without_touching_the_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = RotaryEmbedding(8, max_len=4)
    q = torch.randn(1, 1, 3, 8)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    out = module(q, q, offset=5)[0]
    assert module.cos_cached.shape == (4, 8)
    cos, sin = rope_cos_sin(torch.arange(5, 8), 8)
    assert torch.equal(out, apply_rope(q, cos, sin))


def test_apply_rope_qk_in_place_takes_two_empty_views_of_one_storage() -> None:
    cos, sin = rope_cos_sin(4, 8)
    y = torch.randn(2, 4, 8)
    q, k = apply_rope_qk(y[:0], y[1:1], cos, sin, inplace=True)
    assert q.shape == k.shape == (0, 4, 8)
