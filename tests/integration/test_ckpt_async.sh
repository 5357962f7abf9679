#!/usr/bin/env bash
# Asynchronous saves (checkpoint.async_save, docs/checkpoint.md
# "Asynchronous saves"): the published checkpoints are byte-identical to
# synchronous saves of the same iterations (1 process, and 2 ranks tp2) and
# training is unchanged; a kill -9 while the background writer of iteration
# 10 is stalled (failpoint checkpoint_stall:10), after training went on past
# it, leaves iteration 5 latest, and resuming from it reproduces the
# uninterrupted run bitwise.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
MPIRUN="timeout 120 mpirun --oversubscribe --bind-to none"
common=(--config $CFG --set checkpoint.save_interval=5)
"$MT" "${common[@]}" --set checkpoint.save="$TMP/a" --set logging.metrics_file="$TMP/a.jsonl" >/dev/null
"$MT" "${common[@]}" --set checkpoint.save="$TMP/b" --set logging.metrics_file="$TMP/b.jsonl" \
  --set checkpoint.async_save=true >"$TMP/b.log"
grep -q "started asynchronous save of iteration 5" "$TMP/b.log"
grep -q "saved checkpoint at iteration 20 .*asynchronous" "$TMP/b.log"
compare_metrics "$TMP/a.jsonl" "$TMP/b.jsonl" 0
for i in 05 10 15 20; do same_ckpt "$TMP/a/iter_00000$i" "$TMP/b/iter_00000$i"; done

tp=(--config $CFG --set parallel.tensor_model_parallel_size=2 --set checkpoint.save_interval=4
    --set training.train_iters=8 --set training.eval_interval=0)
$MPIRUN -np 2 "$MT" "${tp[@]}" --set checkpoint.save="$TMP/tp_s" >/dev/null
$MPIRUN -np 2 "$MT" "${tp[@]}" --set checkpoint.save="$TMP/tp_a" --set checkpoint.async_save=true >/dev/null
for i in 4 8; do same_ckpt "$TMP/tp_s/iter_000000$i" "$TMP/tp_a/iter_000000$i"; done

# kill -9 during the background write of iteration 10
MEGATRAIN_FAILPOINT=checkpoint_stall:10 "$MT" "${common[@]}" --set checkpoint.save="$TMP/c" \
  --set checkpoint.async_save=true --set logging.metrics_file="$TMP/c.jsonl" >"$TMP/c.log" 2>&1 &
C=$!
trap 'kill -9 $C 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 600); do
  [ -f "$TMP/c.jsonl" ] && grep -q '"iteration": *1[1-9]' "$TMP/c.jsonl" && break; sleep 0.1
done
grep -q '"iteration": *1[1-9]' "$TMP/c.jsonl" || { echo "training did not go on during the save"; cat "$TMP/c.log"; exit 1; }
compgen -G "$TMP/c/iter_0000010.tmp.*" >/dev/null || { echo "no save of iteration 10 in progress"; ls "$TMP/c"; exit 1; }
echo "training reached $(tail -n1 "$TMP/c.jsonl" | grep -o '"iteration": *[0-9]*') while iteration 10 was being written; kill -9"
kill -9 $C; wait $C 2>/dev/null || true
[ "$(cat "$TMP/c/latest_checkpointed_iteration.txt")" = 5 ] || { echo "latest is not 5"; exit 1; }
[ ! -e "$TMP/c/iter_0000010" ] || { echo "iteration 10 was published"; exit 1; }
head -n 5 "$TMP/c.jsonl" > "$TMP/c5.jsonl"; mv "$TMP/c5.jsonl" "$TMP/c.jsonl"
"$MT" "${common[@]}" --set checkpoint.save="$TMP/c" --set checkpoint.load="$TMP/c" \
  --set checkpoint.async_save=true --set logging.metrics_file="$TMP/c.jsonl" >"$TMP/c2.log"
grep -q "resumed from iteration 5" "$TMP/c2.log"
compare_metrics "$TMP/a.jsonl" "$TMP/c.jsonl" 0
same_ckpt "$TMP/a/iter_0000020" "$TMP/c/iter_0000020"
! compgen -G "$TMP/c/*.tmp*" >/dev/null || { echo "temporary files left"; exit 1; }
echo "asynchronous saves are byte-identical; a crash during one leaves the previous checkpoint loadable"
