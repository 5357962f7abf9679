#!/usr/bin/env bash
# tests/integration/test_cuda_ops.sh — per-op parity of the CUDA backend
# against the CPU backend (fp32 and bf16 storage, forward and backward):
# build/tests/tools/cuda_parity. Without a usable GPU (or in a CUDA=0 build)
# it prints "SKIP: ..." and exits 77.
set -u
cd "$(dirname "$0")/../.."
bin=build/tests/tools/cuda_parity
if [ ! -x "$bin" ]; then
  make -s "$bin" >/dev/null 2>&1 || { echo "FAIL: could not build $bin"; exit 1; }
fi
"$bin" all
