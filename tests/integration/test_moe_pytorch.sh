#!/usr/bin/env bash
# PyTorch parity of the MoE block (model/moe_layer.h) on fixed inputs: output and
# gradients of input, router and expert weights within 1e-5 (fp32 vs
# float64), chosen experts and kept slots identical, load-balancing and z
# losses equal; top-1/2/4, both drop policies, pre-softmax, dropless; plus the
# hand-worked router case (4 tokens, 4 experts, top-2).
set -eu
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi
[ -x build/tests/tools/moe_dump ] || { echo "SKIP: build/tests/tools/moe_dump not built"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
D=build/tests/tools/moe_dump
# dir            N  h  F  E k cf    policy   pre lb    z     aux_scale [router scale]
$D "$tmp/k2probs" 32 16 24 4 2 1.0   probs    0   0.01  0.001 0.05 >/dev/null
$D "$tmp/k2pos"   32 16 24 4 2 1.0   position 0   0.01  0.001 0.05 >/dev/null
$D "$tmp/k1pre"   40 16 20 8 1 1.0   probs    1   0.1   0.01  0.1 >/dev/null
$D "$tmp/k1post"  40 16 20 8 1 0.5   position 0   0.1   0.01  0.1 >/dev/null
$D "$tmp/k4"      24 12 16 8 4 0.75  probs    0   0.05  0.01  0.2 >/dev/null
$D "$tmp/k4pos"   24 12 16 8 4 0.75  position 1   0.05  0.01  0.2 >/dev/null
$D "$tmp/dropless" 32 16 24 4 2 0    probs    0   0.01  0.001 0.05 3 >/dev/null
/usr/bin/python3 tests/reference/test_moe_parity.py --hand "$tmp"/k2probs "$tmp"/k2pos "$tmp"/k1pre \
  "$tmp"/k1post "$tmp"/k4 "$tmp"/k4pos "$tmp"/dropless
