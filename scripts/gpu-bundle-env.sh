# scripts/gpu-bundle-env.sh — copied into a GPU bundle as env.sh by
# scripts/gpu-bundle.sh; sourced (bash) by the bundle's gpu-check.sh and by
# tests/integration/test_gpu_bundle.sh. Sets MT_BUNDLE (the bundle folder),
# the relocated OpenMPI (OPAL_PREFIX and the install dirs OpenMPI reads from
# the environment, PMIx's plugin path), PATH (bundle bin first) and
# LD_LIBRARY_PATH: the bundle's lib, its lib/compat (libstdc++/libgcc_s) only
# when the machine has no C++ runtime at least as new, then the CUDA library
# folders (MT_CUDA_LIBDIRS, below) unless MT_BUNDLE_NO_CUDA=1. Unpacks the
# libraries that travel gzipped (lib/*.so*.gz) next to themselves, once.
# MT_CUDA_LIBDIRS: folders holding libcudart/libcublas/libnccl: the
# toolkit's (/usr/local/cuda*/lib64 and targets/*/lib) and pip's
# (site-packages/nvidia/*/lib: asked of every python found -- python3,
# python, $CONDA_PREFIX, $VIRTUAL_ENV, /opt/conda, /usr/local/bin,
# /usr/bin -- then globbed in /usr/local/lib/python3*, /usr/lib/python3*,
# ~/.local, conda), in that order. MT_NCCL_CANDIDATES: every libnccl.so.2
# on that path, in search order (the NCCL engine dlopens libnccl.so.2, so
# the first one wins). The
# LD_LIBRARY_PATH the shell had before (MT_ORIG_LD_LIBRARY_PATH: where an
# image finds the driver's libcuda.so.1, /usr/local/nvidia/lib64 say) stays
# at the end.
# glibc modes (MT_BUNDLE_MODE, MT_BUNDLE_MODE_WHY): "native" when the
# machine's glibc is at least the bundle's floor ("# needs glibc:" in the
# MANIFEST); "loader" when it is older, unknown (not glibc), or
# GPU_BUNDLE_LOADER=1 (GPU_BUNDLE_LOADER=0 forces native): the wrappers in
# bin/ then run bin/real/* through MT_LOADER (lib/glibc/ld-linux-x86-64.so.2)
# with --library-path MT_LOADER_LIBRARY_PATH (lib/glibc, the bundle's lib,
# the CUDA folders, the original path, the folder of the driver's
# libcuda.so.1), and LD_LIBRARY_PATH keeps only the
# CUDA folders and the original path, so that the machine's own programs
# (python3, grep) never load a bundled library built for the newer glibc.
# mt_ldd FILE: ldd of a bundled program as the chosen mode loads it.
MT_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export MT_BUNDLE
export OPAL_PREFIX=$MT_BUNDLE OPAL_EXEC_PREFIX=$MT_BUNDLE OPAL_BINDIR=$MT_BUNDLE/bin \
  OPAL_LIBDIR=$MT_BUNDLE/lib OPAL_PKGLIBDIR=$MT_BUNDLE/lib/openmpi OPAL_DATAROOTDIR=$MT_BUNDLE/share \
  OPAL_DATADIR=$MT_BUNDLE/share OPAL_PKGDATADIR=$MT_BUNDLE/share/openmpi OPAL_SYSCONFDIR=$MT_BUNDLE/etc
export PMIX_MCA_mca_base_component_path=$MT_BUNDLE/lib/pmix PMIX_PREFIX=$MT_BUNDLE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case ":$PATH:" in *":$MT_BUNDLE/bin:"*) ;; *) export PATH=$MT_BUNDLE/bin:$PATH;; esac
export MT_ORIG_LD_LIBRARY_PATH=${MT_ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}

