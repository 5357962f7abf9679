#!/usr/bin/env bash
# Failed saves (docs/checkpoint.md "Failed saves"): a write error during a
# save (MEGATRAIN_FAILPOINT=checkpoint_enospc:N makes the shard write of
# iteration N fail with ENOSPC) on rank 1 of a 2-rank tp2 job ends the job
# with exit 1 on every rank, one message naming the file and the error; the
# previous checkpoint stays latest and loads, no temporary directory is left.
# The same with an asynchronous save (the error surfaces at its finalize;
# both the shard write and the "latest" write),
# and a save directory that cannot be created is refused at start-up. A disk
# that fills while "latest" is written (checkpoint_latest_enospc:N on rank 0,
# which publishes) leaves iteration N complete on disk: the message says
# exactly that (both paths, the error, the iteration "latest" still names),
# not that N was not saved, and iteration N loads once "latest" names it.
source "$(dirname "$0")/lib.sh"
MPIRUN="timeout 120 mpirun --oversubscribe --bind-to none"
S="$TMP/save"
ARGS=(--config $CFG --set parallel.tensor_model_parallel_size=2 --set checkpoint.save="$S"
      --set checkpoint.save_interval=4 --set training.train_iters=8 --set training.eval_interval=0
      --set training.lr_decay_iters=8) # the resume below stops at 5 with the same LR schedule
set +e
$MPIRUN -np 1 "$MT" "${ARGS[@]}" : -np 1 env MEGATRAIN_FAILPOINT=checkpoint_enospc:8 "$MT" "${ARGS[@]}" \
  >"$TMP/a.log" 2>&1; rc=$?
set -e
grep "error" "$TMP/a.log" || true
[ $rc -eq 1 ] || { echo "exit $rc, want 1"; cat "$TMP/a.log"; exit 1; }
for r in 0 1; do
  grep -q "\[rank $r\] megatrain: error: write to '$S/iter_0000008.tmp.[^/]*/shard_00001.bin' failed: No space left on device (the checkpoint of iteration 8 was not saved; '$S' still holds iteration 4 as latest)" "$TMP/a.log" \
    || { echo "rank $r did not print the write error"; cat "$TMP/a.log"; exit 1; }
done
[ "$(cat "$S/latest_checkpointed_iteration.txt")" = 4 ] || { echo "latest is not 4"; exit 1; }
[ ! -e "$S/iter_0000008" ] || { echo "the failed iteration was published"; exit 1; }
! compgen -G "$S/*.tmp*" >/dev/null || { echo "temporary files left:"; ls "$S"; exit 1; }
$MPIRUN -np 2 "$MT" "${ARGS[@]}" --set checkpoint.load="$S" --set training.train_iters=5 --set training.lr_decay_iters=8 \
  --set checkpoint.save="$TMP/s2" >"$TMP/b.log" 2>&1 || { cat "$TMP/b.log"; exit 1; }
grep -q "resumed from iteration 4" "$TMP/b.log"
echo "sync: ENOSPC on rank 1 -> exit 1 on both ranks, iteration 4 still latest and loadable"

# the disk fills while "latest" is written: iteration 8 is complete, "latest" still says 4
S="$TMP/save_latest"
ARGS_L=("${ARGS[@]}" --set checkpoint.save="$S")
set +e
$MPIRUN -np 1 env MEGATRAIN_FAILPOINT=checkpoint_latest_enospc:8 "$MT" "${ARGS_L[@]}" : -np 1 "$MT" "${ARGS_L[@]}" \
  >"$TMP/l.log" 2>&1; rc=$?
set -e
grep "error" "$TMP/l.log" || true
[ $rc -eq 1 ] || { echo "latest: exit $rc, want 1"; cat "$TMP/l.log"; exit 1; }
want="iteration 8 is saved completely in '$S/iter_0000008', but '$S/latest_checkpointed_iteration.txt' was not updated (write to '$S/latest_checkpointed_iteration.txt.tmp' failed: No space left on device); it still names iteration 4, so a resume from this directory starts at iteration 4 (write 8 into '$S/latest_checkpointed_iteration.txt' to resume from iteration 8)"
for r in 0 1; do
  grep -qF "[rank $r] megatrain: error: $want" "$TMP/l.log" \
    || { echo "latest: rank $r did not print the exact message"; cat "$TMP/l.log"; exit 1; }
