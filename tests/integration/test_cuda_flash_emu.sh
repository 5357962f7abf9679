#!/usr/bin/env bash
# tests/integration/test_cuda_flash_emu.sh — the CUDA fused-attention
# kernels (cuda/cuda_flash_*.cu) compiled for the host and run on emulated
# warps under AddressSanitizer against a double-precision reference
# (scripts/flash-emu.sh, tests/tools/flash_emu.cpp): fp32 FFMA kernels, bf16
# mma.sync kernels, bf16 with MEGATRAIN_CUDA_FLASH_SIMT=1; plain calls and a
# context-parallel ring (cp 2, 3). Needs no GPU and no CUDA toolkit.
set -u
cd "$(dirname "$0")/../.."
command -v "${CXX:-g++}" >/dev/null || { echo "SKIP: no C++ compiler"; exit 77; }
bash scripts/flash-emu.sh
