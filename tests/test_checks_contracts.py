"""Contracts of posenc._checks: what each check accepts, returns, and says when it refuses."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch

from posenc._checks import (
    check_bool,
    check_choice,
    check_even,
    check_finite,
    check_float_dtype,
    check_floating_tensor,
    check_int,
    check_integer_tensor,
    check_keys_cover_queries,
    check_last_dim,
    check_multiple_of,
    check_ndim,
    check_nonnegative_float,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
)


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (-2, -2), (np.int64(5), 5), (0, 0)])
def test_int_is_returned_as_a_plain_int(value: Any, expected: int) -> None:
    out = check_int("n", value)
    assert type(out) is int and out == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "n must be an int, got True of type bool"),
        (2.0, "n must be an int, got 2.0 of type float"),
        ("3", "n must be an int, got '3' of type str"),
    ],
)
def test_int_refuses_other_types_naming_the_type(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=_exactly(message)):
        check_int("n", value)


@pytest.mark.parametrize(("value", "expected"), [(1, 1), (7, 7), (np.int32(2), 2)])
def test_positive_int_returns_integers_from_one(value: Any, expected: int) -> None:
    out = check_positive_int("heads", value)
    assert type(out) is int and out == expected


@pytest.mark.parametrize("value", [0, -3])
def test_positive_int_refuses_zero_and_below(value: int) -> None:
    with pytest.raises(ValueError, match=_exactly(f"heads must be a positive integer, got {value}")):
        check_positive_int("heads", value)


def test_positive_int_refuses_a_float_by_name() -> None:
    with pytest.raises(TypeError, match=_exactly("heads must be an int, got 1.0 of type float")):
        check_positive_int("heads", 1.0)


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1, 1), (np.int64(4), 4)])
def test_nonnegative_int_returns_integers_from_zero(value: Any, expected: int) -> None:
    out = check_nonnegative_int("offset", value)
    assert type(out) is int and out == expected


def test_nonnegative_int_refuses_negatives() -> None:
    with pytest.raises(ValueError, match=_exactly("offset must be a non-negative integer, got -1")):
        check_nonnegative_int("offset", -1)


def test_nonnegative_int_refuses_a_float_by_name() -> None:
    with pytest.raises(TypeError, match=_exactly("offset must be an int, got 1.5 of type float")):
        check_nonnegative_int("offset", 1.5)


@pytest.mark.parametrize("value", [True, False])
def test_bool_returns_bools(value: bool) -> None:
    assert check_bool("flag", value) is value


@pytest.mark.parametrize(
    ("value", "message"),
    [(1, "flag must be a bool, got 1 of type int"), ("no", "flag must be a bool, got 'no' of type str")],
)
def test_bool_refuses_truthy_values_naming_the_type(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=_exactly(message)):
        check_bool("flag", value)


@pytest.mark.parametrize(("value", "expected"), [(2, 2.0), (0.5, 0.5), (1e-300, 1e-300), (np.float32(3), 3.0)])
def test_positive_float_returns_finite_values_above_zero_as_float(value: Any, expected: float) -> None:
    out = check_positive_float("base", value)
    assert type(out) is float and out == expected


@pytest.mark.parametrize(
    ("value", "shown"), [(0, "0.0"), (-1.5, "-1.5"), (float("inf"), "inf"), (float("nan"), "nan")]
)
def test_positive_float_refuses_zero_negatives_inf_and_nan(value: float, shown: str) -> None:
    with pytest.raises(ValueError, match=_exactly(f"base must be a finite number > 0, got {shown}")):
        check_positive_float("base", value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "base must be a real number, got True of type bool"),
        ("2", "base must be a real number, got '2' of type str"),
        (None, "base must be a real number, got None of type NoneType"),
    ],
)
def test_positive_float_refuses_non_numbers_naming_the_type(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=_exactly(message)):
        check_positive_float("base", value)


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (0.25, 0.25), (3, 3.0)])
def test_nonnegative_float_returns_finite_values_from_zero_as_float(value: Any, expected: float) -> None:
    out = check_nonnegative_float("scale", value)
    assert type(out) is float and out == expected


@pytest.mark.parametrize(("value", "shown"), [(-0.5, "-0.5"), (float("inf"), "inf"), (float("nan"), "nan")])
def test_nonnegative_float_refuses_negatives_inf_and_nan(value: float, shown: str) -> None:
    with pytest.raises(ValueError, match=_exactly(f"scale must be a finite number >= 0, got {shown}")):
        check_nonnegative_float("scale", value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (False, "scale must be a real number, got False of type bool"),
        ("1", "scale must be a real number, got '1' of type str"),
    ],
)
def test_nonnegative_float_refuses_non_numbers_naming_the_type(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=_exactly(message)):
        check_nonnegative_float("scale", value)


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (0.5, 0.5), (0.999, 0.999)])
def test_probability_returns_values_in_zero_to_one_as_float(value: Any, expected: float) -> None:
    out = check_probability("dropout", value)
    assert type(out) is float and out == expected


@pytest.mark.parametrize(("value", "shown"), [(1, "1.0"), (-0.1, "-0.1"), (float("nan"), "nan")])
def test_probability_refuses_one_negatives_and_nan(value: float, shown: str) -> None:
    with pytest.raises(ValueError, match=_exactly(f"dropout must be in [0, 1), got {shown}")):
        check_probability("dropout", value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "dropout must be a real number, got True of type bool"),
        ("0.1", "dropout must be a real number, got '0.1' of type str"),
    ],
)
def test_probability_refuses_non_numbers_naming_the_type(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=_exactly(message)):
        check_probability("dropout", value)


def test_choice_returns_an_allowed_value() -> None:
    assert check_choice("style", "half", ("half", "interleaved")) == "half"


def test_choice_lists_every_allowed_value_when_it_refuses_even_from_a_generator() -> None:
    choices = (c for c in ("half", "interleaved"))
    with pytest.raises(ValueError, match=_exactly("style must be one of 'half', 'interleaved'; got 'full'")):
        check_choice("style", "full", choices)


@pytest.mark.parametrize("dtype", [None, torch.float16, torch.bfloat16, torch.float64])
def test_float_dtype_returns_none_or_a_floating_dtype(dtype: torch.dtype | None) -> None:
    assert check_float_dtype("dtype", dtype) is dtype


def test_float_dtype_refuses_a_name_instead_of_a_dtype() -> None:
    with pytest.raises(TypeError, match=_exactly("dtype must be a torch.dtype, got 'float32'")):
        check_float_dtype("dtype", "float32")


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_float_dtype_refuses_non_floating_dtypes(dtype: torch.dtype) -> None:
    with pytest.raises(TypeError, match=_exactly(f"dtype must be a floating-point dtype, got {dtype}")):
        check_float_dtype("dtype", dtype)


def test_floating_tensor_is_returned() -> None:
    x = torch.zeros(2, dtype=torch.float16)
    assert check_floating_tensor("x", x) is x


def test_floating_tensor_refuses_non_tensors_naming_the_type() -> None:
    with pytest.raises(TypeError, match=_exactly("x must be a torch.Tensor, got list")):
        check_floating_tensor("x", [1.0])


def test_floating_tensor_refuses_integer_tensors() -> None:
    with pytest.raises(TypeError, match=_exactly("x must have a floating-point dtype, got torch.int64")):
        check_floating_tensor("x", torch.zeros(2, dtype=torch.int64))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64])
def test_integer_tensor_is_returned(dtype: torch.dtype) -> None:
    x = torch.zeros(2, dtype=dtype)
    assert check_integer_tensor("positions", x) is x


def test_integer_tensor_refuses_non_tensors_naming_the_type() -> None:
    with pytest.raises(TypeError, match=_exactly("positions must be a torch.Tensor, got ndarray")):
        check_integer_tensor("positions", np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bool])
def test_integer_tensor_refuses_float_complex_and_bool(dtype: torch.dtype) -> None:
    with pytest.raises(TypeError, match=_exactly(f"positions must have an integer dtype, got {dtype}")):
        check_integer_tensor("positions", torch.zeros(2, dtype=dtype))


def test_ndim_accepts_the_expected_rank() -> None:
    assert check_ndim("x", torch.zeros(2, 3), 2, "(seq, dim)") is None


def test_ndim_names_the_axes_and_the_shape_received() -> None:
    with pytest.raises(ValueError, match=_exactly("x must be 2-D (seq, dim), got a 3-D tensor of shape (1, 2, 3)")):
        check_ndim("x", torch.zeros(1, 2, 3), 2, "(seq, dim)")


@pytest.mark.parametrize("shape", [(4,), (2, 4)])
def test_last_dim_accepts_the_width_at_any_rank(shape: tuple[int, ...]) -> None:
    assert check_last_dim("x", torch.zeros(shape), 4) is None


@pytest.mark.parametrize(("shape", "shown"), [((2, 3), "(2, 3)"), ((), "()")])
def test_last_dim_refuses_another_width_or_a_scalar(shape: tuple[int, ...], shown: str) -> None:
    with pytest.raises(ValueError, match=_exactly(f"x.shape[-1] must equal dim=4, got shape {shown}")):
        check_last_dim("x", torch.zeros(shape), 4)


@pytest.mark.parametrize("value", [0, 4, 6, -2])
def test_even_returns_even_values(value: int) -> None:
    assert check_even("dim", value) == value


@pytest.mark.parametrize("value", [3, 9])
def test_even_refuses_odd_values_saying_why(value: int) -> None:
    with pytest.raises(ValueError, match=_exactly(f"dim must be even (channels are rotated in pairs), got {value}")):
        check_even("dim", value)


@pytest.mark.parametrize("value", [0, 12])
def test_multiple_of_returns_multiples(value: int) -> None:
    assert check_multiple_of("dim", value, 4, "two axes of sin/cos pairs") == value


def test_multiple_of_refuses_others_saying_why() -> None:
    message = "dim must be divisible by 4 (two axes of sin/cos pairs), got 10"
    with pytest.raises(ValueError, match=_exactly(message)):
        check_multiple_of("dim", 10, 4, "two axes of sin/cos pairs")


@pytest.mark.parametrize(("q_len", "k_len"), [(3, 3), (3, 5), (0, 0)])
def test_keys_may_cover_exactly_the_queries_or_more(q_len: int, k_len: int) -> None:
    assert check_keys_cover_queries(q_len, k_len) is None


def test_fewer_keys_than_queries_are_refused_with_both_lengths() -> None:
    message = ("k_len must be >= q_len (queries are the last q_len of the k_len positions), "
               "got k_len=3 and q_len=4")
    with pytest.raises(ValueError, match=_exactly(message)):
        check_keys_cover_queries(4, 3)


@pytest.mark.parametrize(
    "x", [torch.tensor([0.0, -1e30]), torch.tensor([1, 2]), torch.empty(0)], ids=["finite", "integer", "empty"]
)
def test_finite_accepts_finite_and_integer_tensors(x: torch.Tensor) -> None:
    assert check_finite("scores", x) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_finite_refuses_nan_and_inf(bad: float) -> None:
    with pytest.raises(ValueError, match=_exactly("scores must be finite; got a tensor containing NaN or inf")):
        check_finite("scores", torch.tensor([0.0, bad]))
