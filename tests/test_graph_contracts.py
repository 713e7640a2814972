"""Contracts of posenc.graph that a reviewer's bug would break."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

from posenc.graph import laplacian_pe, random_walk_pe

# A 4-cycle with a chord and a pendant node: degrees 1, 2 and 3.
EDGES = torch.tensor([[0, 1, 2, 3, 0, 3], [1, 2, 3, 0, 2, 4]])
FUNCTIONS = [laplacian_pe, random_walk_pe]


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((EDGES, 0, 1), {}, ValueError, "num_nodes must be a positive integer, got 0"),
        ((EDGES, 5, 0), {}, ValueError, "k must be a positive integer, got 0"),
        ((EDGES, 5, 1.0), {}, TypeError, "k must be an int, got 1.0 of type float"),
        ((EDGES, 5, 5), {}, ValueError, "k must be smaller than num_nodes=5 (eigenvector 1 is skipped), got 5"),
        ((EDGES, 5, 2), {"dtype": torch.int64}, TypeError, "dtype must be a floating-point dtype, got torch.int64"),
        ((EDGES, 5, 2), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_laplacian_refuses_bad_arguments_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        laplacian_pe(*args, **kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((EDGES, 0, 1), {}, ValueError, "num_nodes must be a positive integer, got 0"),
        ((EDGES, 5, 0), {}, ValueError, "walk_length must be a positive integer, got 0"),
        ((EDGES, 5, 2), {"dtype": torch.int64}, TypeError, "dtype must be a floating-point dtype, got torch.int64"),
        ((EDGES, 5, 2), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_random_walk_refuses_bad_arguments_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        random_walk_pe(*args, **kwargs)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize(
    ("edge_index", "error", "message"),
    [
        ([[0, 1], [1, 0]], TypeError, "edge_index must be a torch.Tensor, got list"),
        (torch.tensor([[0.0], [1.0]]), TypeError, "edge_index must have an integer dtype, got torch.float32"),
        (torch.zeros(3, 3, dtype=torch.long), ValueError, "edge_index must have shape (2, num_edges), got shape (3, 3)"),
        (torch.tensor([[0, 5], [1, 0]]), ValueError, "edge_index entries must be node indices in [0, num_nodes=5), got 5"),
        (torch.tensor([[0, -1], [1, 0]]), ValueError, "edge_index entries must be node indices in [0, num_nodes=5), got -1"),
    ],
)
def test_bad_edge_index_is_refused_by_name(
    function: Callable[..., torch.Tensor], edge_index: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        function(edge_index, 5, 2)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("index_dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_edge_index_of_any_integer_dtype_gives_the_same_encoding(
    function: Callable[..., torch.Tensor], index_dtype: torch.dtype
) -> None:
    expected = function(EDGES, 5, 2, dtype=torch.float64)
    assert torch.equal(function(EDGES.to(index_dtype), 5, 2, dtype=torch.float64), expected)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_encoding_is_made_on_the_requested_device(function: Callable[..., torch.Tensor]) -> None:
    out = function(EDGES, 5, 2, device="meta")
    assert out.device.type == "meta"
    assert out.shape == (5, 2)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_encoding_is_made_on_the_device_of_the_edges_by_default(function: Callable[..., torch.Tensor]) -> None:
    out = function(torch.zeros(2, 0, dtype=torch.long, device="meta"), 5, 2)
    assert out.device.type == "meta"
    assert out.shape == (5, 2)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_encoding_does_not_depend_on_the_default_device(function: Callable[..., torch.Tensor]) -> None:
    expected = function(EDGES, 5, 2, dtype=torch.float64)
    with torch.device("meta"):
        out = function(EDGES, 5, 2, dtype=torch.float64)
    assert out.device.type == "cpu"
    assert torch.equal(out, expected)
