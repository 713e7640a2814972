"""The Triton kernel compiles for a Hopper GPU (sm_90), without one: no fused multiply-add, no
spilled registers, vector loads, and cos/sin read once for several heads.

The interpreter tests (test_triton_rope.py) check the kernel's arithmetic; they cannot see what
the compiler makes of it. Here the kernel goes through Triton's whole pipeline to a cubin (the
triton wheel carries ptxas and cuobjdump), in a subprocess without ``TRITON_INTERPRET``, with the
divisibility hints Triton's launcher gives contiguous tensors of usual sizes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

SCRIPT = textwrap.dedent(
    r"""
    import json, os, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from posenc import _triton_rope as K

    fn = K._rope_kernel
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    results = []
    cases = [(dtype, interleaved, inverse, width, K._HEADS_PER_PROGRAM)
             for dtype in ("fp32", "fp16", "bf16") for interleaved in (False, True)
             for inverse, width in ((False, 128), (True, 96))]
    cases.append(("fp32", False, False, 128, 1))  # one head per program, for comparison
    for dtype, interleaved, inverse, width, heads in cases:
        consts = K.kernel_constants(128, width, interleaved, inverse, copy_pass=width < 128,
                                    heads_per_program=heads)
        signature = {n: "constexpr" if n in consts else f"*{dtype}" if n.endswith("_ptr")
                     else "i32" for n in fn.arg_names}
        # What the launcher specialises for contiguous tensors of sizes divisible by 16.
        attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
                 if n not in consts}
        options = dict(K.LAUNCH_OPTIONS)
        compiled = triton.compile(ASTSource(fn, signature, consts, attrs),
                                  target=GPUTarget("cuda", 90, 32), options=options)
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(compiled.asm["cubin"])
        usage = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-resource-usage",
                                f.name], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-sass", f.name],
                              capture_output=True, text=True, check=True).stdout
        os.unlink(f.name)
        ptx = compiled.asm["ptx"]
        results.append({
            "case": [dtype, interleaved, inverse, width, heads],
            "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)),
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
            # Fused multiply-adds on floats (integer mad.lo computes addresses).
            "ptx_fma": len(re.findall(
                r"\b(?:fma|mad)(?:\.[a-z0-9]+)*\.(?:f16x2|bf16x2|f16|bf16|f32|f64)\b", ptx)),
            # Floating-point products and sums (any modifiers: .ftz, .sat, x2 vectors) that are
            # not explicitly rounded to nearest.
            "ptx_unrounded": len([op for op in re.findall(
                r"\b(?:mul|add|sub)(?:\.[a-z0-9]+)*\.(?:f16x2|bf16x2|f16|bf16|f32)\b", ptx)
                if ".rn." not in op]),
            "vector_loads": len(re.findall(r"\bLDG\S*\.128\b", sass)),
            "other_loads": len([op for op in re.findall(r"\bLDG\S*", sass) if ".128" not in op]),
        })
    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def compiled_cases() -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_variant_compiles_for_sm90(compiled_cases: list[dict]) -> None:
    assert len(compiled_cases) == 3 * 2 * 2 + 1


def test_cos_sin_loaded_once_for_several_heads(compiled_cases: list[dict]) -> None:
    by_case = {tuple(c["case"]): c for c in compiled_cases}
    one = by_case[("fp32", False, False, 128, 1)]["vector_loads"]
    several = by_case[("fp32", False, False, 128, 4)]["vector_loads"]
    # One head: x (2 halves) and cos/sin (4 halves) per program. Four heads share the cos/sin
    # loads, so they need fewer than four times as many.
    assert one < several < 4 * one


def test_no_fused_multiply_add(compiled_cases: list[dict]) -> None:
    # Every product and sum is an explicitly rounded instruction (mul.rn, add.rn, sub.rn): ptxas
    # may not contract those, so each product is rounded as in PyTorch.
    for case in compiled_cases:
        assert case["ptx_fma"] == 0, case
        assert case["ptx_unrounded"] == 0, case


def test_no_spills_and_vector_loads(compiled_cases: list[dict]) -> None:
    for case in compiled_cases:
        assert case["local"] == 0, case  # no registers spilled to local memory
        # At least three programs of four warps fit in an SM's 65,536 registers.
        assert 65536 // (4 * 32 * case["registers"]) >= 3, case
        # Only 128-bit loads, in both layouts (the interleaved one loads whole rows and splits them).
        assert case["vector_loads"] > 0 and case["other_loads"] == 0, case
