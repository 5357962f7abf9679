#!/usr/bin/env bash
# tests/integration/test_config_errors.sh — bad configs make ./megatrain exit
# with status 2 and one stderr message ("megatrain: error: ...") that names
# the offending key (and the file). Nothing is trained: every case fails in
# config validation, before any allocation.
set -u
cd "$(dirname "$0")/../.."
bin="${MEGATRAIN:-./megatrain}"   # MEGATRAIN=path tests another build
if [ ! -x "$bin" ]; then
  echo "SKIP: $bin not built"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# A valid base; each case edits it with a Python-free sed or writes its own file.
cat >"$tmp/good.json" <<'EOF'
{
  "device": "cpu",
  "model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 32},
  "parallel": {"tensor_model_parallel_size": 1},
  "training": {"micro_batch_size": 2, "train_iters": 10, "lr": 1e-3},
  "data": {"data_path": ["/nonexistent/corpus_text_document"]},
  "checkpoint": {"save": null, "load": null},
  "logging": {"log_interval": 1}
}
EOF

# expect NAME FILE "needle1" ["needle2" ...] -- [megatrain args after --config FILE]
expect() {
  local name="$1" file="$2"; shift 2
  local needles=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do needles+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local rc
  timeout 120 "$bin" --config "$file" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  local ok=1
  [ $rc -eq 2 ] || { echo "FAIL $name: exit status $rc (expected 2)"; ok=0; }
  grep -q "megatrain: error: " "$tmp/err" || { echo "FAIL $name: no 'megatrain: error: ' on stderr"; ok=0; }
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$tmp/err" || { echo "FAIL $name: stderr lacks '$n'"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    echo "ok   $name: $(head -n 1 "$tmp/err")"
  else
    fails=$((fails + 1)); sed 's/^/     | /' "$tmp/err" | head -n 10
  fi
}

# expect_world NAME WORLD FILE "needle"... -- [args]: the same through
# `megatrain topology --world-size WORLD` (layouts that need several ranks).
expect_world() {
  local name="$1" world="$2" file="$3"; shift 3
  local needles=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do needles+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local rc
  timeout 120 "$bin" topology --config "$file" --world-size "$world" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  local ok=1
  [ $rc -eq 2 ] || { echo "FAIL $name: exit status $rc (expected 2)"; ok=0; }
  grep -q "megatrain: error: " "$tmp/err" || { echo "FAIL $name: no 'megatrain: error: ' on stderr"; ok=0; }
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$tmp/err" || { echo "FAIL $name: stderr lacks '$n'"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    echo "ok   $name: $(head -n 1 "$tmp/err")"
  else
    fails=$((fails + 1)); sed 's/^/     | /' "$tmp/err" | head -n 10
  fi
}

sed 's/"hidden_size"/"hiden_size"/' "$tmp/good.json" >"$tmp/typo.json"
expect typo_key "$tmp/typo.json" "model.hiden_size" "did you mean 'hidden_size'?" "typo.json"

sed 's/"parallel"/"paralel"/' "$tmp/good.json" >"$tmp/section.json"
expect unknown_section "$tmp/section.json" "paralel" "did you mean 'parallel'?"

sed 's/"lr": 1e-3/"lr": "fast"/' "$tmp/good.json" >"$tmp/type.json"
expect wrong_type "$tmp/type.json" "training.lr" "expected a number"

sed 's/"num_attention_heads": 4/"num_attention_heads": 5/' "$tmp/good.json" >"$tmp/heads.json"
expect heads_divide "$tmp/heads.json" "model.num_attention_heads" "hidden_size (64)"

sed 's/"micro_batch_size": 2,/"micro_batch_size": 2, "global_batch_size": 3,/' "$tmp/good.json" >"$tmp/gbs.json"
expect batch_divide "$tmp/gbs.json" "training.global_batch_size"

sed 's/"seq_length": 32}/"seq_length": 32},,/' "$tmp/good.json" >"$tmp/syntax.json"
expect json_syntax "$tmp/syntax.json" "syntax.json" "line 3" "^"

sed 's/"lr": 1e-3//; s/"train_iters": 10,/"train_iters": 10/' "$tmp/good.json" >"$tmp/required.json"
expect required "$tmp/required.json" "training.lr" "required"

