#!/usr/bin/env bash
# bench/bench_gpu.sh — single-GPU training throughput of the GPT-2 124M,
# 350M and 1.3B shapes at seq 1024 on the CUDA backend (bf16 storage, fp32
# master weights/grads/optimizer): tokens/s, TFLOP/s and MFU against 989
# TFLOP/s (H100/H200 SXM dense bf16; env MEGATRAIN_PEAK_TFLOPS overrides).
# usage: bash bench/bench_gpu.sh [steps]   (default 5 timed steps per shape)
set -u
cd "$(dirname "$0")/.."
steps="${1:-5}"
make -s build/bench/bench_gpu || exit 1
rc=0
#            name  layers hidden heads seq mb
for shape in "124M 12 768 12 1024 8" "350M 24 1024 16 1024 8" "1.3B 24 2048 16 1024 8"; do
  set -- $shape
  name=$1; shift
  echo "== GPT-2 $name"
  timeout 300 build/bench/bench_gpu "$1" "$2" "$3" "$4" "$5" "$steps" 1 bf16
  r=$?
  [ $r -eq 77 ] && exit 77
  [ $r -ne 0 ] && { echo "bench $name failed (exit $r)"; rc=1; }
done
exit $rc
