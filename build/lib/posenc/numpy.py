"""NumPy versions of the sinusoidal table, for teaching and for speed comparisons.

Both return float64 arrays equal to ``posenc.sinusoidal_table(..., style="interleaved")``.
"""

from __future__ import annotations

import math

import numpy as np

from posenc._checks import check_positive_float, check_positive_int

__all__ = ["sinusoidal_table_loop", "sinusoidal_table"]


def sinusoidal_table_loop(length: int, dim: int, base: float = 10000.0) -> np.ndarray:
    r"""Sinusoidal table written as two plain Python loops, straight from the formula.

    .. math::

        PE_{p, j} = \begin{cases} \sin(p / \text{base}^{2\lfloor j/2 \rfloor / d}) & j \text{ even} \\
                                  \cos(p / \text{base}^{2\lfloor j/2 \rfloor / d}) & j \text{ odd} \end{cases}

    Column ``j`` uses pair index ``i = j // 2``: both members of a pair share the exponent
    ``2i/d``. (Looping ``i`` over ``0, 2, 4, …`` and writing ``2 * i / d`` doubles the exponent —
    a frequent bug.)

    Parameters
    ----------
    length : int
        Number of positions.
    dim : int
        Encoding width.
    base : float, optional
        Wavelength base.

    Returns
    -------
    numpy.ndarray
        Float64 array of shape ``(length, dim)``.
    """
    length = check_positive_int("length", length)
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    table = np.zeros((length, dim))
    for pos in range(length):
        for j in range(dim):
            angle = pos / base ** (2 * (j // 2) / dim)
            table[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


def sinusoidal_table(length: int, dim: int, base: float = 10000.0) -> np.ndarray:
    """Sinusoidal table computed with broadcasting: a column of positions times a row of frequencies.

    Parameters
    ----------
    length : int
        Number of positions.
    dim : int
        Encoding width.
    base : float, optional
        Wavelength base.

    Returns
    -------
    numpy.ndarray
        Float64 array of shape ``(length, dim)``, equal to :func:`sinusoidal_table_loop`.
    """
    length = check_positive_int("length", length)
    dim = check_positive_int("dim", dim)
    base = check_positive_float("base", base)
    positions = np.arange(length, dtype=np.float64)[:, np.newaxis]  # (length, 1)
    frequencies = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)  # (ceil(dim/2),)
    angles = positions * frequencies  # broadcast to (length, ceil(dim/2))
    table = np.empty((length, dim))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : dim // 2])
    return table
