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
# (site-packages/nvidia/*/lib, found with python3), in that order.
MT_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export MT_BUNDLE
export OPAL_PREFIX=$MT_BUNDLE OPAL_EXEC_PREFIX=$MT_BUNDLE OPAL_BINDIR=$MT_BUNDLE/bin \
  OPAL_LIBDIR=$MT_BUNDLE/lib OPAL_PKGLIBDIR=$MT_BUNDLE/lib/openmpi OPAL_DATAROOTDIR=$MT_BUNDLE/share \
  OPAL_DATADIR=$MT_BUNDLE/share OPAL_PKGDATADIR=$MT_BUNDLE/share/openmpi OPAL_SYSCONFDIR=$MT_BUNDLE/etc
export PMIX_MCA_mca_base_component_path=$MT_BUNDLE/lib/pmix PMIX_PREFIX=$MT_BUNDLE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=$MT_BUNDLE/bin:$PATH

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
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    mt_pip=$("$py" -c 'import nvidia, glob, os
for p in nvidia.__path__:
    for d in sorted(set(os.path.dirname(f) for f in glob.glob(p + "/**/lib*.so*", recursive=True))):
        print(d)' 2>/dev/null) || continue
    for d in $mt_pip; do
      case ":$MT_CUDA_LIBDIRS:" in *":$d:"*) ;; *) MT_CUDA_LIBDIRS=$MT_CUDA_LIBDIRS:$d;; esac
    done
    break
  done
  MT_CUDA_LIBDIRS=${MT_CUDA_LIBDIRS#:}
  export MT_CUDA_LIBDIRS
  [ -n "$MT_CUDA_LIBDIRS" ] && mt_libs=$mt_libs:$MT_CUDA_LIBDIRS
fi
export LD_LIBRARY_PATH=$mt_libs
unset mt_libs mt_pip d py
