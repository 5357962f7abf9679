#!/usr/bin/env bash
# tests/integration/test_data_roundtrip.sh — .bin/.idx written by megatrain
# preprocess are read back by an independent numpy reader of Megatron's layout
# (tests/reference/mmidx_reader.py) with identical sizes, pointers, document
# indices and tokens; files written the way Megatron's builder writes them
# (several sequences per document, uint16/int32/int64/uint8) load in megatrain.
set -eu
cd "$(dirname "$0")/../.."
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
for f in gpt2-vocab.json gpt2-merges.txt tinyshakespeare.txt; do
  [ -f "$D/$f" ] || { echo "SKIP: $D/$f not found (shared data missing)"; exit 77; }
done
PY=/usr/bin/python3
$PY -c "import numpy" 2>/dev/null || { echo "SKIP: /usr/bin/python3 with numpy not available"; exit 77; }
make -s build/tests/tools/preprocess_cli build/tests/tools/mmidx_dump >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PP=build/tests/tools/preprocess_cli DUMP=build/tests/tools/mmidx_dump R=tests/reference/mmidx_reader.py
# 1. megatrain -> python
$PP --input "$D/tinyshakespeare.txt" --output-prefix "$T/ts" --vocab-file "$D/gpt2-vocab.json" \
    --merge-file "$D/gpt2-merges.txt" --append-eod --workers 2 --quiet
$PY $R check-preprocessed "$T/ts" 50256
$DUMP "$T/ts" "$T/ts.tok" > "$T/ts.dump"
$PY $R compare "$T/ts" "$T/ts.dump" "$T/ts.tok"
# 2. python (Megatron builder layout) -> megatrain
for dt in uint16 int32 int64 uint8; do
  $PY $R write "$T/py_$dt" $dt
  $DUMP "$T/py_$dt" "$T/py_$dt.tok" > "$T/py_$dt.dump"
  $PY $R compare "$T/py_$dt" "$T/py_$dt.dump" "$T/py_$dt.tok"
done
echo "PASS: round trip megatrain <-> numpy Megatron reader"
