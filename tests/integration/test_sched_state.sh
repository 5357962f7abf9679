#!/usr/bin/env bash
# The scheduler state in the checkpoint (metadata.json "opt_param_scheduler":
# Megatron's OptimizerParamScheduler.state_dict, megatrain's init_lr and WSD
# decay, the ramp-up; docs/checkpoint.md):
#  1. a save stores it (num_steps = the consumed samples, lengths in samples);
#     a resume keeps the values (bitwise the straight-through curve);
#  2. a state whose value differs from this run's (lr_warmup_steps edited,
#     the config unchanged) is refused with Megatron's sense (exit 1, naming
#     "warmup iterations"); use_checkpoint_opt_param_scheduler runs with the
#     checkpoint's warmup (the logged lr follows it); override keeps this run's;
#  3. num_steps is restored from the state, not recomputed from the consumed
#     samples (an edited num_steps moves the lr of the next update);
#  4. a checkpoint without the state (as written before it existed) loads and
#     resumes bitwise (num_steps = consumed samples);
#  5. a ramped run stores the ramp-up and the next iteration's batch.
source "$(dirname "$0")/lib.sh"
S=(--config $CFG --set training.train_iters=6 --set training.eval_interval=0
   --set training.eval_iters=0 --set logging.log_interval=1)
"$MT" "${S[@]}" --set logging.metrics_file="$TMP/full.jsonl" >/dev/null
"$MT" "${S[@]}" --set training.exit_interval=3 --set checkpoint.save="$TMP/ck" >/dev/null
IT=$TMP/ck/iter_0000003
edit() { # PYTHON-EXPR-ON-s -> a copy of the checkpoint in $TMP/$1 with the state edited
  rm -rf "$TMP/$1"; cp -r "$TMP/ck" "$TMP/$1"
  /usr/bin/python3 - "$TMP/$1/iter_0000003" "$2" <<'PY'
import json, sys
sys.path.insert(0, "tests/reference")
from dist_ckpt import reseal
p = sys.argv[1] + "/metadata.json"
m = json.load(open(p))
s = m["opt_param_scheduler"]
exec(sys.argv[2])
json.dump(m, open(p, "w"), indent=1)
reseal(sys.argv[1])
PY
}
/usr/bin/python3 - "$IT/metadata.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
s = m["opt_param_scheduler"]
want = {"max_lr": 0.001, "min_lr": 0.0001, "lr_warmup_steps": 32, "lr_decay_steps": 48,
        "num_steps": 24, "lr_decay_style": "cosine", "start_wd": 0.1, "end_wd": 0.1,
        "wd_incr_style": "constant", "wd_incr_steps": 48, "init_lr": 0,
        "rampup_batch_size": None, "global_batch_size": 8}
bad = {k: (s.get(k), v) for k, v in want.items() if s.get(k) != v}
assert not bad, bad
assert s["num_steps"] == m["consumed_samples"]
print("1. opt_param_scheduler stored:", json.dumps(s))
PY
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set logging.metrics_file="$TMP/res.jsonl" >/dev/null
head -n 3 "$TMP/full.jsonl" | cat - "$TMP/res.jsonl" > "$TMP/res6.jsonl"
compare_metrics "$TMP/res6.jsonl" "$TMP/full.jsonl" 0
diff <(metrics_field "$TMP/res6.jsonl" lr) <(metrics_field "$TMP/full.jsonl" lr)

# 2. a changed state value
edit w 's["lr_warmup_steps"] = 40'
set +e
"$MT" "${S[@]}" --set checkpoint.load="$TMP/w" >"$TMP/w.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q "OptimizerParamScheduler.*warmup iterations (lr_warmup_steps): checkpoint 40, this run 32" "$TMP/w.log" \
  || { echo "expected a refusal naming the warmup (exit $rc)"; cat "$TMP/w.log"; exit 1; }
echo "2. refused: $(grep -m1 error "$TMP/w.log" | cut -c1-200)..."
"$MT" "${S[@]}" --set checkpoint.load="$TMP/w" --set training.use_checkpoint_opt_param_scheduler=true \
  --set logging.metrics_file="$TMP/uc.jsonl" >"$TMP/uc.log"
grep -q "use_checkpoint_opt_param_scheduler: the checkpoint's opt_param_scheduler state is used" "$TMP/uc.log"
/usr/bin/python3 - "$TMP/uc.jsonl" <<'PY'
import json, sys
rec = {o["iteration"]: o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o}
# warmup over 40 samples from 0 to 1e-3: update 4 applies lr at 24 samples, logs at 32
for it, before, after in ((4, 24, 32), (5, 32, 40)):
    a, l = rec[it]["lr_applied"], rec[it]["lr"]
    assert abs(a - 1e-3 * before / 40) < 1e-15 and abs(l - 1e-3 * after / 40) < 1e-15, (it, a, l)
print("   use_checkpoint: lr follows the checkpoint's 40-sample warmup:",
      [(i, rec[i]["lr_applied"]) for i in sorted(rec)])
PY
"$MT" "${S[@]}" --set checkpoint.load="$TMP/w" --set training.override_opt_param_scheduler=true \
  --set logging.metrics_file="$TMP/ov.jsonl" >"$TMP/ov.log"
grep -q "override_opt_param_scheduler: this run's scheduler values replace" "$TMP/ov.log"
diff <(metrics_field "$TMP/ov.jsonl" lr) <(metrics_field "$TMP/res.jsonl" lr)
echo "   override: this run's schedule (lr as the straight-through run)"

# 3. num_steps restored: 16 instead of 24 -> update 4 applies the lr at 16 samples
edit n 's["num_steps"] = 16'
"$MT" "${S[@]}" --set checkpoint.load="$TMP/n" --set logging.metrics_file="$TMP/n.jsonl" >/dev/null
/usr/bin/python3 - "$TMP/n.jsonl" <<'PY'
import json, sys
rec = {o["iteration"]: o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o}
assert abs(rec[4]["lr_applied"] - 1e-3 * 16 / 32) < 1e-15, rec[4]["lr_applied"]
assert rec[4]["consumed_samples"] == 32
print("3. num_steps restored: update 4 applies lr", rec[4]["lr_applied"], "(16 samples), data at 24")
PY

# 4. no state (an older checkpoint): loads, resumes bitwise
edit o 'del m["opt_param_scheduler"]'
"$MT" "${S[@]}" --set checkpoint.load="$TMP/o" --set logging.metrics_file="$TMP/o.jsonl" >/dev/null
head -n 3 "$TMP/full.jsonl" | cat - "$TMP/o.jsonl" > "$TMP/o6.jsonl"
compare_metrics "$TMP/o6.jsonl" "$TMP/full.jsonl" 0
echo "4. a checkpoint without opt_param_scheduler resumes bitwise"

# 5. ramp-up state: [2,2,24] to 8; after 5 iterations (12 samples) the next batch is 4
"$MT" --config $CFG --set training.train_iters=null --set training.train_samples=64 \
  --set training.lr_warmup_iters=0 --set "training.rampup_batch_size=[2,2,24]" \
  --set training.eval_interval=0 --set training.eval_iters=0 --set training.exit_interval=5 \
  --set checkpoint.save="$TMP/rk" >/dev/null
/usr/bin/python3 - "$TMP/rk/iter_0000005/metadata.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["opt_param_scheduler"]
assert s["rampup_batch_size"] == [2, 2, 24] and s["global_batch_size"] == 4 and s["num_steps"] == 12, s
print("5. ramp-up state stored:", s["rampup_batch_size"], "next batch", s["global_batch_size"])
PY
echo PASS
