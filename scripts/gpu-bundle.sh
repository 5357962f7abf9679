#!/usr/bin/env bash
# scripts/gpu-bundle.sh — one self-contained folder to carry to a GPU machine
# that has the CUDA toolkit and driver but none of our other dependencies
# (no OpenMPI, cJSON, OpenBLAS, PCRE2, libdeflate): megatrain and the GPU
# test tools built with PORTABLE=1 CUDA=1 (no -march=native; SASS for sm_80
# and sm_90, PTX for compute_90), every shared library they need that is
# neither glibc nor CUDA, a relocatable OpenMPI runtime (mpirun, orted,
# plugins, help files; run with OPAL_PREFIX=<bundle>, which env.sh sets),
# the check script and its configs, the tokenized tinyshakespeare data set
# and a MANIFEST (file, size, sha256, origin, build flags, git commit).
# CUDA's own libraries (cudart, cuBLAS, NCCL) come from the target machine.
# glibc travels too (lib/glibc: the loader, libc, libm, ...; never on
# LD_LIBRARY_PATH): every program lives in bin/real/, and bin/NAME is a
# wrapper that runs it natively, or through the bundled loader
# (lib/glibc/ld-linux-x86-64.so.2 --library-path lib/glibc:lib:<CUDA dirs>)
# when the machine's glibc is older than the bundle's floor ("# needs
# glibc:" in the MANIFEST) or GPU_BUNDLE_LOADER=1 (scripts/gpu-bundle-env.sh).
#
# usage: bash scripts/gpu-bundle.sh [--from-build DIR] [--limit-mib N] [OUTDIR]
#   OUTDIR        default dist/gpu-bundle (replaced)
#   --from-build  package the binaries already built in DIR (DIR/megatrain or,
#                 for DIR=build, ./megatrain; DIR/tests/..., DIR/bench/...)
#                 instead of building: quick, for the bundle test. Without it
#                 the script builds in build-portable/ (BUILD=build-portable:
#                 the developer's build/ is untouched), which takes a while.
#   --limit-mib   size limit (default: 64 MiB minus the repo's tracked files
#                 minus 1 MiB, what the device tool carries in one call)
# Then, on the GPU machine: bash OUTDIR/gpu-check.sh RESULTS_DIR (docs/cuda.md).
# Exit: 0 bundle written; 1 build or collection failed or over the limit;
# 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
from=""; out=dist/gpu-bundle; limit_mib=""
while [ $# -gt 0 ]; do
  case $1 in
    --from-build) from=${2:?--from-build needs a build folder}; shift 2;;
    --limit-mib) limit_mib=${2:?--limit-mib needs a number}; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    -*) echo "gpu-bundle.sh: unknown option '$1' (expected --from-build DIR, --limit-mib N, OUTDIR)" >&2; exit 2;;
    *) out=$1; shift;;
  esac
done

# ---- 1. binaries
TOOLS=(tests/test_cuda_table tests/tools/cuda_parity tests/tools/comm_check bench/bench_gpu)
if [ -z "$from" ]; then
  from=build-portable
  echo "== building in $from (PORTABLE=1 CUDA=1)"
  mkdir -p "$from"
  nice make -j"$(nproc)" PORTABLE=1 CUDA=1 BUILD=$from BIN=$from/megatrain \
    $from/megatrain "${TOOLS[@]/#/$from/}" >"$from/gpu-bundle-build.log" 2>&1 ||
    { echo "gpu-bundle.sh: build failed; last lines of $from/gpu-bundle-build.log:" >&2
      tail -20 "$from/gpu-bundle-build.log" >&2; exit 1; }
fi
[ -d "$from" ] || { echo "gpu-bundle.sh: build folder '$from' not found" >&2; exit 2; }
mtbin=$from/megatrain
[ -x "$mtbin" ] || { [ "$from" = build ] && mtbin=./megatrain; }
[ -x "$mtbin" ] || { echo "gpu-bundle.sh: no megatrain binary in '$from' (expected $from/megatrain)" >&2; exit 1; }
grep -q -- '-DMT_HAVE_CUDA=1' "$from/.flags" 2>/dev/null ||
  echo "gpu-bundle.sh: WARNING: $from was not built with CUDA=1 (its .flags lack MT_HAVE_CUDA): the GPU steps will fail" >&2
