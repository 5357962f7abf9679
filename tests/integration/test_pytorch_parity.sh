#!/usr/bin/env bash
# PyTorch parity: megatrain's GPT (fp32) vs the PyTorch reference (fp64) —
# loss, every parameter gradient, and a 10-step AdamW loss curve — for a
# tied and an untied model with a vocabulary that is not a multiple of 128.
set -eu
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# layers hidden heads seq batch vocab ffn untie steps
build/tests/tools/gpt_dump "$tmp/tied" 2 64 4 16 3 500 0 0 10
/usr/bin/python3 tests/reference/test_gpt_parity.py "$tmp/tied"
build/tests/tools/gpt_dump "$tmp/untied" 3 48 3 12 2 301 80 1 10
/usr/bin/python3 tests/reference/test_gpt_parity.py "$tmp/untied"
