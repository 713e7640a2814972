"""Contracts of posenc._positions that a reviewer's bug would break."""

from __future__ import annotations

import pytest
import torch

from posenc.learned import LearnedPositionalEncoding
from posenc.sinusoidal import SinusoidalPositionalEncoding


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_learned_positions_of_any_integer_dtype_pick_the_same_rows(dtype: torch.dtype) -> None:
    module = LearnedPositionalEncoding(4, 8)
    x = torch.zeros(1, 3, 4)
    out = module(x, positions=torch.tensor([[5, 0, 2]], dtype=dtype))
    assert torch.equal(out, module(x, positions=torch.tensor([[5, 0, 2]])))
    assert torch.equal(out[0], module.weight.detach()[[5, 0, 2]])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_sinusoidal_positions_of_any_integer_dtype_pick_the_same_rows(dtype: torch.dtype) -> None:
    module = SinusoidalPositionalEncoding(4, batch_first=False)
    x = torch.zeros(3, 1, 4)
    out = module(x, positions=torch.tensor([[5], [0], [2]], dtype=dtype))
    assert torch.equal(out, module(x, positions=torch.tensor([[5], [0], [2]])))
