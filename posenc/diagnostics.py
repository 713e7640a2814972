"""Checks for debugging a positional-encoding table: similarity, rotation, collisions, sanity.

Every function accepts a table of any floating dtype and computes in float64, so the diagnosis
is not blurred by the precision it is diagnosing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from posenc._dtypes import round_once
from posenc._checks import (
    check_choice,
    check_even,
    check_finite,
    check_float_dtype,
    check_floating_tensor,
    check_int,
    check_ndim,
    check_positive_float,
    check_positive_int,
)
from posenc.sinusoidal import SINUSOIDAL_STYLES, sinusoidal_frequencies, sinusoidal_table

__all__ = [
    "SIMILARITY_METRICS",
    "similarity_matrix",
    "relative_rotation",
    "dot_product_by_offset",
    "PairDistance",
    "min_pairwise_distance",
    "Collisions",
    "collisions",
    "TableReport",
    "check_table",
]

#: Metrics accepted by :func:`similarity_matrix`.
SIMILARITY_METRICS = ("cosine", "dot", "euclidean")

_TABLE_LAYOUT = "(length, dim)"


def _table64(pe: torch.Tensor) -> torch.Tensor:
    check_floating_tensor("pe", pe)
    check_ndim("pe", pe, 2, _TABLE_LAYOUT)
    return pe.to(torch.float64)


def similarity_matrix(pe: torch.Tensor, metric: str = "cosine") -> torch.Tensor:
    r"""Pairwise similarity of the rows of a table, the usual heat-map of an encoding.

    .. math::

        S^{\text{cosine}}_{pq} = \frac{PE_p \cdot PE_q}{\lVert PE_p \rVert \lVert PE_q \rVert},
        \qquad S^{\text{dot}}_{pq} = PE_p \cdot PE_q,
        \qquad S^{\text{euclidean}}_{pq} = \lVert PE_p - PE_q \rVert.

    Parameters
    ----------
    pe : torch.Tensor
        Table ``(length, dim)`` of any floating dtype.
    metric : str, optional
        ``"cosine"``, ``"dot"`` or ``"euclidean"`` (a distance: 0 on the diagonal). A zero row
        has cosine similarity 0 with every row.

    Returns
    -------
    torch.Tensor
        Float64 ``(length, length)``, symmetric.
    """
    check_choice("metric", metric, SIMILARITY_METRICS)
    x = _table64(pe)
    if metric == "euclidean":
        # The direct difference, not the |a|^2 + |b|^2 - 2ab shortcut that cancels for close rows.
        return torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")
    if metric == "cosine":
        x = torch.nn.functional.normalize(x, dim=-1)
    return x @ x.T


def relative_rotation(
    k: int,
    dim: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The matrix that moves an interleaved sinusoidal encoding ``k`` positions along.

    For the ``"interleaved"`` table of :func:`~posenc.sinusoidal_table`,
    :math:`PE_{p+k} = PE_p \, M(k)` for every position :math:`p`, where :math:`M(k)` is
    block-diagonal with one rotation per frequency :math:`\omega_i = \text{base}^{-2i/d}`:

    .. math::

        M(k) = \operatorname{diag}\bigl(R(k\omega_0), \dots, R(k\omega_{d/2-1})\bigr), \qquad
        R(\theta) = \begin{pmatrix} \cos\theta & -\sin\theta \\ \sin\theta & \cos\theta \end{pmatrix}.

    :math:`M(k)` depends on the offset only, which is why the paper expected the model to attend
    by relative position easily.

    Parameters
    ----------
    k : int
        Offset (may be negative; :math:`M(-k) = M(k)^\top`).
    dim : int
        Encoding width; must be even (an odd table's last sine has no cosine partner).
    base : float, optional
        Wavelength base of the table.
    dtype : torch.dtype, optional
        Floating dtype of the result (default: ``torch.get_default_dtype()``).
    device : torch.device or str, optional
        Device of the result.

    Returns
    -------
    torch.Tensor
        ``(dim, dim)``, orthogonal.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """
    k = check_int("k", k)
    dim = check_even("dim", check_positive_int("dim", dim))
    dtype = check_float_dtype("dtype", dtype) or torch.get_default_dtype()
    angles = k * sinusoidal_frequencies(dim, base=base, device=device)
    cos, sin = torch.cos(angles), torch.sin(angles)
    blocks = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    return round_once(torch.block_diag(*blocks), dtype)


