#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Failure handling of a multi-rank training job:
#  - a rank killed (SIGKILL) mid-run makes every other rank exit and mpirun
#    return non-zero within 60 s;
#  - a config that differs on one rank is refused (exit non-zero, message
#    naming the ranks) before training starts;
#  - a data error on every rank exits 1 with one clear message;
#  - a run of non-finite losses skips the updates, counts them, then aborts.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
# 1. kill one rank mid-run
$MPI -np 4 "$MT" --config $CFG --set training.train_iters=100000 --set training.eval_interval=0 \
  --set logging.metrics_file="$TMP/k.jsonl" >"$TMP/kill.log" 2>&1 &
mpipid=$!
for i in $(seq 1 100); do [ -s "$TMP/k.jsonl" ] && break; sleep 0.2; done
victim=$(pgrep -f "^$MT --config $CFG --set training.train_iters=100000" | tail -1 || true)
[ -n "$victim" ] || { echo "no rank process found"; exit 1; }
t0=$(date +%s.%N)
set +e
kill -9 "$victim"
( sleep 70; kill -9 $mpipid 2>/dev/null ) & guard=$!
wait $mpipid; rc=$?
set -e
dt=$(echo "$(date +%s.%N) - $t0" | bc)
kill $guard 2>/dev/null
left=$(pgrep -f "^$MT --config $CFG --set training.train_iters=100000" | wc -l || true)
echo "killed rank pid $victim: mpirun exit $rc after ${dt}s, $left rank processes left"
[ $rc -ne 0 ] && [ "$left" = 0 ] && [ "$(echo "$dt < 60" | bc)" = 1 ] || { tail -20 "$TMP/kill.log"; exit 1; }
# 2. a config that differs on one rank (MPMD launch)
set +e
mpirun --oversubscribe -x OMPI_MCA_mpi_yield_when_idle -np 1 "$MT" --config $CFG : \
  -np 1 "$MT" --config $CFG --set training.lr=2e-3 >"$TMP/cfg.log" 2>&1; rc=$?
set -e
echo "config differing on rank 1: exit $rc"
[ $rc -ne 0 ] && grep -q "config differs across ranks" "$TMP/cfg.log" || { cat "$TMP/cfg.log"; exit 1; }
grep -m1 "differs" "$TMP/cfg.log"
# 3. a data error everywhere: one message, exit 1
set +e
$MPI -np 2 "$MT" --config $CFG --set data.data_path='["/nonexistent/corpus"]' >"$TMP/d.log" 2>&1; rc=$?
set -e
echo "missing data on all ranks: exit $rc"
[ $rc -ne 0 ] && grep -q "/nonexistent/corpus" "$TMP/d.log" || { cat "$TMP/d.log"; exit 1; }
grep -m1 "nonexistent" "$TMP/d.log"
# 4. non-finite loss: updates are skipped and counted (Megatron's "number of
#    nan iterations"); max_nan_iters in a row abort with exit 1
set +e
"$MT" --config $CFG --set training.lr=1e30 --set training.clip_grad=0 --set training.lr_warmup_iters=0 \
  --set training.max_nan_iters=3 --set logging.log_interval=1 >"$TMP/nan.log" 2>&1; rc=$?
set -e
echo "lr=1e30: exit $rc"
[ $rc = 1 ] && grep -q "number of nan iterations:   2" "$TMP/nan.log" &&
  grep -q "3 consecutive iterations had a non-finite loss" "$TMP/nan.log" || { cat "$TMP/nan.log"; exit 1; }
grep -m1 "consecutive" "$TMP/nan.log" | cut -c1-160