# issue 26: an integer out of its type's range says so, with the range (not "expected an integer")
expect int_out_of_range "$tmp/good.json" "model.hidden_size" "1000000000000 is out of range" \
  "(expected an integer in [1, 2147483647])" -- --set model.hidden_size=1e12
sed 's/"hidden_size": 64/"hidden_size": 1e12/' "$tmp/good.json" >"$tmp/huge.json"
expect int_out_of_range_file "$tmp/huge.json" "huge.json" "model.hidden_size: 1000000000000 is out of range" \
  "[1, 2147483647]"
expect i64_out_of_range "$tmp/good.json" "training.train_iters" "is out of range" \
  "[1, 9007199254740992]" -- --set training.train_iters=1e16
expect not_an_integer "$tmp/good.json" "model.hidden_size" "expected an integer, got 64.5" -- \
  --set model.hidden_size=64.5
# what is not JSON is refused where it is (core/json.h), naming the key
sed 's/"hidden_size": 64/"hidden_size": 064/' "$tmp/good.json" >"$tmp/zero.json"
expect json_leading_zero "$tmp/zero.json" "zero.json" "line 3" "leading zero" "(at model.hidden_size)" "^"
sed 's/"micro_batch_size": 2/"micro_batch_size": 2, "seed": 9007199254740993/' "$tmp/good.json" >"$tmp/seed53.json"
expect json_beyond_2p53 "$tmp/seed53.json" "beyond 2^53" "(at training.seed)"
sed 's/"train_iters": 10,/"train_iters": 10,,/' "$tmp/good.json" >"$tmp/comma.json"
expect json_double_comma "$tmp/comma.json" "line 5" "(at training.train_iters)"
expect set_not_json "$tmp/good.json" "training.train_iters (from --set)" "a string (\"010\")" -- \
  --set training.train_iters=010
expect set_unknown "$tmp/good.json" "training.lrr" "did you mean 'lr'?" -- --set training.lrr=0.1
expect set_range "$tmp/good.json" "parallel.zero_stage" "[0, 3]" -- --set parallel.zero_stage=7
expect set_device "$tmp/good.json" "device" "cpu|cuda" -- --set device=tpu
expect missing_file "$tmp/nope.json" "nope.json"

# Llama-style block options (docs/model.md): every inconsistent combination.
g="$tmp/good.json"
GQA="--set model.group_query_attention=true"
ROPE="--set model.position_embedding_type=rope"
expect pos_type_unknown "$g" "model.position_embedding_type" "learned_absolute|rope|none" -- \
  --set model.position_embedding_type=yarn
expect norm_unknown "$g" "model.normalization" "LayerNorm|RMSNorm" -- --set model.normalization=rmsnorm
expect eps_alias_conflict "$g" "model.layernorm_epsilon" "norm_epsilon" -- \
  --set model.norm_epsilon=1e-6 --set model.layernorm_epsilon=1e-5
expect eps_range "$g" "model.norm_epsilon" "> 0" -- --set model.norm_epsilon=0
expect groups_without_gqa "$g" "model.num_query_groups" "group_query_attention" -- \
  --set model.num_query_groups=2
expect groups_not_dividing "$g" "model.num_query_groups" "does not divide num_attention_heads 4" -- \
  $GQA --set model.num_query_groups=3
expect groups_too_many "$g" "model.num_query_groups" "does not divide" -- $GQA --set model.num_query_groups=8
expect groups_range "$g" "model.num_query_groups" ">= 1" -- $GQA --set model.num_query_groups=-2
expect_world groups_vs_tp 4 "$g" "model.num_query_groups" "tensor_model_parallel_size 4" -- \
  $GQA --set model.num_query_groups=2 --set parallel.tensor_model_parallel_size=4
expect_world mqa_vs_tp 2 "$g" "model.num_query_groups" "tensor_model_parallel_size 2" -- \
  $GQA --set parallel.tensor_model_parallel_size=2