def dot_product_by_offset(pe: torch.Tensor) -> torch.Tensor:
    r"""Mean dot product of encodings ``k`` positions apart, for every offset ``k``.

    .. math::

        D(k) = \frac{1}{L - k} \sum_{p=0}^{L-1-k} PE_p \cdot PE_{p+k}, \qquad k = 0 \dots L-1.

    For the even-width sinusoidal table every term equals :math:`\sum_i \cos(k\,\omega_i)`: the
    dot product depends on the offset only. Computed per column with an FFT
    (autocorrelation), so a long table needs no ``(L, L)`` matrix.

    Parameters
    ----------
    pe : torch.Tensor
        Table ``(length, dim)`` of any floating dtype.

    Returns
    -------
    torch.Tensor
        Float64 ``(length,)``.
    """
    x = _table64(pe)
    length = x.shape[0]
    # Zero-padding to 2L makes the circular correlation a linear one.
    spectrum = torch.fft.rfft(x, n=2 * length, dim=0)
    corr = torch.fft.irfft(spectrum.abs().square().sum(dim=1), n=2 * length)[:length]
    counts = torch.arange(length, 0, -1, dtype=torch.float64, device=x.device)
    return corr / counts


class PairDistance(NamedTuple):
    """Result of :func:`min_pairwise_distance`: the distance and the pair ``i < j``.

    Parameters
    ----------
    distance : float
        Euclidean distance between rows ``i`` and ``j``.
    i : int
        The first row.
    j : int
        The second row, ``j > i``.
    """

    distance: float
    i: int
    j: int


