#!/usr/bin/env bash
# Multi-token prediction layout invariance (issue 31): the DeepSeek-style MoE
# model of tests/configs/gpt-mtp-test.json with two MTP depths (MoE layers,
# like the last decoder layer, with expert bias; tied embeddings, RoPE,
# dropout on), trained in one process vs pp=2 (the depths on the last stage,
# the MTP embedding from its copy of the word embedding), pp=2 v=2, tp=2+SP,
# cp=2, ep=2, tp=2+SP+ep=2, pp=2+tp=2+SP+ep=2 and dp=2 with ZeRO-1 and ZeRO-3,
# and full and selective recomputation: lm loss, grad norm, both depths' MTP
# losses, balance losses, tokens per expert and expert biases (also the MTP
# layers') within 1e-5 relative.
# CI (MEGATRAIN_TEST_FULL unset): 3 steps of pp=2, tp=2+SP+ep=2 and dp=2
# ZeRO-3; FULL: 10 steps of every layout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
CFG=tests/configs/gpt-mtp-test.json
COMMON=(--set training.check_replicas_interval=1)
CMP_ARGS=(--keys "lm_loss,grad_norm,mtp_loss,load_balancing_loss,z_loss,tokens_per_expert,expert_bias")
MOE_ITERS=$(full_or 10 3)
full=$(full_or 1 0)
P=parallel
run base 1
run pp2 2 --set $P.pipeline_model_parallel_size=2
cmp_moe pp2 base
run tp2sp_ep2 2 --set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true \
  --set $P.expert_model_parallel_size=2
cmp_moe tp2sp_ep2 base
run dp2_zero3 2 --set $P.zero_stage=3
cmp_moe dp2_zero3 base
if [ $full = 1 ]; then
  run cp2 2 --set $P.context_parallel_size=2
  cmp_moe cp2 base
  run tp2sp 2 --set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true
  cmp_moe tp2sp base
  run ep2 2 --set $P.expert_model_parallel_size=2
  cmp_moe ep2 base
  run pp2_v2 2 --set $P.pipeline_model_parallel_size=2 --set $P.virtual_pipeline_model_parallel_size=2
  cmp_moe pp2_v2 base
  run dp2_zero1 2 --set $P.zero_stage=1
  cmp_moe dp2_zero1 base
  run pp2_tp2sp_ep2 4 --set $P.pipeline_model_parallel_size=2 --set $P.tensor_model_parallel_size=2 \
    --set $P.sequence_parallel=true --set $P.expert_model_parallel_size=2
  cmp_moe pp2_tp2sp_ep2 base
  # untied embeddings: the last stage's MTP copy of the word embedding
  run untied 1 --set model.untie_embeddings_and_output_weights=true
  run untied_pp2 2 --set model.untie_embeddings_and_output_weights=true \
    --set $P.pipeline_model_parallel_size=2
  cmp_moe untied_pp2 untied
  run recompute_full 1 --set model.recompute_granularity=full
  cmp_moe recompute_full base
  run recompute_selective 1 --set model.recompute_granularity=selective
  cmp_moe recompute_selective base
fi
grep -h "mtp_1 loss" "$TMP/base.log" | tail -1 | grep -o "lm loss: [^|]*| grad norm: [^|]*| mtp_1 loss: [^|]*| mtp_2 loss: [^|]*|"