expect kv_channels_range "$g" "model.kv_channels" ">= 1" -- --set model.kv_channels=-1
expect heads_divide_hint "$g" "model.num_attention_heads" "kv_channels" -- --set model.num_attention_heads=3
expect rotary_percent_zero "$g" "model.rotary_percent" "(0, 1]" -- $ROPE --set model.rotary_percent=0
expect rotary_percent_big "$g" "model.rotary_percent" "(0, 1]" -- $ROPE --set model.rotary_percent=1.5
expect rotary_dim_odd "$g" "model.rotary_percent" "3 rotated channels" -- $ROPE --set model.rotary_percent=0.2
expect rotary_dim_zero "$g" "model.rotary_percent" "0 rotated channels" -- $ROPE --set model.rotary_percent=0.05
expect head_dim_odd "$g" "model.kv_channels" "15 rotated channels" -- $ROPE --set model.kv_channels=15
expect rotary_base_range "$g" "model.rotary_base" "> 0" -- $ROPE --set model.rotary_base=-1
expect rotary_percent_without_rope "$g" "model.rotary_percent" "no effect" "\"rope\"" -- \
  --set model.rotary_percent=0.5
expect rotary_base_without_rope "$g" "model.rotary_base" "position_embedding_type \"none\"" -- \
  --set model.position_embedding_type=none --set model.rotary_base=500000
expect rotary_interleaved_without_rope "$g" "model.rotary_interleaved" "no effect" -- \
  --set model.rotary_interleaved=true
expect reset_position_ids_with_rope "$g" "data.reset_position_ids" "no effect" "\"rope\"" \
  "learned_absolute" -- $ROPE --set data.reset_position_ids=true
expect qk_norm_one_channel "$g" "model.qk_layernorm" "kv_channels >= 2" -- \
  --set model.qk_layernorm=true --set model.kv_channels=1
expect swiglu_ffn_zero "$g" "model.ffn_hidden_size" "swiglu" -- --set model.swiglu=true --set model.hidden_size=16
expect_world swiglu_ffn_vs_tp 2 "$g" "model.ffn_hidden_size" "tensor_model_parallel_size 2" -- \
  --set model.swiglu=true --set model.ffn_hidden_size=33 --set parallel.tensor_model_parallel_size=2
expect bool_type "$g" "model.swiglu" "expected true or false" -- --set model.swiglu=1

# context parallelism (issue 15): seq_length a multiple of 2·cp (2·cp·tp with
# sequence parallelism), tp·cp·pp dividing the world, cp_comm_type "p2p" only
expect_world cp_seq_not_2cp 3 "$g" "model.seq_length" "2 x context_parallel_size = 6" -- \
  --set parallel.context_parallel_size=3
expect_world cp_seq_not_2cp_tp_sp 8 "$g" "model.seq_length" \
  "2 x context_parallel_size x tensor_model_parallel_size = 16" -- \
  --set parallel.context_parallel_size=2 --set parallel.tensor_model_parallel_size=4 \
  --set parallel.sequence_parallel=true --set model.seq_length=24
expect_world cp_world 3 "$g" "parallel.context_parallel_size" "does not divide the world size 3" -- \
  --set parallel.context_parallel_size=2
# parallel.distributed_backend: NCCL needs device cuda
expect distributed_backend_nccl_cpu "$g" "parallel.distributed_backend" "\"nccl\" with device \"cpu\"" -- \
  --set parallel.distributed_backend=nccl
expect cp_comm_type_a2a "$g" "parallel.cp_comm_type" "\"a2a\" is not implemented" "p2p" -- \
  --set parallel.cp_comm_type=a2a
expect cp_comm_type_allgather "$g" "parallel.cp_comm_type" "\"allgather\" is not implemented" -- \
  --set parallel.cp_comm_type=allgather
expect cp_comm_type_unknown "$g" "parallel.cp_comm_type" "p2p|a2a|allgather|a2a+p2p" -- \
  --set parallel.cp_comm_type=ring
expect cp_size_zero "$g" "parallel.context_parallel_size" ">= 1" -- --set parallel.context_parallel_size=0

# MoE router options (docs/moe.md "Router options"): group-limited routing
# sizes, top-k, layer pattern, unknown names, options without effect, and the
# expert layouts that do not fit the world
MOE="--set model.num_experts=8"
expect moe_group_topk_alone "$g" "model.moe_router_group_topk" "moe_router_num_groups" -- \
  $MOE --set model.moe_router_group_topk=2
