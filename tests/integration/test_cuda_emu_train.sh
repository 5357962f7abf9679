#!/usr/bin/env bash
# The trainer with device "cuda" under the host emulation (build-emu/, make
# CUDA_EMU=1; tests/cuda_emu/): the CUDA backend's kernels, cuBLAS calls,
# allocator, streams and events, and both communication engines on device
# buffers — the NCCL engine over the NCCL stand-in (libnccl.so.2 over MPI,
# one emulated GPU per rank) and the "mpi" staging engine — run unchanged.
#   - the 1-rank cuda-emu run equals the cpu backend's within 1e-4 relative
#     per step in fp32 (lm loss, grad norm, validation loss), 2e-2 in bf16;
#   - the 1-rank run's training steps hold 5 host synchronisations each
#     (the loss of each of 4 micro-batches, the gradient norm: MT_EMU_SYNCS);
#   - each layout equals the 1-rank cuda-emu run of its precision within
#     1e-5 in fp32 (the layout parity the cpu backend proves), 2e-2 in bf16
#     (as tests/integration/test_bf16_parity.sh on cpu).
# CI (about 2 minutes on 2 cores): the 1-rank fp32 run against cpu, pp=2
# 1F1B on the NCCL stand-in (its p2p channels: own communicators, streams
# and events) and tp=2 + SP on the staging engine, each against the 1-rank
# cuda-emu run. MEGATRAIN_TEST_FULL=1: every layout of the table — tp=2+SP,
# pp=2 1F1B, pp=2 v=2, cp=2, dp=2 ZeRO-1/2/3, ep=2 etp=2 MoE (with tp=2+SP,
# 4 ranks), the Llama-style block with tp=2+SP, multi-latent attention
# (tests/configs/gpt-mla-test.json, 3 steps; 1 rank vs cpu and cp=2, the
# ring's kv form and lse merge with hv != hn), configs/gpt-moe.json on 8
# ranks — in fp32 and bf16 on both engines, each also against the cpu
# backend's 1-rank run, printing the table of worst relative differences
# (tests/tools/cuda_emu_table.py; it also combines the logs of several runs).
# MEGATRAIN_EMU_PRECS="fp32" or "bf16" runs the full matrix's layouts in that
# precision only (two runs of the test side by side take the table's time
# down; the CI runs are in fp32).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_emu_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
FULL=${MEGATRAIN_TEST_FULL:-0}
PRECS=${MEGATRAIN_EMU_PRECS:-fp32 bf16}
t_start=$(date +%s)
# 4 layers (pp=2 v=2 has one per chunk), 16 tokens x 4 micro-batches a
# step, 3 steps with dropout on, validation at step 3
SHAPE=(--set model.num_layers=4 --set model.seq_length=16 --set training.global_batch_size=4
       --set training.micro_batch_size=1 --set training.train_iters=3 --set training.lr_warmup_iters=1
       --set training.eval_interval=3 --set training.eval_iters=1 --set logging.log_interval=1)
G=(--config "$CFG" "${SHAPE[@]}")
P=parallel
TP=(--set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true)
PP=(--set $P.pipeline_model_parallel_size=2)
fails=0
bad() { fails=$((fails + 1)); }

# layout NAME NP PREC ENGINE BASE [args...]: run the layout on cuda-emu and
# compare it with BASE (the 1-rank cuda-emu run of the same model and
# precision) and, in FULL mode, with cpu_BASE (the cpu backend's)
layout() {
  local name=$1 np=$2 prec=$3 eng=$4 base=$5; shift 5
  local tol=1e-5; [ "$prec" = bf16 ] && tol=2e-2
  emu_run "$name" "$np" "$EMU_MT" cuda --set training.precision="$prec" \
    --set $P.distributed_backend="$eng" "$@" || { bad; return; }
  grep -q "communication: $([ "$eng" = nccl ] && echo nccl || echo 'mpi (staged through host)')" \
    "$TMP/$name.log" || { echo "   $name: not the $eng engine"; bad; }
  emu_cmp "$name" "$base" "$tol" || bad
  if [ "$FULL" = 1 ] && [ -s "$TMP/cpu_$base.jsonl" ]; then
    emu_cmp "$name" "cpu_$base" "$([ "$prec" = bf16 ] && echo 2e-2 || echo 1e-4)" || bad
  fi
}

