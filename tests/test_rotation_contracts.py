"""Contracts of posenc._rotation, the RoPE rotation kernel, that a reviewer's bug would break."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch._library.infer_schema import infer_schema

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
    inferred = infer_schema(inspect.unwrap(kernel), mutates_args=mutates)
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
