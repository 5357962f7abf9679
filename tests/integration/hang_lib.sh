# tests/integration/hang_lib.sh — helpers of the hang tests (sourced after
# lib.sh): run a job with a frozen or stopped rank, check that it ended, and
# check what every report names (docs/communication.md "Hang diagnosis").
TO=0.05 # minutes: parallel.distributed_timeout_minutes of the hang cases
HANG_ARGS="--config $CFG --set training.train_iters=1000 --set training.eval_interval=0 --set parallel.distributed_timeout_minutes=$TO"
MPI_HANG="mpirun --oversubscribe --bind-to none -x MEGATRAIN_FAILPOINT -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"

# run_frozen LOG LAUNCHER...: start the job in the background, time from the
# failpoint's line (freeze or stop) to the end; prints "rc dt"
run_frozen() {
  local log=$1; shift
  timeout -s KILL 150 "$@" >"$log" 2>&1 & local pid=$!
  local i; for i in $(seq 1 900); do grep -q "failpoint \(freeze\|stop\)" "$log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  local t0; t0=$(date +%s.%N)
  set +e; wait $pid; local rc=$?; set -e
  echo "$rc $(echo "$(date +%s.%N) - $t0" | bc)"
}
# check_ended NAME LOG RC DT: non-zero exit within the deadline + 30 s, no rank left
check_ended() {
  local left; left=$(pgrep -f "^$MT --config $CFG --set training.train_iters=1000" | wc -l || true)
  echo "$1: exit $3, ${4}s after the failpoint, $left rank processes left"
  grep -q "failpoint \(freeze\|stop\)" "$2" && [ "$3" != 0 ] && [ "$left" = 0 ] &&
    [ "$(echo "$4 < 3 + 30" | bc)" = 1 ] || { tail -20 "$2"; exit 1; }
}
# check_names LOG RANK MODE: every hang report ("megatrain: error: rank R: ...")
# names RANK among the ranks it waits for (not arrived, its peer, not
# running, or where the waits lead), and at least one report exists; with
# MODE stop, RANK itself reports no hang, and (unless HANG_STOP_WOKEN=0: a
# launcher that kills without SIGCONT) says it was not scheduled.
# Prints the row of the matrix "reporting rank -> ranks named".
check_names() {
  /usr/bin/python3 - "$1" "$2" "$3" "${HANG_STOP_WOKEN:-1}" <<'PY'
import re, sys
log, frozen, mode, woken = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
rows, bad, notes = [], [], []
for line in open(log, errors="replace"):
    w = re.search(r"\[rank (\d+)\] megatrain: warning: rank \d+: this rank was not scheduled for ([0-9.]+) s", line)
    if w:
        notes.append("rank %s not scheduled for %s s" % (w.group(1), w.group(2)))
    m = re.search(r"megatrain: error: rank (\d+): (.*)", line)
    if not m or "distributed_timeout_minutes = " not in m.group(2):
        continue
    r, tail = int(m.group(1)), m.group(2).split("distributed_timeout_minutes = ", 1)[1]
    named = [int(x) for x in re.findall(r"(?:: |, |rank )(\d+) \(", tail)]
    rows.append("%d -> %s" % (r, ",".join(map(str, named)) or "none"))
    if frozen not in named:
        bad.append(line.strip())
    if mode == "stop" and r == frozen:
        bad.append("the stopped rank reported a hang: " + line.strip())
print("    reports (reporting rank -> ranks named): %s%s" % ("; ".join(rows) or "none",
      ("; " + "; ".join(notes)) if notes else ""))
if not rows:
    sys.exit("no hang report")
if bad:
    sys.exit("reports that do not name rank %d:\n  %s" % (frozen, "\n  ".join(bad)))
if mode == "stop" and woken and not any(n.startswith("rank %d " % frozen) for n in notes):
    sys.exit("rank %d, woken by the abort's SIGCONT, did not say it was not scheduled" % frozen)
PY
}
# hang_case NAME LOG MODE RANK LAUNCHER...: MEGATRAIN_FAILPOINT=MODE:RANK:3,
# the job must end and every report name RANK
hang_case() {
  local name=$1 log=$2 mode=$3 rank=$4 rc dt; shift 4
  read -r rc dt < <(MEGATRAIN_FAILPOINT=$mode:$rank:3 run_frozen "$log" "$@")
  check_ended "$name" "$log" "$rc" "$dt"
  check_names "$log" "$rank" "$mode" || { tail -20 "$log"; exit 1; }
}
