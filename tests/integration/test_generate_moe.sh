#!/usr/bin/env bash
# `megatrain generate` for mixture-of-experts models (issue 31 item 5): a
# DeepSeek-style tiny model (RMSNorm, RoPE, GQA, SwiGLU; a dense first layer,
# 8 experts in 4 groups, top-2 inside 2 groups, sigmoid scores with a
# non-zero expert bias after training, scaling 2.5, a shared expert) and a
# Mixtral-style one (softmax top-2 of 4 in every layer) trained a few steps:
#  - greedy tokens (24 new) equal a greedy decode of the same checkpoint by
#    the independent PyTorch model (tests/reference/generate_reference.py,
#    fp64, whole-sequence recompute, the MoE of llama_reference.py with the
#    checkpoint's expert biases), logits within 1e-5 of the largest |logit|;
#  - KV-cache decoding equals --no-kv-cache (tokens identical, logits within
#    1e-5 of the largest |logit|);
#  - pp=2 (--pipeline-model-parallel-size 2, one stage per rank) gives the
#    tokens of one process, logits within 1e-5 of the largest;
#  - Mixtral: exported to Hugging Face, the independent HF reader
#    (tests/reference/hf_forward.py greedy) decodes the same tokens;
#  - tensor parallelism is refused for MoE generation with one message (exit 2).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/generate_lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no torch"; exit 77; }
TOK="--set data.vocab_file=$SHARED/gpt2-vocab.json --set data.merge_file=$SHARED/gpt2-merges.txt"
PROMPT="First Citizen: Before we proceed any further, hear me"
N=24
LLAMA="--set model.position_embedding_type=rope --set model.normalization=RMSNorm
  --set model.swiglu=true --set model.group_query_attention=true --set model.num_query_groups=2
  --set model.add_bias_linear=false --set model.untie_embeddings_and_output_weights=true"

train() { # name, extra --set options...
  local n=$1; shift
  # shellcheck disable=SC2086
  "$MT" --config $CFG --set training.train_iters=6 --set training.eval_interval=0 \
    --set model.init_method_std=0.2 --set model.max_position_embeddings=64 \
    --set checkpoint.save="$TMP/$n" $TOK $LLAMA "$@" >"$TMP/$n.train.log" \
    || { echo "$n: training failed"; tail -5 "$TMP/$n.train.log"; exit 1; }
}

check_model() { # name
  local n=$1 d="$TMP/$1"
  "$MT" generate --load "$d" --prompt "$PROMPT" --max-new-tokens $N --temperature 0 \
    --print-ids --dump-logits "$d.kv.f32" >"$d.g1.log" 2>"$d.g1.err" \
    || { echo "$n: generate failed"; cat "$d.g1.err"; exit 1; }
  grep '^generate:' "$d.g1.err"
  local ids
  ids=$(ids_of "$d.g1.log")
  local distinct; distinct=$(echo "$ids" | tr ' ' '\n' | sort -u | wc -l)
  [ "$distinct" -ge 10 ] || { echo "$n: greedy continuation too uniform to prove much: $ids"; exit 1; }
  greedy_vs_reference "$n" "$d" "$ids" $N
  "$MT" generate --load "$d" --prompt "$PROMPT" --max-new-tokens $N --temperature 0 \
    --print-ids --no-kv-cache --dump-logits "$d.nc.f32" >"$d.nc.log"
  [ "$(ids_of "$d.nc.log")" = "$ids" ] || { echo "$n: --no-kv-cache tokens differ"; exit 1; }
  maxdiff "$d.kv.f32" "$d.nc.f32" "$n: KV cache = recompute, tokens identical"
}

train deepseek --set model.num_experts=8 --set model.moe_ffn_hidden_size=32 \
  --set 'model.moe_layer_freq=[0,1]' --set model.moe_router_topk=2 \
  --set model.moe_router_score_function=sigmoid --set model.moe_router_topk_scaling_factor=2.5 \
  --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=2 \
  --set model.moe_router_enable_expert_bias=true --set model.moe_router_bias_update_rate=0.01 \
  --set model.moe_shared_expert_intermediate_size=64 --set model.moe_router_load_balancing_type=seq_aux_loss \
  --set model.moe_aux_loss_coeff=1e-3
check_model deepseek
# pipeline parallelism: 2 stages (the dense layer on stage 0, the MoE layer on
# stage 1) give the tokens of one process, logits within 1e-5 of the largest
d=$TMP/deepseek
mpirun -np 2 --oversubscribe --bind-to none "$MT" generate --load "$d" --prompt "$PROMPT" \
  --max-new-tokens $N --temperature 0 --print-ids --pipeline-model-parallel-size 2 \
  --dump-logits "$d.pp2.f32" >"$d.pp2.log" 2>"$d.pp2.err" || { echo "pp=2 failed"; cat "$d.pp2.err"; exit 1; }
grep '^generate:' "$d.pp2.err"
[ "$(ids_of "$d.pp2.log")" = "$(ids_of "$d.g1.log")" ] || { echo "deepseek: pp=2 tokens differ"; exit 1; }
maxdiff "$d.kv.f32" "$d.pp2.f32" "deepseek: pp=2 = one process, tokens identical"
train mixtral --set model.num_experts=4 --set model.moe_ffn_hidden_size=48 --set model.moe_router_topk=2
check_model mixtral

# the independent Hugging Face reader decodes the Mixtral export alike
d=$TMP/mixtral
"$MT" convert --to hf --load "$d" --output "$d.hf" >/dev/null
prompt_ids=$(grep '^prompt_ids:' "$d.g1.log" | sed 's/^prompt_ids: //')
hf=$($PY tests/reference/hf_forward.py greedy "$d.hf" "$prompt_ids" $N)
[ "$hf" = "ids: $(ids_of "$d.g1.log")" ] || { echo "mixtral: HF reader tokens differ"; echo " $hf"; exit 1; }
echo "mixtral: the HF reader's greedy tokens of the export = megatrain generate's"

# tensor parallelism with experts: one message, exit 2 (the layout)
set +e
mpirun -np 2 --oversubscribe --bind-to none "$MT" generate --load "$TMP/mixtral" --prompt hi \
  >"$TMP/e.log" 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "generate runs a model with experts (model.num_experts 4 in .*) in one process" "$TMP/e.log" || { echo "tp=2 MoE generate: exit $rc"; cat "$TMP/e.log"; exit 1; }
echo "tp=2 MoE generate refused: $(grep -m1 error "$TMP/e.log")"
echo "test_generate_moe: OK"
