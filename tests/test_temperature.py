"""posenc.attention_temperature: Llama 4's query scale for NoPE layers."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import attention_temperature


def test_the_formula_and_its_steps() -> None:
    positions = torch.tensor([0, 8190, 8191, 16382, 16383, 10**6])
    got = attention_temperature(positions, dtype=torch.float64)
    expected = [1 + 0.1 * math.log1p(math.floor((p + 1) / 8192)) for p in positions.tolist()]
    assert got.tolist() == pytest.approx(expected, abs=1e-15)
    assert got[:2].tolist() == [1.0, 1.0] and got[2] > 1 and got[3] == got[2] and got[4] > got[3]


def test_shape_dtype_and_options() -> None:
    positions = torch.arange(12).view(3, 4)
    got = attention_temperature(positions, floor_scale=2, attn_scale=0.5)
    assert got.shape == (3, 4) and got.dtype == torch.get_default_dtype()
    assert float(got[0, 1]) == pytest.approx(1 + 0.5 * math.log(2))
    assert attention_temperature(torch.zeros(2, dtype=torch.long, device="meta")).device.type == "meta"


def test_bad_input() -> None:
    with pytest.raises(TypeError, match=r"^positions must have an integer dtype, got torch.float32$"):
        attention_temperature(torch.zeros(2))
    with pytest.raises(ValueError, match=r"^floor_scale must be a finite number > 0, got 0.0$"):
        attention_temperature(torch.zeros(2, dtype=torch.long), floor_scale=0)
    with pytest.raises(ValueError, match=r"^attn_scale must be a finite number > 0, got -0.1$"):
        attention_temperature(torch.zeros(2, dtype=torch.long), attn_scale=-0.1)
    with pytest.raises(TypeError, match=r"^dtype must be a floating-point dtype, got torch.int64$"):
        attention_temperature(torch.zeros(2, dtype=torch.long), dtype=torch.long)
    with pytest.raises(ValueError, match=r"^positions must be >= 0, got a minimum of -3$"):
        attention_temperature(torch.tensor([1, -3]))
