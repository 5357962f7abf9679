#!/usr/bin/env bash
# scripts/cuda-emu-check.sh — the CI part of the CUDA emulation (no GPU
# needed; docs/cuda.md "Emulation"): build the CUDA backend and the NCCL
# engine against the stand-ins (make CUDA_EMU=1 -> build-emu/), then run the
# op table's cuda-emu column (test_cuda_emu_ops) and the trainer cases
# (test_cuda_emu_train: 1 rank against cpu, pp=2 on the NCCL stand-in, tp=2
# + SP on the staging engine), and print the time of each part. ./megatrain
# (the normal build) is the cpu reference and must be built.
# usage: bash scripts/cuda-emu-check.sh [--build-only | test-name regex, e.g. 'cuda_emu']
#   --build-only: build build-emu/ and stop (.ci/run: the test run that
#   follows then runs the cuda-emu tests instead of skipping them)
# env: MEGATRAIN_TEST_FULL=1 (the full matrices), JOBS (make -j, default 2)
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
mkdir -p build-emu
LOG=build-emu/build.log
targets=(build-emu/megatrain build-emu/tests/test_ops build-emu/tests/test_cuda_table
         build-emu/tests/test_nccl_api build-emu/tests/tools/cuda_parity
         build-emu/tests/tools/comm_check build-emu/tests/tools/comm_async_dev_check
         build-emu/tests/tools/fp8_linear_dev)
if ! nice make CUDA_EMU=1 -j"${JOBS:-2}" "${targets[@]}" > "$LOG" 2>&1; then
  tail -30 "$LOG"; echo "cuda-emu build FAILED (log: $LOG)"; exit 1
fi
if grep -q "warning:" "$LOG"; then
  grep "warning:" "$LOG" | head; echo "cuda-emu build has warnings (log: $LOG)"; exit 1
fi
t1=$(date +%s)
echo "cuda-emu build: $((t1 - t0)) s"
[ "${1:-}" = --build-only ] && exit 0
bash tests/run_tests.sh "${1:-^test_cuda_emu_(ops|train)$}"; rc=$?
t2=$(date +%s)
echo "cuda-emu tests: $((t2 - t1)) s; CI part in all: $((t2 - t0)) s"
exit $rc
