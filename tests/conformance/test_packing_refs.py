"""Packing conventions against transformers 5.x: its collator, flash-attn kwargs and packed-mask helper."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers import DataCollatorWithFlattening  # noqa: E402
from transformers.masking_utils import find_packed_sequence_indices  # noqa: E402
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids  # noqa: E402

from posenc import cu_seqlens_from_position_ids, document_ids, document_mask, packed_position_ids  # noqa: E402

LENGTHS = [3, 1, 5, 2]


def _collated() -> dict:
    features = [{"input_ids": list(range(100, 100 + n))} for n in LENGTHS]
    return DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)(features, return_tensors="pt")


def test_collator_positions_and_cu_seqlens() -> None:
    batch = _collated()
    cu = batch["cu_seq_lens_q"]
    assert cu.tolist() == [0, 3, 4, 9, 11]
    assert torch.equal(packed_position_ids(cu), batch["position_ids"][0])
    assert torch.equal(cu_seqlens_from_position_ids(batch["position_ids"]), cu.to(torch.int32))
    assert torch.equal(document_ids(cu), batch["seq_idx"][0].long())


def test_flash_attention_kwargs_from_positions() -> None:
    positions = packed_position_ids(torch.tensor([0, 3, 4, 9, 11]))
    (cu_q, cu_k), (max_q, _) = prepare_fa_kwargs_from_position_ids(positions[None])
    assert torch.equal(cu_seqlens_from_position_ids(positions), cu_q) and torch.equal(cu_q, cu_k)
    assert int(max_q) == max(LENGTHS)


def test_document_mask_matches_packed_sequence_indices() -> None:
    cu = torch.tensor([0, 3, 4, 9, 11])
    (docs,) = find_packed_sequence_indices(packed_position_ids(cu)[None])
    same = docs[:, None] == docs[None, :]
    assert torch.equal(document_mask(cu, causal=False), same)
    assert torch.equal(document_mask(cu), same.tril())
