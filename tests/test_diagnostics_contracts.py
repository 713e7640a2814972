"""Contracts of posenc.diagnostics that a reviewer's bug would break."""

from __future__ import annotations

import math
import re

import pytest
import torch

from posenc.diagnostics import (
    check_table,
    collisions,
    dot_product_by_offset,
    PairDistance,
    min_pairwise_distance,
    relative_rotation,
    similarity_matrix,
)


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


TABLE = torch.tensor([[0.0, 1.0], [0.5, -1.0], [2.0, 0.25]])


# Argument checks.

@pytest.mark.parametrize(
    ("pe", "metric", "error", "message"),
    [
        (TABLE, "l2", ValueError, "metric must be one of 'cosine', 'dot', 'euclidean'; got 'l2'"),
        (torch.zeros(3, 2, dtype=torch.long), "dot", TypeError, "pe must have a floating-point dtype, got torch.int64"),
        (torch.zeros(3), "dot", ValueError, "pe must be 2-D (length, dim), got a 1-D tensor of shape (3,)"),
    ],
)
def test_similarity_refuses_bad_input_by_name(pe: object, metric: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        similarity_matrix(pe, metric)


@pytest.mark.parametrize(
    ("pe", "error", "message"),
    [
        ([[1.0]], TypeError, "pe must be a torch.Tensor, got list"),
        (torch.zeros(2, 2, dtype=torch.complex64), TypeError, "pe must be a real tensor, got torch.complex64"),
        (torch.zeros(3), ValueError, "pe must be 2-D (length, dim), got a 1-D tensor of shape (3,)"),
    ],
)
def test_check_table_refuses_what_is_not_a_real_table(pe: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        check_table(pe)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((1.5, 4), {}, TypeError, "k must be an int, got 1.5 of type float"),
        ((1, 0), {}, ValueError, "dim must be a positive integer, got 0"),
        ((1, 3), {}, ValueError, "dim must be even (channels are rotated in pairs), got 3"),
        ((1, 4), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_relative_rotation_refuses_bad_arguments_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        relative_rotation(*args, **kwargs)


STYLES_LISTED = "'interleaved', 'concat', 'tensor2tensor'"


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((0, 4, torch.float16), {}, ValueError, "length must be a positive integer, got 0"),
        ((8, 0, torch.float16), {}, ValueError, "dim must be a positive integer, got 0"),
        ((8, 4, None), {}, TypeError, "dtype must be a floating-point torch.dtype, got None"),
        ((8, 4, torch.int64), {}, TypeError, "dtype must be a floating-point dtype, got torch.int64"),
        ((8, 4, "float16"), {}, TypeError, "dtype must be a torch.dtype, got 'float16'"),
        ((8, 4, torch.float16), {"base": 0}, ValueError, "base must be a finite number > 0, got 0.0"),
        ((8, 4, torch.float16), {"style": "half"}, ValueError, f"style must be one of {STYLES_LISTED}; got 'half'"),
    ],
)
def test_collisions_refuse_bad_arguments_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        collisions(*args, **kwargs)


def test_min_pairwise_distance_refuses_a_non_positive_chunk_size_by_name() -> None:
    with pytest.raises(ValueError, match=_exactly("chunk_size must be a positive integer, got 0")):
        min_pairwise_distance(TABLE, chunk_size=0)


# Printed reports.

def test_collisions_report_names_the_first_colliding_pair() -> None:
    # Two columns of float16 collide first at positions 2 and 712 (710 is close to 113 turns).
    found = collisions(720, 2, torch.float16)
    assert str(found) == (
        "720 positions, dim=2, torch.float16: 712 distinct encodings; 8 collide, first: positions 2 and 712"
    )
    assert found.pairs[:2].tolist() == [[2, 712], [3, 713]]


def test_collisions_report_without_collisions_ends_after_the_count() -> None:
    assert str(collisions(720, 3, torch.float16)) == "720 positions, dim=3, torch.float16: 720 distinct encodings"


def test_collisions_use_the_frequencies_of_the_style() -> None:
    # tensor2tensor's one frequency for dim=3 is that of a two-column table (plus a zero column).
    assert collisions(720, 3, torch.float16, style="tensor2tensor").distinct == 712


def test_table_report_of_a_sound_table() -> None:
    assert str(check_table(torch.tensor([[1.0, -2.5], [3.0, 2.0]]))) == (
        "table 2 x 2, torch.float32: OK\n"
        "  range of finite values: [-2.5, 3]\n"
        "  NaN: no\n"
        "  inf: no\n"
        "  duplicate rows: 0"
    )


def test_table_report_of_a_broken_table() -> None:
    report = check_table(torch.tensor([[1.0, math.nan], [math.inf, 2.0], [1.0, math.nan]]))
    assert str(report) == (
        "table 3 x 2, torch.float32: PROBLEMS FOUND\n"
        "  range of finite values: [1, 2]\n"
        "  NaN: yes\n"
        "  inf: yes\n"
        "  duplicate rows: 1"
    )


# Duplicate rows.

def test_an_empty_table_is_sound_and_has_no_range() -> None:
    report = check_table(torch.zeros(0, 4))
    assert report.duplicate_rows == 0 and report.ok
    assert math.isnan(report.min) and math.isnan(report.max)


def test_a_bool_table_is_read_as_zeros_and_ones() -> None:
    report = check_table(torch.tensor([[True, False], [True, False], [False, False]]))
    assert (report.min, report.max, report.duplicate_rows) == (0.0, 1.0, 1)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.float16, torch.float64])