done
! grep -q "was not saved" "$TMP/l.log" || { echo "latest: says 'was not saved' while iteration 8 is on disk"; exit 1; }
[ "$(cat "$S/latest_checkpointed_iteration.txt")" = 4 ] || { echo "latest: latest is not 4"; exit 1; }
[ -f "$S/iter_0000008/metadata.json" ] && [ -f "$S/iter_0000008/index.bin" ] || { echo "latest: iteration 8 missing"; ls "$S"; exit 1; }
! compgen -G "$S/*.tmp*" >/dev/null || { echo "latest: temporary files left:"; ls "$S"; exit 1; }
# what the message says to do works: iteration 8 is complete and loads
echo 8 >"$S/latest_checkpointed_iteration.txt"
"$MT" "${ARGS_L[@]}" --set parallel.tensor_model_parallel_size=1 --set checkpoint.load="$S" \
  --set checkpoint.save="$TMP/s3" --set training.train_iters=9 >"$TMP/l2.log" 2>&1 || { cat "$TMP/l2.log"; exit 1; }
grep -q "resumed from iteration 8" "$TMP/l2.log" || { echo "latest: iteration 8 did not load"; cat "$TMP/l2.log"; exit 1; }
echo "latest: ENOSPC on latest_checkpointed_iteration.txt -> exit 1, the exact message on both ranks, iteration 8 complete and loadable"

# asynchronous save, one process: the error is reported when the save is finalized
S="$TMP/save_async"
set +e
MEGATRAIN_FAILPOINT=checkpoint_eio:8 "$MT" --config $CFG --set checkpoint.save="$S" \
  --set checkpoint.save_interval=4 --set training.train_iters=8 --set checkpoint.async_save=true \
  >"$TMP/c.log" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || { echo "async: exit $rc, want 1"; cat "$TMP/c.log"; exit 1; }
grep "error: write to '$S/iter_0000008.tmp.[^/]*/shard_00000.bin' failed: Input/output error (the checkpoint of iteration 8 was not saved; '$S' still holds iteration 4 as latest)" "$TMP/c.log"
[ "$(cat "$S/latest_checkpointed_iteration.txt")" = 4 ] || { echo "async: latest is not 4"; exit 1; }
! compgen -G "$S/*.tmp*" >/dev/null || { echo "async: temporary files left:"; ls "$S"; exit 1; }
echo "async: EIO -> exit 1, iteration 4 still latest"
# asynchronous save, the disk fills while "latest" is written: the same exact
# message when the save is finalized (iteration 8 complete, "latest" still 4)
S="$TMP/save_async_latest"
set +e
MEGATRAIN_FAILPOINT=checkpoint_latest_enospc:8 "$MT" --config $CFG --set checkpoint.save="$S" \
  --set checkpoint.save_interval=4 --set training.train_iters=8 --set checkpoint.async_save=true \
  >"$TMP/c2.log" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || { echo "async latest: exit $rc, want 1"; cat "$TMP/c2.log"; exit 1; }
want="megatrain: error: iteration 8 is saved completely in '$S/iter_0000008', but '$S/latest_checkpointed_iteration.txt' was not updated (write to '$S/latest_checkpointed_iteration.txt.tmp' failed: No space left on device); it still names iteration 4, so a resume from this directory starts at iteration 4 (write 8 into '$S/latest_checkpointed_iteration.txt' to resume from iteration 8)"
grep -qxF "$want" "$TMP/c2.log" || { echo "async latest: not the exact message"; cat "$TMP/c2.log"; exit 1; }
! grep -q "was not saved" "$TMP/c2.log" || { echo "async latest: says 'was not saved'"; exit 1; }
[ "$(cat "$S/latest_checkpointed_iteration.txt")" = 4 ] || { echo "async latest: latest is not 4"; exit 1; }
[ -f "$S/iter_0000008/metadata.json" ] || { echo "async latest: iteration 8 missing"; ls "$S"; exit 1; }
echo "async: ENOSPC on latest_checkpointed_iteration.txt -> exit 1, the exact message, iteration 8 on disk"

# a save directory that cannot be created: refused at start-up, exit 1
touch "$TMP/file"
set +e
"$MT" --config $CFG --set checkpoint.save="$TMP/file/ck" --set training.train_iters=4 >"$TMP/d.log" 2>&1; rc=$?
set -e
cat "$TMP/d.log"
[ $rc -eq 1 ] && grep -q "cannot create checkpoint.save directory '$TMP/file/ck': Not a directory" "$TMP/d.log"
if [ "$(id -u)" != 0 ]; then
  mkdir "$TMP/ro"; chmod 555 "$TMP/ro"
  set +e
  "$MT" --config $CFG --set checkpoint.save="$TMP/ro" --set training.train_iters=4 >"$TMP/e.log" 2>&1; rc=$?
  set -e
  cat "$TMP/e.log"
  [ $rc -eq 1 ] && grep -q "Permission denied" "$TMP/e.log"
fi
echo "failed saves end the job with exit 1 and leave the previous checkpoint latest"
