#!/usr/bin/env bash
# tests/integration/test_resume_messages.sh — what a resumed run says about
# changes against the checkpoint (issues 18 and 26, Megatron's
# OptimizerParamScheduler check):
#  - a changed schedule key refuses, exit 1, naming each key with both
#    values, and writes nothing: lr and min_lr; weight_decay alone (Megatron's
#    start and end weight decay); lr_warmup_iters, lr_decay_iters,
#    lr_decay_style and weight_decay together; lr_warmup_init saved as null
#    (= 0) against a value, weight_decay_incr_style;
#  - training.override_opt_param_scheduler: this config's schedule is used;
#  - training.use_checkpoint_opt_param_scheduler: the checkpoint's schedule
#    and weight decay are used: the resumed run equals the uninterrupted one
#    bitwise although the config changes lr, min_lr and weight_decay;
#  - training.finetune: no comparison;
#  - a changed global_batch_size prints a note with the consumed-samples position.
source "$(dirname "$0")/lib.sh"
S=(--config $CFG --set training.eval_interval=0 --set logging.log_interval=1
   --set training.train_iters=4)
"$MT" "${S[@]}" --set logging.metrics_file="$TMP/full.jsonl" >"$TMP/full.log" 2>&1 \
  || { tail "$TMP/full.log"; exit 1; }
"$MT" "${S[@]}" --set checkpoint.save="$TMP/ck" --set training.exit_interval=2 >"$TMP/a.log" 2>&1 \
  || { tail "$TMP/a.log"; exit 1; }
# .megatrain.lock: the run lock (holder, pid, start time), rewritten by every run that starts
snap() { (cd "$1" && find . -type f ! -name .megatrain.lock | sort | xargs md5sum); }
snap "$TMP/ck" >"$TMP/ck.before"

# 1. refusal
set +e
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set checkpoint.save="$TMP/ck" \
  --set training.lr=2e-3 --set training.min_lr=5e-5 >"$TMP/r.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] || { echo "schedule change: exit $rc, expected 1"; cat "$TMP/r.log"; exit 1; }
for n in "training.lr: checkpoint 0.001, this run 0.002" "training.min_lr: checkpoint 0.0001, this run 5e-05" \
         "override_opt_param_scheduler" "use_checkpoint_opt_param_scheduler"; do
  grep -qF "$n" "$TMP/r.log" || { echo "schedule change: message lacks '$n'"; cat "$TMP/r.log"; exit 1; }
done
snap "$TMP/ck" | diff - "$TMP/ck.before" >/dev/null || { echo "refused run wrote into the checkpoint"; exit 1; }
# one process: the error line carries no rank prefix
grep -q "^megatrain: error: checkpoint '$TMP/ck' was trained with another" "$TMP/r.log" && ! grep -q "\[rank" "$TMP/r.log" \
  || { echo "single-process error: prefix"; cat "$TMP/r.log"; exit 1; }
echo "changed schedule refused (exit 1): $(grep -m1 error "$TMP/r.log" | sed 's/^.*error: //' | cut -c1-160)..."
# refused_with NAME NEEDLE... -- ARGS: the resume refuses (exit 1), naming every needle, writing nothing
refused_with() {
  local name="$1"; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  set +e
  "$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set checkpoint.save="$TMP/ck" "$@" >"$TMP/r.log" 2>&1; local rc=$?
  set -e
  [ $rc = 1 ] || { echo "$name: exit $rc, expected 1"; cat "$TMP/r.log"; exit 1; }
  for n in "${needles[@]}"; do
    grep -qF "$n" "$TMP/r.log" || { echo "$name: message lacks '$n'"; cat "$TMP/r.log"; exit 1; }
  done
  snap "$TMP/ck" | diff - "$TMP/ck.before" >/dev/null || { echo "$name: refused run wrote into the checkpoint"; exit 1; }
  echo "$name refused (exit 1): $(grep -m1 error "$TMP/r.log" | sed 's/^.*checks on load): //; s/ (expected equal values.*//')"
}
refused_with weight_decay "training.weight_decay: checkpoint 0.1, this run 0.05" \
  "override_opt_param_scheduler" "use_checkpoint_opt_param_scheduler" -- --set training.weight_decay=0.05
refused_with "warmup, decay iters and style, weight decay" \
  "training.lr_warmup_iters: checkpoint 4, this run 2" \
  "training.lr_decay_iters: checkpoint 4 (= its training.train_iters), this run 30" \
  "training.lr_decay_style: checkpoint \"cosine\", this run \"linear\"" \
  "training.weight_decay: checkpoint 0.1, this run 0" -- \
  --set training.lr_warmup_iters=2 --set training.lr_decay_iters=30 \
  --set training.lr_decay_style=linear --set training.weight_decay=0
