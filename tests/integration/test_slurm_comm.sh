#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# tests/integration/test_slurm_comm.sh — the group API under Slurm: brings up
# a one-node user-space Slurm (scripts/local-slurm.sh), runs
# build/tests/tools/comm_check with `srun -n 4 --mpi=pmix` (two layouts),
# checks that a failing rank ends the step non-zero within 60 s, and brings
# Slurm down. SKIP (77) when Slurm is not installed or cannot start.
set -u
cd "$(dirname "$0")/../.."
command -v srun >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ] ||
  { echo "SKIP: slurm-wlm/munge not installed"; exit 77; }
CHECK=build/tests/tools/comm_check FAIL=build/tests/tools/comm_fail
for b in $CHECK $FAIL; do [ -x $b ] || { echo "missing $b (run make tests)"; exit 1; }; done
export MEGATRAIN_SLURM_DIR=$(mktemp -d /tmp/mt-slurm-test.XXXXXX)
trap 'bash scripts/local-slurm.sh down >/dev/null 2>&1; rm -rf "$MEGATRAIN_SLURM_DIR"' EXIT
if ! bash scripts/local-slurm.sh up; then echo "SKIP: local Slurm could not start"; exit 77; fi
export SLURM_CONF=$MEGATRAIN_SLURM_DIR/slurm.conf
# srun does not set this for OpenMPI; needed when oversubscribing 2 cores.
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
rc=0
for args in "--tp 2 --pp 2" "--ep 2 --etp 1"; do
  out=$(timeout 120 srun -n 4 --mpi=pmix $CHECK $args 2>&1); r=$?
  if [ $r -ne 0 ] || ! grep -q "comm_check OK world=4" <<<"$out"; then
    echo "FAIL srun -n 4 comm_check $args (exit $r)"; echo "$out" | tail -20; rc=1
  else echo "ok   srun -n 4 --mpi=pmix comm_check $args"; fi
done
t0=$(date +%s)
out=$(timeout 90 srun -n 4 --mpi=pmix $FAIL fatal 1 2>&1); r=$?; dt=$(( $(date +%s) - t0 ))
if [ $r -eq 0 ] || [ $r -eq 124 ] || [ $dt -gt 60 ] || ! grep -q "fails on purpose" <<<"$out"; then
  echo "FAIL srun mt_fatal propagation: exit $r after ${dt}s"; echo "$out" | tail -20; rc=1
else echo "ok   srun: mt_fatal on rank 1 ends the step (exit $r after ${dt}s)"; fi
exit $rc
