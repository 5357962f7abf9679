#!/usr/bin/env bash
# scripts/flash-emu.sh — build and run tests/tools/flash_emu.cpp: the CUDA
# fused-attention kernels compiled for the host with g++ and run on emulated
# warps under AddressSanitizer, against a double-precision reference (no GPU
# needed; see the file's header comment for what it can and cannot check).
# usage: bash scripts/flash-emu.sh [case-name filter]
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/tests/tools
out=build/tests/tools/flash_emu
san="-fsanitize=address,undefined -fno-omit-frame-pointer"
for f in util rng dtype; do
  ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g $san -I. -c -o "$out-$f.o" core/$f.c
done
${CXX:-g++} -std=c++17 -O1 -g $san -Wall -Wextra -Wno-unknown-pragmas -Itests/tools/flash_emu -I. -Itests/tools \
  -o "$out" tests/tools/flash_emu.cpp "$out-util.o" "$out-rng.o" "$out-dtype.o" -lm
ASAN_OPTIONS=detect_stack_use_after_return=0:${ASAN_OPTIONS:-} "$out" "$@"
