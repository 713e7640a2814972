r"""The RoPE rotation as one Triton kernel: queries and keys in one launch.

Imported only when the Triton backend is used (a CUDA tensor, or ``backend="triton"``), so that
``triton`` stays optional and ``TRITON_INTERPRET=1`` set before the first use takes effect.

Each program rotates ``BLOCK_S`` positions of ``HEADS`` consecutive heads of one batch entry of
``q`` or of ``k``: it loads cos/sin once (when they do not depend on the head; else ``HEADS`` is
1), then for each head the two members of every pair, computes

.. math::

    y_a = x_a c_a - x_b s_a, \qquad y_b = x_b c_b + x_a s_b

(or, with ``INVERSE``, the rotation by :math:`-\theta`: :math:`y_a = x_a c_a + x_b s_b`,
:math:`y_b = x_b c_b - x_a s_a`), and stores the result, so every element of ``q`` and ``k`` is
read once and written once: the traffic of a copy, plus cos/sin.

Bits: the arithmetic is that of the PyTorch path (:mod:`posenc._rotation`). Each product is
computed in float32 and rounded to the tensor's dtype, then the difference is computed in float32
and rounded — what PyTorch's ``mul``/``sub`` do for float16 and bfloat16 (float32 "opmath"). The
compiler may do these float16 steps in float16 instructions: float32 has more than twice the
significand bits plus two, so rounding through it gives the correctly rounded float16 result. For
float32 the launch passes ``enable_fp_fusion=False``, so no product is fused into a multiply-add.
bfloat16 is converted by integer arithmetic (round to nearest, ties to even), because Triton's
interpreter rounds bfloat16 otherwise (ties away, and no carry into the exponent); on a GPU the
same instructions give the same bits as the hardware conversion.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

__all__ = [
    "DTYPES", "LAUNCH_OPTIONS", "cos_fits", "interpreting", "kernel_constants", "launch", "x_fits",
]

#: Floating dtypes the kernel handles; others take the PyTorch path.
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _to_f32(x, IS_BF16: tl.constexpr):
    if IS_BF16:
        bits = x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
        return bits.to(tl.float32, bitcast=True)
    else:
        return x.to(tl.float32)


@triton.jit
def _round(x, dtype: tl.constexpr, IS_BF16: tl.constexpr):
    """float32 -> ``dtype``, round to nearest even."""
    if IS_BF16:
        bits = x.to(tl.uint32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        rounded = tl.where(x != x, 0x7FC0, rounded)  # NaN stays NaN
        return rounded.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(dtype)


@triton.jit
def _load_pairs(row_ptr, row_ok, WIDTH: tl.constexpr, HALF_P2: tl.constexpr, BLOCK_S: tl.constexpr,
                INTERLEAVED: tl.constexpr, IS_BF16: tl.constexpr):
    """The two members of every pair of ``BLOCK_S`` rows, in float32: ``(x_a, x_b)``."""
    if INTERLEAVED:
        # One contiguous load of the row, split into even and odd channels (vector loads,
        # where two strided loads would each fetch every other element).
        cols = tl.arange(0, 2 * HALF_P2)[None, :]
        t = _to_f32(tl.load(row_ptr + cols, mask=row_ok[:, None] & (cols < WIDTH)), IS_BF16)
        a, b = tl.split(tl.reshape(t, (BLOCK_S, HALF_P2, 2)))
    else:
        half = tl.arange(0, HALF_P2)[None, :]
        mask = row_ok[:, None] & (half < WIDTH // 2)
        a = _to_f32(tl.load(row_ptr + half, mask=mask), IS_BF16)
        b = _to_f32(tl.load(row_ptr + half + WIDTH // 2, mask=mask), IS_BF16)
    return a, b


@triton.jit
def _store_pairs(row_ptr, a, b, row_ok, WIDTH: tl.constexpr, HALF_P2: tl.constexpr,
                 BLOCK_S: tl.constexpr, INTERLEAVED: tl.constexpr):
    """Store ``(y_a, y_b)`` (already in the output dtype) where :func:`_load_pairs` read."""
    if INTERLEAVED:
        cols = tl.arange(0, 2 * HALF_P2)[None, :]
        t = tl.reshape(tl.join(a, b), (BLOCK_S, 2 * HALF_P2))
        tl.store(row_ptr + cols, t, mask=row_ok[:, None] & (cols < WIDTH))
    else:
        half = tl.arange(0, HALF_P2)[None, :]
        mask = row_ok[:, None] & (half < WIDTH // 2)
        tl.store(row_ptr + half, a, mask=mask)
        tl.store(row_ptr + half + WIDTH // 2, b, mask=mask)


@triton.jit
def _rotate_tile(
    x_ptr, o_ptr, cos_ptr, sin_ptr, tile, heads, seq, n_blocks,
    x_sb, x_sh, x_ss, o_sb, o_sh, o_ss, c_sb, c_sh, c_ss,
    DIM: tl.constexpr, WIDTH: tl.constexpr, HALF_P2: tl.constexpr, PASS_P2: tl.constexpr,
    BLOCK_S: tl.constexpr, HEADS: tl.constexpr, INTERLEAVED: tl.constexpr,
    INVERSE: tl.constexpr, COPY_PASS: tl.constexpr,
):
    """Rotate ``BLOCK_S`` positions of ``HEADS`` consecutive heads of one batch entry. With
    ``HEADS > 1`` cos/sin do not vary with the head (``c_sh == 0``): loaded once, used for each."""
    dtype = o_ptr.dtype.element_ty
    IS_BF16: tl.constexpr = dtype == tl.bfloat16
    groups = (heads + HEADS - 1) // HEADS
    bg = tile // n_blocks
    b = (bg // groups).to(tl.int64)
    h0 = ((bg % groups) * HEADS).to(tl.int64)
    rows = (tile % n_blocks) * BLOCK_S + tl.arange(0, BLOCK_S)
    row_ok = rows < seq
    rows = rows.to(tl.int64)[:, None]

    c_row = b * c_sb + h0 * c_sh + rows * c_ss
    ca, cb = _load_pairs(cos_ptr + c_row, row_ok, WIDTH, HALF_P2, BLOCK_S, INTERLEAVED, IS_BF16)
    sa, sb = _load_pairs(sin_ptr + c_row, row_ok, WIDTH, HALF_P2, BLOCK_S, INTERLEAVED, IS_BF16)
    if INVERSE:
        # The rotation by -theta: y_a = x_a c_a + x_b s_b, y_b = x_b c_b - x_a s_a.
        s_for_a, s_for_b = sb, sa
    else:
        s_for_a, s_for_b = sa, sb

    for g in tl.static_range(HEADS):
        h = h0 + g
        ok = row_ok & (h < heads)
        x_row = x_ptr + b * x_sb + h * x_sh + rows * x_ss
        o_row = o_ptr + b * o_sb + h * o_sh + rows * o_ss
        xa, xb = _load_pairs(x_row, ok, WIDTH, HALF_P2, BLOCK_S, INTERLEAVED, IS_BF16)
        # Each product rounded to the dtype, then the sum: PyTorch's mul, then sub/add.
        pa1 = _to_f32(_round(xa * ca, dtype, IS_BF16), IS_BF16)
        pa2 = _to_f32(_round(xb * s_for_a, dtype, IS_BF16), IS_BF16)
        pb1 = _to_f32(_round(xb * cb, dtype, IS_BF16), IS_BF16)
        pb2 = _to_f32(_round(xa * s_for_b, dtype, IS_BF16), IS_BF16)
        if INVERSE:
            ya = pa1 + pa2
            yb = pb1 - pb2
        else:
            ya = pa1 - pa2
            yb = pb1 + pb2
        _store_pairs(o_row, _round(ya, dtype, IS_BF16), _round(yb, dtype, IS_BF16), ok,
                     WIDTH, HALF_P2, BLOCK_S, INTERLEAVED)
        if COPY_PASS:
            # Partial rotary, out of place: channels WIDTH .. DIM-1 pass through.
            for start in tl.static_range(WIDTH, DIM, PASS_P2):
                cols = start + tl.arange(0, PASS_P2)[None, :]
                pmask = ok[:, None] & (cols < DIM)
                tl.store(o_row + cols, tl.load(x_row + cols, mask=pmask), mask=pmask)


@triton.jit
def _rope_kernel(
    q_ptr, qo_ptr, k_ptr, ko_ptr, cos_ptr, sin_ptr,
    q_heads, q_seq, q_blocks, q_tiles,
    q_sb, q_sh, q_ss, qo_sb, qo_sh, qo_ss, qc_sb, qc_sh, qc_ss,
    k_heads, k_seq, k_blocks,
    k_sb, k_sh, k_ss, ko_sb, ko_sh, ko_ss, kc_sb, kc_sh, kc_ss,
    DIM: tl.constexpr, WIDTH: tl.constexpr, HALF_P2: tl.constexpr, PASS_P2: tl.constexpr,
    BLOCK_S: tl.constexpr, HEADS: tl.constexpr, INTERLEAVED: tl.constexpr,
    INVERSE: tl.constexpr, COPY_PASS: tl.constexpr,
):
    # One flat grid: the first q_tiles programs rotate q, the rest rotate k.
    pid = tl.program_id(0)
    if pid < q_tiles:
        _rotate_tile(
            q_ptr, qo_ptr, cos_ptr, sin_ptr, pid, q_heads, q_seq, q_blocks,
            q_sb, q_sh, q_ss, qo_sb, qo_sh, qo_ss, qc_sb, qc_sh, qc_ss,
            DIM, WIDTH, HALF_P2, PASS_P2, BLOCK_S, HEADS, INTERLEAVED, INVERSE, COPY_PASS,
        )
    else:
        _rotate_tile(
            k_ptr, ko_ptr, cos_ptr, sin_ptr, pid - q_tiles, k_heads, k_seq, k_blocks,
            k_sb, k_sh, k_ss, ko_sb, ko_sh, ko_ss, kc_sb, kc_sh, kc_ss,
            DIM, WIDTH, HALF_P2, PASS_P2, BLOCK_S, HEADS, INTERLEAVED, INVERSE, COPY_PASS,
        )


# Elements of one half-tile (BLOCK_S positions x HALF_P2 pairs). With 4 warps each thread holds
# 16 of each loaded operand; compiled for sm_90 this takes 78-167 registers per thread (four heads
# per program) and spills none (tests/test_triton_compile.py), leaving room for several programs
# per multiprocessor to keep loads in flight.
_TILE_ELEMENTS = 2048
# Heads rotated by one program when cos/sin do not depend on the head.
_HEADS_PER_PROGRAM = 4


def _as_4d(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` as a 4-d view ``(batch, heads, seq, dim)``, leading axes merged; None if impossible."""
    while t.ndim < 4:
        t = t.unsqueeze(0)
    if t.ndim > 4:
        try:
            t = t.view(-1, *t.shape[-3:])
        except RuntimeError:
            return None
    return t


