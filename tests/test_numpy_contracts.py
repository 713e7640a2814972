"""Contracts of posenc.numpy: each argument is refused by its own name."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from posenc.numpy import sinusoidal_table, sinusoidal_table_loop

FUNCTIONS = [sinusoidal_table_loop, sinusoidal_table]


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 4), ValueError, "length must be a positive integer, got 0"),
        ((2.5, 4), TypeError, "length must be an int, got 2.5 of type float"),
        ((4, 0), ValueError, "dim must be a positive integer, got 0"),
        ((4, "4"), TypeError, "dim must be an int, got '4' of type str"),
        ((4, 4, -2.0), ValueError, "base must be a finite number > 0, got -2.0"),
        ((4, 4, "1e4"), TypeError, "base must be a real number, got '1e4' of type str"),
    ],
)
def test_bad_arguments_are_refused_by_name_with_the_full_message(
    function: Callable[..., np.ndarray], args: tuple, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        function(*args)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_default_base_is_ten_thousand(function: Callable[..., np.ndarray]) -> None:
    np.testing.assert_array_equal(function(6, 4), function(6, 4, 10000.0))
    assert not np.array_equal(function(6, 4), function(6, 4, 1000.0))
