"""Positional encodings for graph nodes: Laplacian eigenvectors and random-walk landing probabilities."""

from __future__ import annotations

import torch

from posenc._dtypes import round_once
from posenc._checks import check_float_dtype, check_integer_tensor, check_positive_int

__all__ = ["laplacian_pe", "random_walk_pe"]

# Entries within this distance of a column's largest magnitude count as tied for the sign rule.
_SIGN_TIE_TOL = 1e-8


def _check_edge_index(edge_index: torch.Tensor, num_nodes: int) -> None:
    check_integer_tensor("edge_index", edge_index)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(
            f"edge_index must have shape (2, num_edges), got shape {tuple(edge_index.shape)}"
        )
    if edge_index.numel():
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            bad = low if low < 0 else high
            raise ValueError(
                f"edge_index entries must be node indices in [0, num_nodes={num_nodes}), got {bad}"
            )


def _adjacency(edge_index: torch.Tensor, num_nodes: int, device: torch.device | str | None) -> torch.Tensor:
    # Dense 0/1 matrix in float64; a repeated edge counts once.
    device = edge_index.device if device is None else device
    adj = torch.zeros(num_nodes, num_nodes, dtype=torch.float64, device=device)
    src, dst = edge_index.to(device=device, dtype=torch.long)
    adj[src, dst] = 1.0
    return adj


def laplacian_pe(
    edge_index: torch.Tensor,
    num_nodes: int,
    k: int,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Laplacian eigenvector positional encoding of the nodes of a graph.

    The graph is taken as undirected and simple: an edge listed in either direction joins both
    nodes, repeated edges count once and self-loops are ignored. With adjacency :math:`A` and
    degrees :math:`D`, the symmetric normalised Laplacian is

    .. math::

        L = I - D^{-1/2} A D^{-1/2}, \qquad L = U \Lambda U^\top,
        \quad \lambda_1 \le \lambda_2 \le \dots \le \lambda_N,

    and the encoding is :math:`[u_2, \dots, u_{k+1}]`, skipping the trivial :math:`u_1 \propto
    D^{1/2}\mathbf{1}`. An isolated node has :math:`D^{-1/2} = 0` (as in PyG), so :math:`L_{ii}
    = 1` and its own indicator vector is an eigenvector with eigenvalue 1.

    Eigenvectors are defined only up to sign; here the entry of largest magnitude of each column
    is positive (among entries of equal magnitude, the one of the lowest node index). When an
    eigenvalue is repeated (symmetric graphs, several connected components) the eigenvectors are
    any basis of its eigenspace and no sign rule makes them unique. Computed densely in float64
    with ``torch.linalg.eigh`` (:math:`O(N^3)`), which suits graphs of up to a few thousand nodes.

    Parameters
    ----------
    edge_index : torch.Tensor
        Integer tensor of shape ``(2, num_edges)``: source and target node of each edge.
    num_nodes : int
        Number of nodes :math:`N`.
    k : int
        Number of eigenvectors, ``1 <= k < num_nodes``.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result (default: that of ``edge_index``).

    Returns
    -------
    torch.Tensor
        Shape ``(num_nodes, k)``; column :math:`j` is the eigenvector of the :math:`(j+2)`-th
        smallest eigenvalue.

    References
    ----------
    Dwivedi et al., "Benchmarking Graph Neural Networks", JMLR 2023 (arXiv:2003.00982);
    Belkin and Niyogi, "Laplacian Eigenmaps for Dimensionality Reduction and Data
    Representation", Neural Computation 2003.
    """
    num_nodes = check_positive_int("num_nodes", num_nodes)
    k = check_positive_int("k", k)
    if k >= num_nodes:
        raise ValueError(f"k must be smaller than num_nodes={num_nodes} (eigenvector 1 is skipped), got {k}")
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    _check_edge_index(edge_index, num_nodes)
    adj = _adjacency(edge_index, num_nodes, device)
    adj = torch.maximum(adj, adj.T).fill_diagonal_(0.0)
    deg = adj.sum(dim=1)
    inv_sqrt = torch.where(deg > 0, deg.clamp(min=1.0).rsqrt(), torch.zeros_like(deg))
    lap = torch.eye(num_nodes, dtype=torch.float64, device=adj.device) - inv_sqrt[:, None] * adj * inv_sqrt
    _, vecs = torch.linalg.eigh(lap)  # ascending eigenvalues
    vecs = vecs[:, 1 : k + 1]
    size = vecs.abs()
    is_top = size >= size.amax(dim=0) - _SIGN_TIE_TOL
    top = is_top.to(torch.uint8).argmax(dim=0)  # first (lowest-index) maximal entry
    signs = torch.sign(vecs.gather(0, top[None, :]))
    return round_once(vecs * signs, dtype)


def random_walk_pe(
    edge_index: torch.Tensor,
    num_nodes: int,
    walk_length: int,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Random-walk positional encoding: the probability of returning to the start after each step.

    Edges are directed as listed (``edge_index[0]`` to ``edge_index[1]``; list both directions for
    an undirected graph, as PyG does), repeated edges count once, and self-loops are kept (a
    step may stay put). With :math:`P = D_{\text{out}}^{-1} A` and :math:`K` = ``walk_length``,

    .. math::

        RW_i = \bigl[(P)_{ii}, (P^2)_{ii}, \dots, (P^{K})_{ii}\bigr].

    A node without out-edges has a zero row in :math:`P`, so its landing probabilities are 0.
    Computed densely in float64.

    Parameters
    ----------
    edge_index : torch.Tensor
        Integer tensor of shape ``(2, num_edges)``: source and target node of each edge.
    num_nodes : int
        Number of nodes :math:`N`.
    walk_length : int
        Number of steps :math:`K`.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result (default: that of ``edge_index``).

    Returns
    -------
    torch.Tensor
        Shape ``(num_nodes, walk_length)``; column :math:`k-1` holds :math:`\operatorname{diag}(P^k)`.

    References
    ----------
    Dwivedi et al., "Graph Neural Networks with Learnable Structural and Positional
    Representations", ICLR 2022 (arXiv:2110.07875).
    """
    num_nodes = check_positive_int("num_nodes", num_nodes)
    walk_length = check_positive_int("walk_length", walk_length)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    _check_edge_index(edge_index, num_nodes)
    adj = _adjacency(edge_index, num_nodes, device)
    walk = adj / adj.sum(dim=1, keepdim=True).clamp(min=1.0)
    power = walk
    steps = [power.diagonal()]
    for _ in range(walk_length - 1):
        power = power @ walk
        steps.append(power.diagonal())
    return round_once(torch.stack(steps, dim=1), dtype)
