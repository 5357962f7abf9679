#!/usr/bin/env bash
# One writer per checkpoint directory (docs/checkpoint.md "One writer per
# directory"): while run A holds checkpoint.save (stalled in a save by the
# checkpoint_stall failpoint), run B on the same directory refuses at
# start-up on every rank, naming A's host and pid, exit 1, and leaves A's
# temporary directory alone; after A dies (kill -9: the kernel releases the
# lock) run C proceeds, removes A's leftover temporary directory and saves.
# The lock cannot be deleted away: with run D's lock file deleted and
# recreated (D stopped meanwhile, so the order is certain), run E is still
# refused naming D's pid (the directory lock; /proc/locks), and D takes the
# file back at its next save and finishes. When another process holds the
# recreated file instead (as a run on another host of an NFS mount could),
# run F stops at its next save, exit 1, without publishing: "latest" and the
# directory keep what F had published before.
source "$(dirname "$0")/lib.sh"
S="$TMP/save"
MPIRUN="timeout 120 mpirun --oversubscribe --bind-to none"
MEGATRAIN_FAILPOINT=checkpoint_stall:2 "$MT" --config $CFG --set checkpoint.save="$S" \
  --set checkpoint.save_interval=2 --set training.train_iters=4 >"$TMP/a.log" 2>&1 &
A=$!
trap 'kill -9 $A 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 600); do compgen -G "$S/iter_0000002.tmp.*" >/dev/null && break; sleep 0.1; done
compgen -G "$S/iter_0000002.tmp.*" >/dev/null || { echo "run A never started its save"; cat "$TMP/a.log"; exit 1; }
cat "$S/.megatrain.lock"
set +e
$MPIRUN -np 2 "$MT" --config $CFG --set checkpoint.save="$S" --set training.train_iters=4 \
  >"$TMP/b.log" 2>&1; rc=$?
set -e
cat "$TMP/b.log"
[ $rc -eq 1 ] || { echo "run B exited $rc, want 1"; exit 1; }
[ "$(grep -c "is in use by another run (host $(hostname), pid $A, started " "$TMP/b.log")" = 2 ] \
  || { echo "run B did not refuse on both ranks naming run A (pid $A)"; exit 1; }
compgen -G "$S/iter_0000002.tmp.*" >/dev/null || { echo "run B removed run A's temporary directory"; exit 1; }
kill -9 $A; wait $A 2>/dev/null || true
"$MT" --config $CFG --set checkpoint.save="$S" --set checkpoint.save_interval=2 \
  --set training.train_iters=4 >"$TMP/c.log" 2>&1 || { cat "$TMP/c.log"; exit 1; }
grep "removed '$S/iter_0000002.tmp" "$TMP/c.log"
! compgen -G "$S/*.tmp*" >/dev/null || { echo "leftovers remain:"; ls "$S"; exit 1; }
[ "$(cat "$S/latest_checkpointed_iteration.txt")" = 4 ] || { echo "run C did not save"; exit 1; }
echo "second run refused while the first held the directory; after the first crashed, a third cleaned up and saved"

# wait_latest DIR N: until DIR's latest names N (60 s at most)
wait_latest() {
  for _ in $(seq 600); do [ "$(cat "$1/latest_checkpointed_iteration.txt" 2>/dev/null)" = "$2" ] && return 0; sleep 0.1; done
  echo "timed out waiting for iteration $2 in $1"; return 1
}
SLOW="--set checkpoint.save_interval=3 --set training.train_iters=9 --set training.eval_interval=0"
# --- the lock file deleted and recreated under run D ---
D="$TMP/d"
MEGATRAIN_FAILPOINT=straggler:0:300 "$MT" --config $CFG --set checkpoint.save="$D" $SLOW >"$TMP/d.log" 2>&1 &
PD=$!
trap 'kill -9 $PD 2>/dev/null || true; rm -rf "$TMP"' EXIT
wait_latest "$D" 3
kill -STOP $PD
rm "$D/.megatrain.lock"; touch "$D/.megatrain.lock"
set +e
"$MT" --config $CFG --set checkpoint.save="$D" >"$TMP/e.log" 2>&1; rc=$?
set -e
kill -CONT $PD
cat "$TMP/e.log"
[ $rc -eq 1 ] || { echo "run E exited $rc, want 1"; exit 1; }
grep -q "checkpoint.save '$D' is in use by another run (pid $PD on this host, from /proc/locks: the lock file '$D/.megatrain.lock' does not name it" "$TMP/e.log" ||
  { echo "run E was not refused naming run D (pid $PD)"; exit 1; }
set +e; wait $PD; rc=$?; set -e
[ $rc -eq 0 ] || { echo "run D exited $rc"; tail "$TMP/d.log"; exit 1; }
grep "warning: the lock file '$D/.megatrain.lock' of this run was replaced by one that no process held" "$TMP/d.log" ||
  { echo "run D did not take its lock file back"; tail "$TMP/d.log"; exit 1; }
[ "$(cat "$D/latest_checkpointed_iteration.txt")" = 9 ] || { echo "run D did not save iteration 9"; exit 1; }
grep -q "^host $(hostname) pid $PD started " "$D/.megatrain.lock" || { echo "lock file does not name run D"; cat "$D/.megatrain.lock"; exit 1; }
echo "lock file deleted and recreated: a second run still refused, the holder took the file back and finished"

# --- the lock file deleted, and the new one held by another process ---
F="$TMP/f"
MEGATRAIN_FAILPOINT=straggler:0:300 "$MT" --config $CFG --set checkpoint.save="$F" $SLOW >"$TMP/f.log" 2>&1 &
PD=$!
wait_latest "$F" 3
kill -STOP $PD
rm "$F/.megatrain.lock"
flock -n "$F/.megatrain.lock" -c "echo 'host node9 pid 77 started 2026-01-01T00:00:00Z' >'$F/.megatrain.lock'; sleep 120" &
HOLD=$!
trap 'kill -9 $PD 2>/dev/null || true; kill $HOLD 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do grep -q node9 "$F/.megatrain.lock" 2>/dev/null && break; sleep 0.1; done
kill -CONT $PD
set +e; wait $PD; rc=$?; set -e
pkill -P $HOLD 2>/dev/null || true; kill $HOLD 2>/dev/null || true
grep "megatrain: error: " "$TMP/f.log"
[ $rc -eq 1 ] || { echo "run F exited $rc, want 1"; tail "$TMP/f.log"; exit 1; }
grep -q "checkpoint.save '$F': the lock file '$F/.megatrain.lock' this run held was replaced, and another run holds the new one (host node9, pid 77, started 2026-01-01T00:00:00Z); this run no longer owns the directory and does not write into it" "$TMP/f.log" ||
  { echo "run F: wrong message"; exit 1; }
[ "$(cat "$F/latest_checkpointed_iteration.txt")" = 3 ] || { echo "run F moved latest"; exit 1; }
[ "$(ls "$F" | grep -c '^iter_')" = 1 ] || { echo "run F left files:"; ls -a "$F"; exit 1; }
echo "lock file taken by another process: the run stopped at its next save, exit 1, nothing published"