# glibc mode
mt_vlt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }  # $1 < $2
MT_LOADER=$(ls "$MT_BUNDLE"/lib/glibc/ld-linux*.so* 2>/dev/null | head -1)
mt_need=$(sed -n 's/^# needs glibc: //p' "$MT_BUNDLE/MANIFEST" 2>/dev/null)
mt_have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
case ${GPU_BUNDLE_LOADER:-auto} in
  1) MT_BUNDLE_MODE=loader MT_BUNDLE_MODE_WHY="GPU_BUNDLE_LOADER=1 (glibc ${mt_have:-unknown} here, bundle floor ${mt_need:-?}): running through the bundled loader";;
  0) MT_BUNDLE_MODE=native MT_BUNDLE_MODE_WHY="GPU_BUNDLE_LOADER=0 (glibc ${mt_have:-unknown} here, bundle floor ${mt_need:-?}): running natively"
     [ -n "$mt_have" ] && [ -n "$mt_need" ] && mt_vlt "$mt_have" "$mt_need" && MT_BUNDLE_MODE_WHY="$MT_BUNDLE_MODE_WHY, although glibc $mt_have < $mt_need";;
  *) if [ -z "$mt_have" ]; then
       MT_BUNDLE_MODE=loader MT_BUNDLE_MODE_WHY="no glibc version found here (getconf GNU_LIBC_VERSION): running through the bundled loader"
     elif [ -n "$mt_need" ] && mt_vlt "$mt_have" "$mt_need"; then
       MT_BUNDLE_MODE=loader MT_BUNDLE_MODE_WHY="glibc $mt_have < $mt_need: running through the bundled loader"
     else
       MT_BUNDLE_MODE=native MT_BUNDLE_MODE_WHY="glibc $mt_have >= ${mt_need:-?}: running natively"
     fi;;
esac
[ -z "$MT_LOADER" ] && [ "$MT_BUNDLE_MODE" = loader ] &&
  MT_BUNDLE_MODE=native MT_BUNDLE_MODE_WHY="$MT_BUNDLE_MODE_WHY -- but this bundle has no lib/glibc: running natively"
export MT_BUNDLE_MODE MT_BUNDLE_MODE_WHY MT_LOADER
unset mt_need mt_have

