#!/usr/bin/env bash
# Router options are layout-free: DeepSeek-style routing (sigmoid scores,
# group-limited top-k 2 of 4 groups, seq_aux_loss, top-k scaling 2.5,
# capacity 1.0, dropout on) gives the one-process 20-step (CI: 10)
# curve with
# tp=2+SP+ep=2 and with cp=2 (the per-sequence loss needs each token's
# sample, t % b, on the gathered micro-batch); softmax with pre-softmax and
# global_aux_loss, dropless (f from the previous global batch's counts,
# summed over dp and pp), likewise with dp=2+ep=2 and pp=2+ep=2. Compared: lm loss, grad
# norm, balance loss, z-loss, dropped tokens, tokens per expert (max per MoE
# layer), within 1e-5 relative.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
MOE_ITERS=$(full_or 20 10)  # CI: 10 steps; MEGATRAIN_TEST_FULL=1: 20
COMMON=(--set training.eval_interval=0 --set model.hidden_dropout=0.1)
DS=(--set model.moe_router_score_function=sigmoid --set model.moe_router_num_groups=4
    --set model.moe_router_group_topk=2 --set model.moe_router_load_balancing_type=seq_aux_loss
    --set model.moe_router_topk_scaling_factor=2.5)
GL=(--set model.moe_router_pre_softmax=true --set model.moe_router_load_balancing_type=global_aux_loss
    --set model.moe_expert_capacity_factor=null)
run ds_base 1 "${DS[@]}"
run ds_tp2sp_ep2 2 "${DS[@]}" --set parallel.tensor_model_parallel_size=2 \
    --set parallel.sequence_parallel=true --set parallel.expert_model_parallel_size=2
cmp_moe ds_tp2sp_ep2 ds_base
run ds_cp2 2 "${DS[@]}" --set parallel.context_parallel_size=2
cmp_moe ds_cp2 ds_base
run gl_base 1 "${GL[@]}"
run gl_dp2_ep2 2 "${GL[@]}" --set parallel.expert_model_parallel_size=2
cmp_moe gl_dp2_ep2 gl_base
run gl_pp2_ep2 4 "${GL[@]}" --set parallel.pipeline_model_parallel_size=2 \
    --set parallel.expert_model_parallel_size=2
cmp_moe gl_pp2_ep2 gl_base
