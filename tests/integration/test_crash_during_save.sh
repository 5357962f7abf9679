#!/usr/bin/env bash
# Crash during a checkpoint save: the process is killed (SIGKILL) halfway
# through writing iteration 20's shard file; the iteration-10 checkpoint stays the
# latest, loads, and resuming from it reproduces the uninterrupted run.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
"$MT" --config $CFG --set checkpoint.save="$TMP/a" --set logging.metrics_file="$TMP/a.jsonl" >/dev/null
set +e
MEGATRAIN_FAILPOINT=checkpoint_write:20 "$MT" --config $CFG --set checkpoint.save="$TMP/b" \
  --set checkpoint.save_interval=10 --set logging.metrics_file="$TMP/b.jsonl" >"$TMP/b1.log" 2>&1; rc=$?
set -e
[ $rc -ne 0 ] || { echo "the failpoint did not kill the run"; exit 1; }
echo "run killed during save (exit $rc)"
[ "$(cat "$TMP/b/latest_checkpointed_iteration.txt")" = 10 ] || { echo "latest is not 10"; exit 1; }
[ ! -e "$TMP/b/iter_0000020" ] || { echo "a half-written iter_0000020 was published"; exit 1; }
ls "$TMP/b"
# resume from 10 and finish: metrics of 11..20 equal the uninterrupted run
head -n 10 "$TMP/b.jsonl" > "$TMP/b_first.jsonl"; mv "$TMP/b_first.jsonl" "$TMP/b.jsonl"
"$MT" --config $CFG --set checkpoint.save="$TMP/b" --set checkpoint.load="$TMP/b" \
      --set logging.metrics_file="$TMP/b.jsonl" >"$TMP/b2.log"
grep -q "resumed from iteration 10" "$TMP/b2.log"
compare_metrics "$TMP/a.jsonl" "$TMP/b.jsonl" 0
same_ckpt "$TMP/a/iter_0000020" "$TMP/b/iter_0000020"
echo "resumed run is byte-identical to the uninterrupted one"
