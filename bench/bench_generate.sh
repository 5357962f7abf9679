#!/usr/bin/env bash
# bench/bench_generate.sh — text generation speed (issue 17) of the GPT-2
# 124M shape (12 layers, hidden 768, 12 heads, ffn 3072, vocabulary 50257,
# seq 1024, fp32) from a checkpoint saved after one training iteration
# (micro-batch 1): `megatrain generate` with the KV cache, greedy, a prompt
# of about 120 tokens then BENCH_NEW new tokens (default 64); prefill and
# decode tokens/s as the command prints them, for one process (2 threads and
# 1 thread), tp=2 (mpirun -np 2, 1 thread per rank), one process without the
# KV cache (the whole prefix every step; 1 thread), and a PyTorch peer
# (bench/generate_torch.py: the same weights, fp32, greedy, KV cache by
# hand; 1 and 2 threads) when /usr/bin/python3 has torch. On a shared
# machine the 2-thread rows suffer most (OpenMP threads wait spinning for a
# descheduled peer). Printed, not asserted. Writes the
# 1.5 GB checkpoint (parameters + Adam state) under BENCH_DIR (default a
# temporary directory, removed at the end).
set -eu
cd "$(dirname "$0")/.."
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SHARED=${MEGATRAIN_SHARED_DATA:-$PWD/../shared/data}
NEW=${BENCH_NEW:-64}
[ -x ./megatrain ] || make -s megatrain
TS=build/testdata/tinyshakespeare_text_document
if [ ! -f "$TS.idx" ]; then
  mkdir -p build/testdata
  ./megatrain preprocess --input "$SHARED/tinyshakespeare.txt" --output-prefix "$TS.tmp" \
    --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
    --append-eod --workers 2 >/dev/null
  mv "$TS.tmp.bin" "$TS.bin"; mv "$TS.tmp.idx" "$TS.idx"
fi
DIR=${BENCH_DIR:-$(mktemp -d)}
[ -n "${BENCH_DIR:-}" ] || trap 'rm -rf "$DIR"' EXIT
if [ ! -f "$DIR/ckpt/latest_checkpointed_iteration.txt" ]; then
  echo "bench_generate: training the 124M shape for 1 iteration (checkpoint in $DIR/ckpt)"
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 ./megatrain --config tests/configs/gpt-test.json \
    --set model.num_layers=12 --set model.hidden_size=768 --set model.num_attention_heads=12 \
    --set model.seq_length=1024 --set model.max_position_embeddings=1024 \
    --set model.hidden_dropout=0.0 --set model.attention_dropout=0.0 \
    --set training.micro_batch_size=1 --set training.global_batch_size=1 \
    --set training.train_iters=1 --set training.lr_warmup_iters=0 --set training.eval_interval=0 \
    --set training.num_threads=2 \
    --set checkpoint.save="$DIR/ckpt" \
    --set data.vocab_file="$SHARED/gpt2-vocab.json" --set data.merge_file="$SHARED/gpt2-merges.txt" \
    >"$DIR/train.log"
fi
PROMPT=$(head -c 520 "$SHARED/tinyshakespeare.txt")
G=(generate --load "$DIR/ckpt" --prompt "$PROMPT" --max-new-tokens "$NEW" --temperature 0)
run() { # label, command...
  local label=$1; shift
  local out; out=$("$@" --print-ids 2>"$DIR/gen.err") # the speed line is on stderr
  local line; line=$(grep '^generate:' "$DIR/gen.err")
  printf '%-28s %s\n' "$label" "${line#generate: }"
  grep '^ids:' <<<"$out" >"$DIR/ids.$(tr -c 'a-z0-9' _ <<<"$label")" || true
}
echo "# 124M GPT shape, fp32, greedy, $NEW new tokens, $(nproc) cores"
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 run "megatrain 1 proc x 2 thr" ./megatrain "${G[@]}" --num-threads 2
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 run "megatrain 1 proc x 1 thr" ./megatrain "${G[@]}" --num-threads 1
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 run "megatrain tp=2 x 1 thr" \
  mpirun -np 2 --oversubscribe --bind-to none ./megatrain "${G[@]}" --num-threads 1
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 run "megatrain no KV cache, 1 thr" ./megatrain "${G[@]}" --no-kv-cache --num-threads 1
if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f tests/reference/dist_ckpt.py ]; then
  ids=$(OMP_NUM_THREADS=2 ./megatrain "${G[@]}" --max-new-tokens 1 --print-ids | sed -n 's/^prompt_ids: //p')
  for t in 1 2; do
    OMP_NUM_THREADS=$t run "pytorch peer, $t thr" \
      /usr/bin/python3 bench/generate_torch.py "$DIR/ckpt" --ids "$ids" --max-new-tokens "$NEW"
  done
  cmp -s "$DIR"/ids.megatrain_1_proc_x_1_thr* "$DIR"/ids.pytorch_peer__1_thr* &&
    echo "greedy tokens: PyTorch peer = megatrain" || echo "greedy tokens: PyTorch peer differs"
fi
