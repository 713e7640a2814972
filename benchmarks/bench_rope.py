"""Speed of :func:`posenc.rope.apply_rope` on CPU against Hugging Face and a plain copy.

Run with ``python benchmarks/bench_rope.py``. Rotates float32 ``q`` and ``k`` of shape
``(4, 16, 1024, 128)`` with

* posenc ``apply_rope`` (``layout="half"``),
* transformers' eager ``apply_rotary_pos_emb(q, k, cos, sin)`` (Llama),
* ``q.clone(), k.clone()`` (the memory-traffic floor: read both, write both),

interleaving the three in each round so that machine noise hits them alike, and prints the
median times and the ratios ``HF / posenc`` (target >= 2) and ``posenc / copy`` (target <= 2).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from posenc.rope import apply_rope, rope_cos_sin


def _median_seconds(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():  # warm-up (allocator, thread pool)
        fn()
        fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--shape", type=int, nargs=4, default=(4, 16, 1024, 128))
    args = parser.parse_args()
    batch, heads, seq, dim = args.shape

    torch.manual_seed(0)
    q = torch.randn(batch, heads, seq, dim)
    k = torch.randn(batch, heads, seq, dim)
    cos, sin = rope_cos_sin(seq, dim, dtype=torch.float32)
    hf_cos, hf_sin = cos[None], sin[None]  # HF expects (batch, seq, dim)

    ref_q, ref_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    # Not merely close: the same bits as Hugging Face's formula.
    assert torch.equal(apply_rope(q, cos, sin), ref_q)
    assert torch.equal(apply_rope(k, cos, sin), ref_k)

    with torch.inference_mode():
        med = _median_seconds(
            {
                "posenc apply_rope": lambda: (apply_rope(q, cos, sin), apply_rope(k, cos, sin)),
                "HF apply_rotary_pos_emb": lambda: apply_rotary_pos_emb(q, k, hf_cos, hf_sin),
                "copy (clone)": lambda: (q.clone(), k.clone()),
            },
            args.rounds,
        )
    print(f"q, k: float32 {tuple(q.shape)}, {torch.get_num_threads()} threads, "
          f"median of {args.rounds} rounds")
    for name, seconds in med.items():
        print(f"  {name:<26} {seconds * 1e3:8.2f} ms")
    posenc, hf, copy = med["posenc apply_rope"], med["HF apply_rotary_pos_emb"], med["copy (clone)"]
    print(f"HF / posenc   = {hf / posenc:5.2f}  (target >= 2)")
    print(f"posenc / copy = {posenc / copy:5.2f}  (target <= 2)")


if __name__ == "__main__":
    main()
