r"""The RoPE rotation kernel: one formula, the same bits on every path.

:func:`rotate` is what :func:`posenc.apply_rope` runs after its checks. For each channel pair
:math:`(x_a, x_b)`

.. math::

    y_a = x_a c_a - x_b s_a, \qquad y_b = x_b c_b + x_a s_b,

each product rounded, then the sum rounded — the bits of Hugging Face's
``x * cos + rotate_half(x) * sin``. No fused multiply-add: ``addcmul`` would round once less and
disagree with that formula in about one entry in seven.

The arithmetic lives in one custom operator, ``posenc::rope_rotate``, which writes each half of
the output in place (no full-size temporaries). Being an operator, it is opaque to
``torch.compile``: a compiled graph calls the same kernel instead of re-deriving the formula, so
eager, autograd, compiled and ``torch.func`` calls return identical bits. An
:class:`torch.autograd.Function` on top gives it a backward (the rotation by :math:`-\theta`,
itself a call of the operator), a forward-mode derivative and a batching rule for ``torch.vmap``.
"""

from __future__ import annotations

import torch

__all__ = ["pair_views", "rotate"]


def pair_views(t: torch.Tensor, width: int, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of each rotated channel pair, as views of ``t[..., :width]``."""
    if interleaved:
        return t[..., 0:width:2], t[..., 1:width:2]
    return t[..., : width // 2], t[..., width // 2 : width]


def _output_like(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    # (*broadcast(x.shape[:-1], cos.shape[:-1]), dim): cos may carry a batch axis x lacks
    # (inside vmap's batching rule, where x has been expanded, they agree).
    lead = torch.broadcast_shapes(x.shape[:-1], cos.shape[:-1])
    return x.new_empty((*lead, x.shape[-1]))


@torch.library.custom_op("posenc::rope_rotate", mutates_args=())
def _rope_rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    width = cos.shape[-1]
    out = _output_like(x, cos)
    x1, x2 = pair_views(x, width, interleaved)
    c1, c2 = pair_views(cos, width, interleaved)
    s1, s2 = pair_views(sin, width, interleaved)
    o1, o2 = pair_views(out, width, interleaved)
    # One half-width scratch tensor holds the second product; each half of ``out`` is then
    # written once and updated once: x is read twice, out written twice, nothing full-size extra.
    scratch = torch.empty(o1.shape, dtype=out.dtype, device=out.device)
    torch.mul(x1, c1, out=o1)
    torch.mul(x2, s1, out=scratch)
    o1.sub_(scratch)
    torch.mul(x2, c2, out=o2)
    torch.mul(x1, s2, out=scratch)
    o2.add_(scratch)
    if width < x.shape[-1]:
        out[..., width:] = x[..., width:]
    return out


@_rope_rotate.register_fake
def _(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    return _output_like(x, cos)


def _join_pairs(a: torch.Tensor, b: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Inverse of :func:`pair_views` for a tensor that holds only the rotated channels."""
    if interleaved:
        return torch.stack((a, b), dim=-1).flatten(-2)
    return torch.cat((a, b), dim=-1)


def _swap_negate(sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """``S`` with ``S_a = -sin_b`` and ``S_b = -sin_a``: the sines of the transposed rotation."""
    s1, s2 = pair_views(sin, sin.shape[-1], interleaved)
    return _join_pairs(-s2, -s1, interleaved)


def _rotation_of_cos_sin(x: torch.Tensor, dcos: torch.Tensor, dsin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """``y`` is bilinear in ``x`` and ``(cos, sin)``: its change for a change of ``cos``/``sin``
    is the same formula with ``x`` fixed, zero on the pass-through channels."""
    width = dcos.shape[-1]
    x1, x2 = pair_views(x, width, interleaved)
    c1, c2 = pair_views(dcos, width, interleaved)
    s1, s2 = pair_views(dsin, width, interleaved)
    y1, y2 = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
    y = _join_pairs(y1, y2, interleaved)
    if width < x.shape[-1]:
        y = torch.cat((y, y.new_zeros((*y.shape[:-1], x.shape[-1] - width))), dim=-1)
    return y


class _RotateForCompile(torch.autograd.Function):
    """Autograd and ``vmap`` rules of the kernel; what ``torch.compile`` traces (Dynamo does not
    trace a Function with a custom ``jvp``)."""

    @staticmethod
    def forward(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
        return _rope_rotate(x, cos, sin, interleaved)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        x, cos, sin, interleaved = inputs
        ctx.interleaved = interleaved
        ctx.x_shape = x.shape
        ctx.save_for_backward(x, cos, sin)
        ctx.save_for_forward(x, cos, sin)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, cos, sin = ctx.saved_tensors
        interleaved = ctx.interleaved
        grad_x = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0]:
            # The transpose of a rotation is the rotation by -theta.
            grad_x = rotate(grad, cos, _swap_negate(sin, interleaved), interleaved)
            grad_x = grad_x.sum_to_size(ctx.x_shape)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            width = cos.shape[-1]
            g1, g2 = pair_views(grad, width, interleaved)
            x1, x2 = pair_views(x, width, interleaved)
            if ctx.needs_input_grad[1]:
                grad_cos = _join_pairs(g1 * x1, g2 * x2, interleaved).sum_to_size(cos.shape)
            if ctx.needs_input_grad[2]:
                grad_sin = _join_pairs(-(g1 * x2), g2 * x1, interleaved).sum_to_size(sin.shape)
        return grad_x, grad_cos, grad_sin, None

    @staticmethod
    def vmap(info, in_dims, x, cos, sin, interleaved):  # type: ignore[no-untyped-def]
        # Move every vmapped axis to the front, give all three tensors the same number of
        # dimensions (the logical ones of cos/sin are right-aligned with those of x), and
        # rotate the batch as one tensor.
        ndim = max(t.ndim - (d is not None) for t, d in zip((x, cos, sin), in_dims[:3]))

        def physical(t: torch.Tensor, d: int | None) -> torch.Tensor:
            if d is None:
                t = t.unsqueeze(0)
            else:
                t = t.movedim(d, 0)
            while t.ndim < ndim + 1:
                t = t.unsqueeze(1)
            return t

        x_p, cos_p, sin_p = (physical(t, d) for t, d in zip((x, cos, sin), in_dims[:3]))
        lead = torch.broadcast_shapes(x_p.shape[:-1], cos_p.shape[:-1], sin_p.shape[:-1])
        x_p = x_p.expand(*lead, x_p.shape[-1])
        return rotate(x_p, cos_p, sin_p, interleaved), 0


class _Rotate(_RotateForCompile):
    """Adds the forward-mode derivative (``torch.func.jvp``, ``jacfwd``) for eager calls."""

    @staticmethod
    def jvp(ctx, x_t, cos_t, sin_t, _):  # type: ignore[no-untyped-def]
        x, cos, sin = ctx.saved_tensors
        interleaved = ctx.interleaved
        out_t = None
        if x_t is not None:
            out_t = rotate(x_t, cos, sin, interleaved)
        if cos_t is not None or sin_t is not None:
            cos_t = torch.zeros_like(cos) if cos_t is None else cos_t
            sin_t = torch.zeros_like(sin) if sin_t is None else sin_t
            term = _rotation_of_cos_sin(x, cos_t, sin_t, interleaved)
            out_t = term if out_t is None else out_t + term
        return out_t


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """Rotate ``x`` by ``cos``/``sin`` (already checked and cast to ``x.dtype``)."""
    if torch.compiler.is_compiling():
        return _RotateForCompile.apply(x, cos, sin, interleaved)
    return _Rotate.apply(x, cos, sin, interleaved)
