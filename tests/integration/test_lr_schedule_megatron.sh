#!/usr/bin/env bash
# The learning rate and weight decay of every update equal Megatron's
# OptimizerParamScheduler (issue 30) to 1e-12 relative, for every decay style
# (constant, linear, cosine, inverse-square-root, WSD with exponential,
# linear, cosine and minus_sqrt), lr_warmup_init, lr_warmup_fraction,
# iteration- and sample-based lengths and the linear and cosine weight-decay
# increments (tests/data/lr_schedule_cases.json): megatrain's values
# (tests/tools/lr_table: the config loader and the trainer's schedule) against
# the table tests/data/megatron_schedule_table.txt, which
# tests/reference/megatron_schedule.py produced by running Megatron-LM's own
# scheduler source; with MEGATRON_LM=path to a Megatron-LM checkout the table
# is produced again from it and compared too (else that part is skipped with a
# note). Then the trainer itself: a 6-step WSD run with warmup from
# lr_warmup_init and a linear weight-decay increment logs, per iteration, the
# applied values (metrics lr_applied, weight_decay_applied) and Megatron's
# logged ones (lr, weight_decay) of the same table, and update 1 runs at
# lr_warmup_init (Megatron steps its scheduler after optimizer.step()).
source "$(dirname "$0")/lib.sh"
LT=build/tests/tools/lr_table
[ -x $LT ] || { echo "SKIP: $LT not built"; exit 77; }
CASES=tests/data/lr_schedule_cases.json
$LT $CASES >"$TMP/mt.txt"
echo "== megatrain vs the committed Megatron table"
/usr/bin/python3 tests/reference/compare_schedule.py "$TMP/mt.txt" tests/data/megatron_schedule_table.txt
if [ -n "${MEGATRON_LM:-}" ]; then
  echo "== megatrain vs Megatron-LM at $MEGATRON_LM"
  /usr/bin/python3 tests/reference/megatron_schedule.py "$MEGATRON_LM" $CASES >"$TMP/mlm.txt"
  /usr/bin/python3 tests/reference/compare_schedule.py "$TMP/mt.txt" "$TMP/mlm.txt"
else
  echo "note: MEGATRON_LM not set: Megatron-LM's source not run (the committed table was)"
fi
# the trainer: the same keys through ./megatrain
KEYS='{"name": "trainer_wsd", "global_batch_size": 8, "train_iters": 6, "lr": 1e-3, "min_lr": 1e-4,
 "lr_decay_style": "WSD", "lr_wsd_decay_style": "minus_sqrt", "lr_warmup_iters": 2,
 "lr_decay_iters": 5, "lr_wsd_decay_iters": 2, "lr_warmup_init": 2e-5,
 "weight_decay_incr_style": "linear", "start_weight_decay": 0.02, "end_weight_decay": 0.1}'
echo "[$KEYS]" >"$TMP/case.json"
$LT "$TMP/case.json" >"$TMP/want.txt"
SETS=$(/usr/bin/python3 -c '
import json, sys
for k, v in json.load(open(sys.argv[1]))[0].items():
    if k != "name": print("--set training.%s=%s" % (k, json.dumps(v)))' "$TMP/case.json")
# gpt-test.json without its weight_decay (the linear increment replaces it)
/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1])); del c["training"]["weight_decay"]
json.dump(c, open(sys.argv[2], "w"))' $CFG "$TMP/cfg.json"
# shellcheck disable=SC2086
"$MT" --config "$TMP/cfg.json" $SETS --set training.eval_interval=0 --set logging.log_interval=1 \
  --set logging.metrics_file="$TMP/m.jsonl" >"$TMP/run.log" 2>&1 || { tail -5 "$TMP/run.log"; exit 1; }
/usr/bin/python3 - "$TMP/m.jsonl" "$TMP/want.txt" <<'PY'
import json, sys
recs = [o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o]
want = [l.split() for l in open(sys.argv[2])]
assert len(recs) == len(want) == 6, (len(recs), len(want))
bad = 0
for o, w in zip(recs, want):
    vals = [float(x) for x in w[3:]]
    got = [o["lr_applied"], o["weight_decay_applied"], o["lr"], o["weight_decay"]]
    for n, x, y in zip(("lr_applied", "weight_decay_applied", "lr", "weight_decay"), got, vals):
        if abs(x - y) > 1e-12 * abs(y):
            bad += 1
            print("FAIL iteration %d %s: %.17g vs %.17g" % (o["iteration"], n, x, y))
assert recs[0]["lr_applied"] == 2e-5, recs[0]["lr_applied"]
print("trainer: 6 iterations, applied and logged lr / weight decay equal the schedule table"
      if not bad else "%d mismatches" % bad)
sys.exit(1 if bad else 0)
PY
