#!/usr/bin/env bash
# MoE throughput and all-to-all traffic for ep = 1, 2, 4 (dp = ep, 4 ranks'
# worth of work each: same global batch) with tests/configs/gpt-moe-test.json
# scaled up a little. Prints tokens/s (mean of the last 5 steps) and the EP
# group's bytes per step (this rank's all-to-all sends, from the JSONL
# comm_bytes of the logging rank).
# usage: bash bench/bench_moe.sh [iters]
set -eu
cd "$(dirname "$0")/.."
source tests/integration/lib.sh >/dev/null
IT=${1:-10}
for ep in 1 2 4; do
  out=$TMP/ep$ep.jsonl
  mpirun -np 4 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
    -x OMP_NUM_THREADS "$MT" --config tests/configs/gpt-moe-test.json --set training.train_iters=$IT \
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