def x_fits(x: torch.Tensor) -> bool:
    """Whether the kernel reads ``x`` as it is: unit last stride, leading axes that merge."""
    return x.stride(-1) == 1 and _as_4d(x) is not None


def cos_fits(x: torch.Tensor, cos: torch.Tensor) -> bool:
    """Whether ``cos`` broadcast to ``x`` has leading axes that merge (its unit last stride is
    the caller's to ensure)."""
    return _as_4d(cos.expand(*x.shape[:-1], cos.shape[-1])) is not None


def launch(
    pairs: list[tuple[torch.Tensor, torch.Tensor]],
    cos: torch.Tensor,
    sin: torch.Tensor,
    interleaved: bool,
    inverse: bool,
) -> None:
    """Rotate each ``(x, out)`` of ``pairs`` (one or two; ``out`` may be ``x``) in one launch.

    ``cos``/``sin`` have ``x``'s dtype and the same shape and strides (one set of strides serves
    both) and broadcast to ``x[..., :w]``; every ``x`` passes :func:`x_fits` and
    :func:`cos_fits`; all pairs are in place or none.
    """
    width = cos.shape[-1]
    views = []
    for x, out in pairs:
        c4 = _as_4d(cos.expand(*x.shape[:-1], width))
        x4, o4 = _as_4d(x), _as_4d(out)
        assert c4 is not None and x4 is not None and o4 is not None
        views.append((x4, o4, c4))
    # cos/sin shared by the heads (the usual case: (seq, w) or (batch, 1, seq, w)): each program
    # rotates several heads with one load of them, cutting their reads from cache.
    heads_per_program = _HEADS_PER_PROGRAM if all(c4.stride(1) == 0 for _, _, c4 in views) else 1
    constants = kernel_constants(
        pairs[0][0].shape[-1], width, interleaved, inverse,
        copy_pass=pairs[0][1] is not pairs[0][0], heads_per_program=heads_per_program,
    )
    args = []
    for x4, o4, c4 in views:
        batch, heads, seq, _ = x4.shape
        blocks = triton.cdiv(seq, constants["BLOCK_S"])
        tiles = batch * triton.cdiv(heads, heads_per_program) * blocks
        args.append((heads, seq, blocks, tiles, x4, o4, c4))
    if len(args) == 1:
        args.append((*args[0][:3], 0, *args[0][4:]))  # no k: no programs for it
    (qh, qs, qb, q_tiles, q4, qo4, qc4), (kh, ks, kb, k_tiles, k4, ko4, kc4) = args
    _rope_kernel[(q_tiles + k_tiles,)](
        q4, qo4, k4, ko4, cos, sin,
        qh, qs, qb, q_tiles,
        *q4.stride()[:3], *qo4.stride()[:3], *qc4.stride()[:3],
        kh, ks, kb,
        *k4.stride()[:3], *ko4.stride()[:3], *kc4.stride()[:3],
        **constants,
        **LAUNCH_OPTIONS,
    )


def kernel_constants(
    dim: int, width: int, interleaved: bool, inverse: bool, *, copy_pass: bool, heads_per_program: int
) -> dict[str, int | bool]:
    """The compile-time arguments of :func:`_rope_kernel` for one call."""
    half_p2 = triton.next_power_of_2(width // 2)
    return {
        "DIM": dim,
        "WIDTH": width,
        "HALF_P2": half_p2,
        "PASS_P2": min(triton.next_power_of_2(max(dim - width, 1)), 128),
        "BLOCK_S": max(1, min(128, _TILE_ELEMENTS // half_p2)),
        "HEADS": heads_per_program,
        "INTERLEAVED": interleaved,
        "INVERSE": inverse,
        "COPY_PASS": copy_pass and width < dim,
    }


#: Launch options: no fused multiply-add (each product rounded, as in PyTorch), 4 warps.
LAUNCH_OPTIONS = {"enable_fp_fusion": False, "num_warps": 4}
