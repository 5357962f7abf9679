#!/usr/bin/env bash
# bench/bench_tokenizers.sh [REPEAT=40] — encoding throughput (MB/s, one
# thread, fresh encoder per pass so the piece cache starts cold each pass) of
# megatrain's tokenizers next to the npm references of
# tests/integration/test_data_hf_tokenizers.sh / test_data_sentencepiece.sh,
# on the mixed test corpus repeated REPEAT times (about 0.8 MB per 10).
# Needs node and the npm modules (.ci/run installs them into build/npm;
# MEGATRAIN_TOKENIZERS_NODE_PATH names another node_modules).
set -eu
cd "$(dirname "$0")/.."
REPEAT=${1:-40}
export NODE_PATH="${MEGATRAIN_TOKENIZERS_NODE_PATH:-$PWD/build/npm/node_modules}"
make -s build/tests/tools/tok_encode >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
R=tests/reference/tokenizer_ref.js
node $R corpus "$T/text.txt" "$REPEAT"
MB=$(awk -v b="$(stat -c %s "$T/text.txt")" 'BEGIN{printf "%.2f", b/1e6}')
node $R file spm "$T/llama2.model"
printf "%-40s %12s %14s %18s\n" "tokenizer ($MB MB corpus)" "megatrain" "reference" "reference impl"
for m in llama3 qwen3 deepseek_v3 spm; do
  if [ $m = spm ]; then typ=SentencePieceTokenizer; model="$T/llama2.model"; ref=spm; impl="sentencepiece-wasm"
  else typ=HuggingFaceTokenizer; mkdir -p "$T/$m"; node $R file $m "$T/$m"; model="$T/$m"; ref=$m; impl="transformers.js"; fi
  ours=$(build/tests/tools/tok_encode $typ "$model" "$T/text.txt" "$T/o.i32" --no-roundtrip --bench 3 | awk '/^MB\/s/{print $2}')
  theirs=$(node $R encode $ref "$T/text.txt" --bench 3 | awk '/^MB\/s/{print $2}')
  printf "%-40s %9s MB/s %11s MB/s %18s\n" "$typ $m" "$ours" "$theirs" "$impl"
done
