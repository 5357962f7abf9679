#!/usr/bin/env bash
# bench/bench_preempt_mpirun.sh — which ways of stopping an mpirun job save a
# checkpoint (README "Running on a cluster", Under mpirun). Each case is one
# line: one run of 2 ranks (tests/configs/gpt-test.json, dp=2) signalled
# after start-up, reporting whether a checkpoint was published, at which
# iteration, seconds from the signal to that publication and to mpirun's
# exit, mpirun's exit status, and the log lines rank 0 dropped because its
# output was not being read (core/log_stream.h; "-" when it reported none).
#   bash bench/bench_preempt_mpirun.sh CASE...      CASE = HOW:T:LI[:KILL]
#     HOW   term-mpirun | usr1-mpirun | term-rank1 (SIGTERM to world rank 1 only)
#     T     mpirun --mca odls_base_sigkill_timeout T
#     LI    logging.log_interval (1 = a line per iteration: mpirun's pty fills
#           while it sleeps in its kill sequence; 100 = almost no output)
#     KILL  optional: SIGKILL to mpirun and the ranks KILL s after the signal
#           (Slurm's KillWait after the SIGTERM of a preemption or scancel)
#   MEGATRAIN_BIN=path   the binary to measure (default ./megatrain)
# Example (the README's table):
#   nice bash bench/bench_preempt_mpirun.sh term-mpirun:1:1 term-mpirun:20:1 term-mpirun:20:1:30
set -u
cd "$(dirname "$0")/.."
BIN=${MEGATRAIN_BIN:-./megatrain}
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
[ -f build/testdata/tinyshakespeare_text_document.idx ] ||
  { echo "build/testdata missing: run a test first (tests/integration/lib.sh prepares it)"; exit 1; }
printf '%-22s %-6s %-10s %-14s %-14s %-10s %s\n' case saved iteration "signal->save" "signal->exit" "mpirun rc" dropped
for c in "$@"; do
  IFS=: read -r how T LI KILL <<<"$c"
  D=$TMP/$c; mkdir -p "$D"
  mpirun --mca odls_base_sigkill_timeout "$T" -np 2 --oversubscribe --bind-to none \
    -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
    "$BIN" --config tests/configs/gpt-test.json --set training.train_iters=100000 \
    --set training.eval_interval=0 --set logging.log_interval="$LI" \
    --set checkpoint.save="$D/ck" >"$D/log" 2>&1 & M=$!
  for _ in $(seq 600); do grep -q "FLOPs per iteration" "$D/log" && break; sleep 0.1; done
  sleep 3
  RANKS=$(pgrep -P $M | tr '\n' ' ')
  t0=$(date +%s.%N)
  case $how in
    term-mpirun) kill -TERM $M ;;
    usr1-mpirun) kill -USR1 $M ;;
    term-rank1)
      for p in $RANKS; do
        tr '\0' '\n' <"/proc/$p/environ" | grep -qx OMPI_COMM_WORLD_RANK=1 && kill -TERM "$p"
      done ;;
  esac
  G=
  [ -n "${KILL:-}" ] && { ( sleep "$KILL"; kill -9 $M $RANKS 2>/dev/null ) & G=$!; }
  { wait $M; rc=$?; } 2>/dev/null
  t1=$(date +%s.%N)
  [ -n "$G" ] && { pkill -P $G 2>/dev/null; kill $G 2>/dev/null; wait $G 2>/dev/null; }
  # ranks left by a killed mpirun are ended here
  kill -9 $RANKS 2>/dev/null
  L=$D/ck/latest_checkpointed_iteration.txt
  drop=$(grep -o "rank 0\] megatrain: warning: [0-9]* line(s)" "$D/log" | grep -o "[0-9]* line" | cut -d' ' -f1)
  if [ -f "$L" ]; then
    ts=$(stat -c %.Y "$L")
    printf '%-22s %-6s %-10s %-14s %-14s %-10s %s\n' "$c" yes "$(cat "$L")" \
      "$(printf %.1f "$(echo "$ts - $t0" | bc)") s" "$(printf %.1f "$(echo "$t1 - $t0" | bc)") s" "$rc" "${drop:--}"
  else
    printf '%-22s %-6s %-10s %-14s %-14s %-10s %s\n' "$c" no - - "$(printf %.1f "$(echo "$t1 - $t0" | bc)") s" \
      "$rc" "${drop:--}"
  fi
done
