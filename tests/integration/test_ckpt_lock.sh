#!/usr/bin/env bash
# One writer per checkpoint directory (docs/checkpoint.md "One writer per
# directory"): while run A holds checkpoint.save (stalled in a save by the
# checkpoint_stall failpoint), run B on the same directory refuses at
# start-up on every rank, naming A's host and pid, exit 1, and leaves A's
# temporary directory alone; after A dies (kill -9: the kernel releases the
# lock) run C proceeds, removes A's leftover temporary directory and saves.
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
