#!/usr/bin/env bash
# configs/gpt-moe.json (8 experts, top-2, capacity 1.25, tp=2 + SP, pp=2,
# ep=2, ZeRO-1) on 8 MPI ranks trains on tinyshakespeare (CPU): the loss
# falls, and a run stopped at iteration 10 and resumed from its checkpoint
# reproduces iterations 11-20 of the uninterrupted run bit for bit (lm loss,
# grad norm, load-balancing loss, z-loss, tokens per expert, dropped count).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
mr() { mpirun -np 8 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$MT" --config configs/gpt-moe.json \
         --set training.train_iters=20 --set training.eval_interval=0 \
         --set data.data_path='["build/testdata/tinyshakespeare_text_document"]' "$@"; }
mr --set checkpoint.save=null --set logging.metrics_file="$TMP/full.jsonl" >"$TMP/full.log" 2>&1 \
  || { tail -20 "$TMP/full.log"; exit 1; }
mr --set checkpoint.save="$TMP/ck" --set training.exit_interval=10 \
   --set logging.metrics_file="$TMP/part.jsonl" >"$TMP/a.log" 2>&1 || { tail -20 "$TMP/a.log"; exit 1; }
mr --set checkpoint.save="$TMP/ck" --set checkpoint.load="$TMP/ck" \
   --set logging.metrics_file="$TMP/part.jsonl" >"$TMP/b.log" 2>&1 || { tail -20 "$TMP/b.log"; exit 1; }
grep -q "resumed from iteration 10" "$TMP/b.log" || { echo "did not resume"; tail "$TMP/b.log"; exit 1; }
/usr/bin/python3 - "$TMP/full.jsonl" "$TMP/part.jsonl" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(a) == sorted(b) == list(range(1, 21)), (sorted(a), sorted(b))
for it in range(1, 21):
    for k in ("lm_loss", "grad_norm", "load_balancing_loss", "z_loss", "dropped_tokens",
              "tokens_per_expert_max"):
        assert a[it][k] == b[it][k], "iteration %d %s: %r vs %r" % (it, k, a[it][k], b[it][k])
first = sum(a[i]["lm_loss"] for i in range(1, 4)) / 3
last = sum(a[i]["lm_loss"] for i in range(18, 21)) / 3
assert last < first - 1.0, "loss did not fall: %.3f -> %.3f" % (first, last)
print("gpt-moe on 8 ranks: lm loss %.3f -> %.3f over 20 steps (lb %.3f, dropped %.3f); resume from "
      "iteration 10 is bitwise identical for iterations 11-20"
      % (first, last, a[20]["load_balancing_loss"], a[20]["dropped_fraction"]))
PY
# configs/deepseek-tiny.json (sigmoid + expert bias + group-limited top-4 +
# shared expert + seq_aux_loss + dense first layer + an MoE MTP depth) starts, trains 3 steps on
# 2 ranks with ep=2, and logs the expert bias and tokens per expert.
mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
  -x OMP_NUM_THREADS "$MT" --config configs/deepseek-tiny.json --set training.train_iters=3 \
  --set training.eval_interval=0 --set training.global_batch_size=8 --set training.micro_batch_size=4 \
  --set parallel.expert_model_parallel_size=2 --set checkpoint.save=null \
  --set data.data_path='["build/testdata/tinyshakespeare_text_document"]' \
  --set logging.metrics_file="$TMP/ds.jsonl" >"$TMP/ds.log" 2>&1 || { tail -20 "$TMP/ds.log"; exit 1; }
/usr/bin/python3 - "$TMP/ds.jsonl" <<'PY'
import json, sys
recs = [o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o]
assert [o["iteration"] for o in recs] == [1, 2, 3], recs
last = recs[-1]
# 3 MoE decoder layers + the MoE layer of its MTP depth (issue 31)
assert len(last["expert_bias"]) == 4 and all(len(b) == 16 for b in last["expert_bias"]), last["expert_bias"]
assert any(v != 0 for b in last["expert_bias"] for v in b), "expert bias never moved"
assert all(sum(t) == 4 * 128 * 4 * 2 for t in last["tokens_per_expert"]), last["tokens_per_expert"]
print("deepseek-tiny on 2 ranks (ep=2): 3 steps, lm loss %.3f, expert bias of 4 MoE layers moved "
      "(max |b| %.4f)" % (last["lm_loss"], max(abs(v) for b in last["expert_bias"] for v in b)))
PY
