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
