"""round_once: float64 -> float16/bfloat16 with a single correct rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc._dtypes import round_once


def _samples() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100_000, dtype=torch.float64, generator=g)
    x = x * torch.exp(3 * torch.randn(100_000, dtype=torch.float64, generator=g))
    # Midpoints between neighbouring float16 values, nudged by tiny amounts: the cases a double
    # rounding through float32 gets wrong.
    h = torch.randn(20_000, generator=g).to(torch.float16)
    up = torch.nextafter(h.float(), torch.tensor(torch.inf)).to(torch.float16)
    mid = (h.double() + torch.nextafter(h, torch.tensor(torch.inf, dtype=torch.float16)).double()) / 2
    nudged = torch.cat([mid, mid + mid.abs() * 2**-40, mid - mid.abs() * 2**-40])
    return torch.cat([x, nudged, up.double()])


def test_float16_matches_numpy_direct_rounding() -> None:
    x = _samples()
    x = x[x.abs() < 65504]  # inside float16's range
    expected = torch.from_numpy(x.numpy().astype(np.float16))  # numpy rounds float64 -> float16 directly
    assert torch.equal(round_once(x, torch.float16), expected)


@pytest.mark.reference_doc
def test_naive_conversion_does_round_twice() -> None:
    """The problem round_once exists for: torch's float64 -> float16 is not always nearest."""
    x = _samples()
    x = x[x.abs() < 65504]
    expected = torch.from_numpy(x.numpy().astype(np.float16))
    assert not torch.equal(x.to(torch.float16), expected)


def test_bfloat16_is_nearest() -> None:
    x = _samples()
    x = x[x.abs() < 1e38]
    y = round_once(x, torch.bfloat16)
    up = torch.nextafter(y, torch.full_like(y, torch.inf))
    down = torch.nextafter(y, torch.full_like(y, -torch.inf))
    err = (y.double() - x).abs()
    assert torch.all(err <= (up.double() - x).abs())
    assert torch.all(err <= (down.double() - x).abs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wider_types_are_plain_conversions(dtype: torch.dtype) -> None:
    x = _samples()
    assert torch.equal(round_once(x, dtype), x.to(dtype))


def test_sinusoidal_float16_table_is_correctly_rounded() -> None:
    from posenc import sinusoidal_table

    table64 = sinusoidal_table(4096, 64, dtype=torch.float64)
    expected = torch.from_numpy(table64.numpy().astype(np.float16))
    assert torch.equal(sinusoidal_table(4096, 64, dtype=torch.float16), expected)
