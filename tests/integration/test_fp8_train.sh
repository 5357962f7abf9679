#!/usr/bin/env bash
# FP8 linear layers in training (training.fp8_format, docs/fp8.md) on the cpu
# backend with bf16 storage, 4 steps of the 2-layer test model, dropout on:
#  - each recipe (tensorwise, delayed, blockwise, mxfp8; hybrid format) stays
#    within 2e-2 relative of the bf16 run on lm loss and grad norm at every
#    step, and differs from it (the FP8 path ran);
#  - first_last_layers_bf16 with every layer kept bf16 reproduces the bf16
#    run bitwise (the output layer and the rest are untouched by FP8);
#  - fp8_wgrad false differs from the FP8 run with FP8 weight gradients;
#  - (MEGATRAIN_TEST_FULL=1) the same delayed run twice is bitwise identical;
#  - tensorwise saved at step 2 and resumed reproduces steps 3-4 bitwise;
#  - an MoE model (FP8 experts, one scale set per expert) within 2e-2 of its
#    bf16 run;
#  - full recomputation (FULL: and selective, every recipe) bitwise equal to
#    the same MoE run without it;
#  - (FULL) MTP depths in FP8 within 2e-2 of bf16, and in FP8 even when every
#    main layer is kept bf16.
# About 30 s on 2 busy cores. MEGATRAIN_TEST_FULL=1 adds e4m3 for every recipe
# (e4m3 delayed: iteration 1 runs on the initial scale 1, docs/fp8.md
# "Scales"; its lm loss within 2e-2, the curve from iteration 2 on).
source "$(dirname "$0")/lib.sh"
BASE=(--config $CFG --set training.precision=bf16 --set training.train_iters=4
      --set logging.log_interval=1 --set training.eval_interval=0)
