#!/usr/bin/env bash
# bench/bench_llama.sh — CPU training throughput of a Llama-style ~124M shape
# (12 layers, hidden 768, 12 heads, 4 KV groups, SwiGLU ffn 2048, RoPE,
# RMSNorm, no biases, untied embeddings, vocabulary 50257, seq 256,
# micro-batch 4, fp32, 2 threads): megatrain (bench/bench_llama.c) next to
# PyTorch running the same model from tests/reference/llama_reference.py
# (bench/bench_llama_torch.py), both timed the same way (warm-up step, then
# forward + backward + clip + AdamW per step); prints both tokens/s and the
# ratio, for the mean step and for the best step (less disturbed by other
# work on a shared machine). `--gpt2` adds the GPT-2 124M block at the same seq/micro-batch
# (learned positions, LayerNorm, GELU, biases, tied) for comparison.
# Environment: BENCH_STEPS (timed steps per side, default 3). Run it on an
# otherwise idle machine: figures are wall-clock.
set -eu
cd "$(dirname "$0")/.."
make -s build/bench/bench_llama
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no torch"; exit 77; }
export OMP_NUM_THREADS=2
steps=${BENCH_STEPS:-3}
SHAPE="${BENCH_LAYERS:-12} 768 12 256 4 2 $steps"
GPT2="position_embedding_type=learned_absolute normalization=LayerNorm swiglu=0 num_query_groups=12 add_bias_linear=1 untie_embeddings_and_output_weights=0"
row() { # name ffn options...
  local name=$1 ffn=$2; shift 2
  local mt pt
  mt=$(build/bench/bench_llama $SHAPE "$ffn" 50257 "$@")
  echo "$mt"
  pt=$(/usr/bin/python3 bench/bench_llama_torch.py $SHAPE "$ffn" 50257 "$@")
  echo "$pt"
  local a b ab bb
  a=$(echo "$mt" | sed -n 's/.*| tokens\/s \([0-9.]*\) |.*/\1/p')
  b=$(echo "$pt" | sed -n 's/.*| tokens\/s \([0-9.]*\) |.*/\1/p')
  ab=$(echo "$mt" | sed -n 's/.*ms, tokens\/s \([0-9.]*\) |.*/\1/p')
  bb=$(echo "$pt" | sed -n 's/.*ms, tokens\/s \([0-9.]*\) |.*/\1/p')
  awk -v n="$name" -v a="$a" -v b="$b" -v ab="$ab" -v bb="$bb" 'BEGIN {
    printf "== %s: megatrain %.1f tokens/s, PyTorch %.1f tokens/s, ratio %.2fx (mean step); ", n, a, b, a / b
    printf "best step: %.1f vs %.1f, ratio %.2fx\n", ab, bb, ab / bb }'
}
echo "== Llama-style 124M shape"
row llama 2048
if [ "${1:-}" = "--gpt2" ]; then
  echo "== GPT-2 124M shape (same seq, micro-batch)"
  # shellcheck disable=SC2086
  row gpt2 3072 $GPT2
fi
