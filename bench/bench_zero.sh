#!/usr/bin/env bash
# ZeRO stages 0-3 at dp=4 on the CPU backend (bench/bench_zero.c): tokens/s
# and per-rank model-state memory on the test model (2 layers, hidden 64,
# GPT-2 vocabulary), one micro-batch of 2 per rank, 5 timed steps.
# usage: bench/bench_zero.sh [extra --set overrides...]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
make -s build/bench/bench_zero megatrain
source tests/integration/lib.sh   # prepares build/testdata
mpirun -np 4 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS build/bench/bench_zero \
  --config tests/configs/gpt-test.json --set training.global_batch_size=8 \
  --set training.eval_interval=0 --set training.train_iters=100 "$@"
