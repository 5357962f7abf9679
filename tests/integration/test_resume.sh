#!/usr/bin/env bash
# Exact resume: 20 iterations straight vs 10 + exit + resume + 10 give
# bitwise identical losses, grad norms (dropout on) and final checkpoint
# (parameters, Adam moments, step). Also: a checkpoint whose shapes differ
# from the config is refused naming the tensor; a corrupted file is refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
"$MT" --config $CFG --set checkpoint.save="$TMP/a" --set logging.metrics_file="$TMP/a.jsonl" >"$TMP/a.log"
"$MT" --config $CFG --set checkpoint.save="$TMP/b" --set logging.metrics_file="$TMP/b.jsonl" \
      --set training.exit_interval=10 >"$TMP/b1.log"
grep -q "exiting after iteration 10" "$TMP/b1.log"
[ "$(cat "$TMP/b/latest_checkpointed_iteration.txt")" = 10 ]
"$MT" --config $CFG --set checkpoint.save="$TMP/b" --set checkpoint.load="$TMP/b" \
      --set logging.metrics_file="$TMP/b.jsonl" >"$TMP/b2.log"
grep -q "resumed from iteration 10" "$TMP/b2.log"
compare_metrics "$TMP/a.jsonl" "$TMP/b.jsonl" 0
same_ckpt "$TMP/a/iter_0000020" "$TMP/b/iter_0000020"

# shape mismatch: names the tensor, exit 1
set +e
"$MT" --config $CFG --set checkpoint.load="$TMP/a" --set model.hidden_size=128 >"$TMP/m.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] || { echo "shape mismatch: exit $rc, expected 1"; cat "$TMP/m.log"; exit 1; }
grep -q "embedding.word_embeddings.weight" "$TMP/m.log" || { cat "$TMP/m.log"; exit 1; }
grep -m1 "error" "$TMP/m.log"
# corruption: flip one byte in the middle; checksum mismatch, exit 1
f="$TMP/a/iter_0000020/shard_00000.bin"
printf '\x55' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
set +e
"$MT" --config $CFG --set checkpoint.load="$TMP/a" >"$TMP/c.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -Eqi "checksum|crc" "$TMP/c.log" || { echo "corruption not detected (exit $rc)"; cat "$TMP/c.log"; exit 1; }
grep -m1 "error" "$TMP/c.log"
