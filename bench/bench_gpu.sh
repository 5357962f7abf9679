#!/usr/bin/env bash
# bench/bench_gpu.sh — single-GPU training throughput of the GPT-2 124M,
# 350M and 1.3B shapes and a Llama-style 1.2B shape (RoPE, RMSNorm, SwiGLU,
# GQA 16/8, no biases, untied embeddings) at seq 1024 on the CUDA backend
# (bf16 storage, fp32 master weights/grads/optimizer): tokens/s, TFLOP/s and
# MFU against 989 TFLOP/s (H100/H200 SXM dense bf16; env
# MEGATRAIN_PEAK_TFLOPS overrides). One "RESULT name=..." line per shape.
# usage: bash bench/bench_gpu.sh [steps]   (default 5 timed steps per shape)
# env: BENCH_GPU=path of a built bench_gpu (a GPU bundle's bin/bench_gpu);
#      else build/bench/bench_gpu is built with make.
#      BENCH_GPU_TIMEOUT=seconds per shape (default 300).
set -u
cd "$(dirname "$0")/.."
steps="${1:-5}"
bin=${BENCH_GPU:-}
if [ -z "$bin" ]; then
  make -s build/bench/bench_gpu || exit 1
  bin=build/bench/bench_gpu
fi
LLAMA="position_embedding_type=rope normalization=RMSNorm swiglu=1 num_query_groups=8
       ffn_hidden_size=5632 add_bias_linear=0 untie_embeddings_and_output_weights=1"
ub=""; command -v stdbuf >/dev/null && ub="stdbuf -oL -eL"
rc=0
#            name         layers hidden heads seq mb  options
for shape in "GPT-124M    12 768  12 1024 8" \
             "GPT-350M    24 1024 16 1024 8" \
             "GPT-1.3B    24 2048 16 1024 8" \
             "Llama-1.2B  16 2048 16 1024 8 $LLAMA"; do
  set -- $shape
  name=$1; shift
  dims=("$1" "$2" "$3" "$4" "$5"); shift 5
  echo "== $name"
  # line-buffered (stdbuf) so that a timeout or a fault keeps the lines so far
  timeout "${BENCH_GPU_TIMEOUT:-300}" $ub "$bin" "${dims[@]}" "$steps" 1 bf16 "$@" 2>&1 |
    sed -u "s/^RESULT /RESULT name=$name /"
  r=${PIPESTATUS[0]}
  [ $r -eq 77 ] && exit 77
  [ $r -ne 0 ] && { echo "bench $name failed (exit $r)"; rc=1; }
done
exit $rc
