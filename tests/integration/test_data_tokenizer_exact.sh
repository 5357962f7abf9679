#!/usr/bin/env bash
# tests/integration/test_data_tokenizer_exact.sh — `preprocess` on the whole of
# tinyshakespeare (one document, no EOD) writes exactly the reference GPT-2 ids
# (tiktoken gpt2). The reference is pinned by count and sha256 so the check
# cannot silently disappear; 1 and 2 workers must agree.
set -eu
cd "$(dirname "$0")/../.."
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
for f in gpt2-vocab.json gpt2-merges.txt tinyshakespeare.txt tinyshakespeare.gpt2.u16; do
  [ -f "$D/$f" ] || { echo "SKIP: $D/$f not found (shared data missing)"; exit 77; }
done
REF="$D/tinyshakespeare.gpt2.u16"
WANT_SHA=25c01b32b32f41897a6359dd222ec114992dc30c357bcafbfe6c56672f76cd31
WANT_COUNT=338025
[ -f "$REF" ] || { echo "FAIL: reference $REF missing"; exit 1; }
sha=$(sha256sum "$REF" | cut -d' ' -f1)
[ "$sha" = "$WANT_SHA" ] || { echo "FAIL: $REF sha256 $sha != $WANT_SHA"; exit 1; }
[ "$(stat -c %s "$REF")" -eq $((WANT_COUNT * 2)) ] || { echo "FAIL: reference count"; exit 1; }
make -s build/tests/tools/preprocess_cli >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for w in 1 2; do
  build/tests/tools/preprocess_cli --input "$D/tinyshakespeare.txt" --output-prefix "$T/ts$w" \
    --vocab-file "$D/gpt2-vocab.json" --merge-file "$D/gpt2-merges.txt" --doc-sep none --workers $w --quiet
  n=$(( $(stat -c %s "$T/ts$w.bin") / 2 ))
  [ "$n" -eq $WANT_COUNT ] || { echo "FAIL: $n tokens, want $WANT_COUNT"; exit 1; }
  cmp "$T/ts$w.bin" "$REF" || { echo "FAIL: token ids differ from tiktoken gpt2 (workers=$w)"; exit 1; }
done
echo "PASS: tinyshakespeare: $WANT_COUNT ids identical to tiktoken gpt2 (sha256 $WANT_SHA)"
