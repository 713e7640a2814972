"""Contracts of posenc._rotation, the RoPE rotation kernel, that a reviewer's bug would break."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

from posenc import _rotation


@pytest.mark.parametrize(
    ("operator", "kernel", "mutates"),
    [
        (_rotation._rope_rotate, _rotation._rotate_impl, ()),
        (_rotation._rope_rotate_qk, _rotation._rotate_qk_impl, ()),
        (_rotation._rope_rotate_qk_, _rotation._rotate_qk_inplace_impl, ("q", "k")),
    ],
)
def test_written_schemas_are_those_of_the_kernels(operator, kernel, mutates) -> None:  # type: ignore[no-untyped-def]
    # The operators' schemas are written out (so a wrapper of the kernels can be registered);
    # they must say what the kernels' annotations say (read from the function itself, under any
    # wrapper).
    name = operator._opoverload._schema.name
    inferred = torch.library.infer_schema(inspect.unwrap(kernel), mutates_args=mutates)
    assert str(operator._opoverload._schema) == name + inferred


def _inputs(cos_batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, 5, 8, generator=generator)
    angles = torch.randn(cos_batch, 1, 5, 8, generator=generator)
    return x, angles.cos(), angles.sin()


@pytest.mark.parametrize("cos_batch", [1, 2])  # cos/sin with a batch axis x lacks: the output is larger than x
def test_operators_pass_pytorchs_operator_checks(cos_batch: int) -> None:
    # torch.library.opcheck: the schema (what it says is mutated), the fake (shape-only)
    # implementations that torch.compile traces with, and the autograd registration.
    x, cos, sin = _inputs(cos_batch)
    checks = [
        (_rotation._rope_rotate, (x, cos, sin, False, False, "torch")),
        (_rotation._rope_rotate, (x, cos, sin, True, True, "torch")),
        (_rotation._rope_rotate_qk, (x, x[:, :1].clone(), cos, sin, False, False, "torch")),
    ]
    if cos_batch == 1:  # in place needs cos to broadcast to q and k as they are
        checks.append((_rotation._rope_rotate_qk_, (x.clone(), x[:, :1].clone(), cos, sin, False, False, "torch")))
    for operator, args in checks:
        results = torch.library.opcheck(operator, args)
        assert set(results.values()) == {"SUCCESS"}, (operator, results)


# --------------------------------------------------------------------------------------------
# The rotation on every path: plain, autograd, in place, as torch.compile sees it, torch.func
# --------------------------------------------------------------------------------------------

WIDTH, DIM = 6, 8  # partial rotary: channels 6 and 7 pass through


def _pairs(t: torch.Tensor, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if interleaved:
        return t[..., 0:WIDTH:2], t[..., 1:WIDTH:2]
    return t[..., : WIDTH // 2], t[..., WIDTH // 2 : WIDTH]


def _joined(a: torch.Tensor, b: torch.Tensor, interleaved: bool) -> torch.Tensor:
    if interleaved:
        return torch.stack((a, b), dim=-1).flatten(-2)
    return torch.cat((a, b), dim=-1)


def _formula(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, inverse: bool) -> torch.Tensor:
    """The rotation written out: each product rounded, then the sum (plain PyTorch, differentiable)."""
    (x1, x2), (c1, c2), (s1, s2) = (_pairs(t, interleaved) for t in (x, cos, sin))
    if inverse:
        y1, y2 = x1 * c1 + x2 * s2, x2 * c2 - x1 * s1
    else:
        y1, y2 = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
    rotated = _joined(y1, y2, interleaved)
    lead = torch.broadcast_shapes(x.shape[:-1], cos.shape[:-1])
    return torch.cat((rotated.expand(*lead, WIDTH), x[..., WIDTH:].expand(*lead, DIM - WIDTH)), dim=-1)


def _data(dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    # cos/sin whose pair members have different values: a swapped member shows.
    g = torch.Generator().manual_seed(7)
    return {"q": torch.randn(2, 3, 5, DIM, generator=g, dtype=dtype),
            "k": torch.randn(2, 1, 5, DIM, generator=g, dtype=dtype),
            "cos": torch.randn(5, WIDTH, generator=g, dtype=dtype),
            "sin": torch.randn(5, WIDTH, generator=g, dtype=dtype)}


@pytest.fixture(params=[False, True], ids=["eager", "traced"])
def traced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    # "traced": the branches torch.compile's tracing takes (torch.compiler.is_compiling() is
    # True), run eagerly: the custom operators and their autograd Functions. (No "compile" in a
    # test's name or id: the mutation map leaves such tests out with -k "not compile".)
    if request.param:
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    return request.param


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
def test_every_path_gives_the_formulas_bits(traced: bool, interleaved: bool, inverse: bool) -> None:
    d = _data(torch.float32)
    q, k, cos, sin = d["q"], d["k"], d["cos"], d["sin"]
    want_q, want_k = _formula(q, cos, sin, interleaved, inverse), _formula(k, cos, sin, interleaved, inverse)
    args = (cos, sin, interleaved)
    assert torch.equal(_rotation.rotate(q, *args, inverse=inverse), want_q)
    for got, want in zip(_rotation.rotate_qk(q, k, *args, inverse=inverse), (want_q, want_k)):
        assert torch.equal(got, want)
    q_in, k_in = q.clone(), k.clone()
    out = _rotation.rotate_qk(q_in, k_in, *args, inverse=inverse, inplace=True)
    assert out[0] is q_in and out[1] is k_in
    assert torch.equal(q_in, want_q) and torch.equal(k_in, want_k)
    # With autograd recording (one input requires a gradient): the Functions' forwards.
    leaf = q.clone().requires_grad_()
    assert torch.equal(_rotation.rotate(leaf, *args, inverse=inverse).detach(), want_q)
    for got, want in zip(_rotation.rotate_qk(leaf, k, *args, inverse=inverse), (want_q, want_k)):
        assert torch.equal(got.detach(), want)
    q_in, k_in = leaf * 1, k.clone().requires_grad_() * 1
    out = _rotation.rotate_qk(q_in, k_in, *args, inverse=inverse, inplace=True)
    assert out[0] is q_in and out[1] is k_in  # both rewritten in place, with their new history
    if not traced:  # one Function rotated both (traced: see the in-place test below)
        assert q_in.grad_fn is k_in.grad_fn and q_in.grad_fn.name() == "_RotateQKInPlaceBackward"
    assert torch.equal(q_in.detach(), want_q) and torch.equal(k_in.detach(), want_k)


def _gradients(outputs: tuple[torch.Tensor, ...], inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    weights = [torch.linspace(-1, 2, o.numel(), dtype=o.dtype).view(o.shape) for o in outputs]
    loss = sum((o * w).sum() for o, w in zip(outputs, weights))
    return dict(zip(inputs, torch.autograd.grad(loss, list(inputs.values()))))


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("wanted", [("q",), ("k",), ("cos",), ("sin",), ("q", "k", "cos", "sin")])
def test_every_path_gives_the_gradients_of_the_formula(
    traced: bool, interleaved: bool, inverse: bool, wanted: tuple[str, ...]
) -> None:
    # Only the inputs named in `wanted` require a gradient; each must get the formula's.
    def run(rotation: str) -> dict[str, torch.Tensor]:
        d = _data()
        inputs = {name: d[name].requires_grad_() for name in wanted}
        q, k, cos, sin = d["q"], d["k"], d["cos"], d["sin"]
        if rotation == "formula":
            outputs = (_formula(q, cos, sin, interleaved, inverse), _formula(k, cos, sin, interleaved, inverse))
        elif rotation == "rotate":
            outputs = (_rotation.rotate(q, cos, sin, interleaved, inverse=inverse),
                       _rotation.rotate(k, cos, sin, interleaved, inverse=inverse))
        elif rotation == "rotate_qk":
            outputs = _rotation.rotate_qk(q, k, cos, sin, interleaved, inverse=inverse)
        else:  # in place, on tensors that are not leaves (a projection's output)
            outputs = _rotation.rotate_qk(q * 1, k * 1, cos, sin, interleaved, inverse=inverse, inplace=True)
        return _gradients(outputs, inputs)

    expected = run("formula")
    rotations = ["rotate", "rotate_qk"]
    # In place, eager: gradients of cos/sin would need the old q and k (apply_rope_qk refuses
    # them). Traced, the in-place rotation with gradients is the out-of-place Function
    # copied back, which needs the functionalisation that torch.compile applies: see
    # test_in_place_as_traced_records_a_gradient_for_each_input.
    if not traced and not {"cos", "sin"} & set(wanted):
        rotations.append("in place")
    for rotation in rotations:
        got = run(rotation)
        assert set(got) == set(expected), rotation
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], msg=f"{rotation}: gradient of {name}")


@pytest.mark.parametrize("wanted", ["q", "k", "cos", "sin"])
def test_in_place_as_traced_records_a_gradient_for_each_input(
    monkeypatch: pytest.MonkeyPatch, wanted: str
) -> None:
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    d = _data()
    d[wanted].requires_grad_()
    q, k = d["q"] * 1, d["k"] * 1
    _rotation.rotate_qk(q, k, d["cos"], d["sin"], True, inverse=True, inplace=True)
    # The rotation out of place, recorded by its autograd Function, then copied into q and k.
    for out in (q, k):
        assert out.grad_fn is not None and out.grad_fn.name().endswith("CopyBackwards")
        sources = [f.name() for f, _ in out.grad_fn.next_functions if f is not None]
        assert "_RotateQKForCompileBackward" in sources
    for got, x in ((q, d["q"]), (k, d["k"])):
        torch.testing.assert_close(got.detach(), _formula(x.detach(), d["cos"].detach(), d["sin"].detach(), True, True),
                                   rtol=0, atol=0)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("tangents", [("q",), ("cos",), ("sin",), ("q", "k", "cos", "sin")])
def test_forward_mode_derivatives_are_those_of_the_formula(
    interleaved: bool, inverse: bool, tangents: tuple[str, ...]
) -> None:
    d = _data()
    names = ("q", "k", "cos", "sin")
    directions = {name: torch.randn_like(d[name]) if name in tangents else torch.zeros_like(d[name]) for name in names}

    def formula(q, k, cos, sin):  # type: ignore[no-untyped-def]
        return _formula(q, cos, sin, interleaved, inverse), _formula(k, cos, sin, interleaved, inverse)

    def rotate_each(q, k, cos, sin):  # type: ignore[no-untyped-def]
        return (_rotation.rotate(q, cos, sin, interleaved, inverse=inverse),
                _rotation.rotate(k, cos, sin, interleaved, inverse=inverse))

    def rotate_both(q, k, cos, sin):  # type: ignore[no-untyped-def]
        return _rotation.rotate_qk(q, k, cos, sin, interleaved, inverse=inverse)

    primals, directions_ = tuple(d[n] for n in names), tuple(directions[n] for n in names)
    _, expected = torch.func.jvp(formula, primals, directions_)
    for fn in (rotate_each, rotate_both):
        _, got = torch.func.jvp(fn, primals, directions_)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
    # A tangent for q alone: k's output has a zero tangent.
    direction = torch.randn_like(d["q"])
    _, (tangent_q, tangent_k) = torch.func.jvp(lambda q: rotate_both(q, d["k"], d["cos"], d["sin"]), (d["q"],),
                                               (direction,))
    torch.testing.assert_close(tangent_q, _formula(direction, d["cos"], d["sin"], interleaved, inverse))
    assert torch.equal(tangent_k, torch.zeros_like(d["k"]))


@pytest.mark.parametrize("in_dims", [(0, None, None), (None, 0, 0), (0, 0, 0), (1, None, None)])
def test_vmap_gives_the_formula_per_sample(traced: bool, in_dims: tuple[int | None, ...]) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 5, DIM, generator=g, dtype=torch.float64)
    cos, sin = torch.randn(4, 5, WIDTH, generator=g, dtype=torch.float64), torch.randn(4, 5, WIDTH, generator=g,
                                                                                      dtype=torch.float64)
    x_in = x if in_dims[0] is not None else x[0]
    cos_in, sin_in = (cos, sin) if in_dims[1] is not None else (cos[0], sin[0])
    for interleaved, inverse in ((False, False), (True, True)):
        def formula(x, cos, sin):  # type: ignore[no-untyped-def]
            return _formula(x, cos, sin, interleaved, inverse)

        expected = torch.vmap(formula, in_dims=in_dims)(x_in, cos_in, sin_in)
        got = torch.vmap(lambda x, c, s: _rotation.rotate(x, c, s, interleaved, inverse=inverse),
                         in_dims=in_dims)(x_in, cos_in, sin_in)
        torch.testing.assert_close(got, expected)
        got_q, got_k = torch.vmap(lambda x, c, s: _rotation.rotate_qk(x, x * 2, c, s, interleaved, inverse=inverse),
                                  in_dims=in_dims)(x_in, cos_in, sin_in)
        torch.testing.assert_close(got_q, expected)
        torch.testing.assert_close(got_k, torch.vmap(lambda x, c, s: formula(x * 2, c, s), in_dims=in_dims)(
            x_in, cos_in, sin_in))


def test_cos_sin_larger_than_x_broadcast_the_output() -> None:
    g = torch.Generator().manual_seed(4)
    cos, sin = torch.randn(2, 1, 5, WIDTH, generator=g), torch.randn(2, 1, 5, WIDTH, generator=g)
    for x in (torch.randn(1, 3, 5, DIM, generator=g), torch.randn(3, 5, DIM, generator=g),
              torch.randn(2, 3, 5, DIM, generator=g), torch.randn(5, DIM, generator=g)):
        want = _formula(x, cos, sin, False, False)
        assert want.shape[:-1] == torch.broadcast_shapes(x.shape[:-1], cos.shape[:-1])
        assert torch.equal(_rotation.rotate(x, cos, sin, False), want)
        for got in _rotation.rotate_qk(x, x, cos, sin, False):
            assert torch.equal(got, want)


# --------------------------------------------------------------------------------------------
# Which implementation runs
# --------------------------------------------------------------------------------------------


def test_eager_calls_without_derivatives_skip_the_operators_and_traced_ones_use_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[str] = []
    for name in ("_rope_rotate", "_rope_rotate_qk", "_rope_rotate_qk_"):
        operator = getattr(_rotation, name)
        monkeypatch.setattr(_rotation, name,
                            lambda *args, _name=name, _op=operator: (called.append(_name), _op(*args))[1])
    d = _data(torch.float32)
    q, k, cos, sin = d["q"], d["k"], d["cos"], d["sin"]

    def rotate_all() -> None:
        _rotation.rotate(q, cos, sin, False)
        _rotation.rotate_qk(q, k, cos, sin, False)
        _rotation.rotate_qk(q.clone(), k.clone(), cos, sin, False, inplace=True)

    rotate_all()
    assert called == []  # eager, nothing requires a gradient: the kernels are called directly
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    rotate_all()
    assert called == ["_rope_rotate", "_rope_rotate_qk", "_rope_rotate_qk_"]


@pytest.mark.parametrize("inverse", [False, True])
def test_a_forced_triton_backend_reaches_the_kernel_on_every_path(
    traced: bool, triton_launches: list[int], inverse: bool
) -> None:
    pytest.importorskip("triton")
    d = _data(torch.float32)
    q, k, cos, sin = d["q"], d["k"], d["cos"], d["sin"]
    kw = {"inverse": inverse, "backend": "triton"}
    want_q, want_k = _formula(q, cos, sin, False, inverse), _formula(k, cos, sin, False, inverse)
    assert torch.equal(_rotation.rotate(q, cos, sin, False, **kw), want_q)
    assert triton_launches == [1]
    assert torch.equal(_rotation.rotate_qk(q, k, cos, sin, False, **kw)[1], want_k)
    assert triton_launches == [1, 2]
    q_in, k_in = q.clone(), k.clone()
    _rotation.rotate_qk(q_in, k_in, cos, sin, False, inplace=True, **kw)
    assert torch.equal(k_in, want_k) and triton_launches == [1, 2, 2]
    # With gradients: the forward and the backward (the inverse rotation) each launch it.
    for rotation in ("rotate", "rotate_qk", "in place"):
        if rotation == "in place" and traced:
            continue  # needs torch.compile's functionalisation (see above)
        triton_launches.clear()
        leaf = q.clone().requires_grad_()
        if rotation == "rotate":
            outputs: tuple[torch.Tensor, ...] = (_rotation.rotate(leaf, cos, sin, False, **kw),)
        elif rotation == "rotate_qk":
            outputs = _rotation.rotate_qk(leaf, k, cos, sin, False, **kw)
        else:
            outputs = _rotation.rotate_qk(leaf * 1, k.clone(), cos, sin, False, inplace=True, **kw)
        assert torch.equal(outputs[0].detach(), want_q) and len(triton_launches) == 1, rotation
        (grad,) = torch.autograd.grad(outputs[0].sum(), leaf)
        assert len(triton_launches) == 2, rotation
        # The gradient of the sum is the inverse rotation of ones.
        assert torch.equal(grad, _formula(torch.ones_like(q), cos, sin, False, not inverse))
    if not traced:  # forward-mode derivatives are eager only (Dynamo does not trace a custom jvp)
        triton_launches.clear()
        torch.func.jvp(lambda t: _rotation.rotate(t, cos, sin, False, **kw), (q,), (torch.ones_like(q),))
        assert triton_launches == [1, 1]  # the output, then its tangent
    triton_launches.clear()
    torch.vmap(lambda t: _rotation.rotate(t, cos, sin, False, **kw))(q)
    assert triton_launches == [1]



# --------------------------------------------------------------------------------------------
# What the Triton kernel is given, and what it refuses
# --------------------------------------------------------------------------------------------


def _raises(error: type, message: str):  # type: ignore[no-untyped-def]
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def test_cos_and_sin_the_kernel_cannot_read_as_they_are_are_copied_first() -> None:
    pytest.importorskip("triton")
    d = _data(torch.float32)
    x, cos, sin = d["q"], d["cos"], d["sin"]
    want = _formula(x, cos, sin, False, False)
    # sin with other strides than cos (the kernel reads both with cos's strides).
    sin_transposed = sin.t().contiguous().t()
    assert sin_transposed.stride() != cos.stride()
    assert torch.equal(_rotation.rotate(x, cos, sin_transposed, False, backend="triton"), want)
    # cos and sin with the same strides, but a stride in their last axis.
    cos_strided = torch.stack((cos, cos), dim=-1)[..., 0]
    sin_strided = torch.stack((sin, sin), dim=-1)[..., 0]
    assert cos_strided.stride() == sin_strided.stride() and cos_strided.stride(-1) == 2
    assert torch.equal(_rotation.rotate(x, cos_strided, sin_strided, False, backend="triton"), want)


def test_the_kernels_refusals_name_the_problem() -> None:
    pytest.importorskip("triton")
    x = torch.randn(2, 2, 3, 5, DIM)
    cos = torch.randn(2, 1, 3, 5, WIDTH)  # broadcast over x's axis 1: axes 0 and 1 do not merge
    message = (f"backend='triton' cannot rotate x of shape (2, 2, 3, 5, 8) and strides {x.stride()}: cos/sin of "
               f"shape (2, 1, 3, 5, 6) do not merge with the leading axes of x; use backend='torch' or pass "
               f"contiguous tensors")
    with _raises(ValueError, message):
        _rotation.rotate(x, cos, cos.clone(), False, backend="triton")
    strided = torch.randn(1, 2, 4, 2 * DIM)[..., ::2]
    cos, sin = torch.randn(4, WIDTH), torch.randn(4, WIDTH)
    message = (f"backend='triton' cannot rotate x of shape (1, 2, 4, 8) and strides {strided.stride()}: x, "
               f"rotated in place, has a stride in its last axis or unmergeable leading axes; use "
               f"backend='torch' or pass contiguous tensors")
    with _raises(ValueError, message):
        _rotation.rotate_qk(strided, strided.clone(), cos, sin, False, backend="triton", inplace=True)


def test_without_triton_the_forced_backend_says_so_and_auto_does_not_need_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rotation, "_triton_kernels", lambda: None)
    d = _data(torch.float32)
    message = "backend='triton' needs the triton package (pip install triton), which is not installed"
    with _raises(RuntimeError, message):
        _rotation.rotate(d["q"], d["cos"], d["sin"], False, backend="triton")
    assert torch.equal(_rotation.rotate(d["q"], d["cos"], d["sin"], False),
                       _formula(d["q"], d["cos"], d["sin"], False, False))


# --------------------------------------------------------------------------------------------
# CPU blocks: where the plan cuts, and the memory an in-place rotation takes
# --------------------------------------------------------------------------------------------

BLOCK = _rotation._CPU_BLOCK_BYTES


@pytest.mark.parametrize(
    ("shape", "plan"),
    [
        ((BLOCK // 128, 64), (0, BLOCK // 256)),  # 2-D, twice a block: rows cut on axis 0
        ((64, 64, 64), (0, 32)),  # 3-D, an axis-0 slice of 16 KiB: 32 of them per block
        ((4, 4096, 64), (1, 2048)),  # 3-D, cut on axis 1
        ((2, 128, 16, 64), (0, 1)),  # 4-D, one axis-0 slice is exactly a block
        ((2, 8, 1024, 64), (1, 2)),
        ((1, 1, 4096, 64), (2, 2048)),
        ((3, 2 * BLOCK // 4), (0, 1)),  # rows wider than a block: one row at a time
    ],
)
def test_in_place_rotation_on_cpu_allocates_at_most_a_block_or_a_row(shape: tuple[int, ...], plan: tuple[int, int]) -> None:
    from torch.profiler import ProfilerActivity, profile

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)
    angles = torch.randn(shape[-1], generator=g)  # one row, broadcast: the promise is about q and k
    cos, sin = angles.cos(), angles.sin()
    assert _rotation._cpu_block_plan(q) == plan
    want_q, want_k = (_rotation._rotate_impl(t, cos, sin, False, False, "torch") for t in (q, k))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _rotation.rotate_qk(q, k, cos, sin, False, inplace=True)
    largest = max(e.cpu_memory_usage for e in prof.events())
    assert largest <= max(BLOCK, shape[-1] * q.element_size())
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


# --------------------------------------------------------------------------------------------
# Shapes and sizes the paths above do not reach
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wanted", ["cos", "sin"])
def test_gradients_and_tangents_of_four_dimensional_cos_sin(wanted: str) -> None:
    # cos/sin of shape (batch, 1, seq, width), as per-sample positions give: the width is their
    # last axis, not their second.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 5, DIM, generator=g, dtype=torch.float64)
    angles = {name: torch.randn(2, 1, 5, WIDTH, generator=g, dtype=torch.float64) for name in ("cos", "sin")}
    for inverse in (False, True):
        def rotation(fn):  # type: ignore[no-untyped-def]
            return lambda t: fn(x, *(t if name == wanted else angles[name] for name in ("cos", "sin")))

        formula = rotation(lambda x, c, s: _formula(x, c, s, True, inverse))
        rotate = rotation(lambda x, c, s: _rotation.rotate(x, c, s, True, inverse=inverse))
        primal, direction = angles[wanted], torch.randn_like(angles[wanted])
        torch.testing.assert_close(torch.func.jvp(rotate, (primal,), (direction,))[1],
                                   torch.func.jvp(formula, (primal,), (direction,))[1])
        torch.testing.assert_close(torch.func.vjp(rotate, primal)[1](torch.ones_like(x))[0],
                                   torch.func.vjp(formula, primal)[1](torch.ones_like(x))[0])


@pytest.mark.parametrize("cos_shape", [(1, 1, 5, WIDTH), (2, 1, 5, WIDTH)])
def test_cos_sin_broadcast_against_an_axis_of_one_in_x(cos_shape: tuple[int, ...]) -> None:
    # x has one position, cos/sin five: the output has five.
    g = torch.Generator().manual_seed(6)
    x = torch.randn(1, 3, 1, DIM, generator=g)
    cos, sin = torch.randn(*cos_shape, generator=g), torch.randn(*cos_shape, generator=g)
    want = _formula(x, cos, sin, False, False)
    assert want.shape[-2] == 5
    assert torch.equal(_rotation.rotate(x, cos, sin, False), want)


def test_cos_sin_with_a_unit_stride_on_another_axis_are_copied_for_the_kernel() -> None:
    pytest.importorskip("triton")
    g = torch.Generator().manual_seed(8)
    x = torch.randn(5, 2, DIM, generator=g)
    # shape (5, 2, 6) with strides (12, 1, 2): unit stride on the middle axis, not the last.
    cos, sin = (torch.randn(5, WIDTH, 2, generator=g).transpose(1, 2) for _ in range(2))
    assert cos.stride() == sin.stride() == (12, 1, 2)
    assert torch.equal(_rotation.rotate(x, cos, sin, False, backend="triton"), _formula(x, cos, sin, False, False))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_blocked_cpu_rotation_keeps_the_dtype(dtype: torch.dtype) -> None:
    # Large enough to be rotated block by block, through a scratch block of x's dtype.
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 8, 4096, DIM, generator=g).to(dtype)
    cos, sin = (torch.randn(4096, WIDTH, generator=g).to(dtype) for _ in range(2))
    assert _rotation._cpu_block_plan(x) is not None
    for inverse in (False, True):
        assert torch.equal(_rotation.rotate(x, cos, sin, True, inverse=inverse), _formula(x, cos, sin, True, inverse))


@pytest.mark.parametrize("wanted", ["cos", "sin"])
def test_blocked_cpu_rotation_gives_gradients_to_cos_or_sin_alone(wanted: str) -> None:
    g = torch.Generator().manual_seed(10)
    q, k = torch.randn(2, 8, 4096, DIM, generator=g), torch.randn(2, 8, 4096, DIM, generator=g)
    assert _rotation._cpu_block_plan(q) is not None
    angles = {name: torch.randn(4096, WIDTH, generator=g) for name in ("cos", "sin")}
    leaf = angles[wanted].requires_grad_()
    (got,) = torch.autograd.grad(_rotation.rotate(q, angles["cos"], angles["sin"], False).sum(), leaf)
    (want,) = torch.autograd.grad(_formula(q, angles["cos"], angles["sin"], False, False).sum(), leaf)
    torch.testing.assert_close(got, want)
    (got,) = torch.autograd.grad(sum(o.sum() for o in _rotation.rotate_qk(q, k, angles["cos"], angles["sin"], False)),
                                 leaf)
    (want,) = torch.autograd.grad(sum(_formula(t, angles["cos"], angles["sin"], False, False).sum() for t in (q, k)),
                                  leaf)
    torch.testing.assert_close(got, want)


def test_vmap_over_sin_alone() -> None:
    g = torch.Generator().manual_seed(11)
    x, cos = torch.randn(3, 5, DIM, generator=g), torch.randn(5, WIDTH, generator=g)
    sin = torch.randn(4, 5, WIDTH, generator=g)
    in_dims = (None, None, 0)
    expected = torch.vmap(lambda x, c, s: _formula(x, c, s, False, False), in_dims=in_dims)(x, cos, sin)
    got = torch.vmap(lambda x, c, s: _rotation.rotate(x, c, s, False), in_dims=in_dims)(x, cos, sin)
    assert got.shape == (4, 3, 5, DIM)
    torch.testing.assert_close(got, expected)


def test_a_failed_triton_import_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(_rotation, "_kernel_module", None)
    import posenc

    monkeypatch.setitem(sys.modules, "posenc._triton_rope", None)  # the import raises ImportError
    monkeypatch.delattr(posenc, "_triton_rope", raising=False)
    assert _rotation._triton_kernels() is None
    assert _rotation._kernel_module is False  # not tried again
