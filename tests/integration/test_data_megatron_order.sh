#!/usr/bin/env bash
# tests/integration/test_data_megatron_order.sh — megatrain's GPT sample
# order is Megatron-core's (GPTDataset, BlendedDataset, NumPy RandomState):
# the token ids of every train/valid/test sample of five small cases
# (one dataset; its final epoch shuffled separately; no extra token; a
# weighted 3-way blend with a split; an unweighted 3-way blend) must hash to
# the values Megatron-LM's own dataset code gave on the same .bin/.idx files
# (tests/reference/megatron_order.py, pinned below), and equal the NumPy
# re-implementation tests/reference/gpt_order_numpy.py (python3-numpy).
# With MEGATRAIN_MEGATRON_DIR (a Megatron-LM checkout with helpers_cpp built)
# Megatron's code runs here too. Data: tinyshakespeare slices tokenized by
# `preprocess` (GPT-2 BPE; its ids are pinned by test_data_tokenizer_exact).
set -eu
cd "$(dirname "$0")/../.."
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
for f in gpt2-vocab.json gpt2-merges.txt tinyshakespeare.txt; do
  [ -f "$D/$f" ] || { echo "SKIP: $D/$f not found (shared data missing)"; exit 77; }
done
make -s build/tests/tools/gpt_samples build/tests/tools/preprocess_cli >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PP="build/tests/tools/preprocess_cli --vocab-file $D/gpt2-vocab.json --merge-file $D/gpt2-merges.txt --append-eod --quiet"
head -c 120000 "$D/tinyshakespeare.txt" > "$T/a.txt"
tail -c +120001 "$D/tinyshakespeare.txt" | head -c 60000 > "$T/b.txt"
tail -c +180001 "$D/tinyshakespeare.txt" | head -c 50000 > "$T/c.txt"
$PP --input "$T/a.txt" --output-prefix "$T/a"
$PP --input "$T/b.txt" --output-prefix "$T/b" --doc-sep line
$PP --input "$T/c.txt" --output-prefix "$T/c"
PY=/usr/bin/python3
have_numpy=0; $PY -c 'import numpy' 2>/dev/null && have_numpy=1
MEG="${MEGATRAIN_MEGATRON_DIR:-}"
# name | sha256 of Megatron's output | arguments
CASES=(
"single|7d437a1b1d29cfd6b530196d4d011c7ac48ee345bb3b937f6aef51a8f672bc74|--seq 32 --seed 1234 --split 969,30,1 --num-samples 2000 300 40 a"
"final-epoch|858a67c5a39c5615af2b69c15e515adac20578da0fc052f8cb2af3bd87395bf0|--seq 32 --seed 42 --split 969,30,1 --num-samples 2300 300 0 a"
"no-extra|8e6d415c89dc0422572e5054649583503e09b6325f311d0301fc1d5a9f31e560|--seq 30 --seed 9 --split 98,2,0 --num-samples 1500 200 0 --no-extra-token a"
"blend3|ca98f2173ba6ec69bf24246f899760f6e0347df37058dd9745320f9342b7da77|--seq 32 --seed 777 --split 90,8,2 --num-samples 1500 300 40 0.5 a 0.3 b 0.2 c"
"blend3-unweighted|73330860aacb572691976b91fa6693c3e89078821dad70da6a686784d1d8c5fa|--seq 16 --seed 5 --split 90,8,2 --num-samples 1000 100 20 a b c"
)
fail=0
for c in "${CASES[@]}"; do
  IFS='|' read -r name want args <<<"$c"
  set -- $args
  argv=(); for x in "$@"; do case $x in a|b|c) argv+=("$T/$x");; *) argv+=("$x");; esac; done
  build/tests/tools/gpt_samples --out "$T/mt.bin" "${argv[@]}" >/dev/null
  got=$(sha256sum "$T/mt.bin" | cut -d' ' -f1)
  n=$(( ($(stat -c %s "$T/mt.bin") - 24) ))
  if [ "$got" != "$want" ]; then echo "FAIL: $name: sample ids hash $got, Megatron's $want"; fail=1; fi
  if [ $have_numpy = 1 ]; then
    $PY tests/reference/gpt_order_numpy.py --out "$T/np.bin" "${argv[@]}" >/dev/null
    cmp -s "$T/mt.bin" "$T/np.bin" || { echo "FAIL: $name: differs from the NumPy re-implementation"; fail=1; }
  fi
  if [ -n "$MEG" ]; then
    timeout 300 $PY tests/reference/megatron_order.py --megatron "$MEG" --out "$T/meg.bin" "${argv[@]}" >/dev/null
    cmp -s "$T/mt.bin" "$T/meg.bin" || { echo "FAIL: $name: differs from Megatron's code in $MEG"; fail=1; }
  fi
  [ $fail = 0 ] && echo "ok: $name ($n bytes of sample ids)"
done
[ $have_numpy = 1 ] || echo "note: python3-numpy missing, NumPy re-implementation not run"
[ $fail = 0 ] || exit 1
echo "PASS: ${#CASES[@]} cases equal Megatron-core sample order (pinned hashes, NumPy)${MEG:+ and Megatron code run live}"
