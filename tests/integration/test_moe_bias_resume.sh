#!/usr/bin/env bash
# Aux-loss-free balancing (model.moe_router_enable_expert_bias) resumes
# exactly: 20 iterations straight vs 10 + exit + resume + 10, dropout on,
# give bitwise identical lm loss, grad norm, tokens per expert and expert
# biases (JSONL) and byte-identical final checkpoints, which hold
# decoder.layers.L.mlp.router.expert_bias. Layouts: one process; pp=2 (each
# stage saves its own layers' biases, shared again after the load); dp=2 with
# ZeRO-1 and dp=2+ep=2 with ZeRO-3 (biases stored once per pipeline stage);
# global_aux_loss without the bias (the previous global batch's counts are
# checkpointed). Also: a checkpoint saved with the bias loaded without it is
# refused naming the buffer.
# CI (MEGATRAIN_TEST_FULL unset) runs 10 iterations straight vs 5 + resume + 5
# and leaves out dp=2 ZeRO-1 (test_zero_resume resumes ZeRO-1 in CI; ZeRO-3
# with ep=2 stays here); FULL runs 20 vs 10 + 10 on every layout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ckpt_lib.sh"
CFG=tests/configs/gpt-moe-test.json
N=$(full_or 20 10); H=$((N / 2)); NNNN=$(printf %07d $N)
COMMON=(--set training.train_iters=$N --set model.moe_router_enable_expert_bias=true --set model.hidden_dropout=0.1
        --set model.attention_dropout=0.1 --set training.eval_interval=0
        --set training.check_replicas_interval=1)
mtrun() { # np args...
  local np=$1; shift
  if [ "$np" = 1 ]; then "$MT" --config $CFG "${COMMON[@]}" "$@"
  else command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
       mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$MT" --config $CFG "${COMMON[@]}" "$@"
  fi
}
same_metrics() { # a.jsonl b.jsonl
  /usr/bin/python3 - "$1" "$2" "$N" <<'PY'
import json, sys
n = int(sys.argv[3])
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(a) == sorted(b) == list(range(1, n + 1)), (sorted(a), sorted(b))
for it in a:
    for k in ("lm_loss", "grad_norm", "load_balancing_loss", "tokens_per_expert", "expert_bias"):
        if a[it].get(k) != b[it].get(k):
            sys.exit("iteration %d %s differs: %r vs %r" % (it, k, a[it][k], b[it][k]))
if "expert_bias" in a[n]:
    moved = sum(1 for l in a[n]["expert_bias"] for x in l if x != 0)
    assert moved > 0, "expert bias never moved"
    print("  %d iterations bitwise equal (lm loss, grad norm, balance loss, tokens per expert, "
          "expert bias; %d bias entries non-zero at step %d)" % (n, moved, n))
else:
    print("  %d iterations bitwise equal (lm loss, grad norm, balance loss, tokens per expert)" % n)
PY
}
case_() { # name np args...
  local name=$1 np=$2; shift 2
  mtrun $np --set checkpoint.save="$TMP/$name-a" --set logging.metrics_file="$TMP/$name-a.jsonl" \
        "$@" >"$TMP/$name-a.log" 2>&1 || { tail -20 "$TMP/$name-a.log"; exit 1; }
  mtrun $np --set checkpoint.save="$TMP/$name-b" --set logging.metrics_file="$TMP/$name-b.jsonl" \
        --set training.exit_interval=$H "$@" >"$TMP/$name-b1.log" 2>&1 || { tail -20 "$TMP/$name-b1.log"; exit 1; }
  mtrun $np --set checkpoint.save="$TMP/$name-b" --set checkpoint.load="$TMP/$name-b" \
        --set logging.metrics_file="$TMP/$name-b.jsonl" "$@" >"$TMP/$name-b2.log" 2>&1 || { tail -20 "$TMP/$name-b2.log"; exit 1; }
  grep -q "resumed from iteration $H " "$TMP/$name-b2.log"
  echo "$name:"
  same_metrics "$TMP/$name-a.jsonl" "$TMP/$name-b.jsonl"
  same_ckpt "$TMP/$name-a/iter_$NNNN" "$TMP/$name-b/iter_$NNNN"
  grep -aq "mlp.router.tokens_per_expert" "$TMP/$name-a/iter_$NNNN"/* \
    || { echo "no router buffer in the checkpoint"; exit 1; }
}
case_ one 1
case_ pp2 2 --set parallel.pipeline_model_parallel_size=2
if [ $N = 20 ]; then case_ dp2_zero1 2 --set parallel.zero_stage=1; fi
case_ dp2_ep2_zero3 2 --set parallel.zero_stage=3 --set parallel.expert_model_parallel_size=2
# global_aux_loss without the bias: the previous global batch's counts
# (decoder.layers.L.mlp.router.tokens_per_expert) are saved and restored
COMMON=(--set training.train_iters=$N --set model.moe_router_load_balancing_type=global_aux_loss --set model.hidden_dropout=0.1
        --set model.attention_dropout=0.1 --set training.eval_interval=0
        --set training.check_replicas_interval=1)
case_ global_aux 1
# saved with the bias, loaded without it: refused naming the buffer (exit 1)
set +e
"$MT" --config $CFG --set training.eval_interval=0 --set checkpoint.load="$TMP/one-a" >"$TMP/x.log" 2>&1; rc=$?
set -e
[ $rc = 1 ] && grep -q "expert_bias" "$TMP/x.log" || { echo "bias checkpoint loaded without the option (exit $rc)"; cat "$TMP/x.log"; exit 1; }
grep -m1 "error" "$TMP/x.log"