refused_with "issue 30's schedule keys (a null warmup init, the weight-decay increment)" \
  "training.lr_warmup_init: checkpoint null, this run 1e-05" \
  "training.weight_decay_incr_style: checkpoint \"constant\", this run \"linear\"" \
  "training.weight_decay: checkpoint 0.1, this run 0.01" -- \
  --set training.lr_warmup_init=1e-5 --set training.weight_decay_incr_style=linear \
  --set training.start_weight_decay=0.05 --set training.end_weight_decay=0.2 \
  --set training.weight_decay=0.01

# 2. override: this config's lr
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set training.lr=2e-3 \
  --set training.override_opt_param_scheduler=true --set logging.metrics_file="$TMP/ov.jsonl" \
  >"$TMP/ov.log" 2>&1 || { tail "$TMP/ov.log"; exit 1; }
grep -q "override_opt_param_scheduler: this config's LR schedule and weight decay replace" "$TMP/ov.log"
/usr/bin/python3 - "$TMP/full.jsonl" "$TMP/ov.jsonl" <<'PY'
import json, sys
lr = lambda p: {o["iteration"]: o["lr"] for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = lr(sys.argv[1]), lr(sys.argv[2])
assert abs(b[3] / a[3] - 2) < 1e-5, (a[3], b[3])
PY
echo "override_opt_param_scheduler: the config's schedule (lr x2) is used"

# 3. use_checkpoint: the checkpoint's schedule and weight decay, bitwise as uninterrupted
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set training.lr=2e-3 --set training.min_lr=5e-5 \
  --set training.weight_decay=0.5 \
  --set training.use_checkpoint_opt_param_scheduler=true --set logging.metrics_file="$TMP/uc.jsonl" \
  >"$TMP/uc.log" 2>&1 || { tail "$TMP/uc.log"; exit 1; }
grep -q "use_checkpoint_opt_param_scheduler: the checkpoint's LR schedule is used, and its weight decay" "$TMP/uc.log"
grep -qF "training.weight_decay: checkpoint 0.1, this run 0.5" "$TMP/uc.log"
/usr/bin/python3 - "$TMP/full.jsonl" "$TMP/uc.jsonl" <<'PY'
import json, sys
rec = lambda p: {o["iteration"]: (o["lr"], o["lm_loss"]) for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = rec(sys.argv[1]), rec(sys.argv[2])
for i in (3, 4): assert a[i] == b[i], (i, a[i], b[i])
PY
echo "use_checkpoint_opt_param_scheduler: iterations 3-4 bitwise equal to the uninterrupted run (config's lr, min_lr and weight_decay replaced)"

# 4. finetune: no comparison
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set training.lr=2e-3 --set training.finetune=true \
  --set training.train_iters=1 --set training.lr_warmup_iters=0 >"$TMP/ft.log" 2>&1 || { tail "$TMP/ft.log"; exit 1; }
echo "finetune with another lr: accepted"

# 5. global_batch_size changed: a note with the position
"$MT" "${S[@]}" --set checkpoint.load="$TMP/ck" --set training.global_batch_size=4 \
  >"$TMP/gb.log" 2>&1 || { tail "$TMP/gb.log"; exit 1; }
grep -F "> note: global_batch_size changed from 8 to 4; the data continues at consumed sample 16" "$TMP/gb.log" \
  || { echo "no global_batch_size note"; cat "$TMP/gb.log"; exit 1; }
# 6. checkpoint.load naming what is not a checkpoint directory: each named
load_refused() { # pattern dir
  set +e
  "$MT" "${S[@]}" --set checkpoint.load="$2" >"$TMP/lr.log" 2>&1; local rc=$?
  set -e
  [ $rc = 1 ] && grep -qF "$1" "$TMP/lr.log" || { echo "load $2: exit $rc"; cat "$TMP/lr.log"; exit 1; }
}
load_refused "checkpoint directory '$TMP/nope' does not exist" "$TMP/nope"
load_refused "'$TMP/ck/iter_0000002' is an iteration directory of a checkpoint: pass its parent '$TMP/ck'" \
  "$TMP/ck/iter_0000002"
mkdir -p "$TMP/hf" && : >"$TMP/hf/model.safetensors"
load_refused "'$TMP/hf' holds a Hugging Face model (model.safetensors): import it with megatrain convert --from hf" \
  "$TMP/hf"
echo "checkpoint.load: a missing directory, an iteration directory, a Hugging Face directory each named"
echo "test_resume_messages OK"