echo "== 1 rank: cuda-emu vs the cpu backend"
emu_run cpu_f32 1 "$MT" cpu "${G[@]}" || exit 1
MT_EMU_SYNCS=1 emu_run f32 1 "$EMU_MT" cuda "${G[@]}" || exit 1
emu_cmp f32 cpu_f32 1e-4 || bad
# host synchronisations inside the training steps (MT_EMU_SYNCS=1, docs/cuda.md
# "GPU efficiency"): the sites met in every one of the 3 steps are the loss of
# each of the 4 micro-batches and the gradient norm, nothing more (one-off
# sites, e.g. the first growth of a buffer, are listed, not counted)
ns=$(awk '/^ +[0-9]+ x  /{c=$1; next} /^ +at mt_trainer_step\+/{if (c >= 3) s+=c; c=0} END{print s+0}' "$TMP/f32.log")
if [ "$ns" = $((3 * (4 + 1))) ]; then echo "   host synchronisations at sites of every step, 3 steps: $ns (4 micro-batches + 1 a step)"
else echo "   host synchronisations at sites of every step, 3 steps: $ns, expected 15:"
  sed -n '/host synchronisations/,$p' "$TMP/f32.log" | head -40; bad; fi
cp "$TMP/cpu_f32.jsonl" "$TMP/cpu_f32x.jsonl"

if [[ " $PRECS " == *" fp32 "* ]]; then
  echo "== layouts against the 1-rank cuda-emu run"
  layout pp2_1f1b_nccl_f32 2 fp32 nccl f32 "${G[@]}" "${PP[@]}"
  layout tp2_sp_mpi_f32 2 fp32 mpi f32 "${G[@]}" "${TP[@]}"
fi

