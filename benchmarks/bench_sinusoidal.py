"""Time the sinusoidal table: torch vs NumPy broadcasting vs the plain Python loop.

Run from the repository root::

    python benchmarks/bench_sinusoidal.py [--repeats 15] [--threads N] [--strict]

Every ratio printed is measured in the same run: medians over ``--repeats`` calls, after one
warm-up call, the two sides of each ratio called alternately so that machine noise hits both.
The target is ``numpy / torch >= 1``: the torch table (float64 angles, float32 result) is no
slower than the NumPy broadcasting version (float64 result). ``--strict`` exits with status 1 if
it is missed. NumPy runs on one core; ``--threads 1`` gives torch the same.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import posenc.numpy as pe_numpy
from posenc.sinusoidal import sinusoidal_table


def paired_medians(
    first: Callable[[], object], second: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median wall times of two functions, called alternately so that both see the same machine load."""
    first()
    second()  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for function, bucket in zip((first, second), times):
            start = time.perf_counter()
            function()
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--small-length", type=int, default=256)
    parser.add_argument("--small-dim", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if numpy/torch < 1")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    length, dim, small_length, small_dim = args.length, args.dim, args.small_length, args.small_dim
    # The three must compute the same numbers, or the timings compare different things.
    small = pe_numpy.sinusoidal_table(small_length, small_dim)
    loop = pe_numpy.sinusoidal_table_loop(small_length, small_dim)
    np.testing.assert_allclose(loop, small, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        sinusoidal_table(small_length, small_dim, dtype=torch.float64).numpy(), small, rtol=0, atol=1e-12
    )

    t_torch, t_numpy = paired_medians(
        lambda: sinusoidal_table(length, dim, dtype=torch.float32),
        lambda: pe_numpy.sinusoidal_table(length, dim),
        args.repeats,
    )
    t_loop, t_broadcast = paired_medians(
        lambda: pe_numpy.sinusoidal_table_loop(small_length, small_dim),
        lambda: pe_numpy.sinusoidal_table(small_length, small_dim),
        args.repeats,
    )

    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}")
    for label, seconds in [
        (f"{length}x{dim} posenc.sinusoidal_table (float32, CPU)", t_torch),
        (f"{length}x{dim} posenc.numpy.sinusoidal_table", t_numpy),
        (f"{small_length}x{small_dim} posenc.numpy.sinusoidal_table_loop", t_loop),
        (f"{small_length}x{small_dim} posenc.numpy.sinusoidal_table", t_broadcast),
    ]:
        print(f"{label:<52} {seconds * 1e3:9.2f} ms")
    ratio = t_numpy / t_torch
    print(f"numpy / torch at {length}x{dim}: {ratio:.2f}  (target >= 1: {'met' if ratio >= 1 else 'MISSED'})")
    print(f"loop / broadcast at {small_length}x{small_dim}: {t_loop / t_broadcast:.0f}")
    return 1 if args.strict and ratio < 1 else 0


if __name__ == "__main__":
    raise SystemExit(main())