expect moe_num_groups_alone "$g" "model.moe_router_num_groups" "moe_router_group_topk" -- \
  $MOE --set model.moe_router_num_groups=4
expect moe_groups_divide "$g" "model.moe_router_num_groups" "does not divide num_experts 8" -- \
  $MOE --set model.moe_router_num_groups=3 --set model.moe_router_group_topk=1
expect moe_group_topk_big "$g" "model.moe_router_group_topk" "more than moe_router_num_groups 4" -- \
  $MOE --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=5
expect moe_topk_from_groups "$g" "model.moe_router_topk" "cannot be picked" "= 2" -- \
  $MOE --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=1 \
  --set model.moe_router_topk=3
expect moe_topk_below_groups "$g" "model.moe_router_topk" "cannot be picked" -- \
  $MOE --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=3 \
  --set model.moe_router_topk=2
expect moe_num_groups_range "$g" "model.moe_router_num_groups" ">= 1" -- \
  $MOE --set model.moe_router_num_groups=-1 --set model.moe_router_group_topk=1
expect moe_topk_experts "$g" "model.moe_router_topk" "more than num_experts 8" -- \
  $MOE --set model.moe_router_topk=9
expect_world moe_shared_vs_tp 2 "$g" "model.moe_shared_expert_intermediate_size" \
  "tensor_model_parallel_size 2" -- $MOE --set model.moe_shared_expert_intermediate_size=33 \
  --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
  --set parallel.expert_tensor_parallel_size=1
# MoE layouts this build refuses, decided from the config and world size
expect_world moe_tp_without_sp 2 "$g" "parallel.sequence_parallel" \
  "tensor_model_parallel_size 2" -- $MOE --set parallel.tensor_model_parallel_size=2 \
  --set parallel.expert_tensor_parallel_size=1
expect moe_layer_freq_len "$g" "model.moe_layer_freq" "3 entries but num_layers is 2" -- \
  $MOE --set 'model.moe_layer_freq=[1,0,1]'
expect moe_layer_freq_two "$g" "model.moe_layer_freq" "element 1 is 2" -- \
  $MOE --set 'model.moe_layer_freq=[1,2]'
expect moe_layer_freq_zero "$g" "model.moe_layer_freq" ">= 1" -- $MOE --set model.moe_layer_freq=0
expect moe_score_unknown "$g" "model.moe_router_score_function" "softmax|sigmoid" -- \
  $MOE --set model.moe_router_score_function=sqrtsoftplus
expect moe_lb_unknown "$g" "model.moe_router_load_balancing_type" \
  "aux_loss|seq_aux_loss|global_aux_loss|none" -- \
  $MOE --set model.moe_router_load_balancing_type=sinkhorn
expect moe_router_dtype_unknown "$g" "model.moe_router_dtype" "fp32|fp64" -- \
  $MOE --set model.moe_router_dtype=bf16
expect moe_scaling_negative "$g" "model.moe_router_topk_scaling_factor" "> 0" -- \
  $MOE --set model.moe_router_topk_scaling_factor=-1
expect moe_scaling_zero "$g" "model.moe_router_topk_scaling_factor" "0 is out of range" -- \
  $MOE --set model.moe_router_topk_scaling_factor=0
expect moe_groups_zero "$g" "model.moe_router_num_groups" "0 is out of range" -- \
  $MOE --set model.moe_router_num_groups=0 --set model.moe_router_group_topk=1
expect moe_bias_rate_negative "$g" "model.moe_router_bias_update_rate" ">= 0" -- \
  $MOE --set model.moe_router_enable_expert_bias=true --set model.moe_router_bias_update_rate=-0.1
expect moe_bias_rate_without_bias "$g" "model.moe_router_bias_update_rate" \
  "moe_router_enable_expert_bias" -- $MOE --set model.moe_router_bias_update_rate=0.01
expect moe_pre_softmax_sigmoid "$g" "model.moe_router_pre_softmax" "sigmoid" -- \
  $MOE --set model.moe_router_score_function=sigmoid --set model.moe_router_pre_softmax=true
