#!/usr/bin/env bash
# scripts/gpu-check-flash.sh — the fused-attention check for a machine with an
# NVIDIA GPU (sm_80 or sm_90), run once by a session that has one: builds with
# CUDA, runs the op table (test_cuda_table), every op-case row on the CUDA
# column (test_ops: the flash_attn_* / attn_merge rows against the CPU
# backend), the per-op parity tool in fp32 and bf16 (its flash group: shapes
# past one tile, hn 64/80/128/160, a cp=2 rank's ring) and bf16 once more on
# the FFMA kernels (MEGATRAIN_CUDA_FLASH_SIMT=1), then the fused vs unfused
# timing table (bench/bench_flash_gpu.c) and, where compute-sanitizer exists,
# memcheck and racecheck over the bf16 parity run. Prints a summary; exit 0
# when no step failed. Logs: build/gpu-check-flash/.
# Budget: about 8 minutes on one H100/H200 with 16 cores (build ~3 of them).
# usage: bash scripts/gpu-check-flash.sh      env: CUDA_ARCH (default: the
#        GPU's own, from nvidia-smi; else "80 90"), REPS (bench, default 10)
set -u
cd "$(dirname "$0")/.."
log=build/gpu-check-flash
source scripts/gpu-step.sh
if [ -z "${CUDA_ARCH:-}" ]; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  CUDA_ARCH=${cc:-80 90}
fi
jobs=$(nproc 2>/dev/null || echo 4)
if ! step build 480 make -j"$jobs" CUDA=1 CUDA_ARCH="$CUDA_ARCH" build/tests/test_cuda_table \
     build/tests/test_ops build/tests/tools/cuda_parity build/bench/bench_flash_gpu; then
  printf '%s\n' "${summary[@]}"; exit 1
fi
step op_table 60 build/tests/test_cuda_table
step op_cases 240 build/tests/test_ops
step parity_fp32 120 build/tests/tools/cuda_parity fp32
step parity_bf16 120 build/tests/tools/cuda_parity bf16
step parity_bf16_ffma 120 env MEGATRAIN_CUDA_FLASH_SIMT=1 build/tests/tools/cuda_parity bf16
step bench_flash 300 build/bench/bench_flash_gpu bf16 "${REPS:-10}"
san=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$san" ]; then
  step memcheck 240 "$san" --tool memcheck --error-exitcode 3 build/tests/tools/cuda_parity bf16
  step racecheck 240 "$san" --tool racecheck --error-exitcode 3 build/tests/tools/cuda_parity bf16
else
  summary+=("SKIP  memcheck/racecheck: compute-sanitizer not found")
fi
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
grep -hE '^(GPT|GQA)|fused|unfused' "$log/bench_flash.log" 2>/dev/null | sed 's/^/  /'
for s in "${summary[@]}"; do case $s in FAIL*) exit 1;; esac; done
exit 0
