#!/usr/bin/env bash
# runner: alone (timed: run with no other test beside it, tests/run_tests.sh)
# A blocked log write never stops the save (README "Running on a cluster",
# core/log_stream.h): a rank whose stdout is a pipe nobody reads sleeps in
# write() once the pipe is full; the exit signal's handler makes its output
# non-blocking, so it drops (and counts) that output and saves.
#  1. one process, stdout a FIFO nobody reads (its buffer shrunk to one page
#     so that it fills in a few iterations), SIGTERM once the process sleeps
#     in pipe_write: exit 0, checkpoint of the exit iteration, a warning on
#     stderr counting the dropped lines;
#  2. mpirun --mca odls_base_sigkill_timeout 12, 2 ranks, rank 0's stdout such
#     a FIFO: SIGTERM to mpirun once rank 0 sleeps in pipe_write (mpirun
#     forwards SIGTERM 12 s later and SIGKILLs 12 s after that): the
#     checkpoint is saved. (Before the fix neither saved: the rank slept in
#     write() until SIGKILL.)
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
ARGS="--config $CFG --set training.train_iters=100000 --set training.eval_interval=0 --set logging.log_interval=1"

# hold_fifo PATH: a FIFO held open for reading and never read, its buffer one
# page; sets HOLDER to the holder's pid
hold_fifo() {
  mkfifo "$1"
  /usr/bin/python3 -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ
open(sys.argv[1] + ".ready", "w").close()
time.sleep(600)' "$1" </dev/null >/dev/null 2>&1 &
  HOLDER=$!
  for _ in $(seq 300); do [ -e "$1.ready" ] && return 0; sleep 0.1; done
  echo "the FIFO holder did not start"; return 1
}
# wait_blocked PID: until PID sleeps in a pipe write (90 s at most)
wait_blocked() {
  for _ in $(seq 900); do grep -q pipe_write "/proc/$1/wchan" 2>/dev/null && return 0; sleep 0.1; done
  echo "process $1 never blocked in a pipe write (wchan $(cat /proc/$1/wchan 2>/dev/null))"; return 1
}
# check_saved LOG_ERR SAVE_DIR: a checkpoint was published; prints its iteration
check_saved() {
  [ -f "$2/latest_checkpointed_iteration.txt" ] || { echo "no checkpoint in $2"; tail -5 "$1"; return 1; }
  cat "$2/latest_checkpointed_iteration.txt"
}

# --- 1. one process ---
H1=; H2=; JOB=
trap 'kill $H1 $H2 $JOB 2>/dev/null || true; rm -rf "$TMP"' EXIT
hold_fifo "$TMP/p1"; H1=$HOLDER
timeout -s KILL 150 "$MT" $ARGS --set checkpoint.save="$TMP/c1" >"$TMP/p1" 2>"$TMP/e1" & JOB=$!
P=
for _ in $(seq 100); do P=$(pgrep -P $JOB) && break; sleep 0.1; done
wait_blocked $P
kill -TERM $P
set +e; wait $JOB; rc=$?; set -e
[ $rc = 0 ] || { echo "one process, stdout blocked: exit $rc after SIGTERM (want 0)"; cat "$TMP/e1"; exit 1; }
IT=$(check_saved "$TMP/e1" "$TMP/c1")
grep -E "warning: [1-9][0-9]* line\(s\) \([0-9]+ bytes\) of this rank's log output were dropped after the signal" "$TMP/e1" ||
  { echo "no drop count on stderr"; cat "$TMP/e1"; exit 1; }
echo "one process, stdout a full pipe nobody reads: SIGTERM -> exit 0, checkpoint of iteration $IT"

# --- 2. mpirun with a raised kill timeout, rank 0's stdout blocked ---
hold_fifo "$TMP/p2"; H2=$HOLDER
cat >"$TMP/wrap.sh" <<'SH'
#!/bin/bash
if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec "$@" >"$MT_FIFO"; else exec "$@"; fi
SH
chmod +x "$TMP/wrap.sh"
MT_FIFO="$TMP/p2" timeout -s KILL 150 mpirun --mca odls_base_sigkill_timeout 12 -np 2 --oversubscribe --bind-to none \
  -x MT_FIFO -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
  "$TMP/wrap.sh" "$MT" $ARGS --set checkpoint.save="$TMP/c2" >"$TMP/m.log" 2>&1 & JOB=$!
R0=
for _ in $(seq 300); do
  for p in $(pgrep -x megatrain); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "MT_FIFO=$TMP/p2" &&
      tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=0" && R0=$p
  done
  [ -n "$R0" ] && break; sleep 0.1
done
[ -n "$R0" ] || { echo "rank 0 not found"; cat "$TMP/m.log"; exit 1; }
wait_blocked $R0
t0=$(date +%s)
kill -TERM "$(pgrep -P $JOB -x mpirun)"
set +e; wait $JOB; rc=$?; set -e
IT=$(check_saved "$TMP/m.log" "$TMP/c2") || { cat "$TMP/m.log"; exit 1; }
grep -q "warning: [1-9][0-9]* line(s) .* dropped after the signal" "$TMP/m.log" ||
  { echo "mpirun: no drop count from rank 0"; cat "$TMP/m.log"; exit 1; }
echo "mpirun --mca odls_base_sigkill_timeout 12, rank 0's stdout a full pipe: SIGTERM to mpirun -> checkpoint of iteration $IT (mpirun exit $rc, $(( $(date +%s) - t0 )) s)"
