"""Speed of RoPE: posenc against Hugging Face (eager and compiled), Meta's complex form and a copy.

Run from the repository root::

    python benchmarks/bench_rope.py                      # the default grid for the device
    python benchmarks/bench_rope.py --device cuda --json benchmarks/results/<gpu>-<date>.json
    python benchmarks/bench_rope.py --shapes 8,32,4096,128 --dtypes bfloat16

For each (batch, heads, seq, head_dim) and dtype it times, interleaved in the same run, a plain
copy of q and k (the floor), ``transformers``' ``apply_rotary_pos_emb`` eager and under
``torch.compile``, Meta Llama's complex formulation and ``posenc.apply_rope_qk``; it prints
milliseconds, effective GB/s (q and k read and written, cos/sin read) and each one's fraction of
the copy's bandwidth, then the targets. The harness is ``posenc.benchmark``; ``--json`` writes the
rows with the environment (date, device, library versions), the form in which GPU results are
recorded in ``benchmarks/results/``.
"""

from posenc.benchmark import main

if __name__ == "__main__":
    raise SystemExit(main())