if [ "$FULL" = 1 ]; then
  emu_run cpu_bf16 1 "$MT" cpu "${G[@]}" --set training.precision=bf16 || exit 1
  emu_run bf16 1 "$EMU_MT" cuda "${G[@]}" --set training.precision=bf16 || exit 1
  emu_cmp bf16 cpu_bf16 2e-2 || bad
  emu_cmp bf16 cpu_f32x 2e-2 || bad
  M=tests/configs/gpt-moe-test.json
  MG=(--config $M "${SHAPE[@]}" --set model.add_bias_linear=false) # expert biases need etp 1
  # the Llama-style block (as tests/integration/test_llama_parity.sh): RoPE,
  # RMSNorm, SwiGLU, GQA 8/4, no biases, untied output, qk_layernorm
  LG=("${G[@]}" --set model.num_attention_heads=8 --set model.ffn_hidden_size=128
      --set model.position_embedding_type=rope --set model.normalization=RMSNorm
      --set model.swiglu=true --set model.group_query_attention=true --set model.num_query_groups=4
      --set model.add_bias_linear=false --set model.untie_embeddings_and_output_weights=true
      --set model.qk_layernorm=true --set training.lr=5e-4)
  MOE=configs/gpt-moe.json
  MOE_SHAPE=(--config $MOE --set training.train_iters=3 --set training.lr_warmup_iters=1
             --set training.eval_interval=3 --set training.eval_iters=1 --set logging.log_interval=1
             --set checkpoint.save=null)
  MLA=(--config tests/configs/gpt-mla-test.json --set training.train_iters=3
       --set training.lr_warmup_iters=1 --set training.eval_interval=3 --set training.eval_iters=1
       --set logging.log_interval=1)
  MOE1=(--set $P.tensor_model_parallel_size=1 --set $P.sequence_parallel=false
        --set $P.pipeline_model_parallel_size=1 --set $P.expert_model_parallel_size=1 --set $P.zero_stage=0)
  for prec in $PRECS; do
    s=$([ $prec = fp32 ] && echo f32 || echo bf16)
    B=(--set training.precision=$prec)
    emu_run cpu_moe_$s 1 "$MT" cpu "${MG[@]}" "${B[@]}" || bad
    emu_run moe_$s 1 "$EMU_MT" cuda "${MG[@]}" "${B[@]}" || bad
    emu_cmp moe_$s cpu_moe_$s "$([ $prec = bf16 ] && echo 2e-2 || echo 1e-4)" || bad
    emu_run cpu_llama_$s 1 "$MT" cpu "${LG[@]}" "${B[@]}" || bad
    emu_run llama_$s 1 "$EMU_MT" cuda "${LG[@]}" "${B[@]}" || bad
    emu_cmp llama_$s cpu_llama_$s "$([ $prec = bf16 ] && echo 2e-2 || echo 1e-4)" || bad
    emu_run cpu_gptmoe1_$s 1 "$MT" cpu "${MOE_SHAPE[@]}" "${MOE1[@]}" "${B[@]}" || bad
    emu_run gptmoe1_$s 1 "$EMU_MT" cuda "${MOE_SHAPE[@]}" "${MOE1[@]}" "${B[@]}" || bad
    emu_cmp gptmoe1_$s cpu_gptmoe1_$s "$([ $prec = bf16 ] && echo 2e-2 || echo 1e-4)" || bad
    # multi-latent attention (hv != hn: the FFMA flash kernels, bf16 too)
    emu_run cpu_mla_$s 1 "$MT" cpu "${MLA[@]}" "${B[@]}" || bad
    emu_run mla_$s 1 "$EMU_MT" cuda "${MLA[@]}" "${B[@]}" || bad
    emu_cmp mla_$s cpu_mla_$s "$([ $prec = bf16 ] && echo 2e-2 || echo 1e-4)" || bad
    for eng in nccl mpi; do
      [ "$prec/$eng" = fp32/nccl ] || layout pp2_1f1b_${eng}_$s 2 $prec $eng $s "${G[@]}" "${PP[@]}"
      [ "$prec/$eng" = fp32/mpi ] || layout tp2_sp_${eng}_$s 2 $prec $eng $s "${G[@]}" "${TP[@]}"
      layout pp2_v2_${eng}_$s 2 $prec $eng $s "${G[@]}" "${PP[@]}" --set $P.virtual_pipeline_model_parallel_size=2
      layout cp2_${eng}_$s 2 $prec $eng $s "${G[@]}" --set $P.context_parallel_size=2
      for z in 1 2 3; do layout dp2_zero${z}_${eng}_$s 2 $prec $eng $s "${G[@]}" --set $P.zero_stage=$z; done
      layout moe_ep2_etp2_${eng}_$s 4 $prec $eng moe_$s "${MG[@]}" "${TP[@]}" \
        --set $P.expert_model_parallel_size=2 --set $P.expert_tensor_parallel_size=2
      layout llama_tp2_sp_${eng}_$s 2 $prec $eng llama_$s "${LG[@]}" "${TP[@]}"
      layout mla_cp2_${eng}_$s 2 $prec $eng mla_$s "${MLA[@]}" --set $P.context_parallel_size=2
      layout gpt_moe_8_${eng}_$s 8 $prec $eng gptmoe1_$s "${MOE_SHAPE[@]}"
    done
  done
  # the table: layout x precision x engine, worst relative difference
  echo "== the table (tests/tools/cuda_emu_table.py)"
  /usr/bin/python3 "$ROOT/tests/tools/cuda_emu_table.py" "$TMP/cmp.log"
fi
dt=$(( $(date +%s) - t_start ))
[ $fails -eq 0 ] || { echo "$fails check(s) failed (${dt} s)"; exit 1; }
echo "trainer on cuda-emu: every run within its tolerance (${dt} s$([ "$FULL" = 1 ] && echo ', full matrix'))"
