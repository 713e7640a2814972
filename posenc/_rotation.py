r"""The RoPE rotation kernel: one formula, the same bits on every path.

:func:`rotate` is what :func:`posenc.apply_rope` runs after its checks. For each channel pair
:math:`(x_a, x_b)`

.. math::

    y_a = x_a c_a - x_b s_a, \qquad y_b = x_b c_b + x_a s_b,

each product rounded, then the sum rounded — the bits of Hugging Face's
``x * cos + rotate_half(x) * sin``. No fused multiply-add: ``addcmul`` would round once less and
disagree with that formula in about one entry in seven.

Two implementations, chosen per call by ``backend`` (:func:`_kernel_inputs`): on CUDA, one
Triton kernel (:mod:`posenc._triton_rope`) that reads each element once and writes it once, for
queries and keys together; elsewhere, four elementwise PyTorch operations (the products of the
swapped pairs with signed sines into one scratch tensor, then ``x * cos`` plus that scratch),
over cache-sized blocks on a CPU. Both give the same bits.

For ``torch.compile`` the kernels are custom operators (``posenc::rope_rotate``,
``posenc::rope_rotate_qk`` and the in-place ``posenc::rope_rotate_qk_``): opaque, so a compiled
graph calls the same arithmetic instead of re-deriving the formula, and eager, autograd, compiled
and ``torch.func`` calls return identical bits. :class:`torch.autograd.Function`\ s on top give
them a backward (the rotation by :math:`-\theta`, itself a call of the kernel), a forward-mode
derivative and a batching rule for ``torch.vmap``. Eager calls run the implementations directly,
and without the Function when no derivative can be asked (:func:`_plain_call`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

__all__ = ["BACKENDS", "pair_views", "rotate", "rotate_qk", "wants_grad"]


def pair_views(t: torch.Tensor, width: int, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of each rotated channel pair, as views of ``t[..., :width]``."""
    if interleaved:
        return t[..., 0:width:2], t[..., 1:width:2]
    return t[..., : width // 2], t[..., width // 2 : width]


def _output_like(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    # (*broadcast(x.shape[:-1], cos.shape[:-1]), dim): cos may carry a batch axis x lacks
    # (inside vmap's batching rule, where x has been expanded, they agree).
    lead = x.shape[:-1]
    if cos.ndim > x.ndim or any(
        c != 1 and c != n for c, n in zip(reversed(cos.shape[:-1]), reversed(lead))
    ):
        lead = torch.broadcast_shapes(lead, cos.shape[:-1])
    return x.new_empty((*lead, x.shape[-1]))


#: ``backend`` of :func:`posenc.apply_rope` and :func:`posenc.apply_rope_qk`.
BACKENDS = ("auto", "torch", "triton")

_kernel_module: Any = None


def _triton_kernels() -> Any:
    """:mod:`posenc._triton_rope`, or None when Triton is not installed (imported on first use)."""
    global _kernel_module
    if _kernel_module is None:
        try:
            from posenc import _triton_rope
        except ImportError:
            _kernel_module = False
        else:
            _kernel_module = _triton_rope
    return _kernel_module or None


Pairs = list[tuple[torch.Tensor, torch.Tensor]]


def _kernel_inputs(
    backend: str, pairs: Pairs, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[Pairs, torch.Tensor, torch.Tensor] | None:
    """What the Triton kernel rotates, or None for the PyTorch path.

    ``"auto"``: the kernel for CUDA tensors it handles, when Triton is installed. ``"triton"``:
    always, or a clear error saying why it cannot. Inputs out of place that the kernel cannot
    read as they are (a last axis with a stride) are copied first: one pass over them, where
    the PyTorch path makes several.
    """
    if backend == "torch":
        return None
    x = pairs[0][0]
    forced = backend == "triton"
    if not forced and x.device.type != "cuda":
        return None
    kernels = _triton_kernels()
    if kernels is None:
        if not forced:
            return None
        raise RuntimeError(
            "backend='triton' needs the triton package (pip install triton), which is not installed"
        )
    if forced and x.device.type != "cuda" and not (x.device.type == "cpu" and kernels.interpreting()):
        raise ValueError(
            f"backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1, "
            f"Triton's interpreter), got device {x.device}"
        )
    if x.dtype not in kernels.DTYPES:
        if not forced:
            return None
        raise TypeError(
            f"backend='triton' supports float32, float16 and bfloat16, got {x.dtype}; "
            f"use backend='torch'"
        )
    if cos.stride() != sin.stride() or cos.stride(-1) != 1:
        cos, sin = cos.contiguous(), sin.contiguous()
    ready: Pairs = []
    for x, out in pairs:
        problem = None
        if not kernels.cos_fits(x, cos):
            problem = f"cos/sin of shape {tuple(cos.shape)} do not merge with the leading axes of x"
        elif not kernels.x_fits(x):
            if out is not x:
                x = x.contiguous()
            else:
                problem = "x, rotated in place, has a stride in its last axis or unmergeable leading axes"
        if problem is not None:
            if not forced:
                return None
            raise ValueError(
                f"backend='triton' cannot rotate x of shape {tuple(x.shape)} and strides "
                f"{x.stride()}: {problem}; use backend='torch' or pass contiguous tensors"
            )
        ready.append((x, out))
    return ready, cos, sin


# On a CPU the four elementwise passes of the PyTorch path run over blocks of about this size, so
# that each block's operands stay in the core's cache between passes: memory traffic then
# approaches one read of x and one write of out. Smaller blocks pay more per-call overhead (and
# below about 256 KiB an operation no longer splits across two threads).
_CPU_BLOCK_BYTES = 1 << 19


def _cpu_block_plan(x: torch.Tensor) -> tuple[int, int] | None:
    """Where to cut ``x`` into cache-sized blocks: ``(axis, length)``, each block
    ``x[i_0, ..., i_{axis-1}, j : j + length]`` with the later axes whole; None when ``x`` is
    small or not on the CPU."""
    if x.device.type != "cpu" or x.ndim < 2 or x.numel() * x.element_size() <= _CPU_BLOCK_BYTES:
        return None
    inner = x.shape[-1] * x.element_size()
    for axis in range(x.ndim - 2, -1, -1):
        if inner * x.shape[axis] > _CPU_BLOCK_BYTES:
            return axis, max(1, _CPU_BLOCK_BYTES // inner)
        inner *= x.shape[axis]
    return None  # unreachable: x is larger than a block


def _cut(t: torch.Tensor, axis: int, length: int) -> list[torch.Tensor]:
    """``t`` in the blocks of :func:`_cpu_block_plan`, as views (any strides)."""
    if axis == 0:
        return list(t.split(length))
    return [block for sub in t.unbind(0) for block in _cut(sub, axis - 1, length)]


def _signed_sines(sin: torch.Tensor, interleaved: bool, inverse: bool) -> torch.Tensor:
    """``T`` with ``y = x * cos + swap(x) * T`` (:func:`_swap_pairs`): ``T = (-sin_a, sin_b)``,
    and for the transposed rotation ``swap(T) = (sin_b, -sin_a)``. Negation is exact, so
    ``y_a = x_a c_a + x_b (-s_a)`` has the bits of ``x_a c_a - x_b s_a``."""
    signed = sin.clone()
    pair_views(signed, signed.shape[-1], interleaved)[0].neg_()
    return _swap_pairs(signed, interleaved) if inverse else signed


def _swap_pairs(t: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """``t`` (rotated channels only) with the two members of each pair exchanged, a new tensor."""
    if interleaved:
        return t.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    return t.roll(t.shape[-1] // 2, -1)


def _torch_rotate_into(
    x: torch.Tensor, cos: torch.Tensor, signed: torch.Tensor, interleaved: bool, out: torch.Tensor
) -> None:
    """The rotation in PyTorch, ``out = x * cos + swap(x) * signed``, written into ``out``
    (``out`` may be ``x``); ``signed`` from :func:`_signed_sines`.

    A small tensor takes four operations on whole tensors. A large one on a CPU is rotated block
    by block (:func:`_cpu_block_plan`) into one block-sized scratch tensor, the products of the
    swapped pairs written half by half: two half-width and two full-width passes over a block
    that stays in cache, and no temporaries the size of ``x``.
    """
    width = cos.shape[-1]
    plan = _cpu_block_plan(out)
    if plan is None:
        x_rot, out_rot = _rotated_channels(x, width), _rotated_channels(out, width)
        products = _swap_pairs(x_rot, interleaved) * signed
        torch.mul(x_rot, cos, out=out_rot)  # after the products: out may be x
        out_rot.add_(products)
    else:
        _torch_rotate_blocks(x, cos, signed, interleaved, out, plan)
    if out is not x and width < x.shape[-1]:
        out[..., width:] = x[..., width:]


def _torch_rotate_blocks(
    x: torch.Tensor, cos: torch.Tensor, signed: torch.Tensor, interleaved: bool, out: torch.Tensor,
    plan: tuple[int, int],
) -> None:
    width = cos.shape[-1]
    lead = (*out.shape[:-1], width)
    cos, signed = cos.expand(lead), signed.expand(lead)  # so that every operand cuts alike
    operands = (
        _rotated_channels(x, width), *pair_views(x, width, interleaved), cos,
        *pair_views(signed, width, interleaved), _rotated_channels(out, width),
    )
    axis, length = plan
    scratch = torch.empty((length, *lead[axis + 1 :]), dtype=out.dtype, device=out.device)
    scratch_views: dict[int, tuple[torch.Tensor, ...]] = {}  # by block length (the last may be shorter)
    for x_rot, x1, x2, c, t1, t2, out_rot in zip(*(_cut(t, axis, length) for t in operands)):
        n = out_rot.shape[0]
        if n not in scratch_views:
            scratch_views[n] = (scratch[:n], *pair_views(scratch[:n], width, interleaved))
        products, p1, p2 = scratch_views[n]
        torch.mul(x2, t1, out=p1)
        torch.mul(x1, t2, out=p2)
        torch.mul(x_rot, c, out=out_rot)  # after the products: out may be x
        out_rot.add_(products)


def _rotated_channels(t: torch.Tensor, width: int) -> torch.Tensor:
    return t[..., :width] if width < t.shape[-1] else t


def _rotate_pairs(
    pairs: Pairs, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool, backend: str
) -> None:
    """Rotate each ``x`` of ``pairs`` into its ``out``: one Triton launch, or PyTorch per pair."""
    kernel_inputs = _kernel_inputs(backend, pairs, cos, sin)
    if kernel_inputs is not None:
        ready, cos, sin = kernel_inputs
        device = ready[0][0].device
        with torch.cuda.device(device) if device.type == "cuda" else nullcontext():
            _triton_kernels().launch(ready, cos, sin, interleaved, inverse)
        return
    signed = _signed_sines(sin, interleaved, inverse)
    for x, out in pairs:
        _torch_rotate_into(x, cos, signed, interleaved, out)


# The three kernels as plain functions (what eager calls run: a custom operator's dispatch
# costs tens of microseconds per call) and as custom operators (what torch.compile sees: opaque,
# so a compiled graph runs the same arithmetic instead of re-deriving the formula).


def _rotate_impl(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool, backend: str
) -> torch.Tensor:
    out = _output_like(x, cos)
    _rotate_pairs([(x.expand_as(out), out)], cos, sin, interleaved, inverse, backend)
    return out


def _rotate_qk_impl(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
    inverse: bool, backend: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    out_q, out_k = _output_like(q, cos), _output_like(k, cos)
    pairs = [(q.expand_as(out_q), out_q), (k.expand_as(out_k), out_k)]
    _rotate_pairs(pairs, cos, sin, interleaved, inverse, backend)
    return out_q, out_k


def _rotate_qk_inplace_impl(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
    inverse: bool, backend: str,
) -> None:
    _rotate_pairs([(q, q), (k, k)], cos, sin, interleaved, inverse, backend)


# The schemas are written out, not inferred from the annotations: inference evaluates them in the
# globals of the function it is given, and a wrapper defined in another module (mutmut's
# trampoline, docs/dev/mutation-testing.md) cannot resolve them. A test checks that they match.
_rope_rotate = torch.library.custom_op(
    "posenc::rope_rotate", mutates_args=(),
    schema="(Tensor x, Tensor cos, Tensor sin, bool interleaved, bool inverse, str backend) -> Tensor",
)(_rotate_impl)
_rope_rotate_qk = torch.library.custom_op(
    "posenc::rope_rotate_qk", mutates_args=(),
    schema="(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved, bool inverse, str backend)"
    " -> (Tensor, Tensor)",
)(_rotate_qk_impl)
_rope_rotate_qk_ = torch.library.custom_op(
    "posenc::rope_rotate_qk_", mutates_args=("q", "k"),
    schema="(Tensor(a0!) q, Tensor(a1!) k, Tensor cos, Tensor sin, bool interleaved, bool inverse,"
    " str backend) -> ()",
)(_rotate_qk_inplace_impl)


@_rope_rotate.register_fake
def _(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool, backend: str) -> torch.Tensor:
    return _output_like(x, cos)


@_rope_rotate_qk.register_fake
def _(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
    inverse: bool, backend: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _output_like(q, cos), _output_like(k, cos)


@_rope_rotate_qk_.register_fake
def _(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
    inverse: bool, backend: str,
) -> None:
    return None


def _join_pairs(a: torch.Tensor, b: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Inverse of :func:`pair_views` for a tensor that holds only the rotated channels."""
    if interleaved:
        return torch.stack((a, b), dim=-1).flatten(-2)
    return torch.cat((a, b), dim=-1)


def _swap_negate(sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """``S`` with ``S_a = -sin_b`` and ``S_b = -sin_a``: the sines of the transposed rotation."""
    return -_swap_pairs(sin, interleaved)


def _rotation_of_cos_sin(
    x: torch.Tensor, dcos: torch.Tensor, dsin: torch.Tensor, interleaved: bool, inverse: bool
) -> torch.Tensor:
    """``y`` is bilinear in ``x`` and ``(cos, sin)``: its change for a change of ``cos``/``sin``
    is the same formula with ``x`` fixed, zero on the pass-through channels."""
    width = dcos.shape[-1]
    if inverse:
        dsin = _swap_negate(dsin, interleaved)
    x1, x2 = pair_views(x, width, interleaved)
    c1, c2 = pair_views(dcos, width, interleaved)
    s1, s2 = pair_views(dsin, width, interleaved)
    y1, y2 = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
    y = _join_pairs(y1, y2, interleaved)
    if width < x.shape[-1]:
        y = torch.cat((y, y.new_zeros((*y.shape[:-1], x.shape[-1] - width))), dim=-1)
    return y


def _grad_cos_sin(
    grad: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, interleaved: bool, inverse: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of ``cos`` and ``sin`` (before summing to their shape) for one rotated tensor."""
    width = cos.shape[-1]
    g1, g2 = pair_views(grad, width, interleaved)
    x1, x2 = pair_views(x, width, interleaved)
    grad_cos = _join_pairs(g1 * x1, g2 * x2, interleaved)
    grad_sin = _join_pairs(-(g1 * x2), g2 * x1, interleaved)
    if inverse:
        # The inverse rotation is the forward one with sin -> S(sin) (swap_negate), and S is its
        # own transpose.
        grad_sin = _swap_negate(grad_sin, interleaved)
    return grad_cos, grad_sin


def _to_physical(
    tensors: tuple[torch.Tensor, ...], in_dims: tuple[int | None, ...]
) -> list[torch.Tensor]:
    """``vmap`` helper: every vmapped axis moved to the front (size-1 axes where a tensor is not
    batched), and all tensors given the same number of dimensions, right-aligned."""
    ndim = max(t.ndim - (d is not None) for t, d in zip(tensors, in_dims))
    out = []
    for t, d in zip(tensors, in_dims):
        t = t.unsqueeze(0) if d is None else t.movedim(d, 0)
        while t.ndim < ndim + 1:
            t = t.unsqueeze(1)
        out.append(t)
    return out


def _vmap_rotate(
    x: torch.Tensor, x_dim: int | None, cos: torch.Tensor, cos_dim: int | None,
    sin: torch.Tensor, sin_dim: int | None, interleaved: bool, inverse: bool, backend: str,
) -> torch.Tensor:
    """Rotate a vmapped batch as one tensor; the batch axis of the result is 0."""
    x_p, cos_p, sin_p = _to_physical((x, cos, sin), (x_dim, cos_dim, sin_dim))
    lead = torch.broadcast_shapes(x_p.shape[:-1], cos_p.shape[:-1], sin_p.shape[:-1])
    x_p = x_p.expand(*lead, x_p.shape[-1])
    return rotate(x_p, cos_p, sin_p, interleaved, inverse=inverse, backend=backend)


class _RotateForCompile(torch.autograd.Function):
    """Autograd and ``vmap`` rules of the kernel; what ``torch.compile`` traces (Dynamo does not
    trace a Function with a custom ``jvp``)."""

    @staticmethod
    def forward(  # type: ignore[override]
        x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool, backend: str
    ) -> torch.Tensor:
        return _rope_rotate(x, cos, sin, interleaved, inverse, backend)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        x, cos, sin, interleaved, inverse, backend = inputs
        ctx.interleaved, ctx.inverse, ctx.backend = interleaved, inverse, backend
        ctx.x_shape = x.shape
        ctx.save_for_backward(x, cos, sin)
        ctx.save_for_forward(x, cos, sin)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, cos, sin = ctx.saved_tensors
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:
            # The transpose of a rotation is the rotation by -theta.
            grad_x = rotate(grad, cos, sin, ctx.interleaved, inverse=not ctx.inverse, backend=ctx.backend)
            grad_x = grad_x.sum_to_size(ctx.x_shape)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            gc, gs = _grad_cos_sin(grad, x, cos, ctx.interleaved, ctx.inverse)
            grad_cos = gc.sum_to_size(cos.shape) if ctx.needs_input_grad[1] else None
            grad_sin = gs.sum_to_size(sin.shape) if ctx.needs_input_grad[2] else None
        return grad_x, grad_cos, grad_sin, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, cos, sin, interleaved, inverse, backend):  # type: ignore[no-untyped-def]
        return _vmap_rotate(x, in_dims[0], cos, in_dims[1], sin, in_dims[2], interleaved, inverse, backend), 0


class _Rotate(_RotateForCompile):
    """Adds the forward-mode derivative (``torch.func.jvp``, ``jacfwd``) for eager calls."""

    @staticmethod
    def forward(  # type: ignore[override]
        x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool, backend: str
    ) -> torch.Tensor:
        return _rotate_impl(x, cos, sin, interleaved, inverse, backend)

    @staticmethod
    def jvp(ctx, x_t, cos_t, sin_t, *_):  # type: ignore[no-untyped-def]
        x, cos, sin = ctx.saved_tensors
        return _tangent(ctx, x, x_t, cos, sin, cos_t, sin_t)


def _tangent(ctx, x, x_t, cos, sin, cos_t, sin_t):  # type: ignore[no-untyped-def]
    """Forward-mode derivative of one rotated tensor: the rotation of ``x_t`` plus the change
    that ``cos_t``/``sin_t`` make. No tangent is None: autograd gives zeros for an input
    without one (a Function's ``materialize_grads``, on by default)."""
    out_t = rotate(x_t, cos, sin, ctx.interleaved, inverse=ctx.inverse, backend=ctx.backend)
    return out_t + _rotation_of_cos_sin(x, cos_t, sin_t, ctx.interleaved, ctx.inverse)


class _RotateQKForCompile(torch.autograd.Function):
    """Queries and keys rotated by the same cos/sin in one kernel call, forward and backward."""

    @staticmethod
    def forward(  # type: ignore[override]
        q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
        inverse: bool, backend: str,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _rope_rotate_qk(q, k, cos, sin, interleaved, inverse, backend)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        q, k, cos, sin, interleaved, inverse, backend = inputs
        ctx.interleaved, ctx.inverse, ctx.backend = interleaved, inverse, backend
        ctx.shapes = (q.shape, k.shape)
        ctx.save_for_backward(q, k, cos, sin)
        ctx.save_for_forward(q, k, cos, sin)

    @staticmethod
    def backward(ctx, grad_q, grad_k):  # type: ignore[no-untyped-def]
        q, k, cos, sin = ctx.saved_tensors
        return _qk_backward(ctx, grad_q, grad_k, q, k, cos, sin)

    @staticmethod
    def vmap(info, in_dims, q, k, cos, sin, interleaved, inverse, backend):  # type: ignore[no-untyped-def]
        qd, kd, cd, sd = in_dims[:4]
        out_q = _vmap_rotate(q, qd, cos, cd, sin, sd, interleaved, inverse, backend)
        out_k = _vmap_rotate(k, kd, cos, cd, sin, sd, interleaved, inverse, backend)
        return (out_q, out_k), (0, 0)


def _qk_backward(ctx, grad_q, grad_k, q, k, cos, sin):  # type: ignore[no-untyped-def]
    """Backward of the q/k rotation: both gradients in one inverse rotation."""
    grad_q_in, grad_k_in = rotate_qk(
        grad_q, grad_k, cos, sin, ctx.interleaved, inverse=not ctx.inverse, backend=ctx.backend
    )
    grad_q_in = grad_q_in.sum_to_size(ctx.shapes[0])
    grad_k_in = grad_k_in.sum_to_size(ctx.shapes[1])
    grad_cos = grad_sin = None
    if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
        gc_q, gs_q = _grad_cos_sin(grad_q, q, cos, ctx.interleaved, ctx.inverse)
        gc_k, gs_k = _grad_cos_sin(grad_k, k, cos, ctx.interleaved, ctx.inverse)
        if ctx.needs_input_grad[2]:
            grad_cos = gc_q.sum_to_size(cos.shape) + gc_k.sum_to_size(cos.shape)
        if ctx.needs_input_grad[3]:
            grad_sin = gs_q.sum_to_size(sin.shape) + gs_k.sum_to_size(sin.shape)
    return grad_q_in, grad_k_in, grad_cos, grad_sin, None, None, None


class _RotateQK(_RotateQKForCompile):
    """Adds the forward-mode derivative for eager calls."""

    @staticmethod
    def forward(  # type: ignore[override]
        q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
        inverse: bool, backend: str,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _rotate_qk_impl(q, k, cos, sin, interleaved, inverse, backend)

    @staticmethod
    def jvp(ctx, q_t, k_t, cos_t, sin_t, *_):  # type: ignore[no-untyped-def]
        q, k, cos, sin = ctx.saved_tensors
        return tuple(_tangent(ctx, x, x_t, cos, sin, cos_t, sin_t) for x, x_t in ((q, q_t), (k, k_t)))


class _RotateQKInPlace(torch.autograd.Function):
    """In-place rotation of q and k. The backward needs only cos/sin (it is the inverse
    rotation), so q and k may be overwritten; gradients of cos/sin would need the old q and k and
    are refused by the caller."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, interleaved, inverse, backend):  # type: ignore[no-untyped-def,override]
        # Eager only: under torch.compile rotate_qk does not use this Function (Dynamo does not
        # trace mark_dirty).
        _rotate_qk_inplace_impl(q, k, cos, sin, interleaved, inverse, backend)
        ctx.mark_dirty(q, k)
        ctx.interleaved, ctx.inverse, ctx.backend = interleaved, inverse, backend
        ctx.shapes = (q.shape, k.shape)
        ctx.save_for_backward(cos, sin)
        return q, k

    @staticmethod
    def backward(ctx, grad_q, grad_k):  # type: ignore[no-untyped-def]
        cos, sin = ctx.saved_tensors
        return _qk_backward(ctx, grad_q, grad_k, None, None, cos, sin)


def wants_grad(*tensors: torch.Tensor) -> bool:
    """Whether autograd records a call on ``tensors``: grad mode on and one of them requires it."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def functorch_active() -> bool:
    """Whether a ``torch.func`` transform (vmap, grad, jvp...) is active; True when this PyTorch
    cannot say, so that callers stay on the safe path."""
    transforms_active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return transforms_active is None or bool(transforms_active())


def _plain_call(*tensors: torch.Tensor) -> bool:
    """Whether no derivative can be asked of this call: no tensor requires a gradient (or grad
    mode is off), no ``torch.func`` transform and no forward-mode AD level is active. Then the
    kernel runs without the autograd.Function around it (which costs tens of microseconds per
    call, binding its arguments) and gives the same bits."""
    if torch.compiler.is_compiling():
        return False
    if functorch_active():
        return False
    if getattr(torch.autograd.forward_ad, "_current_level", 0) >= 0:
        return False
    return not wants_grad(*tensors)


def rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, *,
    inverse: bool = False, backend: str = "auto",
) -> torch.Tensor:
    """Rotate ``x`` by ``cos``/``sin`` (already checked and cast to ``x.dtype``); with
    ``inverse``, by the opposite angles."""
    if _plain_call(x, cos, sin):
        return _rotate_impl(x, cos, sin, interleaved, inverse, backend)
    if torch.compiler.is_compiling():
        return _RotateForCompile.apply(x, cos, sin, interleaved, inverse, backend)
    return _Rotate.apply(x, cos, sin, interleaved, inverse, backend)


def rotate_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, *,
    inverse: bool = False, backend: str = "auto", inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``q`` and ``k`` by the same ``cos``/``sin`` (one kernel call); ``inplace`` writes
    the result into ``q`` and ``k`` and returns them."""
    if _plain_call(q, k, cos, sin):
        if inplace:
            _rotate_qk_inplace_impl(q, k, cos, sin, interleaved, inverse, backend)
            return q, k
        return _rotate_qk_impl(q, k, cos, sin, interleaved, inverse, backend)
    if inplace and torch.compiler.is_compiling():
        # Dynamo does not trace ctx.mark_dirty: without gradients, the in-place operator (which
        # compilation functionalises); with them, the rotation out of place, copied back.
        if wants_grad(q, k, cos, sin):
            out_q, out_k = _RotateQKForCompile.apply(q, k, cos, sin, interleaved, inverse, backend)
            return q.copy_(out_q), k.copy_(out_k)
        _rope_rotate_qk_(q, k, cos, sin, interleaved, inverse, backend)
        return q, k
    if inplace:
        return _RotateQKInPlace.apply(q, k, cos, sin, interleaved, inverse, backend)
    if torch.compiler.is_compiling():
        return _RotateQKForCompile.apply(q, k, cos, sin, interleaved, inverse, backend)
    return _RotateQK.apply(q, k, cos, sin, interleaved, inverse, backend)
