#!/usr/bin/env bash
# ZeRO checkpoints: with dp=2 and zero_stage 1, 2, 3 every rank saves its own
# shard file (mp_rank_00/distrib_optim_dp00{0,1}.bin); stopping at iteration
# 6 and resuming with the same layout reproduces the uninterrupted run
# bitwise (lm loss, grad norm, learning rate every step) and ends with
# byte-identical shard files (parameters, Adam moments, Adam step counter).
# Loading with another zero_stage or dp, or across ZeRO / non-ZeRO, is
# refused with a message naming both layouts.
source "$(dirname "$0")/lib.sh"
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
    --set checkpoint.save="$TMP/full$st" >"$TMP/full$st.log" 2>&1 || { tail "$TMP/full$st.log"; exit 1; }
  $MPI "$MT" --config $CFG $SETS $Z --set logging.metrics_file="$TMP/res$st.jsonl" \
    --set checkpoint.save="$TMP/res$st" --set training.exit_interval=6 >"$TMP/a$st.log" 2>&1 \
    || { tail "$TMP/a$st.log"; exit 1; }
  ls "$TMP/res$st/iter_0000006/mp_rank_00/distrib_optim_dp000.bin" \
     "$TMP/res$st/iter_0000006/mp_rank_00/distrib_optim_dp001.bin" >/dev/null
  $MPI "$MT" --config $CFG $SETS $Z --set logging.metrics_file="$TMP/res$st.jsonl" \
    --set checkpoint.load="$TMP/res$st" --set checkpoint.save="$TMP/res$st" >"$TMP/b$st.log" 2>&1 \
    || { tail "$TMP/b$st.log"; exit 1; }
  grep -q "resumed from iteration 6" "$TMP/b$st.log"
  echo -n "zero_stage=$st resume at 6: "
  same_curve "$TMP/res$st.jsonl" "$TMP/full$st.jsonl"
  for r in 000 001; do
    cmp "$TMP/res$st/iter_0000012/mp_rank_00/distrib_optim_dp$r.bin" \
        "$TMP/full$st/iter_0000012/mp_rank_00/distrib_optim_dp$r.bin"
  done
  echo "zero_stage=$st: final shard files byte-identical"
done
# layout mismatches are refused
expect_error() { # pattern, command...
  local pat=$1; shift
  if "$@" >"$TMP/e.log" 2>&1; then echo "expected failure: $*"; exit 1; fi
  grep -q "$pat" "$TMP/e.log" || { echo "message missing '$pat':"; cat "$TMP/e.log"; exit 1; }
}
expect_error "saved with parallel.zero_stage 2 and data-parallel size 2 but this run has zero_stage 1" \
  $MPI "$MT" --config $CFG $SETS --set parallel.zero_stage=1 --set checkpoint.load="$TMP/full2"
expect_error "but this run has zero_stage 2 and dp 4" \
  mpirun -np 4 --oversubscribe --bind-to none "$MT" --config $CFG $SETS \
  --set parallel.zero_stage=2 --set checkpoint.load="$TMP/full2"
expect_error "was saved with ZeRO" "$MT" --config $CFG $SETS --set checkpoint.load="$TMP/full3"
"$MT" --config $CFG $SETS --set training.train_iters=2 --set training.lr_warmup_iters=1 \
  --set checkpoint.save="$TMP/plain" >/dev/null
expect_error "saved without ZeRO" $MPI "$MT" --config $CFG $SETS --set parallel.zero_stage=3 \
  --set checkpoint.load="$TMP/plain"
echo "layout mismatches refused with messages"
