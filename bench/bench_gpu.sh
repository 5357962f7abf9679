#!/usr/bin/env bash
# bench/bench_gpu.sh — single-GPU training throughput of the GPT-2 124M,
# 350M and 1.3B shapes and a Llama-style 1.2B shape (RoPE, RMSNorm, SwiGLU,
# GQA 16/8, no biases, untied embeddings) at seq 1024 on the CUDA backend
# (bf16 storage, fp32 master weights/grads/optimizer), Megatron's convention:
# each iteration a global batch of ACCUM micro-batches (default 8: 64
# sequences, 65,536 tokens) and one AdamW step; tokens/s, TFLOP/s and MFU
# (today's Megatron FLOPs formula, causal attention at half) against 989
# TFLOP/s (H100/H200 SXM dense bf16; env MEGATRAIN_PEAK_TFLOPS overrides).
# One "RESULT name=..." line per shape and precision, then a table with a
# bf16 and an FP8 column: the FP8 column runs bench_gpu with the FP8 recipe
# $BENCH_GPU_FP8 (default tensorwise, Megatron-Bridge's current scaling;
# format hybrid) when the config rules accept FP8 on device cuda, and says
# "n/a (refused by the config rules)" where they refuse it (bench_gpu exits
# 3); "refused" when bench_gpu exits 2; BENCH_GPU_FP8=none skips the column.
# usage: bash bench/bench_gpu.sh [steps [accum]]   (default 5 timed iterations, 8)
# env: BENCH_GPU=path of a built bench_gpu (a GPU bundle's bin/bench_gpu);
#      else build/bench/bench_gpu is built with make.
#      BENCH_GPU_TIMEOUT=seconds per shape (default 300).
set -u
cd "$(dirname "$0")/.."
steps="${1:-5}"
accum="${2:-8}"
bin=${BENCH_GPU:-}
if [ -z "$bin" ]; then
  make -s build/bench/bench_gpu || exit 1
  bin=build/bench/bench_gpu
fi
LLAMA="position_embedding_type=rope normalization=RMSNorm swiglu=1 num_query_groups=8
       ffn_hidden_size=5632 add_bias_linear=0 untie_embeddings_and_output_weights=1"
ub=""; command -v stdbuf >/dev/null && ub="stdbuf -oL -eL"
rc=0
table=""
#            name         layers hidden heads seq mb  options
for shape in "GPT-124M    12 768  12 1024 8" \
             "GPT-350M    24 1024 16 1024 8" \
             "GPT-1.3B    24 2048 16 1024 8" \
             "Llama-1.2B  16 2048 16 1024 8 $LLAMA"; do
  set -- $shape
  name=$1; shift
  dims=("$1" "$2" "$3" "$4" "$5"); shift 5
  row="| $name |"
  fp8=${BENCH_GPU_FP8:-tensorwise}
  [ "$fp8" = none ] && fp8=""
  for prec in bf16 $fp8; do
    echo "== $name $prec"
    # line-buffered (stdbuf) so that a timeout or a fault keeps the lines so far
    timeout "${BENCH_GPU_TIMEOUT:-300}" $ub "$bin" "${dims[@]}" "$steps" "$accum" "$prec" "$@" \
      >"${TMPDIR:-/tmp}/bench_gpu.$$" 2>&1
    r=$?
    sed "s/^RESULT /RESULT name=$name /" "${TMPDIR:-/tmp}/bench_gpu.$$"
    [ $r -eq 77 ] && { rm -f "${TMPDIR:-/tmp}/bench_gpu.$$"; exit 77; }
    cell=$(sed -n 's/.*| \([0-9.]*\) TFLOP\/s | MFU \([0-9.]*%\).*/\1 TFLOP\/s, MFU \2/p' \
      "${TMPDIR:-/tmp}/bench_gpu.$$")
    if [ $r -eq 3 ]; then cell="n/a (refused by the config rules)"
    elif [ $r -eq 2 ]; then cell="refused"
    elif [ $r -ne 0 ] || [ -z "$cell" ]; then echo "bench $name $prec failed (exit $r)"; cell="failed"; rc=1; fi
    row="$row $cell |"
  done
  [ -z "$fp8" ] && row="$row - |"
  table="$table$row"$'\n'
done
rm -f "${TMPDIR:-/tmp}/bench_gpu.$$"
echo
fp8=${BENCH_GPU_FP8:-tensorwise}
echo "| shape | bf16 | FP8 (${fp8/none/not run}, hybrid) |"
echo "|---|---|---|"
printf "%s" "$table"
exit $rc
