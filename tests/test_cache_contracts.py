"""Contracts of posenc._cache that a reviewer's bug would break."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from posenc._cache import RecomputedOnCast, cached_rows
from posenc.sinusoidal import SinusoidalPositionalEncoding


class _Table(RecomputedOnCast):
    """The smallest cached module: a table of thirds, with a child that holds a weight."""

    table: torch.Tensor
    _cast_buffer = "table"

    def __init__(self) -> None:
        super().__init__()
        self.child = nn.Linear(2, 2)
        self.register_buffer("table", torch.empty(3))
        self.resets = 0
        self.reset_parameters()
        self.resets = 0

    def reset_parameters(self) -> None:
        self.resets += 1
        with torch.no_grad():
            self.table.copy_(torch.full((3,), 1 / 3, dtype=torch.float64))


def test_a_dtype_cast_recomputes_the_table_in_the_new_dtype() -> None:
    module = _Table().double()
    assert module.resets == 1
    assert module.table.dtype == torch.float64
    assert torch.equal(module.table, torch.full((3,), 1 / 3, dtype=torch.float64))


@pytest.mark.parametrize("move", [lambda m: m.float(), lambda m: m.to("cpu"), lambda m: m.cpu()])
def test_a_move_that_keeps_the_dtype_recomputes_nothing(move) -> None:
    module = _Table()
    assert move(module) is module
    assert module.resets == 0


def test_a_cast_on_the_meta_device_recomputes_nothing() -> None:
    module = _Table().to("meta")
    module.half()
    assert module.resets == 0
    assert module.table.dtype == torch.float16
    assert module.table.device.type == "meta"


def test_a_cast_reaches_the_children() -> None:
    module = _Table().double()
    assert module.child.weight.dtype == torch.float64


def test_to_empty_without_recurse_leaves_the_children_where_they_are() -> None:
    module = _Table().to("meta")
    module.to_empty(device="cpu", recurse=False)
    assert module.table.device.type == "cpu"
    assert module.child.weight.device.type == "meta"


class _Cache(nn.Module):
    """A module with two cached tables of ``length`` rows; row ``p`` of both holds ``p``."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.register_buffer("a", torch.arange(length, dtype=torch.float32))
        self.register_buffer("b", -torch.arange(length, dtype=torch.float32))
        self.builds: list[tuple[int, int]] = []

    def build(self, first: int, last: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.builds.append((first, last))
        rows = torch.arange(first, last, dtype=torch.float32)
        return rows, -rows


@pytest.mark.parametrize(("start", "end"), [(0, 3), (0, 8), (5, 8), (2, 2)])
def test_rows_inside_the_cache_are_read_without_building(start: int, end: int) -> None:
    module = _Cache(8)
    a, b = cached_rows(module, ("a", "b"), start, end, module.build)
    assert module.builds == []
    assert torch.equal(a, torch.arange(start, end, dtype=torch.float32))
    assert torch.equal(b, -torch.arange(start, end, dtype=torch.float32))
    assert module.a.shape == module.b.shape == (8,)


@pytest.mark.parametrize(("start", "end", "grown"), [(0, 9, 16), (6, 10, 16), (0, 20, 20)])
def test_rows_past_the_cache_rebuild_it_at_twice_its_length_or_at_end(start: int, end: int, grown: int) -> None:
    module = _Cache(8)
    a, b = cached_rows(module, ("a", "b"), start, end, module.build)
    assert module.builds == [(0, grown)]
    assert torch.equal(a, torch.arange(start, end, dtype=torch.float32))
    assert torch.equal(b, -torch.arange(start, end, dtype=torch.float32))
    assert torch.equal(module.a, torch.arange(grown, dtype=torch.float32))
    assert torch.equal(module.b, -torch.arange(grown, dtype=torch.float32))


@pytest.mark.parametrize(("start", "end"), [(-2, 3), (-3, 20)])
def test_negative_positions_are_built_directly_and_never_cached(start: int, end: int) -> None:
    module = _Cache(8)
    a, b = cached_rows(module, ("a", "b"), start, end, module.build)
    assert module.builds == [(start, end)]
    assert torch.equal(a, torch.arange(start, end, dtype=torch.float32))
    assert torch.equal(b, -torch.arange(start, end, dtype=torch.float32))
    assert torch.equal(module.a, torch.arange(8, dtype=torch.float32))


@pytest.mark.parametrize("seq", [1, 8])
def test_sinusoidal_module_keeps_its_table_for_sequences_that_fit(seq: int) -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    module(torch.zeros(1, seq, 4))
    assert module.pe.shape == (8, 4)
