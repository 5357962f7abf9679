#!/usr/bin/env bash
# Multi-token prediction checkpoints (issue 31): the model of
# tests/configs/gpt-mtp-test.json (two MoE MTP depths with expert bias, tied
# embeddings, dropout on) trained N steps in one process, against a run
# saved at step N/2 under one layout and resumed under another: the resumed
# steps' lm loss, grad norm, both MTP losses, balance losses, tokens per
# expert and expert biases agree with the straight run within 1e-5 relative,
# and the checkpoint holds the MTP weights (mtp.layers.K.eh_proj.weight, the
# MTP layers' experts) and the MTP MoE layers' router state.
# CI (MEGATRAIN_TEST_FULL unset): 4 steps, pp=2 -> tp=2+SP+ep=2; FULL: 10
# steps, also dp=2 ZeRO-3 -> cp=2 and one process -> pp=2 v=2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
CFG=tests/configs/gpt-mtp-test.json
COMMON=(--set training.check_replicas_interval=1)
CMP_ARGS=(--keys "lm_loss,grad_norm,mtp_loss,load_balancing_loss,z_loss,tokens_per_expert,expert_bias")
MOE_ITERS=$(full_or 10 4)
H=$((MOE_ITERS / 2)); HHHH=$(printf %07d $H)
P=parallel
run base 1
resume() { # name np_a np_b "args of a" "args of b"
  local name=$1 na=$2 nb=$3 a=$4 b=$5
  # shellcheck disable=SC2086
  run ${name}_a "$na" $a --set training.exit_interval=$H --set checkpoint.save="$TMP/$name"
  for k in mtp.layers.0.eh_proj.weight mtp.layers.1.mtp_model_layer.mlp.experts.7.linear_fc2.weight \
           mtp.layers.1.mtp_model_layer.mlp.router.expert_bias; do
    grep -aqF "$k" "$TMP/$name/iter_$HHHH"/* || { echo "$name: $k not in the checkpoint"; exit 1; }
  done
  # shellcheck disable=SC2086
  run ${name}_b "$nb" $b --set checkpoint.load="$TMP/$name" --set checkpoint.save="$TMP/$name"
  grep -q "resumed from iteration $H " "$TMP/${name}_b.log" || { echo "$name: no resume"; exit 1; }
  cmp_moe ${name}_b base --first $((H + 1))
}
resume pp2_to_tp2sp_ep2 2 2 "--set $P.pipeline_model_parallel_size=2" \
  "--set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true --set $P.expert_model_parallel_size=2"
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  resume zero3_to_cp2 2 2 "--set $P.zero_stage=3" "--set $P.context_parallel_size=2"
  resume one_to_pp2_v2 1 2 "" \
    "--set $P.pipeline_model_parallel_size=2 --set $P.virtual_pipeline_model_parallel_size=2"
fi
