#!/usr/bin/env bash
# training.apply_wd_to_qk_layernorm (Megatron's --apply-wd-to-qk-layernorm,
# docs/optimizer.md): one AdamW update from the same start with and without
# the option changes exactly the q/k norm weights (lr · weight_decay · w more
# shrinkage; the LayerNorm biases decay too, but start at 0), every other
# parameter and optimizer state bitwise equal; over dp=2 with ZeRO-1 the
# same (the distributed optimizer's groups); without qk_layernorm the key is
# refused (exit 2). The PyTorch reference's own parameter groups are checked
# by test_llama_pytorch.sh (cases qk_wd, qk_wd_rmsnorm).
source "$(dirname "$0")/lib.sh"
ONE=(--set model.qk_layernorm=true --set training.train_iters=1 --set training.lr_warmup_iters=0
     --set training.eval_interval=0 --set training.eval_iters=0)
run() { # NAME [args]: one update, checkpoint in $TMP/NAME
  local n=$1; shift
  "$@" --config $CFG "${ONE[@]}" --set checkpoint.save="$TMP/$n" >"$TMP/$n.log" 2>&1 \
    || { tail -20 "$TMP/$n.log"; exit 1; }
}
check() { # A B: exactly the q/k norm tensors differ
  /usr/bin/python3 - "$TMP/$1" "$TMP/$2" <<'PY'
import sys
sys.path.insert(0, "tests/reference")
import numpy as np
from dist_ckpt import load_checkpoint
_, a = load_checkpoint(sys.argv[1])
_, b = load_checkpoint(sys.argv[2])
assert a.keys() == b.keys()
qk = lambda n: "q_layernorm." in n or "k_layernorm." in n
diff = sorted(n for n in a if not np.array_equal(a[n], b[n]))
params = [n for n in diff if not n.startswith("optimizer.")]
# decoupled decay shrinks the value before the update: the norm weights
# (ones); the LayerNorm biases start at 0, so one update leaves them equal
want = sorted(n for n in a if qk(n) and not n.startswith("optimizer.") and n.endswith(".weight"))
assert all(qk(n) for n in diff), "tensors other than the q/k norms differ: %s" % \
    [n for n in diff if not qk(n)]
assert params == want, "q/k norm tensors that moved: %s, expected %s" % (params, want)
print("exactly the q/k norm parameters differ (%d tensors): %s" % (len(params), " ".join(params)))
for n in params:
    rel = np.max(np.abs(a[n] - b[n]) / np.maximum(np.abs(a[n]), 1e-30))
    print("   %-55s max rel change %.3g" % (n, rel))
PY
}
run off "$MT"
run on "$MT" --set training.apply_wd_to_qk_layernorm=true
check off on
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (dp=2 ZeRO-1 part)"; exit 77; }
MPI="mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
run off_dp $MPI "$MT" --set parallel.zero_stage=1
run on_dp $MPI "$MT" --set parallel.zero_stage=1 --set training.apply_wd_to_qk_layernorm=true
echo "dp=2 ZeRO-1:"
check off_dp on_dp
set +e
"$MT" --config $CFG --set training.apply_wd_to_qk_layernorm=true >"$TMP/bad.log" 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "training.apply_wd_to_qk_layernorm" "$TMP/bad.log" || { cat "$TMP/bad.log"; exit 1; }
echo "refused: $(head -1 "$TMP/bad.log")"
echo PASS
