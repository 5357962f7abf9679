#!/usr/bin/env bash
# TP/SP building blocks on 2 and 4 ranks: region functions (forward and
# backward on every rank), vocab-parallel cross-entropy vs a plain one, and
# the collective counters of one step against the analytic counts.
set -eu
cd "$(dirname "$0")/../.."
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 2 4; do
  mpirun -np $np --oversubscribe --bind-to none build/tests/tools/tp_check
done
