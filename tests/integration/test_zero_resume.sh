#!/usr/bin/env bash
# ZeRO checkpoints: with dp=2 and zero_stage 1, 2, 3 every rank writes the
# pieces it owns into its own shard file (shard_00000.bin, shard_00001.bin:
# parameters and Adam moments in per-parameter model space); stopping at
# iteration 6 and resuming with the same layout reproduces the uninterrupted
# run bitwise (lm loss, grad norm, learning rate every step) and ends with
# byte-identical checkpoints (parameters, Adam moments, Adam step counter).
# Loading under another zero_stage or dp, or across ZeRO / non-ZeRO,
# resumes: iterations 7-12 equal the uninterrupted run within 1e-5.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
SETS="--set model.hidden_size=45 --set model.num_attention_heads=5 --set model.max_position_embeddings=35
      --set training.clip_grad=1.0 --set parallel.ddp_bucket_size=50001
      --set training.train_iters=12 --set training.eval_interval=6"
MPI="mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
same_curve() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and len(a) == 12, (sorted(a), sorted(b))
for it in a:
    for k in ("lm_loss", "grad_norm", "lr", "consumed_samples"):
        assert a[it][k] == b[it][k], "iteration %d %s: %r vs %r" % (it, k, a[it][k], b[it][k])
print("bitwise identical lm_loss, grad_norm, lr over 12 iterations")
PY
}
for st in 1 2 3; do
  Z="--set parallel.zero_stage=$st"
  $MPI "$MT" --config $CFG $SETS $Z --set logging.metrics_file="$TMP/full$st.jsonl" \
    --set checkpoint.save="$TMP/full$st" --set checkpoint.save_interval=6 >"$TMP/full$st.log" 2>&1 || { tail "$TMP/full$st.log"; exit 1; }
  $MPI "$MT" --config $CFG $SETS $Z --set logging.metrics_file="$TMP/res$st.jsonl" \
    --set checkpoint.save="$TMP/res$st" --set training.exit_interval=6 >"$TMP/a$st.log" 2>&1 \
    || { tail "$TMP/a$st.log"; exit 1; }
  ls "$TMP/res$st/iter_0000006/shard_00000.bin" "$TMP/res$st/iter_0000006/shard_00001.bin" >/dev/null
  $MPI "$MT" --config $CFG $SETS $Z --set logging.metrics_file="$TMP/res$st.jsonl" \
    --set checkpoint.load="$TMP/res$st" --set checkpoint.save="$TMP/res$st" >"$TMP/b$st.log" 2>&1 \
    || { tail "$TMP/b$st.log"; exit 1; }
  grep -q "resumed from iteration 6" "$TMP/b$st.log"
  echo -n "zero_stage=$st resume at 6: "
  same_curve "$TMP/res$st.jsonl" "$TMP/full$st.jsonl"
  same_ckpt "$TMP/res$st/iter_0000012" "$TMP/full$st/iter_0000012"
done
# other layouts resume from iteration 6 of another one
resumed() { # label full-run source-dir np args...
  local label=$1 full=$2 src=$3 np=$4; shift 4
  rm -rf "$TMP/x"; ckpt_at "$src" 6 "$TMP/x"
  mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
    -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$MT" --config $CFG $SETS "$@" \
    --set checkpoint.load="$TMP/x" --set logging.metrics_file="$TMP/x.jsonl" >"$TMP/x.log" 2>&1 \
    || { echo "$label failed:"; tail "$TMP/x.log"; exit 1; }
  grep -q "resumed from iteration 6" "$TMP/x.log"
  compare_resumed "$full" "$TMP/x.jsonl" 7 12 1e-5 "$label"
  rm -f "$TMP/x.jsonl"
}
resumed "dp=2 ZeRO-2 -> dp=2 ZeRO-1" "$TMP/full2.jsonl" "$TMP/full2" 2 --set parallel.zero_stage=1
resumed "dp=2 ZeRO-2 -> dp=4 ZeRO-2" "$TMP/full2.jsonl" "$TMP/full2" 4 --set parallel.zero_stage=2
resumed "dp=2 ZeRO-3 -> 1 process" "$TMP/full3.jsonl" "$TMP/full3" 1
"$MT" --config $CFG $SETS --set checkpoint.save="$TMP/plain" --set checkpoint.save_interval=6 \
  --set logging.metrics_file="$TMP/plain.jsonl" >"$TMP/plain.log" 2>&1
resumed "1 process -> dp=2 ZeRO-3" "$TMP/plain.jsonl" "$TMP/plain" 2 --set parallel.zero_stage=3
echo "other zero_stage / dp layouts resume"
