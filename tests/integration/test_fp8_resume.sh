#!/usr/bin/env bash
# FP8 delayed-scaling state in checkpoints (docs/fp8.md "Checkpoints"): the
# 2-layer test model in bf16 with FP8 linear layers (hybrid, delayed,
# fp8_amax_history_len 8), dropout on, 4 micro-batches (history updates) per
# step:
#  - saved at iteration 2 and resumed in the same layout, iteration 3
#    reproduces the uninterrupted run bitwise (metrics, and the whole
#    checkpoint of iteration 3 byte for byte, the amax histories with it);
#  - (MEGATRAIN_TEST_FULL=1) a history of another length than
#    fp8_amax_history_len is refused (exit 1, naming both lengths);
#    convert --to hf exports the checkpoint without its FP8 state; the
#    same resume for every recipe; resharding
#    tp2+SP -> 1 process and pp2 -> tp2+SP: iteration 3 within 2e-2 of the
#    uninterrupted run and the saved history continued bitwise (entries
#    [4:] of iteration 3's history are iteration 2's [:4]); dp=2: resumed
#    bitwise (the dp amax reduction keeps the replicas' histories equal);
#    a bf16 checkpoint resumed with the delayed recipe starts an empty
#    history (TE's initial state) and says so; dp=2 ZeRO-1 with
#    fp8_param_gather resumed bitwise.
# CI part: 10 s wall on 2 busy cores (3.5 s CPU).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
CHK="/usr/bin/python3 tests/integration/fp8_meta_check.py"
BASE=(--config $CFG --set training.precision=bf16 --set training.train_iters=3
      --set logging.log_interval=1 --set training.eval_interval=0 --set training.fp8_format=hybrid
      --set training.lr_decay_iters=4)
