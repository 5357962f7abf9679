#!/usr/bin/env bash
# ZeRO memory and communication (tests/tools/zero_check.c): for dp in {2, 4}
# and zero_stage 0..3, one iteration with one micro-batch per rank; the
# allocator's live parameter + gradient + optimizer bytes equal the layout
# exactly and the ZeRO formula (16Ψ, 8Ψ+8Ψ/N, 4Ψ+12Ψ/N, 16Ψ/N) within 2% plus
# padding; the dp group's counters move 2Ψ (stages 0-2) / 3Ψ (stage 3)
# elements within the padding. Odd parameter count (2315115) and padded buckets.
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
