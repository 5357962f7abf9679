#!/usr/bin/env bash
# scripts/install-deps.sh — install the Debian packages megatrain needs to
# build, test and run (non-interactive; installs only what is missing).
#   build:   gcc g++ make libcjson-dev libopenblas-dev libopenmpi-dev openmpi-bin
#            libpcre2-dev libutf8proc-dev libsentencepiece-dev zlib1g-dev
#            libdeflate-dev libcmocka-dev pkg-config
#   tests:   python3-torch python3-numpy (reference checks, /usr/bin/python3),
#            slurm-wlm munge (local one-node Slurm for the srun tests), bc
#   scripts: python3-matplotlib (plot_metrics.py), npm (quick-start data)
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is optional and not installed here.
set -euo pipefail
pkgs=(gcc g++ make libc6-dev libcjson-dev libopenblas-dev libopenmpi-dev openmpi-bin libpcre2-dev
      libutf8proc-dev libsentencepiece-dev zlib1g-dev libdeflate-dev libcmocka-dev pkg-config bc python3-torch python3-numpy python3-matplotlib
      slurm-wlm munge)
[ "${MEGATRAIN_SKIP_NPM:-0}" = 1 ] || command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"; exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
