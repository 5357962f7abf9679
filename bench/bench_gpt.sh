#!/usr/bin/env bash
# bench/bench_gpt.sh — CPU training throughput of the GPT-2 124M shape
# (12 layers, hidden 768, 12 heads, seq 64, micro-batch 4, fp32, 2 threads):
# tokens/s, achieved GFLOP/s (Megatron's formula: 191.6 GFLOP per
# micro-batch) and a per-op profile, in three settings:
#   1. one AdamW update per micro-batch (as llm.c's CPU trainer runs);
#   2. gradient accumulation over 8 micro-batches (the update amortised);
#   3. as 2 with OpenBLAS's own kernel choice: this machine's environment sets
#      OPENBLAS_CORETYPE=Haswell (AVX2) although the CPU has AVX-512; unset
#      for this one command only.
# Run it on an otherwise idle machine: figures are wall-clock.
set -eu
cd "$(dirname "$0")/.."
make -s build/bench/bench_gpt
export OMP_NUM_THREADS=2
echo "== 1. update every micro-batch"; build/bench/bench_gpt 12 768 12 64 4 2 4 1
echo "== 2. 8 micro-batches per update"; build/bench/bench_gpt 12 768 12 64 4 2 2 8
echo "== 3. as 2, OpenBLAS's own kernels"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/bench/bench_gpt 12 768 12 64 4 2 2 8
