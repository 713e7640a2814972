"""posenc.graph against PyTorch Geometric's AddLaplacianEigenvectorPE and AddRandomWalkPE."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pyg_data = pytest.importorskip("torch_geometric.data")
pyg_transforms = pytest.importorskip("torch_geometric.transforms")
pyg_utils = pytest.importorskip("torch_geometric.utils")

from posenc.graph import laplacian_pe, random_walk_pe  # noqa: E402


def random_connected_graph(n: int, extra: int, seed: int) -> torch.Tensor:
    """Random spanning tree plus ``extra`` edges, both directions listed, no duplicates."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g)
    parents = [order[int(torch.randint(0, i, (1,), generator=g))] for i in range(1, n)]
    tree = torch.stack([order[1:], torch.stack(parents)])
    more = torch.randint(0, n, (2, extra), generator=g)
    edge_index = torch.cat([tree, more[:, more[0] != more[1]]], dim=1)
    return pyg_utils.to_undirected(edge_index, num_nodes=n)  # symmetric and coalesced


def distinct_spectrum(edge_index: torch.Tensor, n: int, k: int, gap: float = 1e-2) -> bool:
    lap_index, lap_weight = pyg_utils.get_laplacian(edge_index, normalization="sym", num_nodes=n, dtype=torch.float64)
    lap = pyg_utils.to_dense_adj(lap_index, edge_attr=lap_weight, max_num_nodes=n)[0]
    values = np.linalg.eigvalsh(lap.numpy())
    return bool((np.diff(values[: k + 2]) > gap).all())


def pyg_laplacian(edge_index: torch.Tensor, n: int, k: int) -> torch.Tensor:
    data = pyg_data.Data(edge_index=edge_index, num_nodes=n)
    return pyg_transforms.AddLaplacianEigenvectorPE(k, is_undirected=True)(data).laplacian_eigenvector_pe


def graphs_with_distinct_spectrum(n: int, extra: int, k: int, count: int) -> list[torch.Tensor]:
    found = []
    for seed in range(200):
        edge_index = random_connected_graph(n, extra, seed)
        if distinct_spectrum(edge_index, n, k):
            found.append(edge_index)
        if len(found) == count:
            return found
    raise AssertionError("no graph with a well-separated spectrum found")


# n < 100 takes PyG's dense numpy.linalg.eigh path, n >= 100 its scipy eigsh path.
@pytest.mark.parametrize(("n", "extra", "k"), [(5, 2, 2), (12, 6, 4), (30, 20, 8), (60, 40, 5), (120, 80, 4)])
def test_laplacian_pe_equals_pyg_up_to_column_sign(n, extra, k):
    torch.manual_seed(0)  # PyG flips column signs at random
    for edge_index in graphs_with_distinct_spectrum(n, extra, k, count=1):
        ref = pyg_laplacian(edge_index, n, k)
        ours = laplacian_pe(edge_index, n, k, dtype=torch.float64)
        assert ref.shape == ours.shape == (n, k)
        signs = torch.sign((ours * ref.double()).sum(0))
        # PyG works in float32; eigenvector error ~ eps32 / eigengap.
        torch.testing.assert_close(ours * signs, ref.double(), rtol=0, atol=2e-4)


def test_pyg_flips_signs_at_random_on_every_call():
    # AddLaplacianEigenvectorPE multiplies each column by a random +-1 on every call (not only in
    # training), so its output is not reproducible without seeding; posenc fixes the sign instead.
    edge_index = graphs_with_distinct_spectrum(10, 5, 3, count=1)[0]
    torch.manual_seed(0)
    signs = {tuple(torch.sign(pyg_laplacian(edge_index, 10, 3)[0]).tolist()) for _ in range(20)}
    assert len(signs) > 1
    assert torch.equal(laplacian_pe(edge_index, 10, 3), laplacian_pe(edge_index, 10, 3))


@pytest.mark.reference_doc
def test_pyg_encodings_are_float32():
    edge_index = random_connected_graph(12, 6, 0)
    assert pyg_laplacian(edge_index, 12, 3).dtype == torch.float32
    assert pyg_random_walk(edge_index, 12, 4).dtype == torch.float32


def pyg_random_walk(edge_index: torch.Tensor, n: int, walk_length: int) -> torch.Tensor:
    data = pyg_data.Data(edge_index=edge_index, num_nodes=n)
    return pyg_transforms.AddRandomWalkPE(walk_length)(data).random_walk_pe


@pytest.mark.parametrize(("n", "extra", "seed"), [(5, 2, 0), (20, 15, 1), (64, 100, 2)])
@pytest.mark.parametrize("walk_length", [1, 4, 16])
def test_random_walk_pe_equals_pyg_undirected(n, extra, seed, walk_length):
    edge_index = random_connected_graph(n, extra, seed)
    ref = pyg_random_walk(edge_index, n, walk_length)
    torch.testing.assert_close(random_walk_pe(edge_index, n, walk_length, dtype=torch.float32), ref, rtol=0, atol=1e-6)


def test_random_walk_pe_equals_pyg_directed_self_loops_isolated():
    g = torch.Generator().manual_seed(3)
    edge_index = torch.randint(0, 25, (2, 60), generator=g)  # directed, some self-loops
    edge_index = pyg_utils.coalesce(edge_index, num_nodes=30)  # nodes 25..29 isolated
    assert (edge_index[0] == edge_index[1]).any()
    ref = pyg_random_walk(edge_index, 30, 8)
    torch.testing.assert_close(random_walk_pe(edge_index, 30, 8, dtype=torch.float32), ref, rtol=0, atol=1e-6)


def test_repeated_edges_pyg_counts_them_in_the_degree_only():
    # PyG divides by a degree that counts a repeated edge twice but writes the adjacency entry
    # once, so rows of its P sum to less than 1; posenc counts the edge once.
    edge_index = torch.tensor([[0, 0, 1, 1, 2], [1, 1, 0, 2, 1]])
    ours = random_walk_pe(edge_index, 3, 2, dtype=torch.float32)
    coalesced = pyg_utils.coalesce(edge_index, num_nodes=3)
    torch.testing.assert_close(ours, pyg_random_walk(coalesced, 3, 2), rtol=0, atol=1e-6)
    assert not torch.allclose(ours, pyg_random_walk(edge_index, 3, 2))
