"""Unit tests for posenc.numpy: the loop and broadcasting tables agree with each other and with torch."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from posenc.numpy import sinusoidal_table, sinusoidal_table_loop
from posenc.sinusoidal import sinusoidal_table as torch_table

SIZES = [(1, 1), (1, 8), (7, 1), (10, 2), (17, 3), (33, 7), (50, 16), (64, 33), (120, 128)]


@pytest.mark.parametrize(("length", "dim"), SIZES)
def test_loop_broadcast_and_torch_agree(length: int, dim: int) -> None:
    loop = sinusoidal_table_loop(length, dim)
    vectorised = sinusoidal_table(length, dim)
    reference = torch_table(length, dim, dtype=torch.float64).numpy()
    for table in (loop, vectorised):
        assert isinstance(table, np.ndarray) and table.dtype == np.float64 and table.shape == (length, dim)
    np.testing.assert_allclose(loop, vectorised, rtol=0, atol=1e-12)
    np.testing.assert_allclose(vectorised, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(loop, reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("base", [100.0, 10000.0, 1e6])
def test_base(base: float) -> None:
    reference = torch_table(40, 10, base=base, dtype=torch.float64).numpy()
    np.testing.assert_allclose(sinusoidal_table_loop(40, 10, base=base), reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sinusoidal_table(40, 10, base=base), reference, rtol=0, atol=1e-12)


def test_known_values() -> None:
    row = sinusoidal_table_loop(2, 512)[1]
    assert row[:4].tolist() == pytest.approx(
        [math.sin(1), math.cos(1), math.sin(10000 ** (-2 / 512)), math.cos(10000 ** (-2 / 512))], abs=1e-15
    )
    assert sinusoidal_table(1, 6)[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("function", [sinusoidal_table_loop, sinusoidal_table])
@pytest.mark.parametrize(
    ("args", "error", "pattern"),
    [
        ((0, 4), ValueError, r"length.*0"),
        ((-1, 4), ValueError, r"length.*-1"),
        ((2.5, 4), TypeError, r"length.*2\.5"),
        ((True, 4), TypeError, r"length.*True"),
        ((4, 0), ValueError, r"dim.*0"),
        ((4, np.float64(4.0)), TypeError, r"dim"),
        ((4, 4, 0.0), ValueError, r"base.*0"),
        ((4, 4, -2.0), ValueError, r"base.*-2"),
        ((4, 4, math.inf), ValueError, r"base.*inf"),
        ((4, 4, math.nan), ValueError, r"base.*nan"),
    ],
)
def test_bad_input(
    function: Callable[..., np.ndarray], args: tuple, error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        function(*args)


def test_numpy_integers_are_accepted() -> None:
    np.testing.assert_array_equal(sinusoidal_table(np.int64(5), np.int32(4)), sinusoidal_table(5, 4))