DL=(--set training.fp8_recipe=delayed --set training.fp8_amax_history_len=8)
run() { # name np args...: a run saving into $TMP/name
  local name=$1 np=$2; shift 2
  local cmd=("$MT" "${BASE[@]}" --set checkpoint.save="$TMP/$name" --set checkpoint.save_interval=2
             --set logging.metrics_file="$TMP/$name.jsonl" "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
at2() { # src dst: dst holds src's iteration 2 as its latest
  mkdir -p "$TMP/$2"; cp -r "$TMP/$1/iter_0000002" "$TMP/$2/"
  echo 2 >"$TMP/$2/latest_checkpointed_iteration.txt"
}
resume() { # src name np args...: name continues src's iteration 2 to 3
  local src=$1 name=$2; shift 2
  at2 "$src" "$name"
  run "$name" "$@" --set checkpoint.load="$TMP/$name"
  grep -q "loaded checkpoint at iteration 2" "$TMP/$name.log" || { echo "$name did not resume"; exit 1; }
}
TP2=(--set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true)
PP2=(--set parallel.pipeline_model_parallel_size=2)

RECIPES=$(full_or "delayed tensorwise blockwise mxfp8" "delayed")
for r in $RECIPES; do
  R=(--set training.fp8_recipe=$r); [ $r = delayed ] && R=("${DL[@]}")
  run "a-$r" 1 "${R[@]}"
  resume "a-$r" "b-$r" 1 "${R[@]}"
  compare_resumed "$TMP/a-$r.jsonl" "$TMP/b-$r.jsonl" 3 3 0 "$r: saved at 2, resumed"
  same_ckpt "$TMP/a-$r/iter_0000003" "$TMP/b-$r/iter_0000003"
done
$CHK count "$TMP/b-delayed/iter_0000003" # the states exist (same_ckpt compared them)

if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  # another history length: exit 1 naming both
  at2 a-delayed badlen
  set +e
  "$MT" "${BASE[@]}" "${DL[@]}" --set training.fp8_amax_history_len=4 --set checkpoint.load="$TMP/badlen" \
    >"$TMP/badlen.log" 2>&1
  rc=$?
  set -e
  [ $rc = 1 ] && grep -q "amax history of length 8.*fp8_amax_history_len is 4" "$TMP/badlen.log" ||
    { echo "history length mismatch: expected exit 1 naming 8 and 4, got $rc:"; tail -3 "$TMP/badlen.log"; exit 1; }
  echo "  history length 8 loaded with fp8_amax_history_len 4: refused (exit 1)"

  # the export leaves the FP8 state (training state) out, as the optimizer's
  "$MT" convert --to hf --load "$TMP/a-delayed" --output "$TMP/hf" >"$TMP/hf.log" 2>&1 ||
    { echo "convert --to hf of a delayed FP8 checkpoint failed:"; tail -3 "$TMP/hf.log"; exit 1; }
  echo "  convert --to hf of the delayed checkpoint: exported without the FP8 state"

  # resharding: the saved history is what the new layout continues
  run a-tp2 2 "${TP2[@]}" "${DL[@]}"
  resume a-tp2 b-tp1 1 "${DL[@]}"
  compare_resumed "$TMP/a-tp2.jsonl" "$TMP/b-tp1.jsonl" 3 3 2e-2 "delayed: tp2+SP saved, 1 process resumed"
  $CHK shift "$TMP/a-tp2/iter_0000002" "$TMP/b-tp1/iter_0000003" 4 "$TMP/a-tp2/iter_0000003"
  run a-pp2 2 "${PP2[@]}" "${DL[@]}"
  resume a-pp2 b-tp2 2 "${TP2[@]}" "${DL[@]}"
  compare_resumed "$TMP/a-pp2.jsonl" "$TMP/b-tp2.jsonl" 3 3 2e-2 "delayed: pp2 saved, tp2+SP resumed"
  $CHK shift "$TMP/a-pp2/iter_0000002" "$TMP/b-tp2/iter_0000003" 4 "$TMP/a-pp2/iter_0000003"
  # dp=2 (2 micro-batches per replica per step): replicas hold one history
  run a-dp2 2 "${DL[@]}"
  resume a-dp2 b-dp2 2 "${DL[@]}"
  compare_resumed "$TMP/a-dp2.jsonl" "$TMP/b-dp2.jsonl" 3 3 0 "delayed: dp=2 saved, dp=2 resumed"
  same_ckpt "$TMP/a-dp2/iter_0000003" "$TMP/b-dp2/iter_0000003"
  # fp8_param_gather (dp=2 ZeRO-1, tensorwise): the master shards and the
  # owned bf16 shards are saved; the resumed run quantizes and gathers
  # them again and continues bitwise, its checkpoint byte for byte
  PG=(--set training.fp8_recipe=tensorwise --set training.fp8_param_gather=true
      --set parallel.zero_stage=1)
  run a-pg 2 "${PG[@]}"
  resume a-pg b-pg 2 "${PG[@]}"
  compare_resumed "$TMP/a-pg.jsonl" "$TMP/b-pg.jsonl" 3 3 0 "fp8_param_gather: dp=2 ZeRO-1 saved, resumed"
  same_ckpt "$TMP/a-pg/iter_0000003" "$TMP/b-pg/iter_0000003"
  # a checkpoint without FP8 state: the delayed run starts an empty history
  "$MT" --config $CFG --set training.precision=bf16 --set training.train_iters=2 \
    --set training.lr_decay_iters=4 --set training.eval_interval=0 \
    --set checkpoint.save="$TMP/bf16" >"$TMP/bf16.log" 2>&1 || { echo "bf16 run failed:"; tail -5 "$TMP/bf16.log"; exit 1; }
  run fresh 1 "${DL[@]}" --set checkpoint.load="$TMP/bf16"
  grep -q "holds no FP8 delayed-scaling state" "$TMP/fresh.log" ||
    { echo "resuming a bf16 checkpoint with the delayed recipe did not say the history starts empty"; exit 1; }
  echo "  bf16 checkpoint resumed with the delayed recipe: empty history, said so"
fi
# DeepSeek-tiny (MLA + sigmoid MoE with a shared expert + one MTP depth;
# every linear's delayed state saved under its layer's name, the routed
# experts' per global expert), delayed with history length 8, 2 micro-batches
# per step: saved at 2 and resumed in the same layout, iteration 3 bitwise
# and its checkpoint byte for byte; MEGATRAIN_TEST_FULL=1: tp2+SP saved ->
# ep=2 resumed, and ep=2 saved -> 1 process resumed, iteration 3 within 2e-2
# of the uninterrupted run (lm loss, grad norm, MTP loss) with every state
# loaded (the same state names saved before and after).
DSB=(--config tests/configs/deepseek-tiny-test.json --set training.global_batch_size=4
     --set training.lr_warmup_iters=1)
run_ds() { run "$@" "${DSB[@]}" "${DL[@]}"; } # name np args...: run on DeepSeek-tiny, delayed
run_ds ds-a 1
resume ds-a ds-b 1 "${DSB[@]}" "${DL[@]}"
compare_resumed "$TMP/ds-a.jsonl" "$TMP/ds-b.jsonl" 3 3 0 "DeepSeek-tiny delayed: saved at 2, resumed"
same_ckpt "$TMP/ds-a/iter_0000003" "$TMP/ds-b/iter_0000003"
echo -n "  DeepSeek-tiny: "; $CHK count "$TMP/ds-b/iter_0000003"
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  EP2=(--set parallel.expert_model_parallel_size=2)
  names() { /usr/bin/python3 -c '
import sys; sys.path.insert(0, "tests/reference"); import dist_ckpt
_, x = dist_ckpt.load_checkpoint(sys.argv[1], names=lambda n: ".fp8_meta." in n)
assert x, "no FP8 state in " + sys.argv[1]
print("\n".join(sorted(x)))' "$1"; }
  same_names() { # a b: the same FP8 state names, none missing
    local a b; a=$(names "$1") && b=$(names "$2") || exit 1
    [ "$a" = "$b" ] || { echo "FP8 states differ: $1 vs $2"; diff <(echo "$a") <(echo "$b") | head; exit 1; }
    echo "  $(echo "$a" | wc -l) FP8 states in both $1 and $2"; }
  run_ds ds-tp2 2 "${TP2[@]}"
  resume ds-tp2 ds-tp2-ep2 2 "${EP2[@]}" "${DSB[@]}" "${DL[@]}"
  compare_resumed "$TMP/ds-tp2.jsonl" "$TMP/ds-tp2-ep2.jsonl" 3 3 2e-2 "DeepSeek-tiny: tp2+SP saved, ep2 resumed"
  same_names "$TMP/ds-tp2/iter_0000002" "$TMP/ds-tp2-ep2/iter_0000003"
  run_ds ds-ep2 2 "${EP2[@]}"
  resume ds-ep2 ds-ep2-one 1 "${DSB[@]}" "${DL[@]}"
  compare_resumed "$TMP/ds-ep2.jsonl" "$TMP/ds-ep2-one.jsonl" 3 3 2e-2 "DeepSeek-tiny: ep2 saved, 1 process resumed"
  same_names "$TMP/ds-ep2/iter_0000002" "$TMP/ds-ep2-one/iter_0000003"
  grep -q "holds no FP8 delayed-scaling state" "$TMP/ds-tp2-ep2.log" "$TMP/ds-ep2-one.log" &&
    { echo "a resharded DeepSeek-tiny run found no FP8 state"; exit 1; }
  echo "  DeepSeek-tiny resharded: every FP8 state saved and loaded under the other layout"
fi
echo "fp8 resume: OK"
