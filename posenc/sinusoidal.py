"""Sinusoidal positional encoding (Vaswani et al., 2017) in its three common column orders."""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._cache import RecomputedOnCast, cached_rows
from posenc._checks import (
    check_bool,
    check_choice,
    check_float_dtype,
    check_int,
    check_integer_tensor,
    check_last_dim,
    check_floating_tensor,
    check_ndim,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from posenc._dtypes import round_once
from posenc._positions import check_token_positions
from posenc._frequencies import inverse_frequencies

__all__ = ["SINUSOIDAL_STYLES", "sinusoidal_frequencies", "sinusoidal_table", "SinusoidalPositionalEncoding"]

#: Column orders accepted by :func:`sinusoidal_table`.
SINUSOIDAL_STYLES = ("interleaved", "concat", "tensor2tensor")


def sinusoidal_frequencies(
    dim: int, *, base: float = 10000.0, style: str = "interleaved", device: torch.device | str | None = None
) -> torch.Tensor:
    r"""Angular frequencies of a sinusoidal table, in float64.

    For ``"interleaved"`` and ``"concat"``, :math:`\omega_i = \text{base}^{-2i/d}` for
    :math:`i = 0 \dots \lceil d/2 \rceil - 1`. For ``"tensor2tensor"``, :math:`n = \lfloor d/2 \rfloor`
    timescales geometric from 1 to ``base``: :math:`\omega_i = \exp(-i \ln(\text{base}) / \max(n-1, 1))`.

    Parameters
    ----------
    dim : int
        Width of the table.
    base : float, optional
        The longest wavelength is :math:`2\pi \cdot \text{base}` (approached, not reached;
        ``"tensor2tensor"`` reaches it when ``dim >= 4``).
    style : str, optional
        One of ``"interleaved"``, ``"concat"``, ``"tensor2tensor"``.
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        Float64 tensor of shape ``(ceil(dim/2),)`` (``(dim//2,)`` for ``"tensor2tensor"``).
    """
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    check_choice("style", style, SINUSOIDAL_STYLES)
    if style == "tensor2tensor":
        n = dim // 2
        log_inc = math.log(base) / max(n - 1, 1)
        return torch.exp(torch.arange(n, dtype=torch.float64, device=device) * -log_inc)
    return inverse_frequencies(dim, base, device=device)


def sinusoidal_table(
    length: int | torch.Tensor,
    dim: int,
    *,
    base: float = 10000.0,
    style: str = "interleaved",
    offset: int = 0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Sinusoidal encodings of positions ``offset … offset + length - 1``, or of given positions.

    The ``"interleaved"`` style is the formula of the paper:

    .. math::

        PE_{p, 2i} = \sin\!\left(p / \text{base}^{2i/d}\right), \qquad
        PE_{p, 2i+1} = \cos\!\left(p / \text{base}^{2i/d}\right).

    ``"concat"`` holds the same numbers with all sines first, then all cosines.
    ``"tensor2tensor"`` spaces :math:`\lfloor d/2 \rfloor` frequencies geometrically from 1 to
    :math:`1/\text{base}` (so they differ slightly from the paper's) and is ``[sin | cos]``, with a
    zero column appended when ``dim`` is odd.

    Angles are computed in float64 and rounded once to ``dtype``.

    Parameters
    ----------
    length : int or torch.Tensor
        Number of positions (rows), or an integer tensor of positions of any shape (restarted
        positions of a packed batch, say; negative ones are allowed: the formula holds for them).
    dim : int
        Encoding width (columns). Odd widths are allowed: in ``"interleaved"`` and ``"concat"``
        the extra column is a sine.
    base : float, optional
        Wavelength base, ``10000`` in the paper.
    style : str, optional
        Column order: ``"interleaved"``, ``"concat"`` or ``"tensor2tensor"``.
    offset : int, optional
        Position of the first row; lengths only.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result (default: the positions' device, or the default device for a
        length).

    Returns
    -------
    torch.Tensor
        ``(length, dim)``, or ``(*positions.shape, dim)``.

    Raises
    ------
    TypeError
        If positions are not integers.
    ValueError
        If ``offset`` is given with positions.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """
    offset = check_int("offset", offset)
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    if isinstance(length, torch.Tensor):
        check_integer_tensor("positions", length)
        if offset:
            raise ValueError(f"offset applies to a length only; add it to the positions, got offset={offset}")
        device = length.device if device is None else device
        positions = length.to(device=device, dtype=torch.float64)
    else:
        length = check_positive_int("length", length)
        positions = torch.arange(offset, offset + length, dtype=torch.float64, device=device)
    freqs = sinusoidal_frequencies(dim, base=base, style=style, device=device)
    angles = positions[..., None] * freqs  # (..., n_sin)
    n_sin, n_cos = freqs.shape[0], dim // 2
    # Rounding is elementwise, so rounding sin and cos before placing them gives the same numbers
    # as rounding a finished float64 table, without building one (about 2x faster on CPU).
    sin = round_once(angles.sin(), dtype)
    cos = round_once(angles[..., :n_cos].cos_(), dtype)  # in place: ``angles`` is not needed again
    table = torch.empty(*positions.shape, dim, dtype=dtype, device=device)
    if style == "interleaved":
        table[..., 0::2] = sin
        table[..., 1::2] = cos
    else:
        table[..., :n_sin] = sin
        table[..., n_sin : n_sin + n_cos] = cos
        table[..., n_sin + n_cos :] = 0.0  # tensor2tensor pads an odd ``dim`` with one zero column
    return table


class SinusoidalPositionalEncoding(RecomputedOnCast):
    r"""Adds a fixed sinusoidal table to its input, then applies dropout.

    ``forward(x) = dropout(x + PE[offset : offset + seq])``. The table is a buffer (saved in the
    ``state_dict`` and moved by ``.to()``) and grows when a longer sequence arrives: the formula
    holds for every position, so there is no limit and no truncation.

    Loading a ``state_dict`` accepts a table of any length (a grown one) whose values are this
    module's up to rounding, and refuses, at load time, a table of another width (PyTorch's size
    mismatch error) or of another ``style`` or ``base``. :meth:`reset_parameters` recomputes the
    table, as after ``to_empty()`` from the meta device.

    Parameters
    ----------
    dim : int
        Model width; the last dimension of the input.
    max_len : int, optional
        Number of positions computed up front.
    dropout : float, optional
        Dropout probability applied after the addition.
    base : float, optional
        Wavelength base.
    style : str, optional
        Column order, see :func:`sinusoidal_table`.
    batch_first : bool, optional
        Input is ``(batch, seq, dim)`` if true, ``(seq, batch, dim)`` otherwise.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """

    pe: torch.Tensor
    _cast_buffer = "pe"

    def __init__(
        self,
        dim: int,
        *,
        max_len: int = 5000,
        dropout: float = 0.0,
        base: float = 10000.0,
        style: str = "interleaved",
        batch_first: bool = True,
    ) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        self.base = check_positive_float("base", base)
        self.style = check_choice("style", style, SINUSOIDAL_STYLES)
        self.batch_first = check_bool("batch_first", batch_first)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        max_len = check_positive_int("max_len", max_len)
        self.register_buffer("pe", torch.empty(max_len, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Recompute the table in place, at its current length, dtype and device."""
        with torch.no_grad():
            self.pe.copy_(self._rows(0, self.pe.shape[0])[0])

    def _rows(self, start: int, end: int) -> tuple[torch.Tensor]:
        table = sinusoidal_table(
            end - start, self.dim, base=self.base, style=self.style, offset=start,
            dtype=self.pe.dtype, device=self.pe.device,
        )
        return (table,)

    def forward(self, x: torch.Tensor, *, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Add the encodings of positions ``offset … offset + seq - 1``, or of ``positions``, to ``x``.

        Parameters
        ----------
        x : torch.Tensor
            ``(batch, seq, dim)``, or ``(seq, batch, dim)`` when ``batch_first=False``.
        offset : int, optional
            Position of the first token (e.g. when decoding step by step).
        positions : torch.Tensor, optional
            Non-negative integer positions of the tokens, ``(batch or 1, seq)`` (``(seq, batch or
            1)`` when ``batch_first=False``): positions that restart in each document of a packed
            batch, or that skip padding. Not with ``offset``.

        Returns
        -------
        torch.Tensor
            Same shape and dtype as ``x``.
        """
        layout = "(batch, seq, dim)" if self.batch_first else "(seq, batch, dim)"
        check_floating_tensor("x", x)
        check_ndim("x", x, 3, layout)
        check_last_dim("x", x, self.dim)
        offset = check_int("offset", offset)
        if positions is not None:
            positions = check_token_positions(positions, x, self.batch_first, offset)
            (table,) = cached_rows(self, ("pe",), 0, int(positions.max()) + 1, self._rows)
            return self.dropout(x + table[positions].to(x.dtype))  # (.., .., dim), aligned with x
        seq_axis = 1 if self.batch_first else 0
        (pe,) = cached_rows(self, ("pe",), offset, offset + x.shape[seq_axis], self._rows)
        pe = pe.to(x.dtype)
        pe = pe.unsqueeze(0) if self.batch_first else pe.unsqueeze(1)  # (seq, dim) -> broadcast over batch
        return self.dropout(x + pe)

    def _load_from_state_dict(  # type: ignore[no-untyped-def]
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        saved = state_dict.get(prefix + "pe")
        before = self.pe.detach().clone()  # loading copies into the buffer in place
        if (
            isinstance(saved, torch.Tensor)
            and saved.ndim == 2
            and saved.shape[1] == self.dim
            and saved.shape[0] != self.pe.shape[0]
        ):
            # A saved table may have grown past max_len: take its length. Any other shape is
            # left to nn.Module, which reports the size mismatch.
            self.pe = torch.empty(saved.shape, dtype=self.pe.dtype, device=self.pe.device)
        n_errors = len(error_msgs)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        if len(error_msgs) > n_errors:
            self.pe = before
        elif isinstance(saved, torch.Tensor) and self.pe.shape == saved.shape:
            problem = self._mismatch(saved)
            if problem is not None:
                self.pe = before
                error_msgs.append(problem)

    def _mismatch(self, saved: torch.Tensor) -> str | None:
        """Why ``saved`` is not this module's table (``None`` if it is, up to rounding)."""
        if saved.is_meta or not saved.dtype.is_floating_point:
            return None
        expected = sinusoidal_table(
            saved.shape[0], self.dim, base=self.base, style=self.style,
            dtype=torch.float64, device=saved.device,
        )
        error = (saved.to(torch.float64) - expected).abs().nan_to_num(nan=float("inf"))
        # Entries lie in [-1, 1]: one unit in the last place of the saved dtype is at most eps.
        tolerance = torch.finfo(saved.dtype).eps
        worst = float(error.max())
        if worst <= tolerance:
            return None
        row = int(error.amax(dim=1).argmax())
        return (
            f"pe: the saved table is not the sinusoidal table of this module (dim={self.dim}, "
            f"base={self.base:g}, style={self.style!r}): it differs by {worst:.3g} at row {row}, "
            f"more than rounding ({tolerance:.3g}); was it saved with another style or base?"
        )

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, max_len={self.pe.shape[0]}, base={self.base:g}, "
            f"style={self.style!r}, batch_first={self.batch_first}"
        )
