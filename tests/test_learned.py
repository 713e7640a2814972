"""Unit tests for posenc.learned: learned absolute positions and token embeddings."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from posenc.learned import LearnedPositionalEncoding, TokenEmbedding

# ------------------------------------------------------------------------ LearnedPositionalEncoding


def test_learned_table_is_a_parameter_and_gets_gradient() -> None:
    module = LearnedPositionalEncoding(8, 12)
    assert isinstance(module.weight, nn.Parameter) and module.weight.requires_grad
    assert dict(module.named_parameters()).keys() == {"weight"}
    assert list(module.state_dict()) == ["weight"]
    x = torch.randn(3, 5, 8)
    module(x, offset=4).sum().backward()
    grad = module.weight.grad
    assert torch.equal(grad[4:9], torch.full((5, 8), 3.0))  # one contribution per batch element
    assert torch.equal(grad[:4], torch.zeros(4, 8)) and torch.equal(grad[9:], torch.zeros(3, 8))


def test_learned_init_std() -> None:
    torch.manual_seed(0)
    weight = LearnedPositionalEncoding(64, 1000).weight
    assert weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert abs(weight.mean().item()) < 1e-3


@pytest.mark.parametrize("offset", [0, 3, 7])
def test_learned_forward_and_offset(offset: int) -> None:
    module = LearnedPositionalEncoding(6, 12)
    x = torch.randn(2, 5, 6)
    assert torch.equal(module(x, offset=offset), x + module.weight[offset : offset + 5][None])


def test_learned_seq_first() -> None:
    module = LearnedPositionalEncoding(6, 12, batch_first=False)
    x = torch.randn(5, 2, 6)
    assert torch.equal(module(x), x + module.weight[:5, None])
    with pytest.raises(ValueError, match=r"sequence length 13\b.*max_len=12\b"):
        module(torch.randn(13, 2, 6))  # the sequence axis is 0 here, not the batch axis


def test_learned_full_table_fits() -> None:
    module = LearnedPositionalEncoding(4, 10)
    x = torch.zeros(1, 10, 4)
    assert torch.equal(module(x)[0], module.weight.detach())
    assert torch.equal(module(torch.zeros(1, 1, 4), offset=9)[0, 0], module.weight[9].detach())


def test_learned_negative_offset_names_offset() -> None:
    # A negative offset is a bad argument, not a sequence past max_len.
    module = LearnedPositionalEncoding(4, 10)
    with pytest.raises(ValueError, match=r"offset must be a non-negative integer, got -1"):
        module(torch.zeros(1, 2, 4), offset=-1)


@pytest.mark.parametrize(
    ("seq", "offset", "pattern"),
    [
        (11, 0, r"sequence length 11\b.*max_len=10\b"),
        (5, 6, r"positions 6\.\.10\b.*offset 6\b.*max_len=10\b"),
        (1, 10, r"sequence length 1\b.*offset 10\b.*max_len=10\b"),
    ],
)
def test_learned_past_max_len_raises(seq: int, offset: int, pattern: str) -> None:
    module = LearnedPositionalEncoding(4, 10)
    with pytest.raises(ValueError, match=pattern):
        module(torch.zeros(2, seq, 4), offset=offset)


def test_learned_dropout_and_dtype() -> None:
    torch.manual_seed(0)
    module = LearnedPositionalEncoding(16, 64, dropout=0.5)
    x = torch.ones(4, 64, 16)
    out = module(x)
    assert 0.4 < (out == 0).float().mean().item() < 0.6
    module.eval()
    assert torch.equal(module(x), x + module.weight.detach())
    assert module(x.double()).dtype == torch.float64


def test_learned_compiles_fullgraph() -> None:
    torch._dynamo.reset()
    module = LearnedPositionalEncoding(8, 16)
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    x = torch.randn(2, 6, 8)
    assert torch.equal(compiled(x, offset=2), module(x, offset=2))


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "pattern"),
    [
        ((0, 10), {}, ValueError, r"dim.*0"),
        ((8, 0), {}, ValueError, r"max_len.*0"),
        ((8, 2.5), {}, TypeError, r"max_len.*2\.5"),
        ((8, 10), {"dropout": 1.0}, ValueError, r"dropout.*1\.0"),
        ((8, 10), {"dropout": -0.1}, ValueError, r"dropout.*-0\.1"),
    ],
)
def test_learned_bad_constructor(args: tuple, kwargs: dict, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        LearnedPositionalEncoding(*args, **kwargs)


@pytest.mark.parametrize(
    ("x", "error", "pattern"),
    [
        (torch.zeros(5, 8), ValueError, r"x must be 3-D"),
        (torch.zeros(2, 5, 9), ValueError, r"x\.shape\[-1\] must equal dim=8"),
        (torch.zeros(2, 5, 8, dtype=torch.int32), TypeError, r"x must have a floating-point dtype"),
    ],
)
def test_learned_bad_input(x: torch.Tensor, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        LearnedPositionalEncoding(8, 10)(x)


# ----------------------------------------------------------------------------------- TokenEmbedding


def test_token_lookup_is_one_hot_matmul() -> None:
    embedding = TokenEmbedding(11, 6, scale=False)
    tokens = torch.tensor([[0, 3, 10], [7, 7, 1]])
    one_hot = F.one_hot(tokens, 11).to(embedding.weight.dtype)
    torch.testing.assert_close(embedding(tokens), one_hot @ embedding.weight)
    assert embedding(tokens).shape == (2, 3, 6)


def test_token_sqrt_dim_scale() -> None:
    torch.manual_seed(0)
    embedding = TokenEmbedding(1000, 64)
    tokens = torch.arange(1000)
    out = embedding(tokens)
    torch.testing.assert_close(out, embedding.weight * 8.0)
    # Initialised with std 1/sqrt(d), so the scaled vectors have unit scale.
    assert out.std().item() == pytest.approx(1.0, rel=0.05)
    assert math.isclose(embedding.weight.std().item(), 64**-0.5, rel_tol=0.05)


@pytest.mark.parametrize("padding_idx", [0, 4, -1])
def test_token_padding_row_is_zero_and_gets_no_gradient(padding_idx: int) -> None:
    embedding = TokenEmbedding(6, 4, padding_idx=padding_idx)
    row = padding_idx % 6
    assert torch.equal(embedding.weight[row], torch.zeros(4))
    assert embedding.weight.abs().sum() > 0
    tokens = torch.tensor([0, 1, 2, 3, 4, 5, row, row])
    out = embedding(tokens)
    assert torch.equal(out[-1], torch.zeros(4))
    (out * torch.randn_like(out)).sum().backward()
    grad = embedding.weight.grad
    assert torch.equal(grad[row], torch.zeros(4))
    others = [r for r in range(6) if r != row]
    assert (grad[others].abs().sum(dim=1) > 0).all()


@pytest.mark.parametrize("freeze", [False, True])
def test_token_from_pretrained(freeze: bool) -> None:
    weight = torch.randn(5, 3)
    weight[2] = 1.0  # a padding row is kept as given, not zeroed
    embedding = TokenEmbedding.from_pretrained(weight, padding_idx=2, scale=False, freeze=freeze)
    assert torch.equal(embedding.weight, weight)
    assert embedding.weight.requires_grad is (not freeze)
    weight.add_(1.0)  # a copy, not a view of the caller's tensor
    assert not torch.equal(embedding.weight, weight)
    tokens = torch.tensor([4, 2, 0])
    torch.testing.assert_close(embedding(tokens), (weight - 1.0)[tokens])
    scaled = TokenEmbedding.from_pretrained(weight, freeze=freeze)
    torch.testing.assert_close(scaled(tokens), weight[tokens] * math.sqrt(3))
    assert [p.requires_grad for p in scaled.parameters()] == [not freeze]


@pytest.mark.parametrize(
    "tokens",
    [torch.tensor([0.0, 1.0]), torch.tensor([1, 2], dtype=torch.float16), torch.tensor([True, False])],
)
def test_token_non_integer_tokens_raise(tokens: torch.Tensor) -> None:
    with pytest.raises(TypeError, match="tokens"):
        TokenEmbedding(4, 2)(tokens)


def test_token_non_tensor_raises() -> None:
    with pytest.raises(TypeError, match="tokens.*list"):
        TokenEmbedding(4, 2)([0, 1])


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "pattern"),
    [
        ((0, 4), {}, ValueError, r"vocab_size.*0"),
        ((-3, 4), {}, ValueError, r"vocab_size.*-3"),
        ((10, 0), {}, ValueError, r"dim.*0"),
        ((10, 4.0), {}, TypeError, r"dim.*4\.0"),
        ((10, 4), {"padding_idx": 10}, ValueError, r"padding_idx.*10"),
        ((10, 4), {"padding_idx": -11}, ValueError, r"padding_idx.*-11"),
        ((10, 4), {"padding_idx": 1.0}, TypeError, r"padding_idx"),
    ],
)
def test_token_bad_sizes(args: tuple, kwargs: dict, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenEmbedding(*args, **kwargs)


@pytest.mark.parametrize(
    ("weight", "error", "pattern"),
    [
        (torch.zeros(4, 3, dtype=torch.int64), TypeError, r"weight"),
        (torch.zeros(4), ValueError, r"weight must be 2-D"),
        (torch.zeros(2, 4, 3), ValueError, r"weight must be 2-D"),
    ],
)
def test_token_from_pretrained_bad_weight(weight: torch.Tensor, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        TokenEmbedding.from_pretrained(weight)


@pytest.mark.parametrize("value", [1, "no", None])
def test_flags_must_be_bools(value: object) -> None:
    with pytest.raises(TypeError, match="batch_first must be a bool"):
        LearnedPositionalEncoding(8, 16, batch_first=value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scale must be a bool"):
        TokenEmbedding(10, 8, scale=value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="freeze must be a bool"):
        TokenEmbedding.from_pretrained(torch.randn(10, 8), freeze=value)  # type: ignore[arg-type]