def min_pairwise_distance(pe: torch.Tensor, *, chunk_size: int | None = None) -> PairDistance:
    r"""The two closest distinct rows of a table: how far apart the nearest positions are.

    .. math::

        \min_{i < j} \lVert PE_i - PE_j \rVert

    Rows are compared a block at a time, so memory stays ``O(chunk_size * length)`` (a
    100 000-row table never needs a 100 000 x 100 000 matrix); time is still quadratic.
    Candidates from the fast ``|a|^2 + |b|^2 - 2ab`` form are re-measured exactly.

    Parameters
    ----------
    pe : torch.Tensor
        Finite table ``(length, dim)`` of any floating dtype, ``length >= 2``.
    chunk_size : int, optional
        Rows per block (default: about 4 million distances per block).

    Returns
    -------
    PairDistance
        ``(distance, i, j)`` with ``i < j``; the first such pair in row-major order on ties.
        ``distance == 0`` means two positions share one encoding.

    Raises
    ------
    ValueError
        If ``pe`` has fewer than 2 rows, a non-finite entry, or rows so long (about 1e153) that
        their squared norms overflow float64.
    """
    x = _table64(pe)
    length = x.shape[0]
    if length < 2:
        raise ValueError(f"pe must have at least 2 rows to compare, got shape {tuple(pe.shape)}")
    check_finite("pe", x)
    if chunk_size is None:
        chunk_size = max(1, (1 << 22) // length)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    sq_norms = x.square().sum(dim=1)
    if not math.isfinite(4 * float(sq_norms.max())):  # the fast form below would overflow
        raise ValueError(f"pe is too large to compare: its largest squared row norm, "
                         f"{float(sq_norms.max()):.3g}, leaves no headroom in float64 (rows up to about 1e153 "
                         f"long are supported)")
    # The fast form is off by at most about (dim + 3) * eps * 4 * max|a|^2 per pair; every pair
    # within twice that of the block minimum is re-measured, so the true minimum is among them.
    tol = 8 * (x.shape[1] + 3) * torch.finfo(torch.float64).eps * float(sq_norms.max())
    best = PairDistance(math.inf, -1, -1)
    for start in range(0, length - 1, chunk_size):
        stop = min(start + chunk_size, length - 1)
        # The block's rows against rows start .. end; only columns j > i count.
        norms = sq_norms[start:stop, None] + sq_norms[None, start:]
        d2 = torch.addmm(norms, x[start:stop], x[start:].T, alpha=-2)
        n = stop - start
        d2[:, :n].masked_fill_(torch.ones(n, n, dtype=torch.bool, device=x.device).tril(), math.inf)
        candidates = torch.nonzero(d2 <= d2.min() + tol) + start
        # Row-major order and a strict "<" keep the first pair on ties; slices bound memory
        # when many rows coincide.
        for part in candidates.split(1 << 16):
            i, j = part[:, 0], part[:, 1]
            exact = (x[i] - x[j]).norm(dim=1)
            k = int(torch.argmin(exact))
            if float(exact[k]) < best.distance:
                best = PairDistance(float(exact[k]), int(i[k]), int(j[k]))
        if best.distance == 0.0:
            break
    return best


def _row_groups(table: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Number of distinct rows and, per row, the index of the first row equal to it."""
    if table.dtype.is_floating_point:
        # Compare exact bit patterns, after folding -0.0 into +0.0 (equal values). The fold works
        # on the bits: float8 tensors have no arithmetic (``table + 0.0`` raises), and the float8
        # types without a negative zero convert -0.0 to the pattern of +0.0.
        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[table.element_size()]
        keys = table.contiguous().view(ints)
        negative_zero = torch.tensor(-0.0, device=table.device).to(table.dtype).view(ints)
        keys = torch.where(keys == negative_zero, 0, keys)
    else:
        keys = table.to(torch.int64)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    distinct = int(inverse.max()) + 1 if inverse.numel() else 0
    positions = torch.arange(table.shape[0], device=table.device)
    first = torch.full((distinct,), table.shape[0], device=table.device, dtype=positions.dtype)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin")
    return distinct, first[inverse]


@dataclass(frozen=True)
class Collisions:
    """Result of :func:`collisions`.

    Parameters
    ----------
    length : int
        Number of positions checked.
    dim : int
        Encoding width.
    dtype : torch.dtype
        Storage dtype.
    distinct : int
        Number of distinct encodings among the ``length`` positions.
    pairs : torch.Tensor
        Long tensor ``(length - distinct, 2)``: one row ``(i, j)`` for every position ``j`` whose
        encoding equals that of an earlier position, ``i`` being the first such position.
        Sorted by ``j``.
    """

    length: int
    dim: int
    dtype: torch.dtype
    distinct: int
    pairs: torch.Tensor

    @property
    def count(self) -> int:
        """Number of positions whose encoding repeats an earlier one."""
        return self.length - self.distinct

    def __str__(self) -> str:
        text = f"{self.length} positions, dim={self.dim}, {self.dtype}: {self.distinct} distinct encodings"
        if self.count:
            i, j = (int(v) for v in self.pairs[0])
            text += f"; {self.count} collide, first: positions {i} and {j}"
        return text


def collisions(
    length: int,
    dim: int,
    dtype: torch.dtype,
    *,
    base: float = 10000.0,
    style: str = "interleaved",
    device: torch.device | str | None = None,
) -> Collisions:
    r"""Positions whose sinusoidal encodings become identical once stored in ``dtype``.

    The table is computed in float64 and rounded once to ``dtype``
    (:func:`~posenc.sinusoidal_table`); positions ``i < j`` collide when
    :math:`\operatorname{round}(PE_i) = \operatorname{round}(PE_j)` in every column. That needs
    :math:`(j - i)\,\omega_c` to be close to a multiple of :math:`2\pi` for every frequency at
    once, so the fast columns keep rows apart: a two-column table collides early (in float16,
    positions 2 and 712, as :math:`710 \approx 113 \cdot 2\pi`), while from ``dim = 8`` on even
    bfloat16 tables of 100 000 positions stay distinct. Rounding then shows up as smaller
    distances (:func:`min_pairwise_distance`), if at all, not as identical rows.

    Parameters
    ----------
    length : int
        Number of positions ``0 … length - 1``.
    dim : int
        Encoding width.
    dtype : torch.dtype
        Floating storage dtype, e.g. ``torch.float16``.
    base : float, optional
        Wavelength base.
    style : str, optional
        Column order, see :func:`~posenc.sinusoidal_table` (it matters only for
        ``"tensor2tensor"``, whose frequencies differ).
    device : torch.device or str, optional
        Where to compute.

    Returns
    -------
    Collisions
        ``distinct`` and the colliding ``pairs``.
    """
    length = check_positive_int("length", length)
    dim = check_positive_int("dim", dim)
    if dtype is None:
        raise TypeError("dtype must be a floating-point torch.dtype, got None")
    dtype = check_float_dtype("dtype", dtype)
    base = check_positive_float("base", base)
    check_choice("style", style, SINUSOIDAL_STYLES)
    table = sinusoidal_table(length, dim, base=base, style=style, dtype=dtype, device=device)
    distinct, first = _row_groups(table)
    j = torch.nonzero(first != torch.arange(length, device=first.device)).flatten()
    return Collisions(length, dim, dtype, distinct, torch.stack([first[j], j], dim=1))


@dataclass(frozen=True)
class TableReport:
    """Result of :func:`check_table`.

    Parameters
    ----------
    shape : tuple of int
        Shape of the table.
    dtype : torch.dtype
        Dtype of the table.
    has_nan : bool
        Some entry is NaN.
    has_inf : bool
        Some entry is infinite.
    min : float
        Smallest finite entry (NaN if there is none).
    max : float
        Largest finite entry (NaN if there is none).
    duplicate_rows : int
        Rows that repeat an earlier row exactly (positions the model cannot tell apart).
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    has_nan: bool
    has_inf: bool
    min: float
    max: float
    duplicate_rows: int

    @property
    def ok(self) -> bool:
        """True when the table is finite and every row is distinct."""
        return not (self.has_nan or self.has_inf or self.duplicate_rows)

    def __str__(self) -> str:
        length, dim = self.shape
        lines = [
            f"table {length} x {dim}, {self.dtype}: {'OK' if self.ok else 'PROBLEMS FOUND'}",
            f"  range of finite values: [{self.min:.6g}, {self.max:.6g}]",
            f"  NaN: {'yes' if self.has_nan else 'no'}",
            f"  inf: {'yes' if self.has_inf else 'no'}",
            f"  duplicate rows: {self.duplicate_rows}",
        ]
        return "\n".join(lines)


def check_table(pe: torch.Tensor) -> TableReport:
    """Sanity report on an encoding table: NaN, inf, value range and duplicate rows.

    Problems in the values are reported, not raised, so the report can be printed for any
    table; only a non-tensor, a complex tensor or a tensor that is not 2-D raises.

    Parameters
    ----------
    pe : torch.Tensor
        Table ``(length, dim)`` of any real dtype.

    Returns
    -------
    TableReport
        Printable; ``report.ok`` is true for a finite table with distinct rows.
    """
    if not isinstance(pe, torch.Tensor):
        raise TypeError(f"pe must be a torch.Tensor, got {type(pe).__name__}")
    if pe.is_complex():
        raise TypeError(f"pe must be a real tensor, got {pe.dtype}")
    check_ndim("pe", pe, 2, _TABLE_LAYOUT)
    x = pe.to(torch.float64)
    finite = x[torch.isfinite(x)]
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (math.nan, math.nan)
    distinct, _ = _row_groups(pe.detach())
    return TableReport(
        shape=tuple(pe.shape),
        dtype=pe.dtype,
        has_nan=bool(torch.isnan(x).any()),
        has_inf=bool(torch.isinf(x).any()),
        min=low,
        max=high,
        duplicate_rows=pe.shape[0] - distinct,
    )
