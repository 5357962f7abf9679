#!/usr/bin/env bash
# tests/integration/test_comm_async.sh — the started collectives of
# parallel/comm.h and their ordering rules (build/tests/tools/comm_async_check)
# on 2 and 4 ranks: with the communication thread, without it
# (MEGATRAIN_COMM_THREAD=0: every started collective runs at start), and
# under a simulated link (MEGATRAIN_SIM_LINK) whose latency the accounts
# must show; a malformed MEGATRAIN_SIM_LINK must end the job with a message
# quoting it.
set -u
cd "$(dirname "$0")/../.."
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CHECK=build/tests/tools/comm_async_check
[ -x $CHECK ] || { echo "missing $CHECK (run make tests)"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPIRUN="mpirun --oversubscribe"
rc=0
run() { # NAME NP ENV... -- ARGS...
  local name=$1 np=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done
  shift
  out=$(timeout 120 $MPIRUN -np "$np" "${envs[@]}" $CHECK "$@" 2>&1); r=$?
  if [ $r -ne 0 ] || ! grep -q "comm_async_check OK" <<<"$out"; then
    echo "FAIL $name (exit $r)"; echo "$out" | tail -15; rc=1
  else
    echo "ok   $name"; grep "simulated link" <<<"$out" | sed 's/^/     /'
  fi
}
run "2 ranks, communication thread" 2 MEGATRAIN_COMM_THREAD=1 --
run "4 ranks, communication thread" 4 MEGATRAIN_COMM_THREAD=1 --
run "2 ranks, started collectives run at start" 2 MEGATRAIN_COMM_THREAD=0 --
run "2 ranks, simulated link dp 200 ms" 2 "MEGATRAIN_SIM_LINK=dp=1,200000;10,5" -- --sim-lat-ms 200
run "2 ranks, simulated link, no thread" 2 MEGATRAIN_COMM_THREAD=0 "MEGATRAIN_SIM_LINK=dp=1,20000" -- --sim-lat-ms 20

for bad in "fast" "2" "dp=2" "dp=0,5" "dp=2,5;dp=3,5" "=2,5"; do
  out=$(MEGATRAIN_SIM_LINK="$bad" timeout 60 $CHECK 2>&1); r=$?
  if [ $r -ne 0 ] && grep -qF "MEGATRAIN_SIM_LINK='$bad'" <<<"$out"; then
    echo "ok   MEGATRAIN_SIM_LINK='$bad' refused"
  else
    echo "FAIL MEGATRAIN_SIM_LINK='$bad' (exit $r)"; echo "$out" | tail -5; rc=1
  fi
done
# a kind that names no group of the run (a typo) ends the start-up too
source tests/integration/lib.sh
prepare_ts "$TS"
r=0
out=$(MEGATRAIN_SIM_LINK="dq=2,50" timeout 60 "$MT" --config "$CFG" --set training.train_iters=1 \
  --set training.lr_warmup_iters=1 2>&1) || r=$?
if [ $r -ne 0 ] && grep -qF "MEGATRAIN_SIM_LINK='dq=2,50': no group of this run is named 'dq' (its groups: " <<<"$out"; then
  echo "ok   MEGATRAIN_SIM_LINK='dq=2,50' (no such group) refused: $(grep -m1 -o "its groups: .*" <<<"$out")"
else
  echo "FAIL MEGATRAIN_SIM_LINK='dq=2,50' (exit $r)"; echo "$out" | tail -5; rc=1
fi
exit $rc
