#!/usr/bin/env bash
# tests/integration/test_comm.sh — multi-rank checks of parallel/ (MPI engine):
#  1. build/tests/tools/comm_check on 1, 2, 4 and 8 ranks over many layouts:
#     every collective on every group kind against a serial reference, exact
#     byte counters, cross-rank agreement check; a few layouts again on the
#     staging engine (--staged 1: every buffer staged through host copies);
#  2. failure propagation (build/tests/tools/comm_fail): a rank calling
#     mt_fatal, a rank killed with SIGKILL, an NCCL group without a GPU, and a
#     config-hash mismatch must each end the whole job non-zero within 60 s.
# Each comm_check run covers every collective in every dtype on every group
# kind of its layout, so CI (MEGATRAIN_TEST_FULL unset) runs 10 of the 26
# layouts: both engines, groups of 1, 2 and 4 ranks and one 8-rank job, every
# group kind (tp, pp, dp, cp, ep, etp, their products) at least once; FULL
# runs all 26. Step 2 runs whole in both modes.
set -u
cd "$(dirname "$0")/../.."
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CHECK=build/tests/tools/comm_check FAIL=build/tests/tools/comm_fail
for b in $CHECK $FAIL; do
  [ -x $b ] || { echo "missing $b (run make tests)"; exit 1; }
done
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPIRUN="mpirun --oversubscribe"
rc=0

layouts=(
  "1:"
  "2:" "2:--tp 2" "2:--pp 2" "2:--ep 2 --etp 1"
  "4:--tp 2 --pp 2" "4:--pp 4" "4:--ep 4 --etp 1" "4:--tp 2 --ep 2"
  "8:--tp 2 --pp 4" "8:--tp 2 --ep 4 --etp 1" "8:--tp 2 --pp 2 --ep 2 --etp 1"
  "8:--tp 2 --pp 2 --ep 2" "8:--tp 4 --ep 2 --etp 1"
  "2:--cp 2" "4:--cp 2" "4:--cp 4" "4:--tp 2 --cp 2" "4:--cp 2 --pp 2" "4:--cp 2 --ep 2 --etp 1"
  "8:--tp 2 --cp 2 --pp 2" "8:--cp 2 --ep 4 --etp 1"
  # the staging engine (parallel/comm_staged.c) on every buffer
  "1:--staged 1" "2:--tp 2 --staged 1" "4:--tp 2 --pp 2 --staged 1"
  "4:--cp 2 --ep 2 --etp 1 --staged 1"
)
if [ "${MEGATRAIN_TEST_FULL:-0}" != 1 ]; then
  layouts=(
    "1:" "2:--tp 2" "4:--tp 2 --pp 2" "4:--pp 4" "4:--tp 2 --ep 2" "4:--cp 2 --ep 2 --etp 1"
    "8:--tp 2 --pp 2 --ep 2 --etp 1" "8:--tp 2 --cp 2 --pp 2"
    "2:--tp 2 --staged 1" "4:--cp 2 --ep 2 --etp 1 --staged 1"
  )
fi
for l in "${layouts[@]}"; do
  np=${l%%:*}; args=${l#*:}
  out=$(timeout 120 $MPIRUN -np "$np" $CHECK $args 2>&1); r=$?
  if [ $r -ne 0 ] || ! grep -q "comm_check OK" <<<"$out"; then
    echo "FAIL comm_check np=$np $args (exit $r)"; echo "$out" | tail -20; rc=1
  else
    echo "ok   comm_check np=$np $args"
  fi
done

# expect_fail NAME PATTERN NP ARGS...: job must exit non-zero within 60 s and
# print PATTERN.
expect_fail() {
  local name=$1 pat=$2 np=$3; shift 3
  local t0=$(date +%s) out r
  out=$(timeout 90 $MPIRUN -np "$np" $FAIL "$@" 2>&1); r=$?
  local dt=$(( $(date +%s) - t0 ))
  if [ $r -eq 0 ] || [ $r -eq 124 ] || [ $dt -gt 60 ] || ! grep -q "$pat" <<<"$out"; then
    echo "FAIL $name: exit $r after ${dt}s, want non-zero within 60 s and '$pat'"
    echo "$out" | tail -20; rc=1
  elif grep -q "unexpected" <<<"$out"; then
    echo "FAIL $name: a rank left the collective"; rc=1
  else
    echo "ok   $name (exit $r after ${dt}s)"
  fi
}
expect_fail "mt_fatal on rank 1 of 4" "rank 1 fails on purpose" 4 fatal 1
expect_fail "SIGKILL of rank 2 of 4" "signal 9" 4 kill 2
expect_fail "mt_fatal on rank 0 of 2" "rank 0 fails on purpose" 2 fatal 0
expect_fail "NCCL group without GPU" "NCCL" 2 nccl
expect_fail "config hash mismatch" "config hash differs across ranks: rank 0 has 0x0000000000000000; ranks 1,3 have" 4 agree
exit $rc
