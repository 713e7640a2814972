"""Tests for posenc.graph: Laplacian eigenvector and random-walk positional encodings."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc._dtypes import round_once
from posenc.graph import laplacian_pe, random_walk_pe

FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def undirected(pairs: list[tuple[int, int]]) -> torch.Tensor:
    both = pairs + [(j, i) for i, j in pairs]
    return torch.tensor(both, dtype=torch.long).T.reshape(2, -1)


def path_graph(n: int) -> torch.Tensor:
    return undirected([(i, i + 1) for i in range(n - 1)])


def random_graph(n: int, extra: int, seed: int) -> torch.Tensor:
    """A connected graph: a random spanning tree plus ``extra`` random edges."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g).tolist()
    pairs = {(order[i], order[int(torch.randint(0, i, (1,), generator=g))]) for i in range(1, n)}
    while len(pairs) < n - 1 + extra:
        i, j = torch.randint(0, n, (2,), generator=g).tolist()
        if i != j and (i, j) not in pairs and (j, i) not in pairs:
            pairs.add((i, j))
    return undirected(sorted(pairs))


def normalized_laplacian_loop(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    adj = [[0.0] * n for _ in range(n)]
    for i, j in edge_index.T.tolist():
        if i != j:
            adj[i][j] = adj[j][i] = 1.0
    deg = [sum(row) for row in adj]
    lap = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            scale = 1.0 / math.sqrt(deg[i] * deg[j]) if deg[i] and deg[j] else 0.0
            lap[i, j] = (1.0 if i == j else 0.0) - adj[i][j] * scale
    return lap


def random_walk_loop(edge_index: torch.Tensor, n: int, steps: int) -> torch.Tensor:
    """diag(P^k) by explicit sums over walks, P = D_out^-1 A with A binary."""
    adj = [[0.0] * n for _ in range(n)]
    for i, j in edge_index.T.tolist():
        adj[i][j] = 1.0
    walk = [[a / max(sum(row), 1.0) for a in row] for row in adj]
    power = [row[:] for row in walk]
    out = torch.zeros(n, steps, dtype=torch.float64)
    for k in range(steps):
        for i in range(n):
            out[i, k] = power[i][i]
        power = [[sum(power[i][m] * walk[m][j] for m in range(n)) for j in range(n)] for i in range(n)]
    return out


# ---------------------------------------------------------------- laplacian_pe


def test_laplacian_path_of_three_closed_form():
    # L has eigenvalues 0, 1, 2 with u2 = (1, 0, -1)/sqrt(2) and u3 = (-1, sqrt(2), -1)/2 (sign rule applied).
    pe = laplacian_pe(path_graph(3), 3, 2, dtype=torch.float64)
    s = 1 / math.sqrt(2)
    expected = torch.tensor([[s, -0.5], [0.0, s], [-s, -0.5]], dtype=torch.float64)
    torch.testing.assert_close(pe, expected, rtol=0, atol=1e-12)


def test_laplacian_isolated_node_is_its_own_eigenvector():
    # Edge 0-1 plus isolated node 2: eigenvalues 0, 1 (indicator of node 2), 2.
    pe = laplacian_pe(undirected([(0, 1)]), 3, 2, dtype=torch.float64)
    s = 1 / math.sqrt(2)
    torch.testing.assert_close(pe, torch.tensor([[0.0, s], [0.0, -s], [1.0, 0.0]], dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("n", "extra", "seed"), [(6, 2, 0), (10, 5, 1), (25, 20, 2)])
def test_laplacian_columns_are_the_next_eigenvectors(n, extra, seed):
    edge_index = random_graph(n, extra, seed)
    lap = normalized_laplacian_loop(edge_index, n)
    values = torch.linalg.eigvalsh(lap)
    k = n - 1
    pe = laplacian_pe(edge_index, n, k, dtype=torch.float64)
    torch.testing.assert_close(lap @ pe, pe * values[1 : k + 1], rtol=0, atol=1e-10)
    torch.testing.assert_close(pe.T @ pe, torch.eye(k, dtype=torch.float64), rtol=0, atol=1e-10)
    # orthogonal to the trivial eigenvector D^1/2 1
    deg_sqrt = lap.diagonal().new_tensor([float((edge_index[0] == i).sum()) for i in range(n)]).sqrt()
    torch.testing.assert_close(deg_sqrt @ pe, torch.zeros(k, dtype=torch.float64), rtol=0, atol=1e-10)


def test_laplacian_sign_rule():
    pe = laplacian_pe(random_graph(15, 10, 3), 15, 8, dtype=torch.float64)
    top = pe.abs().argmax(dim=0)
    assert (pe[top, torch.arange(8)] > 0).all()


def test_laplacian_ignores_direction_duplicates_self_loops_and_edge_order():
    pairs = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4)]
    reference = laplacian_pe(undirected(pairs), 5, 3, dtype=torch.float64)
    one_way = torch.tensor(pairs).T
    messy = torch.cat([one_way, one_way.flip(0), one_way[:, :2], torch.tensor([[4, 1], [4, 1]])], dim=1)
    messy = messy[:, torch.randperm(messy.shape[1], generator=torch.Generator().manual_seed(0))]
    torch.testing.assert_close(laplacian_pe(one_way, 5, 3, dtype=torch.float64), reference, rtol=0, atol=1e-12)
    torch.testing.assert_close(laplacian_pe(messy, 5, 3, dtype=torch.float64), reference, rtol=0, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 12))
