#!/usr/bin/env bash
# training.finetune (Megatron's --finetune) from a layout-free checkpoint:
# the weights are loaded (any layout), iteration, optimizer state and data
# position start afresh. A 5-iteration run's checkpoint is fine-tuned for 5
# iterations in one process, under tp=2+SP and under dp=2 ZeRO-3: the three
# curves agree within 1e-5 (dropout on), they start from the loaded weights
# (iteration 1 loss below a fresh model's), and the fine-tuned run counts
# from iteration 1 with consumed samples from 0.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
S=(--set training.train_iters=5 --set training.eval_interval=0 --set training.lr_warmup_iters=1
   --set logging.log_interval=1)
MPI=(mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle
     -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS)
"$MT" --config $CFG "${S[@]}" --set checkpoint.save="$TMP/pre" --set logging.metrics_file="$TMP/pre.jsonl" \
  >"$TMP/pre.log" 2>&1 || { tail "$TMP/pre.log"; exit 1; }
ft() { # name launcher... -- args
  local name=$1; shift
  "$@" --config $CFG "${S[@]}" --set checkpoint.load="$TMP/pre" --set training.finetune=true \
    --set logging.metrics_file="$TMP/$name.jsonl" >"$TMP/$name.log" 2>&1 \
    || { echo "$name failed:"; tail "$TMP/$name.log"; exit 1; }
  grep -q "fine-tuning from the weights of" "$TMP/$name.log" || { cat "$TMP/$name.log"; exit 1; }
  ! grep -q "resumed from iteration" "$TMP/$name.log" || { echo "$name resumed instead"; exit 1; }
}
ft one "$MT"
ft tp2 "${MPI[@]}" "$MT" --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true
ft z3 "${MPI[@]}" "$MT" --set parallel.zero_stage=3
echo "tp=2+SP vs one process:"; compare_metrics "$TMP/tp2.jsonl" "$TMP/one.jsonl" 1e-5
echo "dp=2 ZeRO-3 vs one process:"; compare_metrics "$TMP/z3.jsonl" "$TMP/one.jsonl" 1e-5
/usr/bin/python3 - "$TMP/pre.jsonl" "$TMP/one.jsonl" <<'PY'
import json, sys
pre, ft = ([o for o in map(json.loads, open(p)) if "lm_loss" in o] for p in sys.argv[1:])
assert [o["iteration"] for o in ft] == [1, 2, 3, 4, 5], [o["iteration"] for o in ft]
assert ft[0]["consumed_samples"] == pre[0]["consumed_samples"], (ft[0], pre[0])
assert ft[0]["lr"] == pre[0]["lr"], "the LR schedule restarts"
assert ft[0]["lm_loss"] < pre[0]["lm_loss"] - 0.05, (ft[0]["lm_loss"], pre[0]["lm_loss"])
print("fine-tuning starts at iteration 1 (consumed samples and LR schedule from 0) from the "
      "loaded weights: iteration-1 loss %.4f vs %.4f for a fresh model" % (ft[0]["lm_loss"], pre[0]["lm_loss"]))
PY
echo "test_finetune OK"
