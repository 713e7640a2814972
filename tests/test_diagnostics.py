"""Tests for posenc.diagnostics."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.diagnostics import (
    Collisions,
    PairDistance,
    TableReport,
    check_table,
    collisions,
    dot_product_by_offset,
    min_pairwise_distance,
    relative_rotation,
    similarity_matrix,
)
from posenc.sinusoidal import sinusoidal_table

F64 = torch.float64


def random_table(length: int = 7, dim: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(length, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)


# --- similarity_matrix -------------------------------------------------------------------------


def test_similarity_matrix_against_loops():
    pe = random_table()
    n = pe.shape[0]
    cos = torch.empty(n, n, dtype=F64)
    dot = torch.empty(n, n, dtype=F64)
    dist = torch.empty(n, n, dtype=F64)
    for p, q in itertools.product(range(n), repeat=2):
        a, b = pe[p].tolist(), pe[q].tolist()
        d = sum(x * y for x, y in zip(a, b))
        dot[p, q] = d
        cos[p, q] = d / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        dist[p, q] = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    torch.testing.assert_close(similarity_matrix(pe), cos, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(similarity_matrix(pe, "dot"), dot, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(similarity_matrix(pe, metric="euclidean"), dist, rtol=1e-12, atol=1e-12)


def test_similarity_matrix_properties():
    pe = sinusoidal_table(64, 16, dtype=torch.float32)
    cos = similarity_matrix(pe)
    assert cos.dtype == F64 and cos.shape == (64, 64)
    torch.testing.assert_close(cos, cos.T, rtol=0, atol=1e-15)
    torch.testing.assert_close(cos.diagonal(), torch.ones(64, dtype=F64), rtol=0, atol=1e-6)
    dist = similarity_matrix(pe, "euclidean")
    assert torch.equal(dist.diagonal(), torch.zeros(64, dtype=F64))  # exact, no cancellation
    # A sinusoidal table's dot product depends on p - q only: constant along diagonals.
    dot = similarity_matrix(sinusoidal_table(32, 8, dtype=F64), "dot")
    for k in range(32):
        diag = dot.diagonal(k)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), rtol=0, atol=1e-12)


def test_similarity_matrix_zero_row_and_half_input():
    pe = random_table(4, 3)
    pe[2] = 0
    cos = similarity_matrix(pe.half())
    assert torch.equal(cos[2], torch.zeros(4, dtype=F64))
    assert similarity_matrix(pe.bfloat16(), "dot").dtype == F64


def test_similarity_matrix_bad_input():
    with pytest.raises(ValueError, match="metric.*'cosine', 'dot', 'euclidean'"):
        similarity_matrix(random_table(), "manhattan")
    with pytest.raises(ValueError, match="pe"):
        similarity_matrix(torch.zeros(4))
    with pytest.raises(TypeError, match="pe"):
        similarity_matrix(torch.zeros(4, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="pe"):
        similarity_matrix([[0.0, 1.0]])


# --- relative_rotation -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(0, 10_000),
    k=st.integers(-5_000, 5_000),
    half=st.integers(1, 16),
    base=st.sampled_from([10000.0, 500.0, 1e6]),
)
def test_relative_rotation_moves_the_table(p, k, half, base):
    dim = 2 * half
    pe_p = sinusoidal_table(1, dim, base=base, offset=p, dtype=F64)
    pe_pk = sinusoidal_table(1, dim, base=base, offset=p + k, dtype=F64)
    m = relative_rotation(k, dim, base=base, dtype=F64)
    torch.testing.assert_close(pe_p @ m, pe_pk, rtol=0, atol=1e-10)


def test_relative_rotation_structure():
    m = relative_rotation(7, 8, dtype=F64)
    torch.testing.assert_close(m @ m.T, torch.eye(8, dtype=F64), rtol=0, atol=1e-14)
    torch.testing.assert_close(relative_rotation(-7, 8, dtype=F64), m.T, rtol=0, atol=1e-15)
    assert torch.equal(relative_rotation(0, 8, dtype=F64), torch.eye(8, dtype=F64))
    # Block diagonal: nothing outside the 2x2 blocks; first block is R(7 * 1).
    mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert torch.equal(m[~mask], torch.zeros(int((~mask).sum()), dtype=F64))
    c, s = math.cos(7.0), math.sin(7.0)
    torch.testing.assert_close(m[:2, :2], torch.tensor([[c, -s], [s, c]], dtype=F64))
    # Whole table at once, and composition M(a) M(b) = M(a + b).
    pe = sinusoidal_table(50, 8, dtype=F64)
    torch.testing.assert_close(pe[:-7] @ m, pe[7:], rtol=0, atol=1e-12)
    torch.testing.assert_close(relative_rotation(3, 8, dtype=F64) @ relative_rotation(4, 8, dtype=F64), m)


def test_relative_rotation_dtype_and_default():
    assert relative_rotation(3, 4).dtype == torch.get_default_dtype()
    assert relative_rotation(3, 4, dtype=torch.bfloat16).dtype == torch.bfloat16
    assert relative_rotation(3, 4, device="cpu").shape == (4, 4)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((1, 7), {}, ValueError, "dim must be even"),
        ((1, 0), {}, ValueError, "dim"),
        ((1.5, 4), {}, TypeError, "k"),
        ((1, 4), {"base": -1.0}, ValueError, "base"),
        ((1, 4), {"dtype": torch.int32}, TypeError, "dtype"),
    ],
)
def test_relative_rotation_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        relative_rotation(*args, **kwargs)


# --- dot_product_by_offset ---------------------------------------------------------------------


def test_dot_product_by_offset_against_loop():
    pe = random_table(9, 4)
    n = pe.shape[0]
    expected = torch.tensor(
        [sum(float(pe[p] @ pe[p + k]) for p in range(n - k)) / (n - k) for k in range(n)], dtype=F64
    )
    out = dot_product_by_offset(pe)
    assert out.shape == (n,) and out.dtype == F64
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("dim", "offset"), [(16, 0), (16, 1000), (6, 37)])
def test_dot_product_of_sinusoidal_depends_only_on_offset(dim, offset):
    # PE(p) . PE(p+k) = sum_i cos(k w_i) for every p, so the mean is that sum.
    length = 200
    pe = sinusoidal_table(length, dim, offset=offset, dtype=F64)
    w = torch.tensor([10000.0 ** (-2 * i / dim) for i in range(dim // 2)], dtype=F64)
    k = torch.arange(length, dtype=F64)
    expected = torch.cos(k[:, None] * w[None, :]).sum(dim=1)
    torch.testing.assert_close(dot_product_by_offset(pe), expected, rtol=0, atol=1e-9)
    assert dot_product_by_offset(pe)[0] == pytest.approx(dim / 2)


def test_dot_product_by_offset_low_precision_and_bad_input():
    pe = sinusoidal_table(64, 8, dtype=torch.float16)
    torch.testing.assert_close(
        dot_product_by_offset(pe), dot_product_by_offset(pe.double()), rtol=0, atol=1e-9
    )
    assert dot_product_by_offset(torch.ones(1, 3)).tolist() == pytest.approx([3.0])
    with pytest.raises(ValueError, match="pe"):
        dot_product_by_offset(torch.ones(2, 3, 4))


# --- min_pairwise_distance ---------------------------------------------------------------------


def brute_min_distance(pe: torch.Tensor) -> PairDistance:
    best = PairDistance(math.inf, -1, -1)
    for i, j in itertools.combinations(range(pe.shape[0]), 2):
        d = float((pe[i].double() - pe[j].double()).norm())
        if d < best.distance:
            best = PairDistance(d, i, j)
    return best


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 100])
def test_min_pairwise_distance_against_brute_force(chunk_size):
    pe = random_table(23, 3, seed=4)
    got = min_pairwise_distance(pe, chunk_size=chunk_size)
    expected = brute_min_distance(pe)
    assert (got.i, got.j) == (expected.i, expected.j)
    assert got.distance == pytest.approx(expected.distance, rel=1e-12)
    assert isinstance(got, PairDistance) and isinstance(got.i, int) and isinstance(got.distance, float)


@pytest.mark.parametrize("chunk_size", [None, 1, 2])
def test_min_pairwise_distance_exact_duplicates_first_pair(chunk_size):
    pe = random_table(6, 4)
    pe[4] = pe[1]
    pe[5] = pe[0]
    pe[3] = pe[1] + 1e-9  # closer than the fast form can resolve, yet not a duplicate
    assert min_pairwise_distance(pe, chunk_size=chunk_size) == PairDistance(0.0, 0, 5)
    pe[5] += 1.0
    assert min_pairwise_distance(pe, chunk_size=chunk_size) == PairDistance(0.0, 1, 4)
    pe[4] += 1.0
    got = min_pairwise_distance(pe, chunk_size=chunk_size)
    assert (got.i, got.j) == (1, 3) and got.distance == pytest.approx(1e-9 * 2, rel=1e-6)


def test_min_pairwise_distance_sinusoidal():
    # In float64 neighbouring positions are the closest: |PE(p+1) - PE(p)| = 2 sqrt(sum sin^2(w/2)).
    pe = sinusoidal_table(300, 16, dtype=F64)
    w = torch.tensor([10000.0 ** (-2 * i / 16) for i in range(8)], dtype=F64)
    got = min_pairwise_distance(pe, chunk_size=37)
    assert got.j - got.i == 1
    assert got.distance == pytest.approx(float(2 * torch.sin(w / 2).square().sum().sqrt()), rel=1e-9)
    # In float16 a two-column table repeats rows (710 is close to 113 * 2 pi): distance 0 at the
    # first row that has a later duplicate, paired with its first duplicate.
    half = sinusoidal_table(2000, 2, dtype=torch.float16)
    pairs = collisions(2000, 2, torch.float16).pairs
    i = int(pairs[:, 0].min())
    j = int(pairs[pairs[:, 0] == i, 1].min())
    assert min_pairwise_distance(half, chunk_size=256) == PairDistance(0.0, i, j)
    assert torch.equal(half[i], half[j])


def test_min_pairwise_distance_bad_input():
    with pytest.raises(ValueError, match="pe must have at least 2 rows"):
        min_pairwise_distance(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="pe must be finite"):
        min_pairwise_distance(torch.tensor([[0.0], [math.nan]]))
    with pytest.raises(ValueError, match="chunk_size"):
        min_pairwise_distance(torch.zeros(3, 2), chunk_size=0)
    with pytest.raises(TypeError, match="pe"):
        min_pairwise_distance(torch.zeros(3, 2, dtype=torch.int64))


# --- collisions --------------------------------------------------------------------------------


def brute_collisions(length: int, dim: int, dtype: torch.dtype) -> tuple[int, list[tuple[int, int]]]:
    rows = sinusoidal_table(length, dim, dtype=dtype).double().tolist()
    first: dict[tuple[float, ...], int] = {}
    pairs = []
    for j, row in enumerate(rows):
        key = tuple(row)
        if key in first:
            pairs.append((first[key], j))
        else:
            first[key] = j
    return len(first), pairs


@pytest.mark.parametrize(("length", "dim", "dtype"), [(2000, 2, torch.float16), (3000, 3, torch.bfloat16)])
def test_collisions_against_brute_force(length, dim, dtype):
    result = collisions(length, dim, dtype)
    distinct, pairs = brute_collisions(length, dim, dtype)
    assert result.distinct == distinct < length
    assert result.pairs.dtype == torch.int64
    assert [tuple(p) for p in result.pairs.tolist()] == pairs
    assert result.count == length - distinct == result.pairs.shape[0]
    table = sinusoidal_table(length, dim, dtype=dtype)
    for i, j in result.pairs[:20].tolist():
        assert torch.equal(table[i], table[j]) and i < j


def test_no_collisions_in_float32_and_float64():
    for dtype in (torch.float32, torch.float64):
        result = collisions(2000, 2, dtype)
        assert result.distinct == 2000 and result.count == 0
        assert result.pairs.shape == (0, 2)
        assert "2000 distinct" in str(result)


def test_wide_half_tables_stay_distinct():
    # The fast columns keep rows apart: even bfloat16 has no collision at dim 8.
    assert collisions(20000, 8, torch.bfloat16).count == 0
    assert collisions(20000, 8, torch.float16).count == 0


def test_collisions_grow_with_length_and_report():
    short, long = collisions(1000, 2, torch.float16), collisions(10000, 2, torch.float16)
    assert 0 < short.count < long.count
    assert isinstance(long, Collisions) and long.dtype == torch.float16 and long.dim == 2
    i, j = long.pairs[0].tolist()
    assert (i, j) == (2, 712)
    assert f"first: positions {i} and {j}" in str(long)


def test_collisions_options():
    # Column order does not change which rows coincide; the base does (at dim 4 the second
    # frequency is base**-0.5, so rows repeat when p - q is near a multiple of both periods).
    a = collisions(3000, 3, torch.bfloat16)
    b = collisions(3000, 3, torch.bfloat16, style="concat")
    assert a.count > 0 and torch.equal(a.pairs, b.pairs)
    assert collisions(20000, 4, torch.bfloat16, base=100.0).pairs[0].tolist() == [2, 7102]
    assert collisions(20000, 4, torch.bfloat16).count == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 4, torch.float16), {}, ValueError, "length"),
        ((10, 0, torch.float16), {}, ValueError, "dim"),
        ((10, 4, torch.int16), {}, TypeError, "dtype"),
        ((10, 4, None), {}, TypeError, "dtype"),
        ((10, 4, torch.float16), {"style": "weird"}, ValueError, "style"),
        ((10, 4, torch.float16), {"base": 0.0}, ValueError, "base"),
    ],
)
def test_collisions_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        collisions(*args, **kwargs)


# --- check_table -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_check_table_clean(dtype):
    pe = sinusoidal_table(100, 8, dtype=dtype)
    report = check_table(pe)
    assert isinstance(report, TableReport)
    assert report.ok and not report.has_nan and not report.has_inf and report.duplicate_rows == 0
    assert report.min == float(pe.double().min()) and report.max == float(pe.double().max())
    assert -1.0 <= report.min < -0.99 and 0.99 < report.max <= 1.0
    assert report.shape == (100, 8) and report.dtype == dtype
    assert "OK" in str(report) and "100 x 8" in str(report)


def test_check_table_problems():
    pe = random_table(6, 3)
    pe[1, 2] = math.nan
    pe[2, 0] = -math.inf
    pe[4] = pe[0]
    pe[5] = pe[0]
    report = check_table(pe)
    assert report.has_nan and report.has_inf and report.duplicate_rows == 2 and not report.ok
    finite = pe[torch.isfinite(pe)]
    assert report.min == float(finite.min()) and report.max == float(finite.max())
    text = str(report)
    assert "PROBLEMS FOUND" in text and "NaN: yes" in text and "inf: yes" in text
    assert "duplicate rows: 2" in text


def test_check_table_each_problem_alone_fails_ok():
    base = random_table(4, 2)
    for edit in (lambda t: t.__setitem__((0, 0), math.nan), lambda t: t.__setitem__((0, 0), math.inf),
                 lambda t: t.__setitem__(3, t[1])):
        pe = base.clone()
        edit(pe)
        assert not check_table(pe).ok


def test_check_table_edge_values():
    # -0.0 and 0.0 are the same value: those rows are duplicates.
    assert check_table(torch.tensor([[0.0, 1.0], [-0.0, 1.0]])).duplicate_rows == 1
    nan_only = check_table(torch.full((2, 2), math.nan))
    assert math.isnan(nan_only.min) and math.isnan(nan_only.max) and not nan_only.ok
    ints = check_table(torch.tensor([[1, 2], [1, 2], [3, 4]]))
    assert ints.duplicate_rows == 1 and ints.max == 4.0 and not ints.has_nan
    # Duplicates appear only after rounding to half precision.
    pe = torch.tensor([[1.0, 0.0], [1.0 + 1e-5, 0.0]])
    assert check_table(pe).ok and check_table(pe.half()).duplicate_rows == 1


def test_check_table_bad_input():
    with pytest.raises(TypeError, match="pe"):
        check_table([[1.0, 2.0]])
    with pytest.raises(ValueError, match="pe must be 2-D"):
        check_table(torch.zeros(3))
    with pytest.raises(ValueError, match="pe must be 2-D"):
        check_table(torch.zeros(2, 3, 4))
