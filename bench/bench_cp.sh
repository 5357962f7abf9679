#!/usr/bin/env bash
# bench/bench_cp.sh — long-context demonstration of context parallelism
# (issue 15): a tiny GPT (2 layers, hidden 64, 4 heads, vocabulary 512,
# micro-batch 1, dropout 0.1) trains at seq 8192 through the model's
# forward+backward (bench/bench_cp.c) with cp=1 on one rank and cp=2, cp=4
# on 2 and 4 ranks, one thread per rank. Prints per-rank peak memory
# (allocator, MiB) and tokens/s of the whole CP group. Printed, not asserted.
# On this 2-core machine cp=4 runs oversubscribed (4 ranks on 2 cores), so
# its tokens/s shows the cost of the ring, not a speed-up; the memory per
# rank is the point: activations are exactly 1/cp (tests/tools/cp_check.c).
# usage: bash bench/bench_cp.sh [seq] [steps] [layers hidden heads]
set -eu
cd "$(dirname "$0")/.."
SEQ=${1:-8192}; STEPS=${2:-2}; L=${3:-2}; H=${4:-64}; NH=${5:-4}
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/bench/bench_cp
[ -x $B ] || { echo "build first: make build/bench/bench_cp"; exit 1; }
for cp in 1 2 4; do
  if [ $cp = 1 ]; then $B $SEQ $L $H $NH 1 $STEPS 512
  else mpirun -np $cp --oversubscribe --bind-to none $B $SEQ $L $H $NH 1 $STEPS 512; fi | grep -E "rank 0|tokens/s"
done
