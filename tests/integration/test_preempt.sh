#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# Preemption (training.exit_signal_handler, exit_duration_in_mins) and the
# straggler report (logging.log_straggler):
#  - SIGTERM to ONE rank (rank 3) of a 4-rank tp=2 dp=2 job mid-run: every
#    rank saves at the next iteration boundary, exit 0 with the reason, and
#    resuming continues bitwise equal to an uninterrupted run;
#  - SIGUSR1 to a single process: the same;
#  - exit_duration_in_mins: saves and exits 0 with its own line;
#  - SIGTERM during a save (failpoint signal_in_save:N): the save finishes
#    and the run exits right after it, saved once;
#  - exit_signal_handler=false: SIGTERM kills at once (nothing saved);
#  - a 2-rank run whose rank 1 is slowed (failpoint straggler:1:MS) names
#    rank 1 as the slowest in the log line and the JSONL.
# The interrupted runs are slowed by the straggler failpoint (a sleep that
# does not change the numbers) so that the signal lands mid-run.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun -np 4 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
TP2="--set parallel.tensor_model_parallel_size=2"

# wait_for FILE PATTERN: until PATTERN appears in FILE (60 s at most)
wait_for() {
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1"; tail -5 "$1"; return 1
}
# rank_pid RANK: pid of the megatrain process with OMPI_COMM_WORLD_RANK=RANK
rank_pid() {
  for p in $(pgrep -x megatrain); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# check_stop LOG SAVE_DIR SIGNAL RANK: the exit line, a checkpoint at that
# iteration, fewer than train_iters iterations; prints the iteration
check_stop() {
  local line it
  line=$(grep "> exiting after iteration" "$1") || { echo "no exit line"; tail -5 "$1"; return 1; }
  echo "$line" | grep -q "received $3 on rank $4; checkpoint saved to" || { echo "bad exit line: $line"; return 1; }
  it=$(echo "$line" | sed -E 's/.*after iteration ([0-9]+):.*/\1/')
  [ "$(cat "$2/latest_checkpointed_iteration.txt")" = "$it" ] || { echo "latest != $it"; return 1; }
  [ "$it" -lt 20 ] || { echo "signal came too late (iteration $it)"; return 1; }
  echo "$line" >&2
  echo "$it"
}

# --- 4 ranks tp=2 dp=2, SIGTERM to rank 3 only ---
$MPI "$MT" --config $CFG $TP2 --set logging.metrics_file="$TMP/ref4.jsonl" >"$TMP/ref4.log" 2>&1 ||
  { echo "reference run failed"; tail -20 "$TMP/ref4.log"; exit 1; }
MEGATRAIN_FAILPOINT=straggler:0:300 $MPI -x MEGATRAIN_FAILPOINT "$MT" --config $CFG $TP2 \
  --set logging.log_interval=1 --set checkpoint.save="$TMP/c4" \
  --set logging.metrics_file="$TMP/int4.jsonl" >"$TMP/int4.log" 2>&1 & JOB=$!
wait_for "$TMP/int4.log" "iteration        3/"
PID3=$(rank_pid 3) || { echo "rank 3 not found"; kill $JOB; exit 1; }
kill -TERM "$PID3"
set +e; wait $JOB; rc=$?; set -e
[ $rc = 0 ] || { echo "4-rank job: exit $rc after SIGTERM to rank 3"; tail -20 "$TMP/int4.log"; exit 1; }
IT=$(check_stop "$TMP/int4.log" "$TMP/c4" SIGTERM 3)
ls "$TMP/c4/iter_$(printf %07d "$IT")" >/dev/null
$MPI "$MT" --config $CFG $TP2 --set checkpoint.load="$TMP/c4" \
  --set logging.metrics_file="$TMP/int4.jsonl" >"$TMP/res4.log" 2>&1 ||
  { echo "resumed run failed"; tail -20 "$TMP/res4.log"; exit 1; }
grep -q "resumed from iteration $IT" "$TMP/res4.log"
echo "tp2 dp2, SIGTERM to rank 3, stopped after iteration $IT, resumed:"
compare_metrics "$TMP/ref4.jsonl" "$TMP/int4.jsonl" 0

# --- one process, SIGUSR1 ---
"$MT" --config $CFG --set logging.metrics_file="$TMP/ref1.jsonl" >/dev/null
MEGATRAIN_FAILPOINT=straggler:0:300 "$MT" --config $CFG --set logging.log_interval=1 \
  --set checkpoint.save="$TMP/c1" --set logging.metrics_file="$TMP/int1.jsonl" >"$TMP/int1.log" 2>&1 & JOB=$!
wait_for "$TMP/int1.log" "iteration        3/"
kill -USR1 $JOB
set +e; wait $JOB; rc=$?; set -e
[ $rc = 0 ] || { echo "one process: exit $rc after SIGUSR1"; tail -20 "$TMP/int1.log"; exit 1; }
IT=$(check_stop "$TMP/int1.log" "$TMP/c1" SIGUSR1 0)
"$MT" --config $CFG --set checkpoint.load="$TMP/c1" --set logging.metrics_file="$TMP/int1.jsonl" >"$TMP/res1.log"
grep -q "resumed from iteration $IT" "$TMP/res1.log"
echo "one process, SIGUSR1, stopped after iteration $IT, resumed:"
compare_metrics "$TMP/ref1.jsonl" "$TMP/int1.jsonl" 0

# --- exit_duration_in_mins: 0.001 min = 60 ms, over after the first iteration ---
"$MT" --config $CFG --set training.exit_duration_in_mins=0.001 --set checkpoint.save="$TMP/cd" \
  >"$TMP/dur.log" 2>&1 || { echo "exit_duration_in_mins: exit $?"; tail "$TMP/dur.log"; exit 1; }
grep "> exiting after iteration 1: .* minutes since start-up >= training.exit_duration_in_mins = 0.001; checkpoint saved" "$TMP/dur.log"
[ "$(cat "$TMP/cd/latest_checkpointed_iteration.txt")" = 1 ]
# with checkpoint.async_save: the background write is finished and published before the exit
"$MT" --config $CFG --set training.exit_duration_in_mins=0.001 --set checkpoint.save="$TMP/ca" \
  --set checkpoint.async_save=true >"$TMP/dura.log" 2>&1 || { echo "async: exit $?"; tail "$TMP/dura.log"; exit 1; }
grep -q "> exiting after iteration 1: .*checkpoint being saved to .* (asynchronous; finished before the process exits)" "$TMP/dura.log"
[ "$(cat "$TMP/ca/latest_checkpointed_iteration.txt")" = 1 ] || { echo "async: iteration 1 not published"; exit 1; }
# without checkpoint.save: says nothing was saved
"$MT" --config $CFG --set training.exit_duration_in_mins=0.001 >"$TMP/dur2.log" 2>&1
grep -q "nothing saved (checkpoint.save is not set)" "$TMP/dur2.log"

# --- a signal during a save: the save finishes, the run ends right after it,
# without a second save ---
MEGATRAIN_FAILPOINT=signal_in_save:5 "$MT" --config $CFG --set checkpoint.save_interval=5 \
  --set checkpoint.save="$TMP/cs" >"$TMP/ins.log" 2>&1 || { echo "signal in save: exit $?"; tail "$TMP/ins.log"; exit 1; }
grep "> exiting after iteration 5: received SIGTERM on rank 0; checkpoint saved" "$TMP/ins.log"
[ "$(grep -c "saved checkpoint at iteration" "$TMP/ins.log")" = 1 ] &&
  [ "$(cat "$TMP/cs/latest_checkpointed_iteration.txt")" = 5 ] ||
  { echo "signal in save: expected one save, of iteration 5"; grep saved "$TMP/ins.log"; exit 1; }

# --- exit_signal_handler=false: the default disposition (killed, nothing saved) ---
MEGATRAIN_FAILPOINT=straggler:0:300 "$MT" --config $CFG --set logging.log_interval=1 \
  --set training.exit_signal_handler=false --set checkpoint.save="$TMP/cn" >"$TMP/off.log" 2>&1 & JOB=$!
wait_for "$TMP/off.log" "iteration        2/"
kill -TERM $JOB
set +e; wait $JOB; rc=$?; set -e
[ $rc = 143 ] && [ ! -e "$TMP/cn/latest_checkpointed_iteration.txt" ] ||
  { echo "exit_signal_handler=false: exit $rc (expected 143), or a checkpoint was written"; exit 1; }
echo "exit_signal_handler=false: SIGTERM kills at once (exit 143, nothing saved)"

# --- straggler report: rank 1 of 2 sleeps 300 ms per step ---
MEGATRAIN_FAILPOINT=straggler:1:300 mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
  -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_FAILPOINT "$MT" --config $CFG \
  --set training.train_iters=10 --set logging.metrics_file="$TMP/s.jsonl" >"$TMP/s.log" 2>&1
grep -m1 -o "straggler: slowest rank 1 [0-9.]* ms, fastest rank 0 [0-9.]* ms |" "$TMP/s.log" ||
  { echo "straggler line missing or wrong"; grep iteration "$TMP/s.log"; exit 1; }
/usr/bin/python3 - "$TMP/s.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
s = [r for r in recs if "straggler_max_ms" in r]
assert [r["iteration"] for r in s] == [5, 10], [r["iteration"] for r in s]
for r in s:
    assert r["straggler_max_rank"] == 1 and r["straggler_min_rank"] == 0, r
    assert r["straggler_max_ms"] >= r["straggler_min_ms"] + 150, r
print("straggler JSONL: iterations 5 and 10 name rank 1 slowest (%.1f ms) and rank 0 fastest (%.1f ms)"
      % (s[-1]["straggler_max_ms"], s[-1]["straggler_min_ms"]))
PY