grep -q -- '-march=native' "$from/.flags" 2>/dev/null &&
  echo "gpu-bundle.sh: WARNING: $from was built with -march=native (not PORTABLE=1): it may not run on another CPU" >&2

rm -rf "$out"; mkdir -p "$out"/{bin/real,lib/glibc,lib/openmpi,lib/pmix,lib/compat,share/openmpi,share/pmix,etc,data,tests/configs,configs,bench,scripts}
out=$(cd "$out" && pwd)
declare -A origin   # bundle-relative path -> where it came from
put() { # src dest-relative
  cp -L "$1" "$out/$2"; chmod u+w "$out/$2"; origin[$2]=$1
}
put "$mtbin" bin/real/megatrain
for t in "${TOOLS[@]}"; do
  if [ -x "$from/$t" ]; then put "$from/$t" "bin/real/$(basename "$t")"
  else echo "gpu-bundle.sh: WARNING: $from/$t not built: left out (its gpu-check step will fail)" >&2; fi
done

# ---- 2. OpenMPI runtime (Debian's 4.1 layout; ompi_info --path all)
ompi_path() { ompi_info --path all 2>/dev/null | sed -n "s/^ *$1: //p" | head -1; }
command -v ompi_info >/dev/null || { echo "gpu-bundle.sh: ompi_info not found (OpenMPI 4.1 expected)" >&2; exit 1; }
pkglib=$(ompi_path Pkglibdir); pkgdata=$(ompi_path Pkgdatadir); sysconf=$(ompi_path Sysconfdir); bindir=$(ompi_path Bindir)
put "$(readlink -f "$bindir/orterun")" bin/real/mpirun
put "$bindir/orted" bin/real/orted
put "$bindir/ompi_info" bin/real/ompi_info
# plugins, less those for fabrics a one-node run never uses (their libraries
# are big and absent on the target: UCX, OFI/libfabric, PSM, verbs, Java)
# and OpenSHMEM's (liboshmem)
for p in "$pkglib"/*.so; do
  case $(basename "$p") in *ucx*|*ofi*|*psm*|*openib*|*verbs*|*java*|*flux*|*memheap*|*scoll*|*spml*|*sshmem*|*atomic*) continue;; esac
  put "$p" "lib/openmpi/$(basename "$p")"
done
for f in "$pkgdata"/help-*.txt "$pkgdata"/amca-param-sets; do [ -e "$f" ] && cp -r "$f" "$out/share/openmpi/"; done
# PMIx (OpenMPI 4.1's external PMIx): its plugins and help files
pmixlib=$(dirname "$(readlink -f "$(ldconfig -p | sed -n 's/.*libpmix.so.2 .*=> //p' | head -1)")")
if [ -d "$pmixlib/pmix" ]; then
  for p in "$pmixlib"/pmix/*.so; do put "$p" "lib/pmix/$(basename "$p")"; done
  [ -d "$pmixlib/../share/pmix" ] && cp "$pmixlib"/../share/pmix/help-*.txt "$out/share/pmix/" 2>/dev/null || true
fi
{ echo "# megatrain GPU bundle: OpenMPI MCA defaults (env.sh sets OPAL_SYSCONFDIR to this folder)"
  # Debian's exclusions less its btl/pml lines (ours follow), then ours
  grep -v '^#' "$sysconf/openmpi-mca-params.conf" 2>/dev/null | grep -Ev '^ *(btl|pml) *=' | grep . || true
  echo "btl = self,vader,tcp"
  echo "pml = ob1"
  echo "btl_vader_single_copy_mechanism = none"
  echo "rmaps_base_oversubscribe = 1"
  echo "hwloc_base_binding_policy = none"
} > "$out/etc/openmpi-mca-params.conf"

# ---- 3. shared libraries: the closure of every ELF above, less glibc and CUDA
is_system() { # soname -> 0 when taken from the target machine
  case $1 in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnss_*|libmvec.so*) return 0;;
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvidia-*|libnvrtc*|libnvJitLink*) return 0;;
  esac
  return 1
}
is_glibc() { case $1 in ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnss_*|libmvec.so*) return 0;; esac; return 1; }
missing=()
for e in "$out"/bin/real/* "$out"/lib/openmpi/*.so "$out"/lib/pmix/*.so; do
  while read -r name _ path _; do
    # glibc's own libraries that something needs go to lib/glibc (libmvec ...)
    if is_glibc "$name" && [ -e "$path" ]; then [ -e "$out/lib/glibc/$name" ] || put "$path" "lib/glibc/$name"; continue; fi
    is_system "$name" && continue
    if [ "$path" = "not" ] || [ ! -e "$path" ]; then missing+=("$name (needed by ${e#$out/})"); continue; fi
    # the C++ runtime goes to lib/compat: env.sh uses the target's own
    # when it is at least as new (cuBLAS and NCCL may need the newer one)
    case $name in libstdc++.so*|libgcc_s.so*) d=lib/compat;; *) d=lib;; esac
    [ -e "$out/$d/$name" ] || put "$path" "$d/$name"
  done < <(ldd "$e" 2>/dev/null | awk '/=>/ {print $1, $2, $3, $4}')
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-bundle.sh: libraries not found here: ${missing[*]}" >&2; exit 1
fi
# ---- 3b. glibc: the loader the binaries name (PT_INTERP) and the libraries
# of that same build (the folder of the libc.so.6 they resolve to), so that
# a machine with an older glibc runs them through lib/glibc's loader.
# libnss_files/dns are stubs since 2.34 (built into libc); libnss_compat is
# what an nsswitch.conf "compat" line loads (getpwuid in OpenMPI).
interp=$(readelf -l "$out/bin/real/megatrain" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -n "$interp" ] && [ -e "$interp" ] || { echo "gpu-bundle.sh: cannot find the program interpreter of megatrain ('$interp')" >&2; exit 1; }
ldname=$(basename "$interp")
libcdir=$(dirname "$(ldd "$out/bin/real/megatrain" | awk '$1 == "libc.so.6" {print $3}')")
[ -e "$out/lib/glibc/$ldname" ] || put "$interp" "lib/glibc/$ldname"
chmod 755 "$out/lib/glibc/$ldname"
for l in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libutil.so.1 \
         libnss_files.so.2 libnss_dns.so.2 libnss_compat.so.2; do
  [ -e "$out/lib/glibc/$l" ] && continue
  if [ -e "$libcdir/$l" ]; then put "$libcdir/$l" "lib/glibc/$l"
  else case $l in libc.so*|libm.so*) echo "gpu-bundle.sh: $libcdir/$l not found" >&2; exit 1;; esac; fi
done
glibc_ver=$("$out/lib/glibc/$ldname" --version 2>/dev/null | sed -n '1s/.*version \([0-9.]*[0-9]\).*/\1/p')
[ -n "$glibc_ver" ] || { echo "gpu-bundle.sh: the bundled loader lib/glibc/$ldname does not run ('--version')" >&2; exit 1; }
# ---- 3c. wrappers: bin/NAME runs bin/real/NAME natively or through the
# bundled loader, as env.sh decided (MT_BUNDLE_MODE native|loader); argv[0]
# stays bin/NAME either way (OpenMPI's messages, usage lines)
for r in "$out"/bin/real/*; do
  n=$(basename "$r")
  sed "s/@NAME@/$n/g; s/@LD@/$ldname/g" > "$out/bin/$n" <<'EOF'
#!/usr/bin/env bash
# megatrain GPU bundle (scripts/gpu-bundle.sh): runs bin/real/@NAME@ natively,
# or through the bundled glibc's loader when env.sh chose that (MT_BUNDLE_MODE).
b=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${MT_BUNDLE:-}" != "$b" ] || [ -z "${MT_BUNDLE_MODE:-}" ]; then source "$b/env.sh" || exit 1; fi
if [ "$MT_BUNDLE_MODE" = loader ]; then
  exec "$b/lib/glibc/@LD@" --argv0 "$0" --library-path "$MT_LOADER_LIBRARY_PATH" "$b/bin/real/@NAME@" "$@"
fi
exec -a "$0" "$b/bin/real/@NAME@" "$@"
EOF
  chmod 755 "$out/bin/$n"; origin[bin/$n]="wrapper of bin/real/$n (gpu-bundle.sh)"
done
strip --strip-unneeded "$out"/bin/real/* "$out"/lib/*.so* "$out"/lib/compat/*.so* "$out"/lib/openmpi/*.so "$out"/lib/pmix/*.so 2>/dev/null || true
# the glibc floor of the native mode: the newest GLIBC_ symbol version that
# a bundled program or library (lib/glibc aside) needs
need_glibc=$(for f in "$out"/bin/real/* "$out"/lib/*.so* "$out"/lib/compat/*.so* "$out"/lib/openmpi/*.so "$out"/lib/pmix/*.so; do
    objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*[0-9]'; done | sort -uV | tail -1 | sed 's/GLIBC_//')
# libraries over 8 MiB (OpenBLAS: 36 MiB, all its CPU kernels) travel
# gzipped; env.sh unpacks them in place at first use (gzip is everywhere)
for l in "$out"/lib/*.so*; do
  [ "$(stat -c %s "$l")" -gt 8388608 ] || continue
  gzip -6 "$l"; origin[lib/$(basename "$l").gz]="${origin[lib/$(basename "$l")]} (gzip; env.sh unpacks it)"
done

# ---- 4. scripts, configs, data
cp scripts/gpu-check.sh "$out/gpu-check.sh"
cp scripts/gpu-bundle-env.sh "$out/env.sh"
cp tests/configs/*.json "$out/tests/configs/"
cp configs/gpt-moe.json configs/gpt-tiny.json "$out/configs/"
cp bench/bench_gpu.sh "$out/bench/"
ds=build/testdata/tinyshakespeare_text_document
if [ ! -f "$ds.idx" ]; then
  shared=${MEGATRAIN_SHARED_DATA:-$ROOT/../shared/data}
  [ -f "$shared/tinyshakespeare.txt" ] || { echo "gpu-bundle.sh: $ds.idx missing and $shared/tinyshakespeare.txt not found to make it (scripts/prepare-data.sh)" >&2; exit 1; }
  mkdir -p build/testdata
  "$mtbin" preprocess --input "$shared/tinyshakespeare.txt" --output-prefix "$ds.tmp" \
    --vocab-file "$shared/gpt2-vocab.json" --merge-file "$shared/gpt2-merges.txt" --append-eod --workers 2 >/dev/null
  mv "$ds.tmp.bin" "$ds.bin"; mv "$ds.tmp.idx" "$ds.idx"
fi
put "$ds.bin" data/tinyshakespeare_text_document.bin
put "$ds.idx" data/tinyshakespeare_text_document.idx

# ---- 5. manifest and size
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
{
  echo "# megatrain GPU bundle"
  echo "# made:   $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(uname -m))"
  echo "# commit: $commit"
  echo "# binaries from: $from"
  echo "# build flags ($from/.flags): $(cat "$from/.flags" 2>/dev/null || echo unknown)"
  echo "# OpenMPI: $(ompi_info --version 2>/dev/null | head -1)"
  echo "# nvcc: $("${NVCC:-/usr/local/cuda/bin/nvcc}" --version 2>/dev/null | grep -m1 release || echo none)"
  echo "# not bundled (taken from the target): libcuda, libcudart, libcublas(Lt), libnccl"
  echo "# needs glibc: $need_glibc"
  echo "# bundled glibc: $glibc_ver (lib/glibc, loader $ldname: used when the machine's glibc is older than $need_glibc, or GPU_BUNDLE_LOADER=1)"
  echo "# size_bytes sha256 path origin"
  (cd "$out" && find . -type f ! -name MANIFEST | sed 's|^\./||' | sort) | while read -r f; do
    printf '%s %s %s %s\n' "$(stat -c %s "$out/$f")" "$(sha256sum "$out/$f" | cut -d' ' -f1)" "$f" "${origin[$f]:-repo:$f}"
  done
} > "$out/MANIFEST"
total=$(du -sb "$out" | cut -f1)
if [ -z "$limit_mib" ]; then
  # disk usage of the tracked files (du, whole blocks: the larger measure)
  repo=$(( $(git ls-files -z | xargs -0 du -ck 2>/dev/null | awk '$2 == "total" {s += $1} END {print s + 0}') * 1024 ))
  limit=$(( 64 * 1048576 - repo - 1048576 ))
  why="64 MiB - repo's tracked files ($((repo / 1024)) KiB) - 1 MiB"
else
  limit=$(( limit_mib * 1048576 )); why="--limit-mib $limit_mib"
fi
printf 'bundle %s: %d files, %.1f MiB (limit %.1f MiB = %s)\n' "$out" "$(find "$out" -type f | wc -l)" \
  "$(echo "$total / 1048576" | bc -l)" "$(echo "$limit / 1048576" | bc -l)" "$why"
[ "$total" -le "$limit" ] || { echo "gpu-bundle.sh: bundle over the limit" >&2; exit 1; }
echo "run on the GPU machine: bash $out/gpu-check.sh RESULTS_DIR"
