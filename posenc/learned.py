"""Learned absolute position embeddings and token embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._positions import check_token_positions
from posenc._checks import (
    check_bool,
    check_floating_tensor,
    check_int,
    check_integer_tensor,
    check_last_dim,
    check_ndim,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
)

__all__ = ["LearnedPositionalEncoding", "TokenEmbedding"]


class LearnedPositionalEncoding(nn.Module):
    r"""Adds a trained table of position vectors to its input, then applies dropout.

    ``forward(x) = dropout(x + P[offset : offset + seq])`` where ``P`` is an
    ``nn.Parameter`` of shape ``(max_len, dim)`` initialised from :math:`\mathcal{N}(0, 0.02^2)`
    (as BERT and GPT-2). Unlike the sinusoidal table it has no rows past ``max_len``: a longer
    sequence raises ``ValueError``.

    Parameters
    ----------
    dim : int
        Model width; the last dimension of the input.
    max_len : int
        Number of positions with a trained vector.
    dropout : float, optional
        Dropout probability applied after the addition.
    batch_first : bool, optional
        Input is ``(batch, seq, dim)`` if true, ``(seq, batch, dim)`` otherwise.

    References
    ----------
    Gehring et al., "Convolutional Sequence to Sequence Learning", ICML 2017;
    Devlin et al., "BERT", NAACL 2019.
    """

    def __init__(self, dim: int, max_len: int, *, dropout: float = 0.0, batch_first: bool = True) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        self.max_len = check_positive_int("max_len", max_len)
        self.batch_first = check_bool("batch_first", batch_first)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.weight = nn.Parameter(torch.empty(max_len, dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Draw the table from :math:`\mathcal{N}(0, 0.02^2)`."""
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor, *, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Add the vectors of positions ``offset … offset + seq - 1``, or of ``positions``, to ``x``.

        Parameters
        ----------
        x : torch.Tensor
            ``(batch, seq, dim)``, or ``(seq, batch, dim)`` when ``batch_first=False``.
        offset : int, optional
            Position of the first token.
        positions : torch.Tensor, optional
            Integer positions of the tokens in ``0 … max_len - 1``, ``(batch or 1, seq)``
            (``(seq, batch or 1)`` when ``batch_first=False``). Not with ``offset``.

        Returns
        -------
        torch.Tensor
            Same shape as ``x``.

        Raises
        ------
        ValueError
            If a position is negative or at least ``max_len``: the table has no vector for it.
        """
        layout = "(batch, seq, dim)" if self.batch_first else "(seq, batch, dim)"
        check_floating_tensor("x", x)
        check_ndim("x", x, 3, layout)
        check_last_dim("x", x, self.dim)
        offset = check_nonnegative_int("offset", offset)
        if positions is not None:
            positions = check_token_positions(positions, x, self.batch_first, offset)
            if int(positions.max()) >= self.max_len:
                raise ValueError(
                    f"position {int(positions.max())} is past the learned table (max_len={self.max_len}); "
                    "a learned table has no vectors past max_len"
                )
            return self.dropout(x + self.weight[positions].to(x.dtype))  # (.., .., dim), aligned with x
        seq_len = x.shape[1 if self.batch_first else 0]
        if offset + seq_len > self.max_len:
            raise ValueError(
                f"positions {offset}..{offset + seq_len - 1} (sequence length {seq_len}, offset {offset}) "
                f"exceed max_len={self.max_len} of the learned table; a learned table has no "
                f"vectors past max_len"
            )
        pe = self.weight[offset : offset + seq_len].to(x.dtype)
        pe = pe.unsqueeze(0) if self.batch_first else pe.unsqueeze(1)
        return self.dropout(x + pe)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_len={self.max_len}, batch_first={self.batch_first}"


class TokenEmbedding(nn.Module):
    r"""Lookup table from token ids to vectors, scaled by :math:`\sqrt{d}`.

    .. math:: \text{forward}(t) = E[t] \cdot \sqrt{d} \quad (\text{or } E[t] \text{ if not scale})

    Looking up row ``t`` is the same as multiplying the one-hot vector of ``t`` by ``E``.
    The :math:`\sqrt{d}` factor (Vaswani et al., section 3.4) brings embeddings initialised with
    standard deviation :math:`1/\sqrt{d}` to unit scale, the scale of a sinusoidal encoding.

    Parameters
    ----------
    vocab_size : int
        Number of rows of the table.
    dim : int
        Embedding width.
    padding_idx : int, optional
        Row kept at zero and excluded from gradients.
    scale : bool, optional
        Multiply by :math:`\sqrt{d}`.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.4.
    """

    def __init__(
        self, vocab_size: int, dim: int, *, padding_idx: int | None = None, scale: bool = True
    ) -> None:
        super().__init__()
        vocab_size = check_positive_int("vocab_size", vocab_size)
        self.dim = check_positive_int("dim", dim)
        if padding_idx is not None:
            padding_idx = check_int("padding_idx", padding_idx)
            if not -vocab_size <= padding_idx < vocab_size:
                raise ValueError(f"padding_idx must be in [-{vocab_size}, {vocab_size}), got {padding_idx}")
        self.scale = check_bool("scale", scale)
        # ``_weight`` skips nn.Embedding's own initialisation; reset_parameters() does ours.
        self.embedding = nn.Embedding(
            vocab_size, dim, padding_idx=padding_idx, _weight=torch.empty(vocab_size, dim)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Draw the table from :math:`\mathcal{N}(0, 1/d)` and zero the padding row."""
        # Standard deviation 1/sqrt(d): after the sqrt(d) scale, entries have unit variance.
        nn.init.normal_(self.embedding.weight, std=self.dim**-0.5)
        if self.embedding.padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[self.embedding.padding_idx].zero_()

    @property
    def weight(self) -> torch.Tensor:
        """The ``(vocab_size, dim)`` table."""
        return self.embedding.weight

    @classmethod
    def from_pretrained(
        cls,
        weight: torch.Tensor,
        *,
        padding_idx: int | None = None,
        scale: bool = True,
        freeze: bool = False,
    ) -> TokenEmbedding:
        """Build from an existing ``(vocab_size, dim)`` table (e.g. word2vec or GloVe vectors).

        Parameters
        ----------
        weight : torch.Tensor
            Floating ``(vocab_size, dim)`` table, copied.
        padding_idx : int, optional
            As in the constructor; that row of ``weight`` is kept as given.
        scale : bool, optional
            Multiply by :math:`\\sqrt{d}` in ``forward``.
        freeze : bool, optional
            Exclude the table from training.

        Returns
        -------
        TokenEmbedding
        """
        check_floating_tensor("weight", weight)
        check_ndim("weight", weight, 2, "(vocab_size, dim)")
        module = cls(weight.shape[0], weight.shape[1], padding_idx=padding_idx, scale=scale)
        with torch.no_grad():
            module.embedding.weight.copy_(weight)
        module.embedding.weight.requires_grad_(not check_bool("freeze", freeze))
        return module

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Look up ``tokens``.

        Parameters
        ----------
        tokens : torch.Tensor
            Integer ids of any shape.

        Returns
        -------
        torch.Tensor
            ``(*tokens.shape, dim)``.
        """
        check_integer_tensor("tokens", tokens)
        out = self.embedding(tokens)
        return out * math.sqrt(self.dim) if self.scale else out

    def extra_repr(self) -> str:
        return f"scale={self.scale}"
