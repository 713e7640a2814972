#!/usr/bin/env bash
# The GPU check of apply_rope's Triton kernel, in one run: correctness on the GPU (the kernel
# compiled, not interpreted), then the benchmark grid, written as a recorded result.
#
#   bash benchmarks/gpu_check.sh OUT_DIR
#
# Needs a CUDA machine whose python3 has torch, triton and transformers (posenc is used from this
# checkout). Writes OUT_DIR/tests.log, OUT_DIR/bench.log and OUT_DIR/<gpu>-<date>.json; copy the
# JSON into benchmarks/results/ to show it on the performance page.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash benchmarks/gpu_check.sh OUT_DIR}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/test_triton_rope.py tests/test_rope.py \
    tests/test_composition.py 2>&1 | tee "$out/tests.log"
name=$(python3 -c "import torch; print(torch.cuda.get_device_name().split()[-1].lower())")
python3 benchmarks/bench_rope.py --device cuda --json "$out/$name-$(date +%F).json" 2>&1 \
    | tee "$out/bench.log"
