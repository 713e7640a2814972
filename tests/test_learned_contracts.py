"""Contracts of posenc.learned that a reviewer's bug would break."""

from __future__ import annotations

import re

import pytest
import torch

from posenc.learned import LearnedPositionalEncoding, TokenEmbedding


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dim": 0, "max_len": 4}, "dim must be a positive integer, got 0"),
    ({"dim": 4, "max_len": 0}, "max_len must be a positive integer, got 0"),
    ({"dim": 4, "max_len": 4, "dropout": 1.0}, "dropout must be in [0, 1), got 1.0"),
])
def test_positional_refuses_bad_sizes_by_name(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LearnedPositionalEncoding(**kwargs)


@pytest.mark.parametrize(("batch_first", "layout"), [(True, "(batch, seq, dim)"), (False, "(seq, batch, dim)")])
def test_positional_names_its_layout_for_a_wrong_rank(batch_first: bool, layout: str) -> None:
    module = LearnedPositionalEncoding(4, 8, batch_first=batch_first)
    message = f"x must be 3-D {layout}, got a 2-D tensor of shape (3, 4)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        module(torch.zeros(3, 4))


@pytest.mark.parametrize("batch_first", [True, False])
def test_positional_keeps_a_half_input_in_half(batch_first: bool) -> None:
    module = LearnedPositionalEncoding(4, 8, batch_first=batch_first)
    x = torch.zeros(2, 3, 4, dtype=torch.float16)
    out = module(x)
    assert out.dtype == torch.float16
    table = module.weight.detach().to(torch.float16)
    expected = table[:3].unsqueeze(0) if batch_first else table[:2].unsqueeze(1)
    assert torch.equal(out, expected.expand(2, 3, 4))


def test_positional_keeps_a_half_input_in_half_with_positions() -> None:
    module = LearnedPositionalEncoding(4, 8)
    x = torch.zeros(1, 3, 4, dtype=torch.float16)
    positions = torch.tensor([[5, 0, 2]])
    out = module(x, positions=positions)
    assert out.dtype == torch.float16
    assert torch.equal(out[0], module.weight.detach()[[5, 0, 2]].to(torch.float16))


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"vocab_size": 0, "dim": 4}, ValueError, "vocab_size must be a positive integer, got 0"),
    ({"vocab_size": 5, "dim": 0}, ValueError, "dim must be a positive integer, got 0"),
    ({"vocab_size": 5, "dim": 4, "padding_idx": 1.5}, TypeError, "padding_idx must be an int, got 1.5 of type float"),
    ({"vocab_size": 5, "dim": 4, "padding_idx": 5}, ValueError, "padding_idx must be in [-5, 5), got 5"),
    ({"vocab_size": 5, "dim": 4, "padding_idx": -6}, ValueError, "padding_idx must be in [-5, 5), got -6"),
])
def test_token_embedding_refuses_bad_arguments_by_name(kwargs: dict[str, float], error: type[Exception],
                                                       message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        TokenEmbedding(**kwargs)


@pytest.mark.parametrize(("padding_idx", "row"), [(-5, 0), (4, 4)])
def test_token_embedding_accepts_both_ends_of_the_padding_range(padding_idx: int, row: int) -> None:
    module = TokenEmbedding(5, 4, padding_idx=padding_idx)
    assert torch.equal(module.weight.detach()[row], torch.zeros(4))


def test_token_embedding_draws_its_table_once_from_the_seeded_generator() -> None:
    torch.manual_seed(123)
    module = TokenEmbedding(6, 4)
    torch.manual_seed(123)
    expected = torch.empty(6, 4).normal_(std=0.5)
    assert torch.equal(module.weight.detach(), expected)


def test_token_embedding_refuses_float_tokens_by_name() -> None:
    with pytest.raises(TypeError, match="^tokens must have an integer dtype, got torch.float32$"):
        TokenEmbedding(5, 4)(torch.zeros(2))


def test_from_pretrained_trains_by_default() -> None:
    module = TokenEmbedding.from_pretrained(torch.randn(5, 4))
    assert module.weight.requires_grad


def test_from_pretrained_keeps_the_padding_row_out_of_gradients() -> None:
    weight = torch.randn(5, 4)
    module = TokenEmbedding.from_pretrained(weight, padding_idx=2, scale=False)
    assert module.embedding.padding_idx == 2
    assert torch.equal(module.weight.detach(), weight)
    module(torch.tensor([1, 2, 2, 3])).sum().backward()
    assert torch.equal(module.weight.grad[2], torch.zeros(4))
    assert torch.equal(module.weight.grad[1], torch.ones(4))


def test_from_pretrained_refuses_integer_tables_by_name() -> None:
    with pytest.raises(TypeError, match="^weight must have a floating-point dtype, got torch.int64$"):
        TokenEmbedding.from_pretrained(torch.zeros(5, 4, dtype=torch.long))


def test_from_pretrained_refuses_one_dimensional_tables_by_name() -> None:
    message = "weight must be 2-D (vocab_size, dim), got a 1-D tensor of shape (5,)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        TokenEmbedding.from_pretrained(torch.zeros(5))