expect moe_aux_coeff_none "$g" "model.moe_aux_loss_coeff" "\"none\"" -- \
  $MOE --set model.moe_router_load_balancing_type=none --set model.moe_aux_loss_coeff=0.01
expect_world moe_ep_etp_world 4 "$g" "parallel.expert_model_parallel_size" \
  "does not divide the world size 4" -- $MOE --set parallel.expert_model_parallel_size=4 \
  --set parallel.expert_tensor_parallel_size=2

# issue 26: a key given where it has no effect is refused (exit 2) naming it and
# the key that would enable it: one case per key of docs/config.md's "Keys that
# need another setting" (generated from the key table's `needs` column; the
# check at the end fails when a key of that table has no case here). A key
# counts as given at its default value too (the moe_router_topk=2 case).
# dead KEY=VALUE ENABLING_KEY [more --set args]
dead_cases=0; dead_keys=""
dead() {
  local kv="$1" en="$2"; shift 2
  dead_cases=$((dead_cases + 1)); dead_keys="$dead_keys ${kv%%=*}"
  # through `megatrain topology` (the same config checks, a faster start)
  expect_world "dead_${kv%%=*}" 1 "$g" "${kv%%=*} (from --set): " "${kv#*=}" " has no effect with " \
    "expected $en " "or the key left out" -- "$@" --set "$kv"
}
dead model.rotary_base=10000 model.position_embedding_type
dead model.rotary_percent=1 model.position_embedding_type --set model.position_embedding_type=none
dead model.rotary_interleaved=true model.position_embedding_type
# issue 31: the MLA keys without multi_latent_attention, the RoPE scaling keys
for kv in q_lora_rank=64 kv_lora_rank=512 qk_head_dim=128 qk_pos_emb_head_dim=64 v_head_dim=128 \
    rotary_scaling_factor=40 original_max_position_embeddings=4096 beta_fast=32 beta_slow=1 \
    mscale=1 mscale_all_dim=1; do
  dead "model.$kv" model.multi_latent_attention
done
dead model.rope_type=rope model.position_embedding_type
dead model.use_rope_scaling=true model.position_embedding_type
dead model.rope_scaling_factor=8 model.use_rope_scaling --set model.position_embedding_type=rope
dead model.num_query_groups=4 model.group_query_attention
dead model.recompute_num_layers=1 model.recompute_granularity --set model.recompute_granularity=selective
dead model.moe_router_topk=2 model.num_experts
dead model.moe_ffn_hidden_size=128 model.num_experts
dead model.moe_layer_freq=1 model.num_experts
dead model.moe_aux_loss_coeff=0.01 model.num_experts
dead model.moe_z_loss_coeff=0.001 model.num_experts
dead model.moe_expert_capacity_factor=1.5 model.num_experts
dead model.moe_token_drop_policy=position model.moe_expert_capacity_factor $MOE
dead model.moe_router_pre_softmax=true model.num_experts
dead model.moe_pad_expert_input_to_capacity=true model.moe_expert_capacity_factor $MOE
dead model.moe_router_score_function=sigmoid model.num_experts
dead model.moe_router_topk_scaling_factor=2.5 model.num_experts
dead model.moe_router_enable_expert_bias=true model.num_experts
dead model.moe_router_bias_update_rate=0.01 model.moe_router_enable_expert_bias $MOE
dead model.moe_router_load_balancing_type=seq_aux_loss model.num_experts
dead model.moe_router_num_groups=4 model.num_experts
dead model.moe_router_group_topk=2 model.moe_router_num_groups $MOE
dead model.moe_router_dtype=fp64 model.num_experts
dead model.moe_shared_expert_intermediate_size=128 model.num_experts
dead model.moe_shared_expert_overlap=true model.moe_shared_expert_intermediate_size $MOE
dead model.moe_grouped_gemm=true model.num_experts
dead model.mtp_loss_scaling_factor=0.2 model.mtp_num_layers
dead parallel.virtual_pipeline_model_parallel_size=2 parallel.pipeline_model_parallel_size
dead parallel.num_layers_in_first_pipeline_stage=1 parallel.pipeline_model_parallel_size
dead parallel.num_layers_in_last_pipeline_stage=1 parallel.pipeline_model_parallel_size
dead parallel.overlap_p2p_comm=true parallel.pipeline_model_parallel_size
dead parallel.expert_model_parallel_size=1 model.num_experts
dead parallel.expert_tensor_parallel_size=1 model.num_experts
dead parallel.cp_comm_type=p2p parallel.context_parallel_size
dead parallel.zero_prefetch_layers=2 parallel.zero_stage --set parallel.zero_stage=1
dead parallel.overlap_param_gather=true parallel.zero_stage --set parallel.overlap_grad_reduce=true
dead training.exit_signal=SIGUSR2 training.exit_signal_handler --set training.exit_signal_handler=false
# tokenizer files read by one tokenizer type only (Megatron's build_tokenizer)
dead data.vocab_file=some/vocab.json data.tokenizer_type --set data.tokenizer_type=HuggingFaceTokenizer \
  --set data.tokenizer_model=some/tokenizer.json
