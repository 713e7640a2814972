"""A packed batch through posenc.models: the same logits and loss as its documents one by one."""

from __future__ import annotations

import pytest
import torch

from posenc import document_mask, packed_position_ids
from posenc.models import POSITIONS, CausalLM, KVCache, Transformer, TransformerConfig

VOCAB, DIM, HEADS = 13, 16, 2
LENGTHS = (5, 3, 7)
ABSOLUTE = ("sinusoidal", "learned")  # the encodings that read a token's own position


def model(position: str, causal: bool = True) -> torch.nn.Module:
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, dim=DIM, num_heads=HEADS, num_layers=2, max_len=32,
                               position=position, causal=causal)
    net = (CausalLM(config) if causal else Transformer(config)).double().eval()
    with torch.no_grad():  # no parameter left at an exact zero or one (CoPE's table, biases)
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return net


def documents(seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=g) for n in LENGTHS]


def pack(docs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(1, total)`` and ``cu_seqlens``."""
    cu_seqlens = torch.tensor([0, *torch.tensor([len(d) for d in docs]).cumsum(0).tolist()])
    return torch.cat(docs)[None], cu_seqlens


def alone(net: torch.nn.Module, docs: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([net(d[None])[0] for d in docs])


def packed(net: torch.nn.Module, docs: list[torch.Tensor], causal: bool = True, *,
           positions: str = "restart", mask: bool = True) -> torch.Tensor:
    tokens, cu_seqlens = pack(docs)
    position_ids = packed_position_ids(cu_seqlens) if positions == "restart" else torch.arange(tokens.shape[1])
    allowed = document_mask(cu_seqlens, causal=causal) if mask else None
    return net(tokens, position_ids=position_ids[None], document_mask=allowed)[0]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("position", POSITIONS)
def test_a_pack_gives_each_document_its_own_logits(position: str, causal: bool) -> None:
    net = model(position, causal)
    docs = documents()
    torch.testing.assert_close(packed(net, docs, causal), alone(net, docs), rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", POSITIONS)
def test_a_pack_gives_each_document_its_own_loss(position: str) -> None:
    net = model(position)
    docs = documents(seed=1)
    targets = torch.cat([d[1:] for d in docs])
    # Drop each document's last prediction: it would score the next document's first token.
    last = torch.tensor(LENGTHS).cumsum(0) - 1
    keep = torch.ones(sum(LENGTHS), dtype=torch.bool)
    keep[last] = False
    loss_packed = torch.nn.functional.cross_entropy(packed(net, docs)[keep], targets)
    loss_alone = torch.nn.functional.cross_entropy(alone(net, docs)[keep], targets)
    torch.testing.assert_close(loss_packed, loss_alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("position", POSITIONS)
def test_two_identical_documents_in_one_pack_get_identical_logits(position: str) -> None:
    net = model(position)
    doc = documents()[2]
    logits = packed(net, [doc, documents(seed=3)[0], doc])
    n = len(doc)
    torch.testing.assert_close(logits[:n], logits[-n:], rtol=0, atol=1e-10)


@pytest.mark.parametrize("position", POSITIONS)
def test_positions_that_keep_counting_break_the_absolute_encodings_only(position: str) -> None:
    # Counting on shifts every position of a later document by the same amount: a relative
    # encoding (and NoPE, CoPE) sees the same distances, an absolute table other rows.
    net = model(position)
    docs = documents()
    error = (packed(net, docs, positions="count") - alone(net, docs)).abs().max()
    if position in ABSOLUTE:
        assert error > 1e-3
    else:
        assert error < 1e-10


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("position", POSITIONS)
def test_documents_that_see_each_other_change_every_encoding(position: str, causal: bool) -> None:
    net = model(position, causal)
    docs = documents()
    first = LENGTHS[0]
    leaked = packed(net, docs, causal, mask=False)
    expected = alone(net, docs)
    # The first document sees nothing new under a causal mask; every later one does.
    if causal:
        torch.testing.assert_close(leaked[:first], expected[:first], rtol=0, atol=1e-10)
    assert (leaked[first:] - expected[first:]).abs().max() > 1e-3


@pytest.mark.parametrize("position", POSITIONS)
def test_a_pack_decoded_with_a_cache_equals_the_full_pass(position: str) -> None:
    net = model(position)
    tokens, cu_seqlens = pack(documents())
    position_ids = packed_position_ids(cu_seqlens)[None]
    allowed = document_mask(cu_seqlens)
    full = net(tokens, position_ids=position_ids, document_mask=allowed)
    cache, split = KVCache(), 6  # inside the second document
    head = net(tokens[:, :split], position_ids=position_ids[:, :split], document_mask=allowed[:split, :split], cache=cache)
    tail = net(tokens[:, split:], position_ids=position_ids[:, split:], document_mask=allowed[split:], cache=cache)
    torch.testing.assert_close(torch.cat([head, tail], dim=1), full, rtol=0, atol=1e-10)


def test_a_batch_of_packs_takes_one_mask_per_row() -> None:
    net = model("rope")
    docs_a, docs_b = documents(0), documents(1)[::-1]
    (tokens_a, cu_a), (tokens_b, cu_b) = pack(docs_a), pack(docs_b)
    tokens = torch.cat([tokens_a, tokens_b])
    positions = torch.stack([packed_position_ids(cu_a), packed_position_ids(cu_b)])
    masks = torch.stack([document_mask(cu_a), document_mask(cu_b)])
    logits = net(tokens, position_ids=positions, document_mask=masks)
    torch.testing.assert_close(logits[0], alone(net, docs_a), rtol=0, atol=1e-10)
    torch.testing.assert_close(logits[1], alone(net, docs_b), rtol=0, atol=1e-10)


def test_bad_document_masks_are_refused() -> None:
    net = model("alibi")
    tokens, cu_seqlens = pack(documents())
    total = tokens.shape[1]
    with pytest.raises(TypeError, match=r"document_mask must be a bool torch.Tensor \(True where a query may see a key"):
        net(tokens, document_mask=document_mask(cu_seqlens).long())
    with pytest.raises(TypeError, match="document_mask must be a bool torch.Tensor .*got list"):
        net(tokens, document_mask=[[True]])
    with pytest.raises(ValueError, match=rf"document_mask must have shape \(seq, cached \+ seq\) = \({total}, {total}\) "
                                         rf"or \(batch, seq, cached \+ seq\) = \(1, {total}, {total}\), got \(2, {total}, {total}\)"):
        net(tokens, document_mask=document_mask(cu_seqlens)[None].expand(2, -1, -1))
    with pytest.raises(ValueError, match=rf"got \({total}, {total + 1}\)"):
        net(tokens, document_mask=torch.ones(total, total + 1, dtype=torch.bool))
