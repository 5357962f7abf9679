#!/usr/bin/env bash
# Router options are layout-free: DeepSeek-style routing (sigmoid scores,
# group-limited top-k 2 of 4 groups, seq_aux_loss, top-k scaling 2.5,
# capacity 1.0, dropout on) gives the one-process 20-step curve with
# tp=2+SP+ep=2 and with cp=2 (the per-sequence loss needs each token's
# sample, t % b, on the gathered micro-batch); softmax with pre-softmax and
# global_aux_loss, dropless (f from the previous global batch's counts,
# summed over dp and pp), likewise with dp=2+ep=2 and pp=2+ep=2. Compared: lm loss, grad
# norm, balance loss, z-loss, dropped tokens, tokens per expert (max per MoE
# layer), within 1e-5 relative.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
CFG=tests/configs/gpt-moe-test.json
DS=(--set model.moe_router_score_function=sigmoid --set model.moe_router_num_groups=4
    --set model.moe_router_group_topk=2 --set model.moe_router_load_balancing_type=seq_aux_loss
    --set model.moe_router_topk_scaling_factor=2.5)
GL=(--set model.moe_router_pre_softmax=true --set model.moe_router_load_balancing_type=global_aux_loss
    --set model.moe_expert_capacity_factor=null)
run() { # name np args...
  local name=$1 np=$2; shift 2
  local cmd=("$MT" --config $CFG --set logging.metrics_file="$TMP/$name.jsonl"
             --set training.eval_interval=0 --set model.hidden_dropout=0.1 "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1
  else mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "${cmd[@]}" >"$TMP/$name.log" 2>&1
  fi || { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
cmp_moe() { # a b
  /usr/bin/python3 - "$TMP/$1.jsonl" "$TMP/$2.jsonl" "$1" "$2" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and len(a) == 20, (sorted(a), sorted(b))
worst = 0.0
for it in sorted(a):
    for k in ("lm_loss", "grad_norm", "load_balancing_loss", "z_loss", "dropped_tokens",
              "tokens_per_expert_max"):
        x, y = a[it][k], b[it][k]
        xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
        for u, v in zip(xs, ys):
            r = abs(u - v) / max(abs(v), 1e-30)
            worst = max(worst, r)
            if r > 1e-5:
                sys.exit("iteration %d %s: %r vs %r" % (it, k, x, y))
last = a[20]
print("%s vs %s: 20 steps agree (worst rel %.2e); step 20: lm %.5f lb %.5f z %.4f dropped %d"
      % (sys.argv[3], sys.argv[4], worst, last["lm_loss"], last["load_balancing_loss"],
         last["z_loss"], last["dropped_tokens"]))
PY
}
run ds_base 1 "${DS[@]}"
run ds_tp2sp_ep2 2 "${DS[@]}" --set parallel.tensor_model_parallel_size=2 \
    --set parallel.sequence_parallel=true --set parallel.expert_model_parallel_size=2
cmp_moe ds_tp2sp_ep2 ds_base
run ds_cp2 2 "${DS[@]}" --set parallel.context_parallel_size=2
cmp_moe ds_cp2 ds_base
run gl_base 1 "${GL[@]}"
run gl_dp2_ep2 2 "${GL[@]}" --set parallel.expert_model_parallel_size=2
cmp_moe gl_dp2_ep2 gl_base
run gl_pp2_ep2 4 "${GL[@]}" --set parallel.pipeline_model_parallel_size=2 \
    --set parallel.expert_model_parallel_size=2
cmp_moe gl_pp2_ep2 gl_base
