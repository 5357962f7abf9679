#!/usr/bin/env bash
# moe_grouped_gemm and moe_pad_expert_input_to_capacity change no number
# (tests/configs/gpt-moe-test.json, capacity 1.0 with drops, dropout on,
# 20 steps (CI: 10), fp32 on cpu):
#  - one process (2 OpenMP threads, so the grouped op runs groups side by
#    side): grouped GEMM gives a bitwise identical JSONL (every field but
#    timings), and its iteration-10 checkpoint (the same per-expert
#    parameters; CI: iteration 5) resumed without grouped GEMM continues bitwise; padding to
#    capacity gives loss, grad norm, balance losses,
#    tokens per expert and drops within 1e-6 (bitwise in practice), and the
#    balance losses are those of the unpadded run (the router never sees the
#    padding rows: no "aux loss = 1" with padding);
#  - ep=2 (dp=2): grouped GEMM + padding against ep=2 without them (1e-6,
#    bitwise in practice) and against one process (1e-5, the parity bar);
#    the EP group's bytes per step are the padded analytic count:
#    4 all-to-allv (dispatch, combine, and their backward) of E·C rows of h
#    fp32 per MoE layer and micro-batch, no counts all-to-all (plus under
#    64 B of other EP-group traffic, if any: a grad-norm scalar);
#  - tp=2 + SP + ep=2 with both: the one-process curve within 1e-5.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
CFG=tests/configs/gpt-moe-test.json
N=$(full_or 20 10); H=$((N / 2))
COMMON=(--set training.eval_interval=0 --set training.train_iters=$N --set model.hidden_dropout=0.1
        --set model.attention_dropout=0.1)
run() { # name np args...
  local name=$1 np=$2; shift 2
  local cmd=("$MT" --config $CFG --set logging.metrics_file="$TMP/$name.jsonl" "${COMMON[@]}" "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" --set training.num_threads=2 >"$TMP/$name.log" 2>&1
  else mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "${cmd[@]}" >"$TMP/$name.log" 2>&1
  fi || { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
cmp() { # a b reltol
  /usr/bin/python3 - "$TMP/$1.jsonl" "$TMP/$2.jsonl" "$1" "$2" "$3" $N <<'PY'
import json, sys
SKIP = {"elapsed_ms", "tokens_per_s", "tflops_per_device", "comm_bytes"}
def load(p):
    return {o["iteration"]: {k: v for k, v in o.items() if k not in SKIP}
            for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
tol, n = float(sys.argv[5]), int(sys.argv[6])
assert a.keys() == b.keys() and len(a) == n, (sorted(a), sorted(b))
worst, nbit = 0.0, 0
for it in sorted(a):
    keys = a[it].keys() if tol == 0 else ("lm_loss", "grad_norm", "load_balancing_loss", "z_loss",
                                         "dropped_tokens", "tokens_per_expert_max")
    for k in keys:
        x, y = a[it][k], b[it].get(k)
        nbit += x != y
        xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
        for u, v in zip(xs, ys):
            r = abs(u - v) / max(abs(v), 1e-30) if isinstance(u, (int, float)) else float(u != v)
            worst = max(worst, r)
            if r > tol:
                sys.exit("%s vs %s iteration %d %s: %r vs %r" % (sys.argv[3], sys.argv[4], it, k, x, y))
print("%s vs %s: %d steps agree (tol %g, worst rel %.2e, %d values not bitwise); step %d lm %.6f "
      "lb %.6f" % (sys.argv[3], sys.argv[4], n, tol, worst, nbit, n, a[n]["lm_loss"],
                   a[n]["load_balancing_loss"]))
PY
}
run base 1
run grouped 1 --set model.moe_grouped_gemm=true --set checkpoint.save="$TMP/ck" \
    --set checkpoint.save_interval=$H
cmp grouped base 0
# same parameters either way: its iteration-H checkpoint resumes without it
echo $H > "$TMP/ck/latest_checkpointed_iteration.txt"
run resumed 1 --set checkpoint.load="$TMP/ck"
grep -q "resumed from iteration $H" "$TMP/resumed.log" || { echo "did not resume"; exit 1; }
/usr/bin/python3 - "$TMP/resumed.jsonl" "$TMP/base.jsonl" $H <<'PY'
import json, sys
SKIP = {"elapsed_ms", "tokens_per_s", "tflops_per_device", "comm_bytes"}
a, b = ({o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o} for p in sys.argv[1:3])
h = int(sys.argv[3])
assert sorted(a) == list(range(h + 1, 2 * h + 1)), sorted(a)
bad = [(it, k) for it in a for k in a[it] if k not in SKIP and a[it][k] != b[it][k]]
assert not bad, bad[:5]
print("checkpoint of the grouped-GEMM run at iteration %d, resumed with per-expert GEMMs: "
      "iterations %d-%d bitwise equal to the per-expert run" % (h, h + 1, 2 * h))
PY
run pad 1 --set model.moe_pad_expert_input_to_capacity=true
cmp pad base 1e-6
EP=(--set parallel.expert_model_parallel_size=2)
run ep2 2 "${EP[@]}"
run ep2_grouped_pad 2 "${EP[@]}" --set model.moe_grouped_gemm=true \
    --set model.moe_pad_expert_input_to_capacity=true
cmp ep2_grouped_pad ep2 1e-6
cmp ep2_grouped_pad base 1e-5
# tp=2 + SP + ep=2: each SP rank pads to the whole micro-batch's capacity
run tp2sp_ep2_grouped_pad 2 "${EP[@]}" --set parallel.tensor_model_parallel_size=2 \
    --set parallel.sequence_parallel=true --set model.moe_grouped_gemm=true \
    --set model.moe_pad_expert_input_to_capacity=true
cmp tp2sp_ep2_grouped_pad base 1e-5
/usr/bin/python3 - "$TMP/ep2_grouped_pad.jsonl" "$TMP/ep2.jsonl" <<'PY'
import json, math, sys
pad = [o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o]
base = [o for o in map(json.loads, open(sys.argv[2])) if "lm_loss" in o]
# gpt-moe-test.json: 4 layers, moe_layer_freq 2 -> 2 MoE layers; E 8, top-2, h 64,
# capacity factor 1.0, s·b = 32·2 tokens per micro-batch; 8 samples / (mbs 2 · dp 2)
L, E, k, h, N, mb = 2, 8, 2, 64, 64, 2
C = math.ceil(N * k / E * 1.0)
want = 4 * L * mb * E * C * h * 4
for o in pad:
    got = o["comm_bytes"]["ep"]
    assert 0 <= got - want < 64, "iteration %d: ep bytes %d, padded analytic %d" % (o["iteration"], got, want)
print("ep=2 padded: EP bytes per step %d = 4 x %d layers x %d micro-batches x E·C (%d x %d) rows x "
      "h %d x 4 B (%d) + %d B other EP traffic; unpadded %d" % (pad[-1]["comm_bytes"]["ep"], L, mb,
      E, C, h, want, pad[-1]["comm_bytes"]["ep"] - want, base[-1]["comm_bytes"]["ep"]))
PY
