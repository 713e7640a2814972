"""Contracts of posenc._dtypes that a reviewer's bug would break."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from posenc._dtypes import round_once

# Just above or below a midpoint between two neighbouring half values: float32 rounds each onto
# the midpoint, where a second rounding to the half type goes to the even neighbour, which is wrong.
_ABOVE_FLOAT16_MIDPOINT = 1 + 2**-11 + 2**-40  # nearest float16: 1 + 2**-10
_BELOW_FLOAT16_MIDPOINT = 1 + 3 * 2**-11 - 2**-40  # nearest float16: 1 + 2**-10
_ABOVE_BFLOAT16_MIDPOINT = 1 + 2**-8 + 2**-40  # nearest bfloat16: 1 + 2**-7
_BELOW_BFLOAT16_MIDPOINT = 1 + 3 * 2**-8 - 2**-40  # nearest bfloat16: 1 + 2**-7


@pytest.fixture(params=[torch.float32, torch.float64], ids=["default_float32", "default_float64"])
def default_dtype(request: pytest.FixtureRequest) -> Iterator[torch.dtype]:
    old = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    yield request.param
    torch.set_default_dtype(old)


@pytest.mark.parametrize(
    ("dtype", "values", "nearest"),
    [
        (torch.float16, [_ABOVE_FLOAT16_MIDPOINT, _BELOW_FLOAT16_MIDPOINT], 1 + 2**-10),
        (torch.bfloat16, [_ABOVE_BFLOAT16_MIDPOINT, _BELOW_BFLOAT16_MIDPOINT], 1 + 2**-7),
    ],
)
def test_values_beside_a_midpoint_round_to_the_nearest_whatever_the_default_dtype(
    default_dtype: torch.dtype, dtype: torch.dtype, values: list[float], nearest: float
) -> None:
    x = torch.tensor(values + [-v for v in values], dtype=torch.float64)
    expected = torch.tensor([nearest] * len(values) + [-nearest] * len(values), dtype=torch.float64)
    out = round_once(x, dtype)
    assert out.dtype == dtype
    assert torch.equal(out.double(), expected)