def test_laplacian_node_relabelling_permutes_rows(seed, n):
    edge_index = random_graph(n, n // 2, seed)
    values = torch.linalg.eigvalsh(normalized_laplacian_loop(edge_index, n))
    k = min(3, n - 1)
    # Only distinct eigenvalues have eigenvectors unique up to sign.
    if (values[1 : k + 2].diff().abs() < 1e-6).any():
        return
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    relabelled = perm[edge_index]  # node i becomes perm[i]
    pe = laplacian_pe(edge_index, n, k, dtype=torch.float64)
    pe_perm = laplacian_pe(relabelled, n, k, dtype=torch.float64)
    # Equal up to sign, per column (the tie-break of the sign rule depends on node order).
    signs = torch.sign((pe_perm[perm] * pe).sum(0))
    torch.testing.assert_close(pe_perm[perm], pe * signs, rtol=0, atol=1e-9)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_laplacian_dtypes(dtype):
    edge_index = random_graph(8, 4, 4)
    pe = laplacian_pe(edge_index, 8, 3, dtype=dtype)
    assert pe.dtype == dtype and pe.shape == (8, 3)
    assert torch.equal(pe, round_once(laplacian_pe(edge_index, 8, 3, dtype=torch.float64), dtype))


def test_laplacian_default_dtype_device_and_int32_index():
    pe = laplacian_pe(path_graph(4).to(torch.int32), 4, 2)
    assert pe.dtype == torch.get_default_dtype() and pe.device.type == "cpu"
    torch.testing.assert_close(pe, laplacian_pe(path_graph(4), 4, 2))


def test_laplacian_bad_k():
    with pytest.raises(ValueError, match="k"):
        laplacian_pe(path_graph(4), 4, 4)
    with pytest.raises(ValueError, match="k"):
        laplacian_pe(path_graph(4), 4, 0)
    with pytest.raises(TypeError, match="k"):
        laplacian_pe(path_graph(4), 4, 1.0)


# ---------------------------------------------------------------- random_walk_pe


@pytest.mark.parametrize(
    "edge_index",
    [
        path_graph(5),
        undirected([(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 3)]),
        torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 3, 3]]),  # directed, with a self-loop on 3
        torch.tensor([[0, 1], [1, 0]]),  # nodes 2..5 isolated
    ],
)
def test_random_walk_matches_loop(edge_index):
    n, steps = 6, 5
    torch.testing.assert_close(
        random_walk_pe(edge_index, n, steps, dtype=torch.float64), random_walk_loop(edge_index, n, steps), rtol=0, atol=1e-12
    )


def test_random_walk_closed_form_on_a_path():
    # Path 0-1-2: no return after an odd number of steps; an end returns after 2 or 4 steps with
    # probability 1/2, the middle with probability 1.
    pe = random_walk_pe(path_graph(3), 3, 4, dtype=torch.float64)
    expected = torch.tensor([[0, 0.5, 0, 0.5], [0, 1, 0, 1], [0, 0.5, 0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(pe, expected, rtol=0, atol=1e-12)


def test_random_walk_self_loop_and_duplicates():
    # A self-loop is a step that stays; a repeated edge counts once.
    edge_index = torch.tensor([[0, 0, 1, 0], [0, 1, 0, 1]])
    pe = random_walk_pe(edge_index, 2, 2, dtype=torch.float64)
    torch.testing.assert_close(pe[0], torch.tensor([0.5, 0.25 + 0.5], dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(pe, random_walk_pe(edge_index[:, :3], 2, 2, dtype=torch.float64), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_random_walk_dtypes(dtype):
    edge_index = random_graph(8, 4, 5)
    pe = random_walk_pe(edge_index, 8, 6, dtype=dtype)
    assert pe.dtype == dtype and pe.shape == (8, 6)
    assert torch.equal(pe, round_once(random_walk_pe(edge_index, 8, 6, dtype=torch.float64), dtype))


def test_random_walk_empty_graph_and_default_dtype():
    pe = random_walk_pe(torch.zeros(2, 0, dtype=torch.long), 3, 2)
    assert pe.dtype == torch.get_default_dtype()
    assert torch.equal(pe, torch.zeros(3, 2))


def test_random_walk_bad_walk_length():
    with pytest.raises(ValueError, match="walk_length"):
        random_walk_pe(path_graph(3), 3, 0)
    with pytest.raises(TypeError, match="walk_length"):
        random_walk_pe(path_graph(3), 3, 2.5)


# ---------------------------------------------------------------- shared input checks


@pytest.mark.parametrize("fn", [lambda e, n: laplacian_pe(e, n, 1), lambda e, n: random_walk_pe(e, n, 2)])
def test_edge_index_checks(fn):
    with pytest.raises(TypeError, match="edge_index"):
        fn([[0, 1], [1, 0]], 3)
    with pytest.raises(TypeError, match="edge_index"):
        fn(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 3)
    with pytest.raises(TypeError, match="edge_index"):
        fn(torch.tensor([[True, False], [False, True]]), 3)
    with pytest.raises(ValueError, match="edge_index"):
        fn(torch.tensor([[0, 1, 2], [1, 2, 0], [2, 0, 1]]), 3)
    with pytest.raises(ValueError, match="edge_index"):
        fn(torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match=r"edge_index.*num_nodes=3.*got 3"):
        fn(torch.tensor([[0, 1], [3, 0]]), 3)
    with pytest.raises(ValueError, match=r"edge_index.*got -1"):
        fn(torch.tensor([[0, -1], [1, 0]]), 3)
    with pytest.raises(ValueError, match="num_nodes"):
        fn(torch.zeros(2, 0, dtype=torch.long), 0)
    with pytest.raises(TypeError, match="num_nodes"):
        fn(torch.zeros(2, 0, dtype=torch.long), 2.0)


@pytest.mark.parametrize("fn", [laplacian_pe, random_walk_pe])
def test_bad_dtype(fn):
    with pytest.raises(TypeError, match="dtype"):
        fn(path_graph(3), 3, 1, dtype=torch.int64)
