#!/usr/bin/env bash
# bench/bench_attn.sh — fused vs unfused attention in training (issue 15):
# tokens/s of the GPT-2 124M shape (12 layers, hidden 768, 12 heads, ffn
# 3072, vocabulary 50257, micro-batch 4, fp32, 2 threads) at seq 64, 256 and
# 1024, one AdamW update per micro-batch, in three implementations:
#   fused    megatrain with the op table's fused attention (FlashAttention-2)
#   unfused  megatrain with the unfused reference op (tests/tools/
#            attn_unfused.h: [b, a, s, s] probabilities kept per layer)
#   pytorch  the same model in PyTorch (tests/reference/llama_reference.py
#            with the GPT-2 options, bench/bench_llama_torch.py), its plain
#            attention (matmul, masked softmax, matmul; sdpa=0)
# all timed the same way (one warm-up step, then forward + backward + clip +
# AdamW per step, wall clock). Prints one table: mean-step tokens/s (best
# step in brackets: less disturbed by other work on a shared machine), the
# fused/unfused ratio of both, and megatrain's activation peak. Printed, not
# asserted. Environment: BENCH_STEPS (timed steps per run, default 2),
# BENCH_SEQS (default "64 256 1024"). Run it on an otherwise idle machine.
set -eu
cd "$(dirname "$0")/.."
make -s build/bench/bench_gpt
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
steps=${BENCH_STEPS:-2}
seqs=${BENCH_SEQS:-64 256 1024}
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || have_torch=0
GPT2="position_embedding_type=learned_absolute normalization=LayerNorm swiglu=0 num_query_groups=12 add_bias_linear=1 untie_embeddings_and_output_weights=0 sdpa=0"
mean() { sed -n 's/.*| tokens\/s \([0-9.]*\) |.*/\1/p'; }
best() { sed -n 's/.*ms, tokens\/s \([0-9.]*\) |.*/\1/p'; }
peak() { sed -n 's/.*activation peak \([0-9.]*\) MiB.*/\1/p'; }
rows=()
for s in $seqs; do
  f=$(build/bench/bench_gpt 12 768 12 "$s" 4 2 "$steps" 1 0)
  echo "$f" | head -2
  u=$(build/bench/bench_gpt 12 768 12 "$s" 4 2 "$steps" 1 1)
  echo "$u" | head -2
  pm=- pb=-
  if [ $have_torch = 1 ]; then
    # shellcheck disable=SC2086
    p=$(/usr/bin/python3 bench/bench_llama_torch.py 12 768 12 "$s" 4 2 "$steps" 3072 50257 $GPT2)
    echo "$p"
    pm=$(echo "$p" | mean) pb=$(echo "$p" | best)
  fi
  rows+=("$s $(echo "$f" | mean) $(echo "$f" | best) $(echo "$u" | mean) $(echo "$u" | best) $pm $pb $(echo "$f" | peak) $(echo "$u" | peak)")
done
echo
echo "== GPT-2 124M shape, micro-batch 4, fp32, 2 threads: tokens/s, mean step (best step)"
printf '| seq | fused | unfused | PyTorch (plain attention) | fused/unfused | fused/PyTorch | activation peak fused / unfused (MiB) |\n'
printf '|---|---|---|---|---|---|---|\n'
for r in "${rows[@]}"; do
  echo "$r" | awk '{
    pt = $6 == "-" ? "-" : sprintf("%.1f (%.1f)", $6, $7)
    rp = $6 == "-" ? "-" : sprintf("%.2fx (%.2fx)", $2 / $6, $3 / $7)
    printf "| %d | %.1f (%.1f) | %.1f (%.1f) | %s | %.2fx (%.2fx) | %s | %.0f / %.0f |\n",
           $1, $2, $3, $4, $5, pt, $2 / $4, $3 / $5, rp, $8, $9 }'
done
[ $have_torch = 1 ] || echo "(PyTorch column skipped: /usr/bin/python3 has no torch)"
