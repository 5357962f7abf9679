#!/usr/bin/env bash
# MoE layout invariance: with a capacity factor that drops tokens (1.0) and
# dropless, ep 1/2/4 (dp matching), tp=2 + SP (ep 2 over the TP ranks), and
# pp=2 (MoE layers on both stages) reproduce the single-process 20-step
# curve (10 steps in CI): lm loss, grad norm, load-balancing loss, z-loss, tokens per expert
# (max, per MoE layer) and dropped count within 1e-5 relative (counts exact
# in practice). The micro-batch (mbs=2 samples) is the unit of routing and
# capacity in every layout, so the same tokens compete whatever tp/ep/dp/pp.
# Also: ZeRO-1 with ep = tp (edp = dp) matches, and the expert replicas
# agree across the expert-data-parallel group (checked by the trainer).
# CI: every layout with the capacity factor, and dropless ep=4 and pp=2 +
# ep=2; MEGATRAIN_TEST_FULL=1 adds dropless ep=2 and tp=2 + SP + ep=2
# (dropless ep=2 + etp=2 in CI: test_moe_etp_parity.sh's DeepSeek-style case).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/moe_lib.sh"
MOE_ITERS=$(full_or 20 10)  # CI: 10 steps; MEGATRAIN_TEST_FULL=1: 20
COMMON=(--set training.check_replicas_interval=10 --set training.eval_interval=0)
FULL=${MEGATRAIN_TEST_FULL:-0}
for mode in cap dropless; do
  extra=()
  [ $mode = dropless ] && extra=(--set model.moe_expert_capacity_factor=null)
  run ${mode}_base 1 "${extra[@]}"
  if [ $mode = cap ] || [ "$FULL" = 1 ]; then
    run ${mode}_ep2 2 --set parallel.expert_model_parallel_size=2 "${extra[@]}"
    cmp_moe ${mode}_ep2 ${mode}_base
  fi
  run ${mode}_ep4 4 --set parallel.expert_model_parallel_size=4 "${extra[@]}"
  cmp_moe ${mode}_ep4 ${mode}_base
  if [ $mode = cap ] || [ "$FULL" = 1 ]; then
    run ${mode}_tp2sp_ep2 2 --set parallel.tensor_model_parallel_size=2 \
        --set parallel.sequence_parallel=true --set parallel.expert_model_parallel_size=2 "${extra[@]}"
    cmp_moe ${mode}_tp2sp_ep2 ${mode}_base
  fi
  run ${mode}_pp2_ep2 4 --set parallel.pipeline_model_parallel_size=2 \
      --set parallel.expert_model_parallel_size=2 "${extra[@]}"
  cmp_moe ${mode}_pp2_ep2 ${mode}_base
done
run cap_tp2sp_dp2_ep2_zero1 4 --set parallel.tensor_model_parallel_size=2 \
    --set parallel.sequence_parallel=true --set parallel.expert_model_parallel_size=2 \
    --set parallel.zero_stage=1
cmp_moe cap_tp2sp_dp2_ep2_zero1 cap_base
run cap_tp2sp_ep1 2 --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true
cmp_moe cap_tp2sp_ep1 cap_base
grep -h "identical on all" "$TMP/cap_ep4.log" | head -1
