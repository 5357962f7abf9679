#!/usr/bin/env bash
# bench/bench_moe.sh — MoE on the CPU:
#  1. training tokens/s of a small Llama-style MoE model (bench/bench_llama.c:
#     2 layers, hidden 256, seq 128, micro-batch 4, vocab 2048, SwiGLU experts
#     of moe_ffn_hidden_size 128, top-2, dropless, 2 threads) with 8 and 64
#     experts, per-expert GEMM loop vs moe_grouped_gemm (same loss: the op is
#     bitwise equal); mean and best step (the best is less disturbed by other
#     work on a shared machine);
#  2. all-to-all bytes per step of the EP group at ep=2 (dp=2,
#     tests/configs/gpt-moe-test.json: 2 MoE layers, E 8, top-2, h 64,
#     2 micro-batches of 64 tokens per rank and step), dropless, capacity 1.0,
#     and capacity 1.0 padded to capacity, with the padded analytic count
#     4 · layers · micro-batches · E·C · h · 4 B (C = 16);
#  3. with "sweep": the former ep 1/2/4 throughput sweep (4 ranks, dp 4).
# usage: bash bench/bench_moe.sh [steps] [sweep]
set -eu
cd "$(dirname "$0")/.."
source tests/integration/lib.sh >/dev/null
STEPS=${1:-5}
make -s build/bench/bench_llama
echo "== 1. tokens/s, 1 process, 2 threads (per-expert loop vs grouped GEMM)"
printf "%-8s %-8s %12s %12s %10s %s\n" experts grouped "tokens/s" "best tok/s" loss "expert GEMM ms/step"
for E in 8 64; do
  for g in 0 1; do
    out=$(OMP_NUM_THREADS=2 build/bench/bench_llama 2 256 4 128 4 2 "$STEPS" 512 2048 \
          num_experts=$E moe_router_topk=2 moe_ffn_hidden_size=128 moe_grouped_gemm=$g)
    /usr/bin/python3 - "$E" "$g" <<PY
import re, sys
out = """$out"""
m = re.search(r"tokens/s ([0-9.]+) \| best step [0-9.]+ ms, tokens/s ([0-9.]+).*loss ([0-9.]+)", out)
gg = re.search(r"gemm_grouped ([0-9.]+)", out)
print("%-8s %-8s %12s %12s %10s %s" % (sys.argv[1], "yes" if sys.argv[2] == "1" else "no",
      m.group(1), m.group(2), m.group(3), gg.group(1) + " (grouped op)" if gg else "in gemm"))
PY
  done
done
echo "== 2. all-to-all bytes per step, ep=2 (dp=2), rank 0's EP group counters"
CFG=tests/configs/gpt-moe-test.json
for mode in dropless cap pad; do
  extra=()
  [ $mode = dropless ] && extra=(--set model.moe_expert_capacity_factor=null)
  [ $mode = pad ] && extra=(--set model.moe_pad_expert_input_to_capacity=true)
  out=$TMP/a2a_$mode.jsonl
  mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
    -x OMP_NUM_THREADS "$MT" --config $CFG --set training.train_iters=5 --set training.eval_interval=0 \
    --set parallel.expert_model_parallel_size=2 --set logging.metrics_file="$out" "${extra[@]}" >/dev/null
  /usr/bin/python3 - "$out" "$mode" <<'PY'
import json, sys
recs = [o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o]
b = [o["comm_bytes"]["ep"] for o in recs]
want = 4 * 2 * 2 * 8 * 16 * 64 * 4
extra = " (padded analytic count %d)" % want if sys.argv[2] == "pad" else ""
print("%-9s EP bytes per step: %s, dropped fraction (last) %.3f%s"
      % (sys.argv[2], " ".join(map(str, b)), recs[-1]["dropped_fraction"], extra))
PY
done
[ "${2:-}" = sweep ] || exit 0
echo "== 3. ep sweep (4 ranks, dp 4, EP carved from DP)"
for ep in 1 2 4; do
  out=$TMP/ep$ep.jsonl
  mpirun -np 4 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
    -x OMP_NUM_THREADS "$MT" --config tests/configs/gpt-moe-test.json --set training.train_iters=10 \
    --set training.eval_interval=0 --set training.global_batch_size=16 \
    --set parallel.expert_model_parallel_size=$ep --set logging.metrics_file=$out >/dev/null
  /usr/bin/python3 - "$out" "$ep" <<'PY'
import json, sys
recs = [o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o]
last = recs[-5:]
tps = sum(o["tokens_per_s"] for o in last) / len(last)
ep_bytes = last[-1].get("comm_bytes", {}).get("ep", 0)
print("ep=%s dp=4: %.0f tokens/s, all-to-all bytes per step (rank 0, ep group) %d, dropped %.3f"
      % (sys.argv[2], tps, ep_bytes, last[-1]["dropped_fraction"]))
PY
done
