#!/usr/bin/env bash
# ZeRO memory and communication (tests/tools/zero_check.c): for dp in {2, 4}
# and zero_stage 0..3, one iteration with one micro-batch per rank; the
# allocator's live parameter + gradient + optimizer bytes equal the layout
# exactly and the ZeRO formula (16Ψ, 8Ψ+8Ψ/N, 4Ψ+12Ψ/N, 16Ψ/N) within 2% plus
# padding; the dp group's counters move 2Ψ (stages 0-2) / 3Ψ (stage 3)
# elements within the padding. Odd parameter count (2315115) and padded buckets.
# MoE (tests/configs/gpt-moe-test.json): dp=4 + ep=2 (edp 2, hidden 45: odd
# lengths, padded buckets) and tp=2 + SP + ep=4 (dp 2, edp 1): the dense
# part follows the formulas over dp, the expert part (its own layout) over
# edp, and the edp group moves 2Ψ_e / 3Ψ_e elements (0 when edp = 1).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
ZC=build/tests/tools/zero_check
[ -x $ZC ] || { echo "SKIP: $ZC not built"; exit 77; }
for dp in 2 4; do
  mpirun -np $dp --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
    -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS $ZC --config $CFG \
    --set model.hidden_size=45 --set model.num_attention_heads=5 \
    --set model.max_position_embeddings=35 --set parallel.ddp_bucket_size=50001 \
    --set training.eval_interval=0 --set training.global_batch_size=$((2 * dp)) \
    >"$TMP/zc$dp.log" 2>&1 || { cat "$TMP/zc$dp.log"; exit 1; }
  cat "$TMP/zc$dp.log"
  grep -q "zero_check OK" "$TMP/zc$dp.log"
done
moe() { # name np sets...
  local name=$1 np=$2; shift 2
  mpirun -np $np --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
    -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS $ZC --config tests/configs/gpt-moe-test.json \
    --set parallel.ddp_bucket_size=4999 --set training.eval_interval=0 "$@" \
    >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; exit 1; }
  cat "$TMP/$name.log"
  grep -q "zero_check OK" "$TMP/$name.log"
}
moe moe_dp4_ep2 4 --set parallel.expert_model_parallel_size=2 --set model.hidden_size=45 \
  --set model.num_attention_heads=5
grep -q "stage 3 dp 4 edp 2" "$TMP/moe_dp4_ep2.log"
moe moe_tp2_ep4 4 --set parallel.expert_model_parallel_size=4 --set parallel.tensor_model_parallel_size=2 \
  --set parallel.sequence_parallel=true --set training.global_batch_size=4
