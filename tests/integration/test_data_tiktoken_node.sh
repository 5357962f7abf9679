#!/usr/bin/env bash
# tests/integration/test_data_tiktoken_node.sh — compare megatrain's tokenizer
# with npm `tiktoken` (gpt2) through node on generated text mixing scripts,
# emoji, digits, contractions, Unicode spaces and whitespace runs. Skips when
# node or the tiktoken module is not installed (set MEGATRAIN_TIKTOKEN_NODE_PATH to a
# node_modules folder holding it; `npm install tiktoken` in some directory).
set -eu
cd "$(dirname "$0")/../.."
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
for f in gpt2-vocab.json gpt2-merges.txt; do
  [ -f "$D/$f" ] || { echo "SKIP: $D/$f not found (shared data missing)"; exit 77; }
done
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
export NODE_PATH="${MEGATRAIN_TIKTOKEN_NODE_PATH:-/tmp/tk/node_modules}${NODE_PATH:+:$NODE_PATH}"
node -e 'require("tiktoken")' 2>/dev/null || { echo "SKIP: npm module tiktoken not found (NODE_PATH=$NODE_PATH)"; exit 77; }
make -s build/tests/tools/bpe_encode >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
node - "$T/text.txt" "$T/ref.i32" <<'JS'
const fs = require("fs");
const { get_encoding } = require("tiktoken");
const pieces = ["Hello", " world", "'s", "'LL", "'re", " don't", " 1234567", "3.14", " ", "  ", "\n", "\n\n",
  "\t", "\r\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "é", "naïve", " Ωμέγα", " Привет", "日本語",
  "한국어", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", " !!", "...", "—", "«»", "١٢٣", "½", "Ⅻ", "𝟙", "\u200b", "a", "Z", "_", "#"];
let s = 1, out = [];
function rnd() { s = (s * 1103515245 + 12345) % 2147483648; return s; }
for (let i = 0; i < 20000; i++) out.push(pieces[rnd() % pieces.length]);
const text = out.join("");
fs.writeFileSync(process.argv[2], text);
const ids = get_encoding("gpt2").encode_ordinary(text);
fs.writeFileSync(process.argv[3], Buffer.from(new Int32Array(ids).buffer));
JS
build/tests/tools/bpe_encode "$D/gpt2-vocab.json" "$D/gpt2-merges.txt" "$T/text.txt" -4 > "$T/ours.i32"
cmp "$T/ours.i32" "$T/ref.i32" || { echo "FAIL: ids differ from npm tiktoken"; exit 1; }
echo "PASS: $(( $(stat -c %s "$T/ref.i32") / 4 )) ids identical to npm tiktoken gpt2 on mixed Unicode text"