run() { # name args...
  local name=$1; shift
  "$MT" "${BASE[@]}" --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
differs() { # a b: some lm_loss or grad_norm differs
  if compare_metrics "$TMP/$1.jsonl" "$TMP/$2.jsonl" 0 >/dev/null 2>&1; then
    echo "$1 and $2 are bitwise identical (expected the FP8 path to change the numbers)"; exit 1
  fi
}
run bf16
FMTS=$(full_or "hybrid e4m3" "hybrid")
for f in $FMTS; do
  for r in tensorwise delayed blockwise mxfp8; do
    run "$f-$r" --set training.fp8_format=$f --set training.fp8_recipe=$r
    if [ "$f-$r" = e4m3-delayed ]; then
      # TE's delayed state starts with scale 1 (empty history), so the first
      # step quantizes gradients with scale 1; in e4m3 (smallest subnormal
      # 2^-9) that moves iteration 1's grad norm by ~2.7% (hybrid's e5m2
      # gradients: 2^-16, within 2e-2). Iteration 1's loss (forward) is still
      # held to 2e-2; the whole curve from iteration 2 on as for every recipe.
      grep -v '"iteration": *1,' "$TMP/$f-$r.jsonl" >"$TMP/$f-$r.from2.jsonl"
      grep -v '"iteration": *1,' "$TMP/bf16.jsonl" >"$TMP/bf16.from2.jsonl"
      echo -n "$f $r vs bf16 (iterations 2-4): "
      compare_metrics "$TMP/$f-$r.from2.jsonl" "$TMP/bf16.from2.jsonl" 2e-2
      /usr/bin/python3 - "$TMP/$f-$r.jsonl" "$TMP/bf16.jsonl" <<'PY'
import json, sys
one = [[json.loads(l) for l in open(p) if '"lm_loss"' in l and json.loads(l)["iteration"] == 1][0]
       for p in sys.argv[1:]]
d = abs(one[0]["lm_loss"] - one[1]["lm_loss"]) / abs(one[1]["lm_loss"])
assert d <= 2e-2, "e4m3 delayed iteration 1 lm loss %.3g from bf16" % d
print("e4m3 delayed iteration 1: lm loss %.2g from bf16 (grad norm %.2g, scale 1)" % (
    d, abs(one[0]["grad_norm"] - one[1]["grad_norm"]) / one[1]["grad_norm"]))
PY
    else
      echo -n "$f $r vs bf16: "; compare_metrics "$TMP/$f-$r.jsonl" "$TMP/bf16.jsonl" 2e-2
    fi
    differs "$f-$r" bf16
  done
done
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  run delayed-again --set training.fp8_format=hybrid --set training.fp8_recipe=delayed
  echo -n "delayed twice: "; compare_metrics "$TMP/delayed-again.jsonl" "$TMP/hybrid-delayed.jsonl" 0
fi
run all-bf16 --set training.fp8_format=hybrid --set training.fp8_recipe=tensorwise \
  --set training.first_last_layers_bf16=true --set training.num_layers_at_start_in_bf16=1 \
  --set training.num_layers_at_end_in_bf16=1
echo -n "first_last_layers_bf16 covering every layer vs bf16: "
compare_metrics "$TMP/all-bf16.jsonl" "$TMP/bf16.jsonl" 0
run nowgrad --set training.fp8_format=hybrid --set training.fp8_recipe=tensorwise \
  --set training.fp8_wgrad=false
differs nowgrad hybrid-tensorwise
echo -n "fp8_wgrad false vs bf16: "; compare_metrics "$TMP/nowgrad.jsonl" "$TMP/bf16.jsonl" 2e-2
# resume (tensorwise keeps no state between steps): 2 steps + exit + resume
# + 2 reproduce the 4-step run bitwise
run res1 --set training.fp8_format=hybrid --set training.fp8_recipe=tensorwise \
  --set checkpoint.save="$TMP/ck" --set training.exit_interval=2
"$MT" "${BASE[@]}" --set training.fp8_format=hybrid --set training.fp8_recipe=tensorwise \
  --set checkpoint.save="$TMP/ck" --set checkpoint.load="$TMP/ck" \
  --set logging.metrics_file="$TMP/res1.jsonl" >"$TMP/res2.log" 2>&1 ||
  { echo "resume failed:"; tail -20 "$TMP/res2.log"; exit 1; }
grep -q "resumed from iteration 2" "$TMP/res2.log"
echo -n "tensorwise 2 + resume + 2 vs 4 straight: "
compare_metrics "$TMP/res1.jsonl" "$TMP/hybrid-tensorwise.jsonl" 0
# MoE (gpt-moe-test cut to 2 layers: layer 0 MoE, 8 experts top-2, capacity
# 1.0; 2 steps of 2 micro-batches): the routed experts' fc1 / fc2 in FP8 with
# one set of scales per expert (TE's GroupedLinear), the router in bf16 with
# fp32 logits; within 2e-2 of the bf16 MoE run, and different from it
MOE=(--config tests/configs/gpt-moe-test.json --set training.precision=bf16
     --set model.num_layers=2 --set training.train_iters=2 --set training.global_batch_size=4
     --set training.lr_warmup_iters=1 --set logging.log_interval=1 --set training.eval_interval=0)
run_moe() { # name args...
  local name=$1; shift
  "$MT" "${MOE[@]}" --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
run_moe moe-bf16
run_moe moe-delayed --set training.fp8_format=hybrid --set training.fp8_recipe=delayed
echo -n "MoE delayed vs bf16: "; compare_metrics "$TMP/moe-delayed.jsonl" "$TMP/moe-bf16.jsonl" 2e-2
differs moe-delayed moe-bf16
# activation recomputation replays each forward with the scales it took and
# records no second amax: bitwise the run without it (dense and expert
# linears). CI: delayed (the recipe with state) under full recomputation;
# MEGATRAIN_TEST_FULL=1 also selective, and every other recipe both ways.
RCASES=$(full_or "delayed:full delayed:selective tensorwise:full tensorwise:selective
  blockwise:full blockwise:selective mxfp8:full mxfp8:selective" "delayed:full")
for c in $RCASES; do
  r=${c%%:*} g=${c#*:}
  [ -f "$TMP/moe-$r.jsonl" ] ||
    run_moe "moe-$r" --set training.fp8_format=hybrid --set training.fp8_recipe=$r
  run_moe "moe-$r-$g" --set training.fp8_format=hybrid --set training.fp8_recipe=$r \
    --set model.recompute_granularity=$g
  echo -n "MoE $r with $g recomputation vs without: "
  compare_metrics "$TMP/moe-$r-$g.jsonl" "$TMP/moe-$r.jsonl" 0
done
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  # MTP (gpt-mtp-test: 4 layers, 2 MTP depths, MoE): Megatron runs the MTP
  # block (eh_proj and its layer) under the global FP8 context, which
  # ignores first_last_layers_bf16. Within 2e-2 of bf16; with every main
  # layer kept in bf16 the main loss of step 1 is bitwise bf16's and the MTP
  # losses are not (the MTP depths ran in FP8)
  MTP=(--config tests/configs/gpt-mtp-test.json --set training.precision=bf16
       --set training.train_iters=2 --set training.global_batch_size=4
       --set training.lr_warmup_iters=1 --set logging.log_interval=1 --set training.eval_interval=0)
  run_mtp() { # name args...
    local name=$1; shift
    "$MT" "${MTP[@]}" --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
      { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
  }
  run_mtp mtp-bf16
  run_mtp mtp-fp8 --set training.fp8_format=hybrid
  echo -n "MTP delayed vs bf16: "; compare_metrics "$TMP/mtp-fp8.jsonl" "$TMP/mtp-bf16.jsonl" 2e-2
  run_mtp mtp-main-bf16 --set training.fp8_format=hybrid --set training.first_last_layers_bf16=true \
    --set training.num_layers_at_start_in_bf16=4 --set training.num_layers_at_end_in_bf16=0
  /usr/bin/python3 - "$TMP/mtp-main-bf16.jsonl" "$TMP/mtp-bf16.jsonl" <<'PY'
import json, sys
def first(p):
    return next(o for o in map(json.loads, open(p)) if o.get("iteration") == 1 and "lm_loss" in o)
a, b = first(sys.argv[1]), first(sys.argv[2])
assert a["lm_loss"] == b["lm_loss"], "main loss of step 1 differs: %r vs %r" % (a["lm_loss"], b["lm_loss"])
assert all(x != y for x, y in zip(a["mtp_loss"], b["mtp_loss"])), "MTP losses equal: %r" % a["mtp_loss"]
print("main layers in bf16: step-1 main loss bitwise bf16, MTP losses %s vs %s (FP8 MTP)" %
      (a["mtp_loss"], b["mtp_loss"]))
PY
fi
# DeepSeek-tiny (tests/configs/deepseek-tiny-test.json: MLA with q
# compression and latent norms, YaRN, sigmoid MoE with a shared expert and a
# dense first layer, one MTP depth), 2 steps of 2 micro-batches: every
# linear Megatron builds as a TE linear in FP8 -- MLA's q down / q up /
# kv down / kv up / proj, the dense MLP, the shared and the routed experts,
# MTP's eh_proj and its layer -- with the latent norms and core attention
# in bf16; within 2e-2 of bf16 on lm loss and the MTP loss, and different
# from it. The grad norm is held to 5e-2: FP8's forward noise flips the
# sigmoid router's choice for near-tie tokens (tokens per expert differ from
# bf16 at iteration 1), which moves this 2-step grad norm by up to 2.8e-2
# (delayed; tensorwise 1.2e-2; the same model with dense layers 1.5e-2).
# CI: delayed; MEGATRAIN_TEST_FULL=1: every recipe.
DS=(--config tests/configs/deepseek-tiny-test.json --set training.precision=bf16
    --set training.train_iters=2 --set training.global_batch_size=4 --set training.lr_warmup_iters=1
    --set logging.log_interval=1 --set training.eval_interval=0)
run_ds() { # name args...
  local name=$1; shift
  "$MT" "${DS[@]}" --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
run_ds ds-bf16
for r in $(full_or "delayed tensorwise blockwise mxfp8" "delayed"); do
  run_ds "ds-$r" --set training.fp8_format=hybrid --set training.fp8_recipe=$r
  echo -n "DeepSeek-tiny $r vs bf16: "; compare_metrics_mtp "$TMP/ds-$r.jsonl" "$TMP/ds-bf16.jsonl" 2e-2 5e-2
  differs "ds-$r" ds-bf16
done
echo "fp8 training: OK"