dead data.merge_file=some/merges.txt data.tokenizer_type --set data.tokenizer_type=SentencePieceTokenizer \
  --set data.tokenizer_model=some/tokenizer.model
dead data.tokenizer_model=some/tokenizer.json data.tokenizer_type
# issue 30: document masking, per-split paths, the optimizer schedule's keys
dead data.reset_position_ids=false model.position_embedding_type $ROPE
dead data.split=90,10,0 data.train_data_path --set data.data_path=null --set 'data.train_data_path=["t"]'
dead data.valid_data_path=v data.train_data_path
dead data.test_data_path=t data.train_data_path
dead training.lr_wsd_decay_style=linear training.lr_decay_style
dead training.lr_wsd_decay_iters=2 training.lr_decay_style
dead training.lr_wsd_decay_samples=8 training.lr_decay_style
dead training.start_weight_decay=0.01 training.weight_decay_incr_style
dead training.end_weight_decay=0.1 training.weight_decay_incr_style
dead training.lr_warmup_samples=4 training.train_samples
dead training.lr_decay_samples=50 training.train_samples
dead 'training.rampup_batch_size=[2,2,24]' training.train_samples
dead training.apply_wd_to_qk_layernorm=false model.qk_layernorm
# issue 29: Megatron's timers and TensorBoard keys
dead logging.timing_log_option=max logging.timing_log_level
dead logging.tensorboard_log_interval=10 logging.tensorboard_dir
dead logging.log_timers_to_tensorboard=true logging.tensorboard_dir
dead logging.log_memory_to_tensorboard=true logging.tensorboard_dir
# issue 32: the delayed recipe's amax reduction group
dead training.tp_only_amax_red=true training.fp8_recipe --set training.precision=bf16 \
  --set training.fp8_format=e4m3 --set training.fp8_recipe=tensorwise
# chains: the first missing setting up the chain is named
dead model.moe_router_pre_softmax=true model.moe_router_score_function $MOE \
  --set model.moe_router_score_function=sigmoid
dead model.moe_aux_loss_coeff=0.01 model.moe_router_load_balancing_type $MOE \
  --set model.moe_router_load_balancing_type=none
# in the file too, at the default value, with the file named
sed 's/"num_attention_heads": 4,/"num_attention_heads": 4, "moe_router_topk": 2,/' "$tmp/good.json" >"$tmp/dense_topk.json"
expect dead_in_file "$tmp/dense_topk.json" "dense_topk.json: model.moe_router_topk: 2 has no effect with num_experts null" \
  "expected model.num_experts > 0"
# null is not giving a key; --set KEY=null removes a key the file gives
sed 's/"num_attention_heads": 4,/"num_attention_heads": 4, "moe_expert_capacity_factor": null,/' "$tmp/good.json" >"$tmp/null_ok.json"
if timeout 60 "$bin" topology --config "$tmp/null_ok.json" --world-size 1 >/dev/null 2>"$tmp/err" &&
   timeout 60 "$bin" topology --config "$tmp/dense_topk.json" --world-size 1 --set model.moe_router_topk=null \
     >/dev/null 2>>"$tmp/err"; then
  echo "ok   null_not_given: a null key and a key removed by --set KEY=null are accepted"
