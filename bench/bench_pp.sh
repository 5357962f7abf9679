#!/usr/bin/env bash
# bench/bench_pp.sh — measured pipeline bubble against the 1F1B formula
# (p-1)/m (and (p-1)/(v m) interleaved) on the CPU backend, one thread per
# rank. The measured bubble is the idle/busy time of the busiest stage (so
# stage imbalance, e.g. the output layer on the last stage, is not counted as
# bubble), averaged over the iterations after the first.
# The stages are balanced with an uneven split (the last stage holds the
# output layer, worth about 8 layers at h=512 and V=50304): 16 + 8 layers.
# A bubble is only visible when every stage has its own core: on this 2-core
# machine p=2 is measured; p=4 (oversubscribed, idle stages lend their core to
# the others) is printed for completeness but cannot show the bubble.
# usage: bash bench/bench_pp.sh [iters]
set -eu
cd "$(dirname "$0")/.."
ITERS=${1:-5}
DATA=${MEGATRAIN_BENCH_DATA:-build/testdata/tinyshakespeare_text_document}
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
printf "%-4s %-4s %-4s %12s %12s %12s\n" p v m "measured" "theory" "tokens/s"
for p in 2 4; do
  for m in 2 4 8; do
    for v in 1; do
      if [ $p = 2 ]; then SPLIT="--set parallel.num_layers_in_first_pipeline_stage=16 --set parallel.num_layers_in_last_pipeline_stage=8"
      else SPLIT=""; fi
      f="$TMP/p${p}_m${m}_v${v}.jsonl"
      mpirun -np $p --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
        ./megatrain --config tests/configs/gpt-test.json --set data.data_path="[\"$DATA\"]" \
        --set model.num_layers=24 --set model.hidden_size=512 --set model.num_attention_heads=8 $SPLIT \
        --set model.seq_length=64 --set model.hidden_dropout=0 --set model.attention_dropout=0 \
        --set training.micro_batch_size=1 --set training.global_batch_size=$m \
        --set training.train_iters=$ITERS --set training.lr_warmup_iters=0 --set training.eval_interval=0 \
        --set parallel.pipeline_model_parallel_size=$p --set parallel.virtual_pipeline_model_parallel_size=$v \
        --set logging.metrics_file="$f" >/dev/null
      /usr/bin/python3 - "$f" $p $v $m <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "lm_loss" in l][1:]
b = sum(r["pp_bubble_busiest_stage"] for r in rows) / len(rows)
t = rows[-1]["pp_bubble_theory"]
tps = sum(r["tokens_per_s"] for r in rows) / len(rows)
print("%-4s %-4s %-4s %12.3f %12.3f %12.1f" % (sys.argv[2], sys.argv[3], sys.argv[4], b, t, tps))
PY
    done
  done
done
