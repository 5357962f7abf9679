#!/usr/bin/env bash
# training.rampup_batch_size (Megatron's --rampup-batch-size; docs/optimizer.md):
# (a) the global batch and consumed samples of every iteration of the cases
#     in tests/data/rampup_cases.json (tests/tools/rampup_table: the config
#     loader and config/batch_rampup.c) equal tests/data/megatron_rampup_table.txt,
#     which Megatron-LM's own RampupBatchsizeNumMicroBatchesCalculator and
#     update_train_iters produced (0b9bc2088b, the last Megatron with them) and
#     tests/reference/megatron_rampup.py (the formula in our words) reproduces;
#     a ./megatrain run logs the same curve (metrics global_batch_size,
#     consumed_samples);
# (b) layout parity: the ramped run on 1 process equals dp=2, tp=2 and pp=2
#     within 1e-5 relative per step (fp32, dropout on);
# (c) a resume in the middle of the ramp gives the straight-through curve
#     bitwise (and Megatron's checkpoint at each batch-size change is written);
# (d) the ramp-up's config errors exit 2 with a message naming the key.
# MEGATRON_LM=DIR also runs DIR's calculator (a checkout that still has it).
source "$(dirname "$0")/lib.sh"
RT=build/tests/tools/rampup_table
[ -x "$RT" ] || { echo "SKIP: $RT not built"; exit 77; }
"$RT" tests/data/rampup_cases.json > "$TMP/c.txt"
cmp "$TMP/c.txt" tests/data/megatron_rampup_table.txt
echo "rampup_table equals Megatron's table ($(wc -l < "$TMP/c.txt") lines)"
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 tests/reference/megatron_rampup.py tests/data/rampup_cases.json > "$TMP/ref.txt"
  cmp "$TMP/ref.txt" tests/data/megatron_rampup_table.txt
  echo "the reference formula equals Megatron's table"
fi
if [ -n "${MEGATRON_LM:-}" ]; then
  /usr/bin/python3 tests/reference/megatron_rampup.py tests/data/rampup_cases.json "$MEGATRON_LM" \
    > "$TMP/meg.txt"
  cmp "$TMP/meg.txt" tests/data/megatron_rampup_table.txt
  echo "Megatron-LM at $MEGATRON_LM gives the table"
fi

# case "test" of the table (its batch curve; micro-batches of 1 here, for dp=2):
# start 2, increment 2 over 24 samples to 8, 64 samples
RAMP=(--set training.train_iters=null --set training.train_samples=64
      --set training.lr_warmup_iters=0 --set training.lr_warmup_samples=16
      --set "training.rampup_batch_size=[2,2,24]" --set training.eval_interval=6
      --set training.micro_batch_size=1 --set logging.log_interval=1)
"$MT" --config $CFG "${RAMP[@]}" --set logging.metrics_file="$TMP/one.jsonl" \
      --set checkpoint.save="$TMP/ck_full" >"$TMP/one.log"
/usr/bin/python3 - "$TMP/one.jsonl" tests/data/megatron_rampup_table.txt <<'PY'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
got = [(o["iteration"], o["global_batch_size"], o["consumed_samples"]) for o in got if "lm_loss" in o]
want = [l.split() for l in open(sys.argv[2]) if l.startswith("test ") and "train_iters" not in l]
want = [(int(w[1]), int(w[2]), int(w[5])) for w in want]
assert got == want, (got, want)
print("megatrain's metrics follow the table:", " ".join("%d:%d" % (k, b) for k, b, _ in got))
PY
# a checkpoint at every batch change (after iterations 4, 6, 8) and at the end
for it in 4 6 8 12; do [ -d "$TMP/ck_full/iter_$(printf %07d $it)" ]; done
echo "checkpoints at the batch-size changes: $(ls "$TMP/ck_full" | grep iter_ | tr '\n' ' ')"

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (parity part)"; exit 77; }
MPI="mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
for lay in "dp2" "tp2 --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true" \
           "pp2 --set parallel.pipeline_model_parallel_size=2"; do
  set -- $lay; name=$1; shift
  $MPI "$MT" --config $CFG "${RAMP[@]}" "$@" --set logging.metrics_file="$TMP/$name.jsonl" \
      >"$TMP/$name.log" 2>&1 || { tail -20 "$TMP/$name.log"; exit 1; }
  echo "$name vs one process:"
  compare_metrics "$TMP/$name.jsonl" "$TMP/one.jsonl" 1e-5
done

# resume at iteration 5 (inside the ramp: batch 4 of 8) gives the same curve bitwise
"$MT" --config $CFG "${RAMP[@]}" --set training.exit_interval=5 --set checkpoint.save="$TMP/ck" \
      --set logging.metrics_file="$TMP/res.jsonl" >"$TMP/r1.log"
"$MT" --config $CFG "${RAMP[@]}" --set checkpoint.load="$TMP/ck" --set checkpoint.save="$TMP/ck" \
      --set logging.metrics_file="$TMP/res.jsonl" >"$TMP/r2.log"
grep -q "resumed from iteration 5 (consumed samples 12)" "$TMP/r2.log"
echo "resumed at 5 vs straight through:"
compare_metrics "$TMP/res.jsonl" "$TMP/one.jsonl" 0
diff <(metrics_field "$TMP/res.jsonl" global_batch_size) <(metrics_field "$TMP/one.jsonl" global_batch_size)

# config errors: exit 2, naming the key
bad() {
  set +e; "$MT" --config $CFG "$@" >"$TMP/bad.log" 2>&1; rc=$?; set -e
  [ $rc = 2 ] && grep -q "training.rampup_batch_size" "$TMP/bad.log" \
    || { echo "expected exit 2 naming training.rampup_batch_size for: $*"; cat "$TMP/bad.log"; exit 1; }
  echo "refused: $(grep -m1 error "$TMP/bad.log")"
}
bad --set "training.rampup_batch_size=[2,2,24]"                     # iteration-based
S=(--set training.train_iters=null --set training.train_samples=64 --set training.lr_warmup_iters=0)
bad "${S[@]}" --set "training.rampup_batch_size=[8,2,24]"           # start = global
bad "${S[@]}" --set "training.rampup_batch_size=[2,4,24]"           # 6 not a multiple of 4
bad "${S[@]}" --set "training.rampup_batch_size=[3,5,24]"           # start not a multiple of mbs
bad "${S[@]}" --set "training.rampup_batch_size=[2,2,0]"            # no ramp-up samples
bad "${S[@]}" --set "training.rampup_batch_size=[2,2]"              # two values
echo "PASS"
