#!/usr/bin/env bash
# Multi-latent attention checkpoints (issue 31): the tiny MLA model of
# tests/configs/gpt-mla-test.json (q compression, latent norms, YaRN, dropout
# on) trained N steps in one process, against a run saved at step N/2 under
# one layout and resumed under another (resharding the column-parallel up
# projections by heads, the replicated down projections and latent norms as
# they are): the resumed steps' lm loss and grad norm agree with the
# straight run within 1e-5 relative, and the checkpoint holds the MLA
# weights under Megatron's names.
# Only with MEGATRAIN_TEST_FULL=1 (CI has the layouts in test_mla_parity):
# 10 steps, tp=2+SP -> pp=2, pp=2 -> tp=2 (no SP) + cp=2; and
# configs/deepseek-tiny.json tp=2+SP -> pp=2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
[ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] || { echo "SKIP: MEGATRAIN_TEST_FULL=1 only"; exit 77; }
CFG=tests/configs/gpt-mla-test.json
COMMON=(--set training.check_replicas_interval=1)
CMP_ARGS=(--keys "lm_loss,grad_norm")
MOE_ITERS=10
H=$((MOE_ITERS / 2)); HHHH=$(printf %07d $H)
P=parallel
BASE=base
run base 1
resume() { # name np_a np_b "args of a" "args of b"
  local name=$1 na=$2 nb=$3 a=$4 b=$5
  # shellcheck disable=SC2086
  run ${name}_a "$na" $a --set training.exit_interval=$H --set checkpoint.save="$TMP/$name"
  for k in decoder.layers.1.self_attention.linear_q_down_proj.weight \
           decoder.layers.1.self_attention.q_layernorm.weight \
           decoder.layers.1.self_attention.linear_q_up_proj.weight \
           decoder.layers.1.self_attention.linear_kv_down_proj.weight \
           decoder.layers.1.self_attention.kv_layernorm.weight \
           decoder.layers.1.self_attention.linear_kv_up_proj.weight; do
    grep -aqF "$k" "$TMP/$name/iter_$HHHH"/* || { echo "$name: $k not in the checkpoint"; exit 1; }
  done
  # shellcheck disable=SC2086
  run ${name}_b "$nb" $b --set checkpoint.load="$TMP/$name" --set checkpoint.save="$TMP/$name"
  grep -q "resumed from iteration $H " "$TMP/${name}_b.log" || { echo "$name: no resume"; exit 1; }
  cmp_moe ${name}_b "$BASE" --first $((H + 1))
}
resume tp2sp_to_pp2 2 2 "--set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true" \
  "--set $P.pipeline_model_parallel_size=2"
resume pp2_to_tp2_cp2 2 4 "--set $P.pipeline_model_parallel_size=2" \
  "--set $P.tensor_model_parallel_size=2 --set $P.context_parallel_size=2"
# configs/deepseek-tiny.json (MLA with YaRN, MoE with expert bias, one MTP
# depth; shortened to 32 tokens and batches of 8) on tinyshakespeare:
# tp=2+SP -> pp=2 (the MTP depth on the last stage), also the MTP loss and
# expert biases
CFG=configs/deepseek-tiny.json
CMP_ARGS=(--keys "lm_loss,grad_norm,mtp_loss,load_balancing_loss,tokens_per_expert,expert_bias")
COMMON=(--set training.check_replicas_interval=1 --set model.seq_length=32
        --set training.micro_batch_size=2 --set training.global_batch_size=8
        --set training.eval_interval=0 --set checkpoint.save=null
        --set 'data.data_path=["build/testdata/tinyshakespeare_text_document"]'
        --set data.vocab_file=null --set data.merge_file=null)
BASE=ds_base
run ds_base 1
resume ds_tp2sp_to_pp2 2 2 "--set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true" \
  "--set $P.pipeline_model_parallel_size=2"
