#!/usr/bin/env bash
# bench/bench_fp8.sh — the FP8 training table (docs/fp8.md): llama-tiny
# (configs/llama-tiny.json) trained on the cpu backend for BENCH_TOKENS tokens
# (default 409,600 = 400 steps of 8 × 128) in bf16 and with each FP8 recipe
# (fp8_format BENCH_FP8_FORMAT, default hybrid), then evaluated on the
# validation split; prints one row per run: final validation loss and its
# relative difference from bf16 (the aim: within 1%).
# Data: BENCH_DATA (a Megatron .bin/.idx prefix; default the tinyshakespeare
# one tests/integration/lib.sh prepares under build/testdata). Runs the
# recipes one after another under nice with OMP_NUM_THREADS (default 2).
# A bench, not a test: on a shared 2-core machine one run takes ~25 min.
set -eu
cd "$(dirname "$0")/.."
MT=${MT:-./megatrain}
TOK=${BENCH_TOKENS:-409600}
FMT=${BENCH_FP8_FORMAT:-hybrid}
DATA=${BENCH_DATA:-build/testdata/tinyshakespeare_text_document}
SHARED=${MEGATRAIN_SHARED_DATA:-../shared/data}
[ -f "$DATA.idx" ] || { echo "no $DATA.idx (run an integration test first, or set BENCH_DATA)"; exit 1; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1
ITERS=$((TOK / (8 * 128)))
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
run() { # name args...
  local name=$1; shift
  nice "$MT" --config configs/llama-tiny.json --set data.data_path="[\"$DATA\"]" \
    --set data.vocab_file="$SHARED/gpt2-vocab.json" --set data.merge_file="$SHARED/gpt2-merges.txt" \
    --set checkpoint.save=null --set training.precision=bf16 --set training.train_iters=$ITERS \
    --set training.lr_decay_iters=$ITERS --set training.lr_warmup_iters=$((ITERS / 10)) \
    --set training.eval_interval=$ITERS --set training.eval_iters=20 --set logging.log_interval=50 \
    --set logging.metrics_file="$OUT/$name.jsonl" "$@" >"$OUT/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$OUT/$name.log"; exit 1; }
  /usr/bin/python3 -c '
import json, sys
v = [json.loads(l) for l in open(sys.argv[1])]
v = [o["val_loss"] for o in v if "val_loss" in o]
print(repr(v[-1]))' "$OUT/$name.jsonl"
}
echo "llama-tiny, $TOK tokens ($ITERS steps of 8 x 128), validation loss after the last step"
echo "| run | validation loss | vs bf16 |"
echo "| --- | --- | --- |"
ref=$(run bf16)
echo "| bf16 | $ref | — |"
for r in tensorwise delayed blockwise mxfp8; do
  v=$(run "$r" --set training.fp8_format=$FMT --set training.fp8_recipe=$r)
  d=$(/usr/bin/python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('%+.3f%%' % (100 * (a - b) / b))" "$v" "$ref")
  echo "| fp8 $FMT $r | $v | $d |"
done
