#!/usr/bin/env bash
# bench/bench_tp.sh — tokens/s and bytes communicated per step (the group
# API's counters: all-reduce counts its buffer, all-gather/reduce-scatter the
# full gathered buffer; docs/communication.md) for tensor
# parallelism tp=1/2/4 with and without sequence parallelism on the CPU
# backend (one thread per rank), from megatrain's own metrics file.
# usage: bash bench/bench_tp.sh [iters]   (needs build/testdata from the tests,
# or set MEGATRAIN_BENCH_DATA=prefix)
set -eu
cd "$(dirname "$0")/.."
ITERS=${1:-6}
DATA=${MEGATRAIN_BENCH_DATA:-build/testdata/tinyshakespeare_text_document}
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
printf "%-10s %10s %14s %18s\n" layout tokens/s "ms/iter" "tp bytes/step"
for tp in 1 2 4; do
  for sp in false true; do
    [ $tp = 1 ] && [ $sp = true ] && continue
    m="$TMP/tp${tp}_${sp}.jsonl"
    mpirun -np $tp --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
      ./megatrain --config tests/configs/gpt-test.json --set data.data_path="[\"$DATA\"]" \
      --set model.num_layers=4 --set model.hidden_size=256 --set model.num_attention_heads=8 \
      --set model.seq_length=128 --set training.micro_batch_size=4 --set training.global_batch_size=4 \
      --set training.train_iters=$ITERS --set training.lr_warmup_iters=0 --set training.eval_interval=0 \
      --set parallel.tensor_model_parallel_size=$tp --set parallel.sequence_parallel=$sp \
      --set logging.metrics_file="$m" >/dev/null
    /usr/bin/python3 - "$m" "tp=$tp$([ $sp = true ] && echo +sp)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "lm_loss" in l][1:]  # skip the first (warm-up)
tps = sum(r["tokens_per_s"] for r in rows) / len(rows)
ms = sum(r["elapsed_ms"] for r in rows) / len(rows)
tpb = rows[-1].get("comm_bytes", {}).get("tp", 0)
print("%-10s %10.1f %14.1f %18d" % (sys.argv[2], tps, ms, tpb))
PY
  done
done
