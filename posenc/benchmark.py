r"""Timing RoPE against the memory bound: the harness behind ``benchmarks/bench_rope.py`` and the
site's performance page.

Rotating queries and keys reads every element of ``q`` and ``k`` once and writes it once; the
cos/sin tables add little. Its floor is therefore a copy of ``q`` and ``k``, and every
implementation is measured against one, in the same run:

* ``copy``: ``q.clone()``, ``k.clone()`` — the floor;
* ``Hugging Face eager``: transformers' ``apply_rotary_pos_emb`` (Llama), when transformers is
  installed;
* ``Hugging Face compiled``: the same function under ``torch.compile``;
* ``Meta complex``: Meta Llama's formulation — pairs as complex numbers times
  :math:`e^{\mathrm{i} p \theta}`, in float32 (:func:`meta_complex_rope`);
* ``posenc``: :func:`posenc.apply_rope_qk` (the Triton kernel on CUDA, PyTorch elsewhere).

Effective bandwidth counts what an implementation must move at least: ``q`` and ``k`` read and
written, cos/sin read once (:func:`rope_bytes`). Its *fraction of the copy* is its bandwidth
divided by the copy's, measured in the same run.

Run ``python -m posenc.benchmark --help`` (or ``python benchmarks/bench_rope.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from posenc.rope import apply_rope_qk, rope_cos_sin

__all__ = [
    "RopeTiming",
    "meta_complex_rope",
    "median_seconds",
    "rope_bytes",
    "rope_implementations",
    "time_rope",
    "environment",
]

Shape = tuple[int, int, int, int]


def median_seconds(
    fns: dict[str, Callable[[], object]], rounds: int, *, device: torch.device | str = "cpu"
) -> dict[str, float]:
    """Median time of each function, the functions called in turn in every round.

    Interleaving puts machine noise on every function alike. On CUDA each call is timed with
    CUDA events (the GPU's own clock); elsewhere with ``time.perf_counter``. Two untimed calls of
    each first (allocator, thread pool, compilation).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds}")
    cuda = torch.device(device).type == "cuda"
    for fn in fns.values():
        fn()
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def meta_complex_rope(
    q: torch.Tensor, k: torch.Tensor, freqs_cis: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Meta Llama's RoPE: channel pairs :math:`(x_{2i}, x_{2i+1})` as complex numbers, times
    ``freqs_cis`` :math:`= e^{\mathrm{i} p \theta_i}` (complex64, ``(seq, dim/2)``), in float32,
    cast back to the input's dtype. The same rotation as
    ``apply_rope(..., layout="interleaved")``, rounded differently (each product and sum rounded in
    float32, then one rounding to the dtype)."""
    def one(x: torch.Tensor) -> torch.Tensor:
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs_cis).flatten(-2).type_as(x)

    return one(q), one(k)


def rope_bytes(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> int:
    """Bytes an implementation must move: ``q`` and ``k`` read and written, cos/sin read once."""
    qk = q.numel() * q.element_size() + k.numel() * k.element_size()
    return 2 * qk + cos.numel() * cos.element_size() + sin.numel() * sin.element_size()


def rope_implementations(
    q: torch.Tensor, k: torch.Tensor, *, compiled: bool = True
) -> tuple[dict[str, Callable[[], object]], dict[str, torch.Tensor]]:
    """The implementations timed by :func:`time_rope`, each checked against posenc first.

    Returns the callables (by name, ``"copy"`` first) and the cos/sin tables they read (``cos``,
    ``sin`` in the half layout, ``(seq, dim)`` in ``q``'s dtype; ``freqs_cis`` for the complex
    form). Hugging Face's entries are present only when transformers is installed; the compiled
    one only with ``compiled=True``.
    """
    seq, dim = q.shape[-2], q.shape[-1]
    cos, sin = rope_cos_sin(seq, dim, dtype=q.dtype, device=q.device)
    angles = rope_cos_sin(seq, dim, layout="interleaved", dtype=torch.float64, device=q.device)
    freqs_cis = torch.complex(angles[0][:, ::2], angles[1][:, ::2]).to(torch.complex64)
    fns: dict[str, Callable[[], object]] = {"copy": lambda: (q.clone(), k.clone())}
    want = apply_rope_qk(q, k, cos, sin)
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        apply_rotary_pos_emb = None
    if apply_rotary_pos_emb is not None:
        hf_cos, hf_sin = cos[None], sin[None]  # Hugging Face passes (batch, seq, dim)
        got = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
        # Not merely close: the same bits as Hugging Face's formula.
        if not (torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])):
            raise RuntimeError("posenc.apply_rope_qk differs from Hugging Face's apply_rotary_pos_emb")
        fns["Hugging Face eager"] = lambda: apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
        if compiled:
            hf_compiled = torch.compile(apply_rotary_pos_emb, dynamic=True)
            fns["Hugging Face compiled"] = lambda: hf_compiled(q, k, hf_cos, hf_sin)
    # The complex form rotates interleaved pairs: compare it with posenc in that layout.
    meta = meta_complex_rope(q, k, freqs_cis)
    cos_i, sin_i = rope_cos_sin(seq, dim, layout="interleaved", dtype=q.dtype, device=q.device)
    eps = max(torch.finfo(q.dtype).eps, torch.finfo(torch.float32).eps)  # the complex form rounds in float32
    for got, ref in zip(meta, apply_rope_qk(q, k, cos_i, sin_i, layout="interleaved")):
        torch.testing.assert_close(got, ref, rtol=4 * eps, atol=4 * eps * float(ref.abs().max()))
    fns["Meta complex"] = lambda: meta_complex_rope(q, k, freqs_cis)
    fns["posenc"] = lambda: apply_rope_qk(q, k, cos, sin)
    return fns, {"cos": cos, "sin": sin, "freqs_cis": freqs_cis}


@dataclass(frozen=True)
class RopeTiming:
    """One implementation at one size: median milliseconds, the bytes it must move (the copy's
    own for ``copy``), effective GB/s and the fraction of the copy's bandwidth measured in the
    same run."""

    implementation: str
    shape: Shape
    dtype: str
    device: str
    ms: float
    bytes_moved: int
    gb_per_s: float
    fraction_of_copy: float


def time_rope(
    shape: Shape,
    dtype: torch.dtype = torch.float32,
    *,
    device: torch.device | str = "cpu",
    rounds: int = 20,
    compiled: bool = True,
    seed: int = 0,
) -> list[RopeTiming]:
    """Time every implementation of :func:`rope_implementations` on ``q`` and ``k`` of ``shape``
    ``(batch, heads, seq, head_dim)``."""
    generator = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(shape, generator=generator, device=device).to(dtype)
    k = torch.randn(shape, generator=generator, device=device).to(dtype)
    fns, tables = rope_implementations(q, k, compiled=compiled)
    with torch.inference_mode():
        seconds = median_seconds(fns, rounds, device=device)
    moved = rope_bytes(q, k, tables["cos"], tables["sin"])
    copied = 2 * (q.numel() * q.element_size() + k.numel() * k.element_size())
    copy_bandwidth = copied / seconds["copy"]
    rows = []
    for name, s in seconds.items():
        nbytes = copied if name == "copy" else moved
        rows.append(
            RopeTiming(
                implementation=name,
                shape=tuple(shape),  # type: ignore[arg-type]
                dtype=str(dtype).removeprefix("torch."),
                device=str(torch.device(device).type),
                ms=1e3 * s,
                bytes_moved=nbytes,
                gb_per_s=nbytes / s / 1e9,
                fraction_of_copy=(nbytes / s) / copy_bandwidth,
            )
        )
    return rows


def environment(device: torch.device | str = "cpu") -> dict[str, str]:
    """Where a measurement was made: date, machine, device and library versions."""
    import posenc

    info = {
        "date": datetime.date.today().isoformat(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "posenc": posenc.__version__,
        "threads": str(torch.get_num_threads()),
    }
    if torch.device(device).type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = str(torch.version.cuda)
    for package in ("triton", "transformers"):
        try:
            info[package] = __import__(package).__version__
        except ImportError:
            pass
    return info


def _format(rows: Sequence[RopeTiming]) -> str:
    lines = [f"{'shape':<22}{'dtype':<10}{'implementation':<24}{'ms':>10}{'GB/s':>10}{'of copy':>9}"]
    for r in rows:
        lines.append(
            f"{str(r.shape):<22}{r.dtype:<10}{r.implementation:<24}{r.ms:>10.3f}"
            f"{r.gb_per_s:>10.1f}{r.fraction_of_copy:>8.0%}"
        )
    return "\n".join(lines)


CPU_SHAPES: list[Shape] = [(1, 8, 256, 64), (4, 16, 1024, 128), (4, 32, 2048, 128)]
CUDA_SHAPES: list[Shape] = [(1, 32, 1, 128), (1, 32, 4096, 128), (8, 32, 1024, 128), (8, 32, 4096, 128)]


def _targets(rows: Sequence[RopeTiming]) -> list[str]:
    """The project's targets, checked on the rows that exist: CPU float32 (4, 16, 1024, 128):
    Hugging Face eager / posenc >= 2 and posenc / copy <= 2; CUDA bfloat16 (8, 32, 4096, 128):
    posenc at >= 90% of the copy's bandwidth and >= 1.3x Hugging Face compiled."""
    by = {(r.device, r.shape, r.dtype, r.implementation): r for r in rows}
    out = []
    cpu = ("cpu", (4, 16, 1024, 128), "float32")
    if (*cpu, "posenc") in by and (*cpu, "Hugging Face eager") in by:
        p, hf, copy = by[(*cpu, "posenc")].ms, by[(*cpu, "Hugging Face eager")].ms, by[(*cpu, "copy")].ms
        out.append(f"CPU float32 {cpu[1]}: HF eager / posenc = {hf / p:.2f} (target >= 2), "
                   f"posenc / copy = {p / copy:.2f} (target <= 2)")
    gpu = ("cuda", (8, 32, 4096, 128), "bfloat16")
    if (*gpu, "posenc") in by:
        p = by[(*gpu, "posenc")]
        line = f"CUDA bfloat16 {gpu[1]}: posenc at {p.fraction_of_copy:.0%} of the copy (target >= 90%)"
        if (*gpu, "Hugging Face compiled") in by:
            line += f", HF compiled / posenc = {by[(*gpu, 'Hugging Face compiled')].ms / p.ms:.2f} (target >= 1.3)"
        out.append(line)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m posenc.benchmark",
        description="Time RoPE implementations against a copy of q and k (the memory bound).",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtypes", nargs="+", default=None,
                        help="default: float32 on CPU; bfloat16 float16 float32 on CUDA")
    parser.add_argument("--shapes", nargs="+", default=None, metavar="B,H,S,D",
                        help="default: a grid for the device")
    parser.add_argument("--rounds", type=int, default=None, help="default: 20 on CPU, 50 on CUDA")
    parser.add_argument("--no-compile", action="store_true", help="skip Hugging Face compiled")
    parser.add_argument("--json", default=None, help="also write the environment and rows here")
    args = parser.parse_args(argv)
    cuda = torch.device(args.device).type == "cuda"
    dtypes = args.dtypes or (["bfloat16", "float16", "float32"] if cuda else ["float32"])
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else (
        CUDA_SHAPES if cuda else CPU_SHAPES)
    rounds = args.rounds or (50 if cuda else 20)
    env = environment(args.device)
    print(", ".join(f"{key} {value}" for key, value in env.items()))
    rows: list[RopeTiming] = []
    for shape in shapes:
        if len(shape) != 4:
            parser.error(f"a shape is B,H,S,D, got {shape}")
        for name in dtypes:
            dtype = getattr(torch, name)
            rows += time_rope(shape, dtype, device=args.device, rounds=rounds,  # type: ignore[arg-type]
                              compiled=not args.no_compile)
    print(_format(rows))
    for line in _targets(rows):
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "rows": [asdict(r) for r in rows]}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
