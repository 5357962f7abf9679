#!/usr/bin/env bash
# scripts/gpu-check.sh — one command for a machine with NVIDIA GPUs: build
# with CUDA, run the GPU tests (op table, per-op CPU-vs-CUDA parity in fp32
# and bf16) and the throughput benchmark (GPT-2 124M/350M/1.3B, seq 1024),
# then print a summary. Budget: < 8 minutes on one H100/H200 (the build is
# most of it). Exit 0 when every step passed.
# usage: bash scripts/gpu-check.sh [bench steps, default 5]
set -u
cd "$(dirname "$0")/.."
steps="${1:-5}"
log=build/gpu-check
source scripts/gpu-step.sh
jobs=$(nproc 2>/dev/null || echo 4)
if ! step build 360 make -j"$jobs" CUDA=1 megatrain build/tests/test_cuda_table \
     build/tests/tools/cuda_parity build/bench/bench_gpu; then
  printf '%s\n' "${summary[@]}"; exit 1
fi
step op_table 60 build/tests/test_cuda_table
step parity_fp32 120 build/tests/tools/cuda_parity fp32
step parity_bf16 120 build/tests/tools/cuda_parity bf16
step bench 300 bash bench/bench_gpu.sh "$steps"
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
grep -h '^RESULT' "$log/bench.log" 2>/dev/null | sed 's/^/  /'
for s in "${summary[@]}"; do case $s in FAIL*) exit 1;; esac; done
exit 0
