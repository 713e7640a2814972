"""The Triton kernel of apply_rope / apply_rope_qk gives the bits of the PyTorch path.

Without a GPU the kernel runs in Triton's CPU interpreter (``TRITON_INTERPRET=1``, set by
conftest.py before the kernel is defined); with one, on the GPU. Shapes are small because the
interpreter runs every program of the grid in Python.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

triton = pytest.importorskip("triton")

from posenc import RotaryEmbedding, apply_rope, apply_rope_qk, rope_cos_sin  # noqa: E402
from posenc import _rotation  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
LAYOUTS = ["half", "interleaved"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype=dtype, device=DEVICE)


def _cos_sin(seq: int, width: int, layout: str, dtype: torch.dtype = torch.float32):
    cos, sin = rope_cos_sin(seq, width, base=100.0, layout=layout, dtype=dtype)
    return cos.to(DEVICE), sin.to(DEVICE)


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    """Bit equality, except that NaNs are compared as NaNs (PyTorch's own bfloat16 NaN bits
    differ between its vectorised and scalar code) and the sign of zero is ignored, as
    torch.equal does."""
    assert a.dtype == b.dtype and a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# Same bits as the PyTorch path
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [16, 12])  # full and partial rotary (12 of 16 channels)
def test_kernel_same_bits_as_torch(layout: str, dtype: torch.dtype, width: int) -> None:
    q = _randn(2, 3, 17, 16, dtype=dtype)
    k = _randn(2, 1, 17, 16, dtype=dtype, seed=1)  # fewer key heads (grouped-query attention)
    cos, sin = _cos_sin(17, width, layout)
    _same(apply_rope(q, cos, sin, layout=layout, backend="triton"),
          apply_rope(q, cos, sin, layout=layout, backend="torch"))
    expected = apply_rope_qk(q, k, cos, sin, layout=layout, backend="torch")
    for got, want in zip(apply_rope_qk(q, k, cos, sin, layout=layout, backend="triton"), expected):
        _same(got, want)
    q_in, k_in = q.clone(), k.clone()
    out = apply_rope_qk(q_in, k_in, cos, sin, layout=layout, inplace=True, backend="triton")
    assert out[0] is q_in and out[1] is k_in
    _same(q_in, expected[0])
    _same(k_in, expected[1])
    # ... and those are the bits of two apply_rope calls.
    _same(expected[0], apply_rope(q, cos, sin, layout=layout))
    _same(expected[1], apply_rope(k, cos, sin, layout=layout))


def test_kernel_with_more_heads_than_one_program_rotates() -> None:
    # cos/sin shared by the heads: each program rotates a group of heads; with 6 heads, a full
    # group and a partial one.
    for heads in (6, 9):
        x = _randn(2, heads, 5, 8)
        cos, sin = _cos_sin(5, 8, "half")
        _same(apply_rope(x, cos, sin, backend="triton"), apply_rope(x, cos, sin, backend="torch"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernel_inverse_with_pair_members_of_different_angles(layout: str) -> None:
    # The inverse rotation (the backward of apply_rope) with cos/sin that are not RoPE's: the two
    # members of a pair have different angles, so each member's own sine must be used.
    x, cos, sin = _randn(1, 2, 6, 8), _randn(6, 8, seed=1), _randn(6, 8, seed=2)
    interleaved = layout == "interleaved"
    _same(_rotation.rotate(x, cos, sin, interleaved, inverse=True, backend="triton"),
          _rotation.rotate(x, cos, sin, interleaved, inverse=True, backend="torch"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kernel_rounds_ties_to_even_like_torch(dtype: torch.dtype) -> None:
    # Products of two half-precision numbers are exact in float32; about one in 2**(24 - p) of
    # them lies exactly halfway between two representable values (p = 8 for bfloat16, 11 for
    # float16), where round-half-up and round-half-even differ.
    x = _randn(1, 1, 64, 64, dtype=dtype, seed=3)
    cos = _randn(64, 64, dtype=dtype, seed=4)
    sin = _randn(64, 64, dtype=dtype, seed=5)
    products = x.float() * cos.float()
    mantissa_bits = 8 if dtype == torch.bfloat16 else 11
    low = products.view(torch.int32) & ((1 << (24 - mantissa_bits)) - 1)
    ties = int((low == (1 << (23 - mantissa_bits))).sum())
    assert ties > 0  # the data exercise the rounding rule
    _same(apply_rope(x, cos, sin, backend="triton"), apply_rope(x, cos, sin, backend="torch"))


def test_kernel_special_values() -> None:
    x = _randn(1, 2, 8, 8)
    x[0, 0, 0, 0] = float("inf")
    x[0, 0, 1, 5] = float("nan")
    x[0, 1, 2, :] = 0.0
    x[0, 1, 3, 1] = 1e-40  # float32 subnormal
    cos, sin = _cos_sin(8, 8, "half")
    for dtype in DTYPES:
        xd = x.to(dtype)
        _same(apply_rope(xd, cos, sin, backend="triton"), apply_rope(xd, cos, sin, backend="torch"))


def test_kernel_strided_and_batched_layouts() -> None:
    # q as a projection reshaped to (batch, seq, heads, dim) and transposed: not contiguous.
    q = _randn(2, 9, 3, 16).transpose(1, 2)
    assert not q.is_contiguous()
    cos, sin = _cos_sin(9, 16, "half")
    _same(apply_rope(q, cos, sin, backend="triton"), apply_rope(q, cos, sin, backend="torch"))
    # Per-sample positions: cos/sin of shape (batch, 1, seq, w).
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [4, 5, 6, 7, 8, 9, 10, 11, 12]])
    cos_b, sin_b = rope_cos_sin(positions, 16, dtype=torch.float32)
    cos_b, sin_b = cos_b.unsqueeze(1).to(DEVICE), sin_b.unsqueeze(1).to(DEVICE)
    _same(apply_rope(q, cos_b, sin_b, backend="triton"), apply_rope(q, cos_b, sin_b, backend="torch"))
    # cos/sin that differ per head (shape (1, heads, seq, w)): one head per program.
    per_head = torch.arange(27).reshape(3, 9) * torch.tensor([1, 2, 3])[:, None]
    cos_h, sin_h = rope_cos_sin(per_head, 16, dtype=torch.float32)
    cos_h, sin_h = cos_h.unsqueeze(0).to(DEVICE), sin_h.unsqueeze(0).to(DEVICE)
    _same(apply_rope(q, cos_h, sin_h, backend="triton"), apply_rope(q, cos_h, sin_h, backend="torch"))
    # 3-d and 5-d inputs (leading axes merged into batch and heads).
    for shape in [(3, 9, 16), (2, 2, 3, 9, 16)]:
        x = _randn(*shape)
        _same(apply_rope(x, cos, sin, backend="triton"), apply_rope(x, cos, sin, backend="torch"))
    # cos/sin in float64 are cast to x's dtype first, on both paths.
    cos64, sin64 = rope_cos_sin(9, 16, dtype=torch.float64)
    x = _randn(3, 9, 16, dtype=torch.bfloat16)
    _same(apply_rope(x, cos64.to(DEVICE), sin64.to(DEVICE), backend="triton"),
          apply_rope(x, cos64.to(DEVICE), sin64.to(DEVICE), backend="torch"))


def test_rotary_embedding_backends_agree() -> None:
    q, k = _randn(2, 4, 10, 16), _randn(2, 2, 10, 16, seed=1)
    fast = RotaryEmbedding(16, backend="triton").to(DEVICE)
    slow = RotaryEmbedding(16, backend="torch").to(DEVICE)
    assert "backend='triton'" in repr(fast)
    for got, want in zip(fast(q, k, offset=3), slow(q, k, offset=3)):
        _same(got, want)


# ---------------------------------------------------------------------------------------------
# Autograd through the inverse rotation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernel_backward_same_bits_as_torch(layout: str) -> None:
    q0, k0 = _randn(2, 2, 6, 8), _randn(2, 1, 6, 8, seed=1)
    cos0, sin0 = _cos_sin(6, 6, layout)
    weight_q, weight_k = _randn(2, 2, 6, 8, seed=2), _randn(2, 1, 6, 8, seed=3)
    grads = {}
    for backend in ("torch", "triton"):
        q, k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
        cos, sin = cos0.clone().requires_grad_(), sin0.clone().requires_grad_()
        out_q, out_k = apply_rope_qk(q, k, cos, sin, layout=layout, backend=backend)
        ((out_q * weight_q).sum() + (out_k * weight_k).sum()).backward()
        grads[backend] = (q.grad, k.grad, cos.grad, sin.grad)
    for got, want in zip(grads["triton"], grads["torch"]):
        _same(got, want)
    # The gradient of x is the rotation of the upstream gradient by -theta.
    _same(grads["triton"][0], apply_rope(weight_q, cos0, -sin0, layout=layout, backend="torch"))


def test_inplace_backward_equals_out_of_place() -> None:
    q0, k0 = _randn(1, 2, 5, 8), _randn(1, 2, 5, 8, seed=1)
    cos, sin = _cos_sin(5, 8, "half")
    weight = _randn(1, 2, 5, 8, seed=2)
    leaf_q, leaf_k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
    # In place on non-leaf tensors (the output of a projection), as in an attention layer.
    q, k = leaf_q * 1.0, leaf_k * 1.0
    out_q, out_k = apply_rope_qk(q, k, cos, sin, inplace=True, backend="triton")
    assert out_q is q
    ((out_q * weight).sum() + out_k.sum()).backward()
    ref_q, ref_k = q0.clone().requires_grad_(), k0.clone().requires_grad_()
    rq, rk = apply_rope_qk(ref_q, ref_k, cos, sin, backend="torch")
    ((rq * weight).sum() + rk.sum()).backward()
    _same(leaf_q.grad, ref_q.grad)
    _same(leaf_k.grad, ref_k.grad)


def test_apply_rope_qk_composes_with_torch_func() -> None:
    q, k = _randn(3, 2, 6, 8), _randn(3, 1, 6, 8, seed=1)
    cos, sin = _cos_sin(6, 8, "interleaved")

    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope_qk(a, b, cos, sin, layout="interleaved", backend="triton")

    vq, vk = torch.vmap(f)(q, k)
    _same(vq, apply_rope(q, cos, sin, layout="interleaved"))
    _same(vk, apply_rope(k, cos, sin, layout="interleaved"))
    (pq, pk), (tq, tk) = torch.func.jvp(f, (q, k), (torch.ones_like(q), torch.zeros_like(k)))
    _same(pq, vq)
    _same(tq, apply_rope(torch.ones_like(q), cos, sin, layout="interleaved"))
    assert torch.count_nonzero(tk) == 0


def test_kernel_under_torch_compile() -> None:
    torch._dynamo.reset()
    q, k = _randn(1, 2, 5, 8), _randn(1, 2, 5, 8, seed=1)
    cos, sin = _cos_sin(5, 8, "half")

    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope_qk(a, b, cos, sin, backend="triton")

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(q, k), apply_rope_qk(q, k, cos, sin, backend="torch")):
        _same(got, want)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_inplace_under_torch_compile(backend: str) -> None:
    torch._dynamo.reset()
    q, k = _randn(1, 2, 5, 8), _randn(1, 2, 5, 8, seed=1)
    cos, sin = _cos_sin(5, 8, "half")
    want = apply_rope_qk(q, k, cos, sin, backend="torch")

    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        apply_rope_qk(a, b, cos, sin, inplace=True, backend=backend)
        return a * 2, b * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    q_in, k_in = q.clone(), k.clone()
    doubled = compiled(q_in, k_in)
    _same(q_in, want[0])
    _same(k_in, want[1])
    _same(doubled[0], want[0] * 2)
    # With gradients: the leaves' gradients are those of the out-of-place rotation.
    leaf_q, leaf_k = q.clone().requires_grad_(), k.clone().requires_grad_()
    out_q, out_k = compiled(leaf_q * 1.0, leaf_k * 1.0)
    (out_q.sum() + out_k.square().sum()).backward()
    ref_q, ref_k = q.clone().requires_grad_(), k.clone().requires_grad_()
    rq, rk = apply_rope_qk(ref_q, ref_k, cos, sin, backend="torch")
    ((rq * 2).sum() + (rk * 2).square().sum()).backward()
    _same(leaf_q.grad, ref_q.grad)
    _same(leaf_k.grad, ref_k.grad)


# ---------------------------------------------------------------------------------------------
# Choosing the backend, and bad input
# ---------------------------------------------------------------------------------------------


def test_auto_uses_torch_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from posenc import _triton_rope

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Triton kernel ran for a CPU tensor under backend='auto'")

    monkeypatch.setattr(_triton_rope, "launch", refuse)
    x = torch.randn(1, 2, 4, 8)
    cos, sin = rope_cos_sin(4, 8)
    apply_rope(x, cos, sin)
    apply_rope_qk(x, x.clone(), cos, sin)
    with pytest.raises(AssertionError, match="Triton kernel ran"):
        apply_rope(x, cos, sin, backend="triton")  # the forced backend does reach it


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_auto_and_triton_launch_the_kernel_and_torch_does_not(triton_launches: list[int]) -> None:
    x = _randn(1, 2, 4, 8)
    cos, sin = _cos_sin(4, 8, "half")
    for backend, expected in (("torch", []), ("auto", [1]), ("triton", [1])):
        triton_launches.clear()
        _same(apply_rope(x, cos, sin, backend=backend), apply_rope(x, cos, sin, backend="torch"))
        assert triton_launches == expected, backend


def test_bad_backend_and_arguments() -> None:
    x = _randn(1, 2, 4, 8)
    cos, sin = _cos_sin(4, 8, "half")
    with pytest.raises(ValueError, match="backend.*'cuda'"):
        apply_rope(x, cos, sin, backend="cuda")
    with pytest.raises(ValueError, match="backend"):
        RotaryEmbedding(8, backend="fast")
    with pytest.raises(TypeError, match="float32, float16 and bfloat16, got torch.float64"):
        apply_rope(x.double(), cos, sin, backend="triton")
    strided = _randn(1, 2, 4, 16)[..., ::2]
    _same(apply_rope(strided, cos, sin, backend="triton"), apply_rope(strided, cos, sin, backend="torch"))
    with pytest.raises(ValueError, match="cannot rotate x .* in place, has a stride"):
        apply_rope_qk(strided, x.clone(), cos, sin, inplace=True, backend="triton")
    with pytest.raises(ValueError, match="same dtype and last dimension"):
        apply_rope_qk(x, x.half(), cos, sin)
    with pytest.raises(TypeError, match="inplace must be a bool"):
        apply_rope_qk(x, x.clone(), cos, sin, inplace=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gradients of cos/sin"):
        apply_rope_qk(x.clone(), x.clone(), cos.requires_grad_(), sin, inplace=True)
    with pytest.raises(ValueError, match="cos and sin must be on x's device meta, got cpu"):
        apply_rope(torch.empty(1, 2, 4, 8, device="meta"), cos.detach().cpu(), sin.cpu())
    cos = cos.detach()
    with pytest.raises(ValueError, match="own its memory"):
        apply_rope_qk(x[:, :1].expand(1, 2, 4, 8), x.clone(), cos, sin, inplace=True)


def test_triton_backend_errors_without_gpu_or_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    from posenc import _triton_rope

    x = torch.randn(1, 2, 4, 8)
    cos, sin = rope_cos_sin(4, 8)
    monkeypatch.setattr(_triton_rope, "interpreting", lambda: False)
    with pytest.raises(ValueError, match="needs CUDA tensors .* got device cpu"):
        apply_rope(x, cos, sin, backend="triton")
    monkeypatch.setattr(_rotation, "_kernel_module", False)  # as if triton were not installed
    with pytest.raises(RuntimeError, match="needs the triton package"):
        apply_rope(x, cos, sin, backend="triton")
    # "auto" never needs it.
    torch.testing.assert_close(apply_rope(x, cos, sin), apply_rope(x, cos, sin, backend="torch"))


def test_interpreting_follows_tritons_knob_or_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from posenc import _triton_rope

    # Triton with knobs (3.4 and later): the knob decides. (Triton's own knob follows the
    # environment variable; stand-in knobs that disagree with it show which one is read.)
    for knob, environment in ((False, "1"), (True, "0")):
        monkeypatch.setattr(triton, "knobs", SimpleNamespace(runtime=SimpleNamespace(interpret=knob)))
        monkeypatch.setenv("TRITON_INTERPRET", environment)
        assert _triton_rope.interpreting() is knob
    # An older Triton: the environment variable, "1" meaning on.
    monkeypatch.delattr(triton, "knobs")
    for value, expected in (("1", True), ("0", False), ("true", False)):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        assert _triton_rope.interpreting() is expected, value
    monkeypatch.delenv("TRITON_INTERPRET")
    assert _triton_rope.interpreting() is False


def test_kernel_with_a_pass_through_wider_than_one_copy_block() -> None:
    # 288 pass-through channels: copied 128 at a time.
    x = _randn(1, 2, 3, 320)
    cos, sin = _cos_sin(3, 32, "half")
    _same(apply_rope(x, cos, sin, backend="triton"), apply_rope(x, cos, sin, backend="torch"))


def test_kernel_with_cos_per_head_and_the_same_at_every_position() -> None:
    # cos/sin of shape (1, heads, 1, w): they vary with the head (one head per program), not with
    # the position.
    x = _randn(1, 6, 5, 8)
    angles = _randn(1, 6, 1, 8, seed=1)
    cos, sin = angles.cos(), angles.sin()
    _same(apply_rope(x, cos, sin, backend="triton"), apply_rope(x, cos, sin, backend="torch"))
