"""Contracts of posenc.relative that a reviewer's bug would break."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.relative import (
    RelativePositionEmbedding,
    T5RelativePositionBias,
    rel_shift,
    relative_position_indices,
    t5_relative_position_bucket,
    xl_position_logits,
    xl_relative_embedding,
)


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def test_indices_refuse_a_non_positive_maximum_by_name() -> None:
    with pytest.raises(ValueError, match=_exactly("max_relative_position must be a positive integer, got 0")):
        relative_position_indices(3, 3, 0)


def test_indices_of_lengths_are_made_on_the_requested_device() -> None:
    index = relative_position_indices(2, 3, 1, device="meta")
    assert index.device.type == "meta"
    assert index.shape == (2, 3) and index.dtype == torch.long


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 4), "max_relative_position must be a positive integer, got 0"), ((2, 0), "dim must be a positive integer, got 0")],
)
def test_embedding_refuses_bad_arguments_by_name(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=_exactly(message)):
        RelativePositionEmbedding(*args)


def test_embedding_builds_its_indices_on_the_weight_device_not_the_default_one() -> None:
    module = RelativePositionEmbedding(2, 4)
    expected = module(3, 4)
    with torch.device("meta"):
        out = module(3, 4)
    assert out.device.type == "cpu"
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_heads": 0}, ValueError, "num_heads must be a positive integer, got 0"),
        ({"num_heads": 2, "bidirectional": 1}, TypeError, "bidirectional must be a bool, got 1 of type int"),
        ({"num_heads": 2, "num_buckets": 0}, ValueError, "num_buckets must be a positive integer, got 0"),
        ({"num_heads": 2, "max_distance": 0}, ValueError, "max_distance must be a positive integer, got 0"),
        ({"num_heads": 2, "num_buckets": 3}, ValueError, "num_buckets must be >= 4 when bidirectional=True, got 3"),
        ({"num_heads": 2, "num_buckets": 1, "bidirectional": False}, ValueError,
         "num_buckets must be >= 2 when bidirectional=False, got 1"),
        ({"num_heads": 2, "max_distance": 8}, ValueError,
         "max_distance must be > 8 (the number of exact buckets for num_buckets=32, bidirectional=True), got 8"),
    ],
)
def test_t5_bias_refuses_bad_arguments_by_name(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=_exactly(message)):
        T5RelativePositionBias(**kwargs)


def test_t5_bucket_refuses_float_positions_by_name() -> None:
    with pytest.raises(TypeError, match=_exactly("relative_position must have an integer dtype, got torch.float32")):
        t5_relative_position_bucket(torch.zeros(3))


@pytest.mark.parametrize(
    ("bidirectional", "num_buckets", "max_distance", "exact"), [(True, 4, 2, 1), (False, 2, 2, 1), (True, 32, 9, 8)]
)
def test_t5_bucket_accepts_the_smallest_allowed_settings(
    bidirectional: bool, num_buckets: int, max_distance: int, exact: int
) -> None:
    buckets = t5_relative_position_bucket(
        -torch.arange(exact + 1), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert buckets.tolist() == list(range(exact + 1))


def test_t5_bias_defaults_are_those_of_t5() -> None:
    module = T5RelativePositionBias(2)
    assert module.extra_repr() == "num_heads=2, bidirectional=True, num_buckets=32, max_distance=128"
    assert module.relative_attention_bias.weight.shape == (32, 2)


def test_t5_bias_defaults_set_the_buckets_of_distant_keys() -> None:
    module = T5RelativePositionBias(1)
    with torch.no_grad():
        module.relative_attention_bias.weight.copy_(torch.arange(32.0)[:, None])
    # Query 0 against keys 0 … 199: the buckets of distances 0 … 199 for 32 buckets and max_distance 128.
    bias = module(1, 200, offset=0)[0, 0, 0]
    expected = t5_relative_position_bucket(torch.arange(200), num_buckets=32, max_distance=128).float()
    assert torch.equal(bias, expected)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((2, 3), {"offset": 1.5}, TypeError, "offset must be an int, got 1.5 of type float"),
        ((0, 3), {}, ValueError, "q_len must be a positive integer, got 0"),
        ((2, 0), {}, ValueError, "k_len must be a positive integer, got 0"),
    ],
)
def test_t5_bias_forward_refuses_bad_lengths_by_name(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=_exactly(message)):
        T5RelativePositionBias(2)(*args, **kwargs)


def test_t5_bias_builds_its_positions_on_the_weight_device_not_the_default_one() -> None:
    module = T5RelativePositionBias(2)
    expected = module(3, 5, offset=2)
    with torch.device("meta"):
        out = module(3, 5, offset=2)
    assert out.device.type == "cpu"
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0, 4), {}, "k_len must be a positive integer, got 0"),
        ((3, 0), {}, "dim must be a positive integer, got 0"),
        ((3, 4), {"clamp_len": 0}, "clamp_len must be a positive integer, got 0"),
    ],
)
def test_xl_embedding_refuses_bad_arguments_by_name(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=_exactly(message)):
        xl_relative_embedding(*args, **kwargs)


@pytest.mark.parametrize("clamp_len", [None, 2])
def test_xl_embedding_is_made_on_the_requested_device(clamp_len: int | None) -> None:
    table = xl_relative_embedding(5, 4, clamp_len=clamp_len, device="meta")
    assert table.device.type == "meta"
    assert table.shape == (5, 4)


def test_xl_logits_refuse_non_tensors() -> None:
    with pytest.raises(TypeError, match=_exactly("query and weight must be torch.Tensors")):
        xl_position_logits([[[0.0]]], torch.zeros(2, 2), 1, 1)


def test_xl_logits_use_the_weight_in_the_dtype_of_the_query() -> None:
    g = torch.Generator().manual_seed(0)
    query = torch.randn(2, 3, 4, dtype=torch.float64, generator=g)
    weight = torch.randn(8, 6, generator=g)
    out = xl_position_logits(query, weight, 3, 5)
    assert out.dtype == torch.float64
    assert torch.equal(out, xl_position_logits(query, weight.double(), 3, 5))


def test_xl_logits_follow_the_query_device_for_lengths() -> None:
    out = xl_position_logits(torch.zeros(2, 3, 4, device="meta"), torch.zeros(8, 6, device="meta"), 3, 5)
    assert out.device.type == "meta"
    assert out.shape == (2, 3, 5)


def test_rel_shift_refuses_non_tensors_naming_the_type() -> None:
    with pytest.raises(TypeError, match=_exactly("x must be a torch.Tensor, got list")):
        rel_shift([[1.0]])
