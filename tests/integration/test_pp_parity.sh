#!/usr/bin/env bash
# Pipeline parallelism parity (1F1B and interleaved): p in {2, 4} with and
# without interleaving (v=2), combined with tp=2 + SP, with dp=2 in an 8-rank
# run (tp=2 + SP + ZeRO-1), with an uneven 3/2/2 split over 3 stages, and
# with untied embeddings, reproduce the single-process run (8
# layers, dropout on): lm loss and grad norm within 1e-5 relative every step
# over 20 steps (CI: 10); final parameters (gathered from all stages' checkpoints)
# within 1e-5; the word-embedding copies of the first and last stage are
# bitwise equal after every step (training.check_replicas_interval=1).
# Also: the schedules' activation memory counted by the allocator
# (build/tests/tools/pp_check, overlap_p2p_comm on and off) and config errors for invalid layouts.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
run() { # name np args...
  local name=$1 np=$2; shift 2
  local cmd=("$MT" --config $CFG --set model.num_layers=8 --set checkpoint.save="$TMP/$name"
             --set logging.metrics_file="$TMP/$name.jsonl" --set training.check_replicas_interval=1
             --set training.train_iters=$(full_or 20 10) "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
check() { # name baseline
  echo "== $1 vs $2"
  compare_metrics "$TMP/$1.jsonl" "$TMP/$2.jsonl" 1e-5
  /usr/bin/python3 tests/reference/ckpt_reader.py compare "$TMP/$1" "$TMP/$2" 1e-5
}
PP="parallel.pipeline_model_parallel_size"; VP="parallel.virtual_pipeline_model_parallel_size"
run base 1
run pp2 2 --set $PP=2
check pp2 base
FULL=${MEGATRAIN_TEST_FULL:-0}
# CI: pp=2 and pp=2 v=2 (pp=4 with untied embeddings and the uneven pp=3
# below); MEGATRAIN_TEST_FULL=1 adds pp=4, pp=4 v=2 and the 8-rank tp=2 + SP
# + pp=2 + dp=2 ZeRO-1 (in CI on the Llama-style block: test_llama_parity)
if [ "$FULL" = 1 ]; then
  run pp4 4 --set $PP=4
  check pp4 base
fi
run pp2_v2 2 --set $PP=2 --set $VP=2
check pp2_v2 base
if [ "$FULL" = 1 ]; then
  run pp4_v2 4 --set $PP=4 --set $VP=2
  check pp4_v2 base
fi
run pp2_tp2_sp 4 --set $PP=2 --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true
check pp2_tp2_sp base
# (CI: the same 8-rank mix of tp=2 + SP, pp=2 and dp=2 ZeRO-1 on the
# Llama-style block, test_llama_parity.sh's tp2_sp_pp2_dp2_z1)
if [ "$FULL" = 1 ]; then
  run pp2_tp2_dp2 8 --set $PP=2 --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
      --set parallel.zero_stage=1
  echo "== pp2_tp2_dp2 (ZeRO-1) vs base"   # ZeRO checkpoints hold flat shards: metrics only
  compare_metrics "$TMP/pp2_tp2_dp2.jsonl" "$TMP/base.jsonl" 1e-5
  grep -h "identical on the first and last" "$TMP/pp2_tp2_dp2.log"
fi
run base7 1 --set model.num_layers=7
run pp3_uneven 3 --set model.num_layers=7 --set $PP=3 --set parallel.num_layers_in_first_pipeline_stage=3 \
    --set parallel.num_layers_in_last_pipeline_stage=2
check pp3_uneven base7
run base_untied 1 --set model.untie_embeddings_and_output_weights=true
run pp4_untied 4 --set $PP=4 --set model.untie_embeddings_and_output_weights=true
check pp4_untied base_untied
echo "== activation memory per stage (allocator)"
$MPI -np 4 build/tests/tools/pp_check 8 1
$MPI -np 4 build/tests/tools/pp_check 8 2
echo "== the same with overlap_p2p_comm off (interleaved only; both with MEGATRAIN_TEST_FULL=1)"
[ "$FULL" = 1 ] && $MPI -np 4 build/tests/tools/pp_check 8 1 0
$MPI -np 4 build/tests/tools/pp_check 8 2 0
echo "== invalid layouts are config errors"
set +e
"$MT" --config $CFG --set $PP=3 >"$TMP/e1.log" 2>&1; e1=$?
$MPI -np 4 "$MT" --config $CFG --set model.num_layers=8 --set $PP=4 --set $VP=2 --set training.global_batch_size=6 --set training.micro_batch_size=1 >"$TMP/e2.log" 2>&1; e2=$?
set -e
[ $e1 = 2 ] && grep -q "pipeline_model_parallel_size" "$TMP/e1.log" || { cat "$TMP/e1.log"; exit 1; }
head -c 300 "$TMP/e1.log"; echo
[ $e2 != 0 ] && grep -qi "micro-batch\|multiple" "$TMP/e2.log" || { cat "$TMP/e2.log"; exit 1; }
grep -m1 -i "error" "$TMP/e2.log"