# libraries that travel gzipped (scripts/gpu-bundle.sh): unpack once, in place
for mt_gz in "$MT_BUNDLE"/lib/*.so*.gz; do
  [ -e "$mt_gz" ] && [ ! -e "${mt_gz%.gz}" ] || continue
  gzip -dc "$mt_gz" > "${mt_gz%.gz}.tmp.$$" && mv -f "${mt_gz%.gz}.tmp.$$" "${mt_gz%.gz}" ||
    echo "env.sh: cannot unpack $mt_gz into $MT_BUNDLE/lib (read-only folder?)" >&2
done
unset mt_gz

# newest GLIBCXX_ version named in a libstdc++ file
mt_glibcxx() { grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$1" 2>/dev/null | sort -t. -k3 -n | tail -1; }
mt_libs=$MT_BUNDLE/lib
if [ -e "$MT_BUNDLE/lib/compat/libstdc++.so.6" ]; then
  sys=$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/.*libstdc++\.so\.6 (libc6,x86-64) => //p' | head -1)
  want=$(mt_glibcxx "$MT_BUNDLE/lib/compat/libstdc++.so.6")
  have=$([ -n "$sys" ] && mt_glibcxx "$sys")
  if [ -z "$have" ] || [ "${have##*.}" -lt "${want##*.}" ]; then mt_libs=$mt_libs:$MT_BUNDLE/lib/compat; fi
  unset sys want have
fi
if [ "${MT_BUNDLE_NO_CUDA:-0}" != 1 ]; then
  MT_CUDA_LIBDIRS=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64; do
    [ -d "$d" ] && case ":$MT_CUDA_LIBDIRS:" in *":$(readlink -f "$d"):"*) ;; *) MT_CUDA_LIBDIRS=$MT_CUDA_LIBDIRS:$(readlink -f "$d");; esac
  done
  # pip's CUDA wheels (site-packages/nvidia/*/lib, nvidia/cu13/lib): asked of
  # EVERY python found (the first python3 on PATH may not be the one with
  # torch: a conda or venv python), then the usual site folders globbed
  # directly (no working python at all)
  mt_add() { case ":$MT_CUDA_LIBDIRS:" in *":$1:"*) ;; *) MT_CUDA_LIBDIRS=$MT_CUDA_LIBDIRS:$1;; esac; }
  for py in python3 python ${CONDA_PREFIX:+"$CONDA_PREFIX/bin/python3"} ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python3"} \
            /opt/conda/bin/python3 /usr/local/bin/python3 /usr/bin/python3; do
    py=$(command -v "$py" 2>/dev/null) || continue
    mt_pip=$(LD_LIBRARY_PATH=$MT_ORIG_LD_LIBRARY_PATH timeout 20 "$py" -c 'import nvidia, glob, os
for p in nvidia.__path__:
    for d in sorted(set(os.path.dirname(f) for f in glob.glob(p + "/**/lib*.so*", recursive=True))):
        print(d)' 2>/dev/null) || continue
    for d in $mt_pip; do mt_add "$(readlink -f "$d")"; done
  done
  for d in /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/local/lib/python3*/site-packages/nvidia/*/lib \
           /usr/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3*/site-packages/nvidia/*/lib \
           ${HOME:+"$HOME"/.local/lib/python3*/site-packages/nvidia/*/lib} \
           ${CONDA_PREFIX:+"$CONDA_PREFIX"/lib/python3*/site-packages/nvidia/*/lib} \
           /opt/conda/lib/python3*/site-packages/nvidia/*/lib /opt/conda/envs/*/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && mt_add "$(readlink -f "$d")"
  done
  unset -f mt_add
  MT_CUDA_LIBDIRS=${MT_CUDA_LIBDIRS#:}
  export MT_CUDA_LIBDIRS
  # every libnccl.so.2 on that path, in search order (the first one wins
  # when the NCCL engine dlopens it; the probe reports it and its version)
  MT_NCCL_CANDIDATES=""
  for d in ${MT_CUDA_LIBDIRS//:/ }; do [ -e "$d/libnccl.so.2" ] && MT_NCCL_CANDIDATES="$MT_NCCL_CANDIDATES $d/libnccl.so.2"; done
  MT_NCCL_CANDIDATES=${MT_NCCL_CANDIDATES# }
  export MT_NCCL_CANDIDATES
  [ -n "$MT_CUDA_LIBDIRS" ] && mt_libs=$mt_libs:$MT_CUDA_LIBDIRS
fi
mt_orig=${MT_ORIG_LD_LIBRARY_PATH:+:$MT_ORIG_LD_LIBRARY_PATH}
if [ "$MT_BUNDLE_MODE" = loader ]; then
  # the driver's libcuda.so.1 where the machine's own loader finds it (its
  # ld.so.cache, or the NVIDIA container folder), in case the bundled loader
  # cannot read that cache or its default folders differ (/usr/lib64)
  mt_drv=$(/sbin/ldconfig -p 2>/dev/null | sed -n 's/.*libcuda\.so\.1 (libc6,x86-64) => //p' | head -1)
  for d in ${mt_drv:+"$(dirname "$mt_drv")"} /usr/local/nvidia/lib64; do
    [ -e "$d/libcuda.so.1" ] && case ":$mt_libs$mt_orig:" in *":$d:"*) ;; *) mt_orig=$mt_orig:$d;; esac
  done
  export MT_LOADER_LIBRARY_PATH=$MT_BUNDLE/lib/glibc:$mt_libs$mt_orig
  mt_cuda_orig=${MT_CUDA_LIBDIRS:-}$mt_orig
  export LD_LIBRARY_PATH=${mt_cuda_orig#:}
else
  unset MT_LOADER_LIBRARY_PATH
  export LD_LIBRARY_PATH=$mt_libs$mt_orig
fi
unset mt_libs mt_pip d py mt_orig mt_cuda_orig mt_drv
# mt_ldd FILE: how the chosen mode resolves FILE's libraries (ldd's format)
mt_ldd() {
  if [ "$MT_BUNDLE_MODE" = loader ]; then "$MT_LOADER" --library-path "$MT_LOADER_LIBRARY_PATH" --list "$1"
  else ldd "$1"; fi
}