def test_duplicate_rows_are_counted_in_any_float_dtype_with_minus_zero_equal_to_zero(dtype: torch.dtype) -> None:
    table = torch.tensor([[0.5, 0.0], [0.5, -0.0], [1.0, 0.0], [0.5, 0.0]]).to(dtype)
    assert check_table(table).duplicate_rows == 2


def test_collisions_of_float8_tables_are_found() -> None:
    found = collisions(100, 2, torch.float8_e5m2)
    assert found.pairs[:3].tolist() == [[1, 45], [2, 46], [4, 48]]
    assert found.count == 100 - found.distinct > 0


# Devices.

def test_relative_rotation_is_made_on_the_requested_device() -> None:
    m = relative_rotation(2, 6, device="meta")
    assert m.device.type == "meta" and m.shape == (6, 6)


def test_results_do_not_depend_on_the_default_device() -> None:
    table = torch.randn(9, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = (
        collisions(720, 2, torch.float16, device="cpu").pairs,
        dot_product_by_offset(table),
        min_pairwise_distance(table, chunk_size=2),
        check_table(table).duplicate_rows,
    )
    with torch.device("meta"):
        got = (
            collisions(720, 2, torch.float16, device="cpu").pairs,
            dot_product_by_offset(table),
            min_pairwise_distance(table, chunk_size=2),
            check_table(table).duplicate_rows,
        )
    assert torch.equal(got[0], expected[0]) and got[0].device.type == "cpu"
    assert torch.equal(got[1], expected[1]) and got[1].device.type == "cpu"
    assert got[2:] == expected[2:]


# The closest pair.

def _brute_force(x: torch.Tensor) -> tuple[float, int, int]:
    n = x.shape[0]
    return min((float((x[i] - x[j]).norm()), i, j) for i in range(n) for j in range(i + 1, n))


def test_two_rows_are_compared() -> None:
    assert tuple(min_pairwise_distance(torch.tensor([[0.0, 3.0], [4.0, 0.0]]))) == (5.0, 0, 1)


@pytest.mark.parametrize("chunk_size", [1, 2, None])
def test_the_closest_pair_may_be_the_last_two_rows(chunk_size: int | None) -> None:
    table = torch.tensor([[0.0], [3.0], [5.0], [5.5]])
    assert tuple(min_pairwise_distance(table, chunk_size=chunk_size)) == (0.5, 2, 3)


def test_a_distance_of_one_does_not_stop_the_search() -> None:
    table = torch.tensor([[0.0], [1.0], [1.5]])
    assert tuple(min_pairwise_distance(table, chunk_size=1)) == (0.5, 1, 2)


@pytest.mark.parametrize("chunk_size", [1, None])
def test_ties_keep_the_first_pair_across_blocks(chunk_size: int | None) -> None:
    table = torch.tensor([[0.0], [1.0], [2.0]])
    assert tuple(min_pairwise_distance(table, chunk_size=chunk_size)) == (1.0, 0, 1)


def test_a_table_of_zeros_has_distance_zero_at_the_first_pair() -> None:
    assert tuple(min_pairwise_distance(torch.zeros(3, 2))) == (0.0, 0, 1)


def test_rows_far_from_the_origin_give_the_exact_closest_pair() -> None:
    """Near 1e8 the fast |a|^2 + |b|^2 - 2ab form cancels: candidates must be re-measured widely."""
    table = 1e8 + torch.randn(8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert tuple(min_pairwise_distance(table)) == _brute_force(table)


@pytest.mark.parametrize("rows", [[[1e200], [-1e200], [0.0]], [[1e200], [1e200]], [[1e154, 0.0], [0.0, 0.0]]])
def test_rows_whose_squared_norms_overflow_are_refused(rows: list[list[float]]) -> None:
    """Squared norms past float64's range would make the fast distance form pick a wrong pair."""
    with pytest.raises(ValueError, match=r"^pe is too large to compare: its largest squared row norm, .* float64"):
        min_pairwise_distance(torch.tensor(rows, dtype=torch.float64))


def test_long_rows_within_the_range_are_compared() -> None:
    table = torch.tensor([[1e150], [-1e150], [0.0]], dtype=torch.float64)
    assert min_pairwise_distance(table) == PairDistance(1e150, 0, 2)
