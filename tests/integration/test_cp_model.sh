#!/usr/bin/env bash
# Context parallelism inside the model (tests/tools/cp_check.c): on 2 and 4
# ranks forming one CP group, one training forward+backward with dropout on
# equals the same model on the whole sequence (loss sum and every gradient,
# summed over the CP group, within 1e-5), the CP group's ring traffic equals
# the analytic count, and activation bytes per rank are exactly 1/cp of
# cp=1's (allocator). Variants: GPT-2 block; Llama-style block (RoPE,
# RMSNorm, SwiGLU, GQA, qk norm, no biases); MoE (routing over the whole
# micro-batch, auxiliary losses); full and selective recomputation (the
# forward ring runs again before the backward); tp=3 + SP inside cp=2 (SP
# shards straddling the two chunks), dense and Llama + MoE.
set -eu
cd "$(dirname "$0")/../.."
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { mpirun -np "$1" --oversubscribe --bind-to none build/tests/tools/cp_check 1e-5 "${@:2}"; }
LLAMA="position_embedding_type=rope normalization=RMSNorm swiglu=1 num_query_groups=2 add_bias_linear=0 qk_layernorm=1"
MOE="num_experts=4 moe_expert_capacity_factor=1.25 moe_aux_loss_coeff=0.01 moe_z_loss_coeff=0.001"
for np in 2 4; do
  run $np
  run $np $LLAMA
done
run 2 $MOE
run 4 recompute=full seq=32 position_embedding_type=rope num_query_groups=1
run 2 recompute=selective
# TP with sequence parallelism inside CP (6 ranks, tp fastest): tp=3 makes the
# SP shards straddle a CP rank's two chunks (dropout, position embedding, RoPE
# and the MoE token offsets then run per run of global positions)
T3="tp=3 hidden=48 heads=6 ffn_hidden_size=96 seq=24"
run 6 $T3
run 6 $T3 position_embedding_type=rope num_query_groups=3 num_experts=3 moe_aux_loss_coeff=0.01 moe_expert_capacity_factor=1.5
echo "ok: context parallelism in the model"
