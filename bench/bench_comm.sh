#!/usr/bin/env bash
# bench/bench_comm.sh — run build/bench/bench_comm on 2, 4 and 8 ranks
# (oversubscribed when the machine has fewer cores) and print nccl-tests
# style tables. Extra arguments go to bench_comm (e.g. --maxbytes 4194304).
set -eu
cd "$(dirname "$0")/.."
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x build/bench/bench_comm ] || make build/bench/bench_comm
echo "# host: $(nproc) cores, $(mpirun --version | head -1)"
for np in ${MEGATRAIN_BENCH_NPS:-2 4 8}; do
  echo "## np=$np"
  mpirun -np "$np" --oversubscribe build/bench/bench_comm "$@"
done
