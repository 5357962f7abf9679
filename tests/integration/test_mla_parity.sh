#!/usr/bin/env bash
# Multi-latent attention layout invariance (issue 31): the tiny MLA model of
# tests/configs/gpt-mla-test.json (q compression, latent RMSNorms, YaRN with
# mscale and mscale_all_dim, dropout on, tied embeddings) trained in one
# process vs tp=2+SP (heads split, the replicated down projections' and
# latent norms' gradients summed over the shards, k_pe gathered and its
# gradient reduce-scattered), tp=2 without SP (k_pe's gradient all-reduced),
# pp=2, cp=2 (the ring attention with value heads of v_head_dim), cp=2 with
# tp=2+SP, dp=2 with ZeRO-1, and full and selective recomputation: lm loss and
# grad norm within 1e-5 relative; and MLA on the MoE + MTP model of
# tests/configs/gpt-mtp-test.json (DeepSeek-tiny-like) under tp=2+SP and ep=2
# (also the MTP losses, balance losses, tokens per expert, expert biases).
# CI (MEGATRAIN_TEST_FULL unset): 3 steps of tp=2+SP; FULL: 10 steps of
# every layout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
CFG=tests/configs/gpt-mla-test.json
COMMON=(--set training.check_replicas_interval=1)
CMP_ARGS=(--keys "lm_loss,grad_norm")
MOE_ITERS=$(full_or 10 3)
full=$(full_or 1 0)
P=parallel
run base 1
run tp2sp 2 --set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true
cmp_moe tp2sp base
if [ $full = 1 ]; then
  run tp2 2 --set $P.tensor_model_parallel_size=2
  cmp_moe tp2 base
  run pp2 2 --set $P.pipeline_model_parallel_size=2
  cmp_moe pp2 base
  run cp2 2 --set $P.context_parallel_size=2
  cmp_moe cp2 base
  run cp2_tp2sp 4 --set $P.context_parallel_size=2 --set $P.tensor_model_parallel_size=2 \
    --set $P.sequence_parallel=true
  cmp_moe cp2_tp2sp base
  run dp2_zero1 2 --set $P.zero_stage=1
  cmp_moe dp2_zero1 base
  run recompute_full 1 --set model.recompute_granularity=full
  cmp_moe recompute_full base
  run recompute_selective 1 --set model.recompute_granularity=selective
  cmp_moe recompute_selective base
  # DeepSeek-tiny-like: MLA on the MoE + MTP model of tests/configs/gpt-mtp-test.json
  CFG=tests/configs/gpt-mtp-test.json
  CMP_ARGS=(--keys "lm_loss,grad_norm,mtp_loss,load_balancing_loss,tokens_per_expert,expert_bias")
  M=model
  DS=(--set $M.multi_latent_attention=true --set $M.q_lora_rank=24 --set $M.kv_lora_rank=16
      --set $M.qk_head_dim=8 --set $M.qk_pos_emb_head_dim=4 --set $M.v_head_dim=12
      --set $M.qk_layernorm=true --set $M.rotary_scaling_factor=4
      --set $M.original_max_position_embeddings=16 --set $M.mscale_all_dim=1 --set $M.beta_fast=4)
  run ds_base 1 "${DS[@]}"
  run ds_tp2sp 2 "${DS[@]}" --set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true
  cmp_moe ds_tp2sp ds_base
  run ds_ep2 2 "${DS[@]}" --set $P.expert_model_parallel_size=2
  cmp_moe ds_ep2 ds_base
fi
grep -h "lm loss" "$TMP/base.log" | tail -1
