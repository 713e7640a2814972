"""Contracts of posenc.sinusoidal that a reviewer's bug would break."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from posenc.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


STYLES_LISTED = "'interleaved', 'concat', 'tensor2tensor'"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer, got 0"),
        ({"dim": 4, "base": 0}, ValueError, "base must be a finite number > 0, got 0.0"),
        ({"dim": 4, "style": "half"}, ValueError, f"style must be one of {STYLES_LISTED}; got 'half'"),
    ],
)
def test_frequencies_refuse_bad_arguments_by_name(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        sinusoidal_frequencies(**kwargs)


@pytest.mark.parametrize("style", ["interleaved", "tensor2tensor"])
def test_frequencies_are_made_on_the_requested_device(style: str) -> None:
    freqs = sinusoidal_frequencies(6, style=style, device="meta")
    assert freqs.device.type == "meta"
    assert freqs.dtype == torch.float64
    assert freqs.shape == (3,)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((0, 4), {}, ValueError, "length must be a positive integer, got 0"),
        ((3, 4), {"offset": 0.5}, TypeError, "offset must be an int, got 0.5 of type float"),
        ((3, 4), {"dtype": torch.int64}, TypeError, "dtype must be a floating-point dtype, got torch.int64"),
        ((3, 4), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype, got 'float32'"),
    ],
)
def test_table_refuses_bad_arguments_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        sinusoidal_table(*args, **kwargs)


def test_table_of_positions_is_made_on_their_device() -> None:
    table = sinusoidal_table(torch.arange(3, device="meta"), 4)
    assert table.device.type == "meta"
    assert table.shape == (3, 4)


def test_table_of_positions_is_made_on_the_requested_device() -> None:
    table = sinusoidal_table(torch.arange(3), 4, device="meta")
    assert table.device.type == "meta"
    assert table.shape == (3, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer, got 0"),
        ({"dim": 4, "base": -1}, ValueError, "base must be a finite number > 0, got -1.0"),
        ({"dim": 4, "style": "half"}, ValueError, f"style must be one of {STYLES_LISTED}; got 'half'"),
        ({"dim": 4, "dropout": 1.0}, ValueError, "dropout must be in [0, 1), got 1.0"),
        ({"dim": 4, "max_len": 0}, ValueError, "max_len must be a positive integer, got 0"),
        ({"dim": 4, "batch_first": 1}, TypeError, "batch_first must be a bool, got 1 of type int"),
    ],
)
def test_module_refuses_bad_arguments_by_name(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        SinusoidalPositionalEncoding(**kwargs)


def test_module_computes_five_thousand_rows_by_default() -> None:
    assert SinusoidalPositionalEncoding(4).pe.shape == (5000, 4)


@pytest.mark.parametrize(("batch_first", "layout"), [(True, "(batch, seq, dim)"), (False, "(seq, batch, dim)")])
def test_module_names_its_input_layout_when_the_rank_is_wrong(batch_first: bool, layout: str) -> None:
    module = SinusoidalPositionalEncoding(4, batch_first=batch_first)
    message = f"x must be 3-D {layout}, got a 2-D tensor of shape (2, 4)"
    with pytest.raises(ValueError, match=_exactly(message)):
        module(torch.zeros(2, 4))


def test_module_refuses_a_float_offset_by_name() -> None:
    with pytest.raises(TypeError, match=_exactly("offset must be an int, got 1.5 of type float")):
        SinusoidalPositionalEncoding(4)(torch.zeros(1, 2, 4), offset=1.5)


@pytest.mark.parametrize(("largest", "rows"), [(7, 8), (20, 21)])
def test_positions_grow_the_table_only_as_far_as_they_need(largest: int, rows: int) -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    module(torch.zeros(1, 2, 4), positions=torch.tensor([[0, largest]]))
    assert module.pe.shape == (rows, 4)


def test_positions_keep_the_dtype_of_x() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    x = torch.zeros(1, 3, 4, dtype=torch.float16)
    out = module(x, positions=torch.tensor([[2, 0, 1]]))
    assert out.dtype == torch.float16
    assert torch.equal(out[0], module.pe[[2, 0, 1]].half())


# Loading a state_dict.

def _state(module: SinusoidalPositionalEncoding) -> dict[str, torch.Tensor]:
    return {"pe": module.pe.clone()}


@pytest.mark.parametrize(("saved_rows", "module_rows"), [(8, 4), (4, 8), (16, 8)])
def test_a_table_of_another_length_is_taken_at_its_length(saved_rows: int, module_rows: int) -> None:
    module = SinusoidalPositionalEncoding(4, max_len=module_rows)
    module.load_state_dict(_state(SinusoidalPositionalEncoding(4, max_len=saved_rows)))
    assert torch.equal(module.pe, SinusoidalPositionalEncoding(4, max_len=saved_rows).pe)


def test_a_grown_table_keeps_the_dtype_of_the_module() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=4).double()
    saved = SinusoidalPositionalEncoding(4, max_len=8).double()
    module.load_state_dict(_state(saved))
    assert module.pe.dtype == torch.float64
    assert torch.equal(module.pe, saved.pe)


def test_a_grown_table_keeps_the_module_on_its_device() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=4).to("meta")
    with pytest.warns(UserWarning, match="copying from a non-meta parameter"):
        module.load_state_dict(_state(SinusoidalPositionalEncoding(4, max_len=8)))
    assert module.pe.device.type == "meta"
    assert module.pe.shape == (8, 4)


def test_a_table_of_another_width_and_length_is_a_size_mismatch() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    message = ("size mismatch for pe: copying a param with shape torch.Size([10, 6]) from checkpoint, "
               "the shape in current model is torch.Size([8, 4]).")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        module.load_state_dict({"pe": torch.zeros(10, 6)})
    assert torch.equal(module.pe, SinusoidalPositionalEncoding(4, max_len=8).pe)


def test_unexpected_keys_are_reported() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    with pytest.raises(RuntimeError, match=re.escape('Unexpected key(s) in state_dict: "bogus".')):
        module.load_state_dict({**_state(module), "bogus": torch.zeros(1)})


def test_a_missing_table_is_reported() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    with pytest.raises(RuntimeError, match=re.escape('Missing key(s) in state_dict: "pe".')):
        module.load_state_dict({})


def test_a_missing_table_is_listed_when_not_strict() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    result = module.load_state_dict({}, strict=False)
    assert result.missing_keys == ["pe"] and result.unexpected_keys == []
    assert torch.equal(module.pe, SinusoidalPositionalEncoding(4, max_len=8).pe)


@pytest.mark.parametrize("kwargs", [{"base": 100.0}, {"style": "concat"}, {"style": "tensor2tensor"}])
def test_a_module_with_another_base_or_style_loads_its_own_table(kwargs: dict) -> None:
    module = SinusoidalPositionalEncoding(6, max_len=8, **kwargs)
    module.load_state_dict(_state(SinusoidalPositionalEncoding(6, max_len=8, **kwargs)))
    assert torch.equal(module.pe, SinusoidalPositionalEncoding(6, max_len=8, **kwargs).pe)


def test_a_float64_module_loads_its_own_float64_table() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=64).double()
    module.load_state_dict(_state(SinusoidalPositionalEncoding(4, max_len=64).double()))
    assert module.pe.dtype == torch.float64


def test_a_meta_module_loads_a_meta_table() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8).to("meta")
    module.load_state_dict(_state(SinusoidalPositionalEncoding(4, max_len=8).to("meta")))
    assert module.pe.device.type == "meta"


def test_the_table_is_checked_on_its_own_device_whatever_the_default_device() -> None:
    module = SinusoidalPositionalEncoding(4, max_len=8)
    saved = _state(SinusoidalPositionalEncoding(4, max_len=8))
    with torch.device("meta"):
        module.load_state_dict(saved)
    assert torch.equal(module.pe, saved["pe"])


def test_a_table_off_by_exactly_one_eps_is_accepted() -> None:
    saved = _state(SinusoidalPositionalEncoding(4, max_len=8))
    saved["pe"][0, 0] = 2**-23  # the exact entry is sin(0) = 0; float32's eps is 2**-23
    module = SinusoidalPositionalEncoding(4, max_len=8)
    module.load_state_dict(saved)
    assert module.pe[0, 0] == 2**-23


@pytest.mark.parametrize(("bad", "shown"), [(float("nan"), "inf"), (0.5, "0.5")])
def test_a_wrong_entry_is_refused_with_its_row_and_the_table_is_kept(bad: float, shown: str) -> None:
    saved = _state(SinusoidalPositionalEncoding(4, max_len=8))
    saved["pe"][2, 1] = saved["pe"][2, 1] + bad
    module = SinusoidalPositionalEncoding(4, max_len=8)
    message = (
        "pe: the saved table is not the sinusoidal table of this module (dim=4, base=10000, "
        f"style='interleaved'): it differs by {shown} at row 2, more than rounding (1.19e-07); "
        "was it saved with another style or base?"
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        module.load_state_dict(saved)
    assert torch.equal(module.pe, SinusoidalPositionalEncoding(4, max_len=8).pe)
