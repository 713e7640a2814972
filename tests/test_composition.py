"""posenc composes with the rest of PyTorch (docs/dev/spec.md, General rules).

``torch.func`` transforms, the same bits on every execution path, meta-device initialisation
followed by ``to_empty()`` and ``reset_parameters()``, and ``state_dict`` loading that refuses a
table of another shape or encoding.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable

import pytest
import torch
from torch import nn

from posenc import (
    CoPE,
    LearnedPositionalEncoding,
    RelativePositionEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
    TokenEmbedding,
    VideoPositionalEncoding,
    apply_rope,
    rope_cos_sin,
)

LAYOUTS = ["half", "interleaved"]


def _qkv(shape: tuple[int, ...] = (2, 4, 64, 128), seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _hf_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Hugging Face's formula, written out: x * cos + rotate_half(x) * sin.
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


# ---------------------------------------------------------------------------------------------
# The same bits on every path
# ---------------------------------------------------------------------------------------------


def test_apply_rope_same_bits_with_and_without_autograd() -> None:
    x = _qkv()
    cos, sin = rope_cos_sin(64, 128, dtype=torch.float32)
    plain = apply_rope(x, cos, sin)
    with_grad = apply_rope(x.clone().requires_grad_(), cos, sin)
    assert torch.equal(plain, with_grad.detach())
    # ... and they are the bits of Hugging Face's formula (no fused multiply-add anywhere).
    assert torch.equal(plain, _hf_rotate(x, cos, sin))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_apply_rope_same_bits_compiled(layout: str, backend: str) -> None:
    torch._dynamo.reset()
    x = _qkv((2, 3, 16, 32))
    cos, sin = rope_cos_sin(16, 24, layout=layout, dtype=torch.float32)  # partial rotary too
    compiled = torch.compile(apply_rope, backend=backend, fullgraph=True)
    expected = apply_rope(x, cos, sin, layout=layout)
    assert torch.equal(compiled(x, cos, sin, layout=layout), expected)
    x_grad = x.clone().requires_grad_()
    out = compiled(x_grad, cos, sin, layout=layout)
    assert torch.equal(out.detach(), expected)
    upstream = torch.randn_like(expected)  # a fixed gradient: the backward alone is compared
    out.backward(upstream)
    reference = x.clone().requires_grad_()
    apply_rope(reference, cos, sin, layout=layout).backward(upstream)
    assert torch.equal(x_grad.grad, reference.grad)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_rope_same_bits_under_torch_func(layout: str) -> None:
    x = _qkv((3, 2, 8, 16))
    cos, sin = rope_cos_sin(8, 16, layout=layout, dtype=torch.float32)
    expected = apply_rope(x, cos, sin, layout=layout)
    vmapped = torch.vmap(lambda t: apply_rope(t, cos, sin, layout=layout))(x)
    assert torch.equal(vmapped, expected)
    primal, _ = torch.func.jvp(lambda t: apply_rope(t, cos, sin, layout=layout), (x,), (torch.ones_like(x),))
    assert torch.equal(primal, expected)


# ---------------------------------------------------------------------------------------------
# torch.func
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_rope_vmap_over_x_and_over_cos_sin(layout: str) -> None:
    x = _qkv((5, 2, 6, 8))
    cos, sin = rope_cos_sin(6, 8, layout=layout, dtype=torch.float32)
    per_sample = torch.vmap(lambda t: apply_rope(t, cos, sin, layout=layout))(x)
    assert torch.equal(per_sample, apply_rope(x, cos, sin, layout=layout))
    # cos/sin batched too (one position set per sample), vmapped over another axis than 0.
    positions = torch.stack([torch.arange(6) + 3 * b for b in range(5)])
    cos_b, sin_b = rope_cos_sin(positions, 8, layout=layout, dtype=torch.float32)  # (5, 6, 8)
    out = torch.vmap(
        lambda t, c, s: apply_rope(t, c, s, layout=layout), in_dims=(0, 0, 0)
    )(x, cos_b, sin_b)
    expected = torch.stack([apply_rope(x[b], cos_b[b], sin_b[b], layout=layout) for b in range(5)])
    assert torch.equal(out, expected)
    # Only cos/sin batched: the same x rotated by five position sets.
    out = torch.vmap(lambda c, s: apply_rope(x[0], c, s, layout=layout), in_dims=(1, 1))(
        cos_b.movedim(0, 1), sin_b.movedim(0, 1)
    )
    expected = torch.stack([apply_rope(x[0], cos_b[b], sin_b[b], layout=layout) for b in range(5)])
    assert torch.equal(out, expected)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_rope_jvp_and_jacobians_match_finite_math(layout: str) -> None:
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    cos, sin = rope_cos_sin(4, 4, layout=layout, dtype=torch.float64)  # partial: 2 channels pass
    cos, sin = cos.clone().requires_grad_(), sin.clone().requires_grad_()

    def f(t: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return apply_rope(t, c, s, layout=layout)

    # Reverse mode (first and second order) and forward mode, each against finite differences.
    assert torch.autograd.gradcheck(f, (x.clone().requires_grad_(), cos, sin))
    assert torch.autograd.gradgradcheck(f, (x.clone().requires_grad_(), cos, sin))
    assert torch.autograd.gradcheck(
        f, (x.clone().requires_grad_(), cos, sin), check_forward_ad=True, check_backward_ad=False,
        check_undefined_grad=False, check_batched_grad=False,
    )
    jac_fwd = torch.func.jacfwd(f, argnums=(0, 1, 2))(x, cos.detach(), sin.detach())
    jac_rev = torch.func.jacrev(f, argnums=(0, 1, 2))(x, cos.detach(), sin.detach())
    for a, b in zip(jac_fwd, jac_rev):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_rotary_embedding_under_vmap_jvp_and_grad() -> None:
    module = RotaryEmbedding(16, max_len=32)
    q, k = _qkv((3, 2, 4, 10, 16), seed=1), _qkv((3, 2, 1, 10, 16), seed=2)
    out_q, out_k = torch.vmap(module)(q, k)
    for b in range(3):
        ref_q, ref_k = module(q[b], k[b])
        assert torch.equal(out_q[b], ref_q) and torch.equal(out_k[b], ref_k)
    tangent = torch.randn_like(q[0])
    (_, _), (dq, dk) = torch.func.jvp(lambda t: module(t, k[0]), (q[0],), (tangent,))
    # The rotation is linear in q: its derivative in direction t is the rotation of t.
    assert torch.equal(dq, module(tangent, k[0])[0])
    assert torch.equal(dk, torch.zeros_like(dk))
    grad = torch.func.grad(lambda t: module(t, k[0])[0].sum())(q[0])
    # The gradient of sum(R q) is R^T 1, the rotation of a vector of ones by -theta.
    cos, sin = rope_cos_sin(10, 16, dtype=torch.float32)
    torch.testing.assert_close(grad, apply_rope(torch.ones_like(q[0]), cos, -sin), rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Meta device, to_empty, reset_parameters
# ---------------------------------------------------------------------------------------------

MODULES: dict[str, Callable[[], nn.Module]] = {
    "rotary": lambda: RotaryEmbedding(8, max_len=16),
    "rotary-yarn": lambda: RotaryEmbedding(
        8, max_len=16, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
    ),
    "sinusoidal": lambda: SinusoidalPositionalEncoding(8, max_len=16),
    "video": lambda: VideoPositionalEncoding(8, max_frames=4),
    "video-spatial": lambda: VideoPositionalEncoding(8, max_frames=4, spatial=True),
    "learned": lambda: LearnedPositionalEncoding(8, 16),
    "token": lambda: TokenEmbedding(20, 8, padding_idx=3),
    "shaw": lambda: RelativePositionEmbedding(4, 8),
    "t5": lambda: T5RelativePositionBias(2),
    "cope": lambda: CoPE(8, 6),
}


def _outputs(name: str, module: nn.Module) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    if name.startswith("rotary"):
        q, k = torch.randn(1, 2, 20, 8), torch.randn(1, 1, 20, 8)  # past max_len: the cache grows
        return module(q, k)
    if name == "sinusoidal":
        return (module(torch.randn(2, 20, 8)),)
    if name.startswith("video"):
        return (module(torch.randn(1, 6, 3, 2, 8)),)
    if name == "learned":
        return (module(torch.randn(2, 16, 8)),)
    if name == "token":
        return (module(torch.tensor([[0, 3, 19]])),)
    if name == "shaw":
        return (module(5, 7),)
    if name == "t5":
        return (module(5, 7),)
    query = torch.randn(1, 2, 5, 8)
    logits = torch.randn(1, 2, 5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    return (module(query, logits),)


@pytest.mark.parametrize("name", list(MODULES))
def test_meta_to_empty_reset_parameters_equals_normal_construction(name: str) -> None:
    torch.manual_seed(123)
    normal = MODULES[name]()
    with torch.device("meta"):
        lazy = MODULES[name]()
    assert all(t.is_meta for t in [*lazy.parameters(), *lazy.buffers()])
    lazy.to_empty(device="cpu")
    torch.manual_seed(123)
    lazy.reset_parameters()
    for a, b in zip(_outputs(name, normal), _outputs(name, lazy)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["rotary", "sinusoidal", "video-spatial"])
def test_reset_parameters_rebuilds_a_grown_cache(name: str) -> None:
    module = MODULES[name]()
    _outputs(name, module)  # grows the caches
    buffers = {n: b.clone() for n, b in module.named_buffers()}
    for b in module.buffers():
        b.fill_(float("nan"))
    module.reset_parameters()
    for n, b in module.named_buffers():
        assert torch.equal(b, buffers[n]), n


@pytest.mark.parametrize("name", list(MODULES))
def test_deepcopy_and_torch_save_round_trip(name: str) -> None:
    module = MODULES[name]()
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for other in (copy.deepcopy(module), loaded):
        for a, b in zip(_outputs(name, module), _outputs(name, other)):
            assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------------
# state_dict loading
# ---------------------------------------------------------------------------------------------


def test_sinusoidal_state_dict_of_another_width_is_refused_at_load_time() -> None:
    target = SinusoidalPositionalEncoding(16)
    before = target.pe.clone()
    with pytest.raises(RuntimeError, match=r"size mismatch for pe"):
        target.load_state_dict(SinusoidalPositionalEncoding(8).state_dict())
    assert torch.equal(target.pe, before)


@pytest.mark.parametrize(
    ("saved_kwargs", "match"),
    [
        ({"style": "concat"}, r"style='interleaved'"),
        ({"style": "tensor2tensor"}, r"style='interleaved'"),
        ({"base": 500.0}, r"base=10000"),
    ],
)
def test_sinusoidal_state_dict_of_another_encoding_is_refused(saved_kwargs: dict, match: str) -> None:
    target = SinusoidalPositionalEncoding(8, max_len=64)
    before = target.pe.clone()
    saved = SinusoidalPositionalEncoding(8, max_len=64, **saved_kwargs).state_dict()
    with pytest.raises(RuntimeError, match=match):
        target.load_state_dict(saved)
    assert torch.equal(target.pe, before)
    # A table of another style that happens to be longer is refused too (it would change the
    # values of the first rows when the table grows).
    longer = SinusoidalPositionalEncoding(8, max_len=128, **saved_kwargs).state_dict()
    with pytest.raises(RuntimeError, match=match):
        target.load_state_dict(longer)
    assert torch.equal(target.pe, before)


def test_sinusoidal_state_dict_grown_or_half_precision_loads() -> None:
    grown = SinusoidalPositionalEncoding(8, max_len=16)
    grown(torch.zeros(1, 40, 8))
    fresh = SinusoidalPositionalEncoding(8, max_len=16)
    fresh.load_state_dict(grown.state_dict())
    assert torch.equal(fresh.pe, grown.pe)
    # A half-precision model's table (float32 -> float16, rounded twice) is still this table.
    half = SinusoidalPositionalEncoding(8, max_len=3000).half()
    target = SinusoidalPositionalEncoding(8, max_len=16).half()
    target.load_state_dict(half.state_dict())
    assert target.pe.shape == (3000, 8)


# ---------------------------------------------------------------------------------------------
# Per-sample positions: cos/sin with a batch axis
# ---------------------------------------------------------------------------------------------


def test_apply_rope_refuses_batch_cos_against_heads() -> None:
    batch = heads = 2
    q = _qkv((batch, heads, 5, 8))
    positions = torch.tensor([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    cos, sin = rope_cos_sin(positions, 8)  # (batch, seq, w), as Hugging Face's module returns
    with pytest.raises(ValueError, match=r"unsqueeze\(1\)"):
        apply_rope(q, cos, sin)
    out = apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1))
    for b in range(batch):
        single = rope_cos_sin(positions[b], 8)
        assert torch.equal(out[b], apply_rope(q[b], *single))
    # The module takes per-sample positions and inserts the heads axis itself.
    module = RotaryEmbedding(8)
    assert torch.equal(module(q, q, positions=positions)[0], out)
    # Unequal sizes: the same clear error, not one from inside torch.
    with pytest.raises(ValueError, match=r"unsqueeze\(1\)"):
        apply_rope(_qkv((3, 2, 5, 8)), *rope_cos_sin(torch.zeros(3, 5, dtype=torch.long), 8))


def test_rope_cos_sin_list_positions_message_names_tensor() -> None:
    with pytest.raises(TypeError, match=r"int \(a sequence length\) or a torch\.Tensor"):
        rope_cos_sin([0, 1, 2], 8)


def test_rotary_embedding_compiled_with_inductor_gives_the_same_bits() -> None:
    torch._dynamo.reset()
    scaling = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8}
    module = RotaryEmbedding(16, max_len=8, scaling=scaling)
    q, k = _qkv((2, 4, 12, 16), seed=3).requires_grad_(), _qkv((2, 2, 12, 16), seed=4)
    positions = torch.arange(12).expand(2, 12)  # past max_position_embeddings: dynamic frequencies
    compiled = torch.compile(module, backend="inductor", fullgraph=True)
    for got, expected in zip(compiled(q, k, positions=positions), module(q, k, positions=positions)):
        assert torch.equal(got, expected)
    # |R x|^2 = |x|^2 for a rotation, so its gradient is 2x, through the compiled kernel too.
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_cos_sin(3, 8, dtype=torch.float64)
    squared_norm = torch.compile(lambda t: apply_rope(t, cos, sin).square().sum(), fullgraph=True)
    (grad,) = torch.autograd.grad(squared_norm(x), x)
    torch.testing.assert_close(grad, 2 * x.detach(), rtol=1e-12, atol=1e-12)