else
  echo "FAIL null_not_given"; sed 's/^/     | /' "$tmp/err" | head; fails=$((fails + 1))
fi
# every key of the generated table has a case above
for k in $(sed -n 's/^| `\([a-z_]*\.[a-z_]*\)` | .* |$/\1/p' docs/config.md | sort -u); do
  grep -q "applies only with" docs/config.md || break
  if ! sed -n '/^## Keys that need another setting/,/^Messages quote/p' docs/config.md | grep -q "^| \`$k\` |"; then continue; fi
  case " $dead_keys " in *" $k "*) ;; *) echo "FAIL dead-key case missing for $k"; fails=$((fails + 1)) ;; esac
done
echo "     $dead_cases dead-key cases"

# issue 18: honest messages for a directory, and for binary bytes (escaped, cut short)
mkdir -p "$tmp/cfgdir"
expect config_is_dir "$tmp/cfgdir" "is a directory, expected a JSON config file"
printf '{"model": \001\377\033[31m\n' >"$tmp/binary.json"
head -c 400 /dev/zero | tr '\0' 'x' >>"$tmp/binary.json"
expect json_binary "$tmp/binary.json" "JSON syntax error" '\x01\xFF\x1B[31m'
if LC_ALL=C grep -q "$(printf '[\001\033\377]')" "$tmp/err"; then
  echo "FAIL json_binary: raw control bytes echoed"; fails=$((fails + 1))
fi
if [ "$(awk '/^    / && length > 110' "$tmp/err" | wc -l)" -ne 0 ]; then
  echo "FAIL json_binary: quoted text not cut to a short window"; fails=$((fails + 1))
fi
printf '{"\\u001b[31mred": 1, "model": {"x\377": 2}}\n' >"$tmp/ctrlkey.json"
expect unknown_key_escaped "$tmp/ctrlkey.json" "unknown" '\x1B[31mred'
if LC_ALL=C grep -q "$(printf '[\033\377]')" "$tmp/err"; then
  echo "FAIL unknown_key_escaped: raw control bytes echoed"; fails=$((fails + 1))
fi
expect opt_sched_both "$g" "training.override_opt_param_scheduler" \
  "use_checkpoint_opt_param_scheduler" -- --set training.override_opt_param_scheduler=true \
  --set training.use_checkpoint_opt_param_scheduler=true
# bf16 on the cpu backend: accepted since issue 19 (was a config error): the
# run gets past configuration and stops at the missing corpus (exit 1)
timeout 120 "$bin" --config "$g" --set training.precision=bf16 >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "corpus_text_document" "$tmp/err" && ! grep -q "precision" "$tmp/err"; then
  echo "ok   bf16_cpu: accepted ($(head -c 100 "$tmp/err"))"
else
  echo "FAIL bf16_cpu: exit $rc (expected 1 at the missing corpus)"; sed 's/^/     | /' "$tmp/err" | head
  fails=$((fails + 1))
fi
# finetune without checkpoint.load: a start-up note (the run goes on from scratch)
timeout 120 "$bin" --config "$g" --set training.finetune=true >"$tmp/out" 2>"$tmp/err"
if grep -q "megatrain: note: .*training.finetune is true but checkpoint.load is not set" "$tmp/err"; then
  echo "ok   finetune_no_load: $(grep -m1 'finetune' "$tmp/err")"
else
  echo "FAIL finetune_no_load: no note"; sed 's/^/     | /' "$tmp/err" | head; fails=$((fails + 1))
fi
# bundled configs that train on the quick-start data name its tokenizer
# (so that `megatrain generate` works on their checkpoints without flags)
for f in configs/*.json; do
  if grep -q 'prepared/brown_text_document' "$f" && ! { grep -q '"vocab_file": "prepared/gpt2-vocab.json"' "$f" \
       && grep -q '"merge_file": "prepared/gpt2-merges.txt"' "$f"; }; then
    echo "FAIL $f: trains on prepared/brown_text_document without data.vocab_file/merge_file"
    fails=$((fails + 1))
  fi
done

if [ $fails -ne 0 ]; then
  echo "$fails case(s) failed"
  exit 1
fi
echo "all config error cases passed"
