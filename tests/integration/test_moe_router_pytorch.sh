#!/usr/bin/env bash
# PyTorch parity of the MoE router (model/moe_router.h) with an independent
# float64 autograd reference (tests/reference/moe_router_reference.py):
# hand-made and random cases over softmax / sigmoid, pre-softmax, the top-k
# scaling factor, the expert bias, group-limited top-k, aux / seq_aux /
# global_aux / none balance losses, capacity on and off (both drop
# policies), bf16-rounded logits and the backward split over token ranges:
# experts, kept slots and counts equal; gate weights, balance loss, z-loss
# and dlogits within 1e-6; and the case where the expert bias changes the
# selection but not the gate weights (nor the balance loss).
set -eu
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi
D=build/tests/tools/moe_route_dump
[ -x "$D" ] || { echo "SKIP: $D not built"; exit 77; }
OMP_NUM_THREADS=1 /usr/bin/python3 tests/reference/test_moe_router.py "$D"
