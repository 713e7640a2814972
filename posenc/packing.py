"""Packed sequences: several documents in one row, each with its own positions.

Training code packs documents end to end to avoid padding. Each document must then see positions
that restart at 0 and only its own tokens. Two conventions describe a pack:

* ``cu_seqlens`` (flash-attn's ``flash_attn_varlen_func``): the cumulative lengths, an integer
  tensor ``(n_docs + 1,)`` that starts at 0 and ends at the pack's length;
* ``position_ids`` that restart at 0 in each document, as transformers'
  ``DataCollatorWithFlattening`` writes them.

:func:`~posenc.packed_position_ids` goes from the first to the second,
:func:`~posenc.cu_seqlens_from_position_ids` back, and :func:`~posenc.document_mask` builds the
attention mask that keeps documents apart.
"""

from __future__ import annotations

import torch

from posenc._checks import check_bool, check_integer_tensor, check_ndim

__all__ = ["cu_seqlens_from_position_ids", "document_ids", "document_mask", "packed_position_ids"]


def _check_cu_seqlens(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Raise unless ``cu_seqlens`` is a 1-D integer tensor that starts at 0 and never decreases."""
    check_integer_tensor("cu_seqlens", cu_seqlens)
    check_ndim("cu_seqlens", cu_seqlens, 1, "(n_docs + 1,)")
    if cu_seqlens.numel() < 2:
        raise ValueError(f"cu_seqlens needs at least 2 entries (0 and the pack's length), got {cu_seqlens.tolist()}")
    if int(cu_seqlens[0]) != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {int(cu_seqlens[0])}")
    lengths = cu_seqlens.diff()
    if bool((lengths < 0).any()):
        at = int((lengths < 0).nonzero()[0])
        raise ValueError(
            f"cu_seqlens must not decrease, got cu_seqlens[{at}] = {int(cu_seqlens[at])} > "
            f"cu_seqlens[{at + 1}] = {int(cu_seqlens[at + 1])}")
    return lengths


def document_ids(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """The document each token of a pack belongs to (transformers' ``seq_idx``).

    Parameters
    ----------
    cu_seqlens : torch.Tensor
        Integer ``(n_docs + 1,)``: 0, then the cumulative document lengths.

    Returns
    -------
    torch.Tensor
        int64 ``(total,)``, ``total = cu_seqlens[-1]``: ``d`` for every token of document ``d``
        (documents of length 0 have no token).

    Raises
    ------
    TypeError
        If ``cu_seqlens`` is not an integer tensor.
    ValueError
        If it is not 1-D, has fewer than 2 entries, does not start at 0, or decreases.

    References
    ----------
    Dao, "FlashAttention-2" (2023), the ``cu_seqlens`` argument of ``flash_attn_varlen_func``.
    """
    lengths = _check_cu_seqlens(cu_seqlens)
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=cu_seqlens.device), lengths.long())


def packed_position_ids(cu_seqlens: torch.Tensor) -> torch.Tensor:
    r"""Positions that restart at 0 in each document of a pack.

    Token :math:`t` of document :math:`d` gets :math:`t - c_d`, where :math:`c_d` =
    ``cu_seqlens[d]`` is the document's first token in the pack. These are the ``position_ids``
    of transformers' ``DataCollatorWithFlattening``; every position encoding then sees each
    document exactly as if it were alone.

    Parameters
    ----------
    cu_seqlens : torch.Tensor
        Integer ``(n_docs + 1,)``: 0, then the cumulative document lengths (flash-attn's
        convention).

    Returns
    -------
    torch.Tensor
        int64 ``(total,)`` with ``total = cu_seqlens[-1]``.

    Raises
    ------
    TypeError
        If ``cu_seqlens`` is not an integer tensor.
    ValueError
        If it is not 1-D, has fewer than 2 entries, does not start at 0, or decreases.

    References
    ----------
    Hugging Face transformers, ``DataCollatorWithFlattening``; Krell et al., "Efficient
    Sequence Packing without Cross-contamination" (2021).
    """
    docs = document_ids(cu_seqlens)
    starts = cu_seqlens.long()[:-1]
    return torch.arange(docs.numel(), device=cu_seqlens.device) - starts[docs]


def cu_seqlens_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """The ``cu_seqlens`` of a pack whose positions restart at 0 in each document.

    A document starts at every 0. Positions that neither restart at 0 nor continue the previous
    one by 1 (positions that keep counting across documents, or a gap) are an error: the pack
    they describe is ambiguous.

    Parameters
    ----------
    position_ids : torch.Tensor
        Integer ``(total,)``, or ``(1, total)`` as a collator returns it.

    Returns
    -------
    torch.Tensor
        int32 ``(n_docs + 1,)`` on the same device (flash-attn takes int32).

    Raises
    ------
    TypeError
        If ``position_ids`` is not an integer tensor.
    ValueError
        If it is not ``(total,)`` or ``(1, total)``, is empty, does not start at 0, or a
        position is neither 0 nor the previous one plus 1.

    References
    ----------
    Hugging Face transformers, ``prepare_fa_kwargs_from_position_ids``.
    """
    check_integer_tensor("position_ids", position_ids)
    if position_ids.ndim == 2 and position_ids.shape[0] == 1:
        position_ids = position_ids[0]  # (1, total) -> (total,)
    check_ndim("position_ids", position_ids, 1, "(total,) or (1, total)")
    if position_ids.numel() == 0:
        raise ValueError("position_ids is empty: a pack needs at least one token")
    if int(position_ids[0]) != 0:
        raise ValueError(f"position_ids must start at 0 (a document's first token), got {int(position_ids[0])}")
    steps = position_ids.diff()
    bad = (position_ids[1:] != 0) & (steps != 1)
    if bool(bad.any()):
        at = int(bad.nonzero()[0]) + 1
        raise ValueError(
            f"position_ids[{at}] = {int(position_ids[at])} follows {int(position_ids[at - 1])}: positions must "
            f"restart at 0 in each document and count up by 1")
    starts = (position_ids == 0).nonzero().flatten()
    end = torch.tensor([position_ids.numel()], device=position_ids.device)
    return torch.cat([starts, end]).to(torch.int32)


def document_mask(cu_seqlens: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    r"""Which tokens of a pack may attend to which: only within their own document.

    .. math::

        M_{ij} = [\,d_i = d_j\,] \wedge [\,j \le i\,] \quad\text{(causal)}, \qquad
        M_{ij} = [\,d_i = d_j\,] \quad\text{(bidirectional)},

    where :math:`d_i` is token :math:`i`'s document. With this mask and
    :func:`~posenc.packed_position_ids`, a packed batch gives each document the logits it gets alone.

    Parameters
    ----------
    cu_seqlens : torch.Tensor
        Integer ``(n_docs + 1,)``: 0, then the cumulative document lengths.
    causal : bool, optional
        Also hide later tokens of the same document (default ``True``).

    Returns
    -------
    torch.Tensor
        bool ``(total, total)``, ``True`` where attention is allowed (the convention of
        ``torch.nn.functional.scaled_dot_product_attention``'s boolean ``attn_mask``).

    Raises
    ------
    TypeError
        If ``cu_seqlens`` is not an integer tensor, or ``causal`` is not a bool.
    ValueError
        If ``cu_seqlens`` is not 1-D, has fewer than 2 entries, does not start at 0, or decreases.

    References
    ----------
    Krell et al., "Efficient Sequence Packing without Cross-contamination" (2021).
    """
    check_bool("causal", causal)
    docs = document_ids(cu_seqlens)
    mask = docs[:, None] == docs[None, :]  # (total, total)
    if causal:
        mask = mask.tril()
    return mask
