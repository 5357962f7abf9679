#!/usr/bin/env bash
# MoE collective counters and the skewed-routing no-hang check
# (tests/tools/moe_comm_check.c) on EP groups of 2 and 4 ranks, top-1 and top-2;
# all-to-all bytes = the analytic count from the token counts of a FIXED
# hand-made routing, dropless and padded to capacity (tests/tools/moe_a2a_bytes.c);
# expert tensor parallelism (etp=2 with ep=1 and ep=2): ETP all-gatherv /
# reduce-scatterv bytes equal the analytic count.
set -eu
cd "$(dirname "$0")/../.."
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
[ -x build/tests/tools/moe_comm_check ] || { echo "SKIP: moe_comm_check not built"; exit 77; }
[ -x build/tests/tools/moe_a2a_bytes ] || { echo "SKIP: moe_a2a_bytes not built"; exit 77; }
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 2 4; do
  for k in 1 2; do
    timeout 120 mpirun -np $np --oversubscribe --bind-to none build/tests/tools/moe_comm_check 24 16 32 8 $k
    timeout 120 mpirun -np $np --oversubscribe --bind-to none build/tests/tools/moe_a2a_bytes 24 16 8 $k
  done
done
for np in 2 4; do
  timeout 120 mpirun -np $np --oversubscribe --bind-to none build/tests/tools/moe_comm_check 24 16 32 8 2 2
done
