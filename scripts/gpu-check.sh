#!/usr/bin/env bash
# scripts/gpu-check.sh — the one-command GPU check, run FROM A GPU BUNDLE
# (scripts/gpu-bundle.sh; no build step, nothing but the CUDA toolkit/driver
# needed on the machine). Steps, each time-limited, line-buffered and logged
# to OUTDIR/<step>.log:
#   probe    GPU name, driver, CUDA version the driver supports vs the one the
#            bundle was built with and the libcudart found (MAJOR versions
#            compared: minor-version compatibility; a newer minor is a NOTE),
#            where libcudart/libcublas were found, the libnccl.so.2 the
#            nccl engine will load (a NOTE when none); the bundle's OpenMPI (mpirun -np 2
#            hostname). Aborts the run when no GPU is visible or the
#            driver's major CUDA version is too old.
#   ops      cuda_parity fp32 and bf16 at tiny and realistic shapes (with
#            CUDA_LAUNCH_BLOCKING=1, so a fault names its op), test_cuda_table
#   trainer  tests/configs/gpt-test.json, 10 steps: fp32 cuda (the default
#            engine, nccl: size-1 groups, no communicator) vs cpu within
#            1e-4 relative per step (lm loss, grad norm, val loss); bf16 cuda
#            (mpi engine) vs fp32 cpu within 2e-2
#   mpi      the mpi engine with all ranks on GPU 0: configs/gpt-moe.json on
#            8 ranks (10 steps; first), tp=2+SP, pp=2 (1F1B), pp=2 v=2, dp=2
#            ZeRO-3 (gpt-test, 4 layers), each vs its 1-rank run within 1e-4
#   nccl     the NCCL engine on one rank (MEGATRAIN_NCCL_SIZE1=1: a real
#            1-rank communicator): the trainer vs the mpi-engine run within
#            1e-4, and comm_check's NCCL collectives
#   bench    bench/bench_gpu.sh: tokens/s, TFLOP/s, MFU (GPT 124M/350M/1.3B,
#            Llama 1.2B)
# Every run's wall time goes to its step log and OUTDIR/run_times.txt (the
# summary lists them). A trainer/mpi/nccl run whose log shows a CUDA fault
# is rerun once (time permitting, <= 20 s) with CUDA_LAUNCH_BLOCKING=1 so the
# faulting op is named; the check goes on after a fault (each run is a
# fresh process) unless nvidia-smi stops answering.
# A SKIP (exit 77) is a FAIL: a GPU is visible. Ends with a one-screen summary
# (PASS/FAIL per step with its time, the worst parity figure, the MFU table)
# printed and written to OUTDIR/summary.txt. Exit 0 only when every step
# passed; 1 otherwise (no GPU: one "no GPU" line, summary.txt says so);
# 2 usage. Budget: about 8 minutes on one H100/H200.
#
# usage: bash BUNDLE/gpu-check.sh OUTDIR
#        bash scripts/gpu-check.sh [--bundle DIR] OUTDIR   (DIR default dist/gpu-bundle)
# env:   GPU_CHECK_STEPS="probe ops trainer mpi nccl bench" (a subset; probe always runs)
#        GPU_CHECK_BENCH_STEPS=3 (timed iterations per bench shape), GPU_CHECK_BENCH_ACCUM=8
#        (micro-batches per iteration)
#        GPU_CHECK_NCCL_COMM="comm_check --engine nccl" (the comm check's NCCL mode)
#        GPU_CHECK_TIME_SCALE=N multiplies every time limit (slow machines)
#        GPU_CHECK_BUDGET=520 the whole check's deadline in seconds (steps
#        that would pass it get what is left)
#        GPU_CHECK_DEVICE=cpu: a dry run of the check's own logic on a machine
#        without a GPU (trainer and mpi steps on the cpu backend with
#        MEGATRAIN_TEST_DEVICE_BUFFERS=1, ops/nccl/bench left out); never a pass
#        of the GPU check (its summary says DRY RUN; exit 0 when those pass)
set -u
here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "$0")
# what a CUDA fault (or a dead GPU / NCCL failure) prints: FAULT matched
# case-insensitively, plus NVIDIA's kernel-log form "Xid" (XID: the word,
# case-sensitive, so that no "xid" inside another word matches)
FAULT="illegal memory|illegal instruction|illegal address|misaligned address|unspecified launch failure|device-side assert|cudaErrorLaunch[A-Za-z]*|cudaErrorIllegal[A-Za-z]*|cudaErrorMisaligned[A-Za-z]*|cudaErrorAssert|NCCL error"
XID='\bXid\b'
# fault_line FILE: the first fault line of FILE (empty when none)
fault_line() { { grep -m1 -iE "$FAULT" "$1"; grep -m1 -E "$XID" "$1"; } 2>/dev/null | head -1; }
# each step's limit covers the limits of the runs inside it (plus a few
# seconds of slack); 480 s in all, plus 5 s of kill grace per step; the
# whole check also has a deadline (GPU_CHECK_BUDGET, default 520 s from its
# start: a step that would pass it gets what is left, one that cannot get
# 10 s is not run), so that the check with its summary always ends inside
# the device tool's `timeout -k 5 560` with time to spare:
#   probe   30: nvidia-smi twice (8 each at most; ~1 s normally), the
#               library probe, mpirun -np 2 hostname (10); a probe that
#               times out is a FAIL after which the other steps still run
#   ops    110: cuda_parity 12+33 (fp32 tiny, realistic) + 12+33 (bf16) + test_cuda_table 15 = 105
#   trainer 45: cpu_fp32 15 + cuda_fp32 15 + cuda_bf16 12 = 42
#   mpi    130: moe_8 35 + moe_1 14 + base4 14 + tp2_sp, pp2_1f1b, pp2_v2, dp2_zero3 4x14 = 119
#   nccl    35: nccl_1rank 14 + comm_check 16 = 30 (+15 when the trainer step
#               did not run in this invocation: the step then makes its own
#               reference run, cuda_fp32, first; GPU_CHECK_STEPS=nccl alone
#               works)
#   bench  130: 4 shapes x 31 = 124
# Within a step no run outlives the step: each run's limit is cut to what
# the step has left (GPU_CHECK_STEP_END), and one that cannot get 5 s is
# not started (and reported).
STEP_LIMITS="probe:30 ops:110 trainer:45 mpi:130 nccl:35 bench:130"

# ---- one step, run as a child of this script: gpu-check.sh --run-step NAME OUTDIR BUNDLE
if [ "${1:-}" = --run-step ]; then
  step=$2; O=$3; B=$4
  source "$B/env.sh"
  export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
  ub=""; command -v stdbuf >/dev/null && ub="stdbuf -oL -eL"
  PY=python3; command -v python3 >/dev/null || PY=/usr/bin/python3
  DATA="[\"$B/data/tinyshakespeare_text_document\"]"
  W=$O/work; mkdir -p "$W"
  TS=${GPU_CHECK_TIME_SCALE:-1}
  END=${GPU_CHECK_STEP_END:-$(( $(date +%s) + 3600 ))}
  # left: seconds this step has left, minus 3 for its own bookkeeping
  left() { echo $(( END - $(date +%s) - 3 )); }
  # cap LIMIT: LIMIT cut to what the step has left
  cap() { local l; l=$(left); [ "$1" -lt "$l" ] && l=$1; echo "$l"; }
  # wall NAME SECONDS LIMIT [EXIT]: one run's wall time, in the log and in
  # OUTDIR/run_times.txt (to size a rerun from real numbers)
  wall() { echo "   wall ${2}s (limit ${3}s${4:+, exit $4})"; echo "$step $1 ${2}s limit ${3}s${4:+ exit $4}" >> "$O/run_times.txt"; }
  DEV=cuda
  # RL: the run-name prefix of the trainer/nccl steps' device runs, named by
  # the device actually used ("dry_cpu" in the dry run, beside the cpu_fp32
  # reference)
  RL=cuda
  if [ "${GPU_CHECK_DEVICE:-cuda}" = cpu ]; then DEV=cpu; RL=dry_cpu; export MEGATRAIN_TEST_DEVICE_BUFFERS=1; fi
  # parallel.distributed_backend (issue 19): a binary without it cannot run
  # the mpi engine on device buffers
  HAS_BK=0; grep -qa 'distributed_backend' "$B/bin/real/megatrain" && HAS_BK=1
  bk() { [ $HAS_BK = 1 ] && echo "--set parallel.distributed_backend=$1"; }
  note() { echo "$*" >> "$W/$step.note"; echo "NOTE: $*"; }
  # run NAME NP TIMEOUT megatrain-args...: one training run (NP ranks, all on
  # GPU 0 when the device is cuda), metrics in $W/NAME.jsonl, log $W/NAME.log;
  # returns 1 when it fails (the step goes on with its other runs: more
  # findings per GPU minute)
  run() {
    local name=$1 np=$2 lim=$(( $3 * TS )) blk=""; shift 3
    local cmd=("$B/bin/megatrain" --set data.data_path="$DATA" --set checkpoint.save=null
               --set checkpoint.save_interval=0 --set logging.log_interval=1
               --set logging.metrics_file="$W/$name.jsonl" "$@")
    echo "-- $name (np $np): ${cmd[*]##*/bin/}"
    local r t0 l try log=$W/$name.log
    # try 1: as users run it; try 2 (only after a CUDA fault, time
    # permitting): CUDA_LAUNCH_BLOCKING=1, so the fault surfaces at the
    # faulting op instead of at the next synchronising call
    for try in 1 2; do
      l=$(cap "$lim")
      if [ "$l" -lt 5 ]; then
        echo "   NOT RUN: the step has ${l}s left"; note "$name${blk:+ (CUDA_LAUNCH_BLOCKING=1 rerun)} not run: the step's time was used up"
        [ $try = 1 ] && return 1 || break
      fi
      t0=$(date +%s)
      if [ "$np" = 1 ]; then env $blk timeout -k 5 "$l" $ub "${cmd[@]}" >"$log" 2>&1; r=$?
      else env $blk timeout -k 5 "$l" mpirun -np "$np" --oversubscribe --bind-to none -x PATH -x LD_LIBRARY_PATH \
             -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS ${blk:+-x CUDA_LAUNCH_BLOCKING} \
             $ub "${cmd[@]}" >"$log" 2>&1; r=$?; fi
      [ $try = 1 ] && grep -m3 -E 'iteration +[0-9]+/' "$log" | sed 's/^/   /'
      wall "$name${blk:+_blocking}" $(( $(date +%s) - t0 )) "$l" "$([ $r != 0 ] && echo $r)"
      if [ $try = 2 ]; then
        local f2; f2=$(fault_line "$log" | cut -c1-150)
        note "$name rerun with CUDA_LAUNCH_BLOCKING=1 (work/$name.log): ${f2:-no fault this time (exit $r)}"
        break
      fi
      if [ $r -ne 0 ]; then
        echo "   FAILED (exit $r$([ $r = 124 ] && echo ": timed out after ${l}s")); last lines of $log:"
        tail -15 "$log" | sed 's/^/   | /'
        note "$name failed (exit $r): $(grep -m1 -iE 'cannot load|error|fault|illegal|abort|fatal' "$log" | cut -c1-150)"
      fi
      # a CUDA fault: keep this log, rerun once with CUDA_LAUNCH_BLOCKING=1
      [ "$DEV" = cuda ] && [ -n "$(fault_line "$log")" ] || break
      [ "${CUDA_LAUNCH_BLOCKING:-0}" = 1 ] && break
      echo "   CUDA fault: $(fault_line "$log" | cut -c1-150)"
      echo "   rerunning $name once with CUDA_LAUNCH_BLOCKING=1 (the faulting op named); first log kept as $name.fault1.log"
      mv -f "$log" "$W/$name.fault1.log"; log=$W/$name.log; blk="CUDA_LAUNCH_BLOCKING=1"
      lim=$(( lim < 20 * TS ? lim : 20 * TS ))
      # a GPU that stopped answering tells nothing more
      timeout 20 nvidia-smi -L >/dev/null 2>&1 || { note "the GPU stopped answering (nvidia-smi) after $name"; break; }
    done
    [ -n "$blk" ] && return 1
    [ $r -eq 0 ]
  }
  # compare NAME REF TOL: per-iteration lm_loss, grad_norm, val_loss within
  # TOL relative; prints the worst figure (and appends it to
  # $W/parity_STEP.txt); returns 1 beyond TOL
  compare() {
    "$PY" - "$W/$1.jsonl" "$W/$2.jsonl" "$3" "$1" "$2" "$W/parity_$step.txt" <<'PY'

import json, sys
def load(p):
    d = {}
    for line in open(p):
        o = json.loads(line)
        if "lm_loss" in o:
            d[o["iteration"]] = o
    return d
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
name = "%s vs %s" % (sys.argv[4], sys.argv[5])
if not a or a.keys() != b.keys():
    print("   %s: iterations differ: %s vs %s" % (name, sorted(a), sorted(b))); sys.exit(1)
worst, where = 0.0, ""
for it in sorted(a):
    for k in ("lm_loss", "grad_norm", "val_loss"):
        if (k in a[it]) != (k in b[it]):
            print("   %s: iteration %d has %s in one run only" % (name, it, k)); sys.exit(1)
        if k not in a[it]:
            continue
        x, y = a[it][k], b[it][k]
        r = abs(x - y) / max(abs(y), 1e-30) if x == x and y == y else float("inf")
        if r > worst or r != r:
            worst, where = r, "iteration %d %s %.8g vs %.8g" % (it, k, x, y)
print("   %s: worst rel diff %.3e (tol %g) at %s" % (name, worst, tol, where))
with open(sys.argv[6], "a") as f:
    f.write("%.3e %s (tol %g)\n" % (worst, name, tol))
sys.exit(0 if worst <= tol else 1)
PY
  }
  # cmp_ref NAME REF TOL: compare when the reference run left metrics, else say so
  cmp_ref() {
    if [ -s "$W/$2.jsonl" ]; then compare "$@"
    else note "$1 not compared: its reference run $2 left no metrics"; return 1; fi
  }
  # worst: the comparison closest to (or furthest past) its tolerance, by
  # figure / tolerance (comparisons of one step may have other tolerances:
  # fp32 1e-4 beside bf16 2e-2); a step of at most two comparisons notes both
  worst() {
    [ -s "$W/parity_$step.txt" ] || return 0
    if [ "$(wc -l < "$W/parity_$step.txt")" -le 2 ]; then
      while IFS= read -r l; do note "$l"; done < "$W/parity_$step.txt"
    else
      note "worst $(awk '{ t = $NF; sub(/\)$/, "", t); t += 0
                            if (tolower($1) ~ /^[-+]?(inf|nan)/) r = 1e300; else r = t > 0 ? ($1 + 0) / t : 0
                            if (NR == 1 || r > w) { w = r; l = $0 } } END { print l }' "$W/parity_$step.txt")"
    fi
  }
  case $step in
  probe)
    echo "== GPU"
    # nvidia-smi twice in all (each call may pay the driver's start-up
    # without persistence mode)
    smi=$(timeout 8 nvidia-smi 2>&1) || { echo "$smi"; note "nvidia-smi failed"; exit 1; }
    echo "$smi"
    q=$(timeout 8 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1 | head -1)
    echo "$q"
    # several ranks share GPU 0 in the mpi step: an exclusive compute mode
    # refuses the second process, whatever the code does
    case $q in *Exclusive*|*Prohibited*)
      note "compute mode '${q##*, }': Exclusive_Process lets one process at a time use the GPU (the multi-rank runs of the mpi step will fail for that reason), Prohibited none";; esac
    drv_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' <<< "$smi" | head -1)
    built=$(sed -n 's/^# nvcc: .*release \([0-9.]*\),.*/\1/p' "$B/MANIFEST")
    echo "driver supports CUDA $drv_cuda; bundle built with CUDA ${built:-unknown}"
    # CUDA minor-version compatibility: a 13.x runtime runs on any driver of
    # CUDA 13 (R580+), and the bundle carries sm_80/sm_90 SASS (no PTX JIT):
    # only a driver of an older MAJOR version is too old; a newer minor is a NOTE
    # vcheck WHAT VERSION: exit 1 when VERSION's major is above the driver's
    vcheck() {
      [ -n "$drv_cuda" ] && [ -n "$2" ] || return 0
      if [ "${2%%.*}" -gt "${drv_cuda%%.*}" ]; then
        note "driver too old: it supports CUDA $drv_cuda, $1 is CUDA $2 (a newer major version; driver >= 580 for CUDA 13)"; exit 1
      elif [ "$(printf '%s\n%s\n' "$2" "$drv_cuda" | sort -V | head -1)" != "$2" ]; then
        note "$1 is CUDA $2, newer than the driver's $drv_cuda: same major version, so minor-version compatibility applies (not a failure)"
      fi
    }
    vcheck "the bundle (built with)" "$built"
    # glibc: native, or every bundled program through the bundled loader
    # (env.sh decided; GPU_BUNDLE_LOADER=1/0 forces one)
    echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') here; $(grep -m1 '^# bundled glibc:' "$B/MANIFEST" | cut -c3-)"
    echo "glibc mode: $MT_BUNDLE_MODE_WHY"
    if [ "$MT_BUNDLE_MODE" = loader ]; then
      lv=$("$MT_LOADER" --version 2>&1); lr=$?; lv=$(head -1 <<< "$lv")
      if [ $lr != 0 ]; then
        note "the bundled loader does not start here ('$MT_LOADER --version': $lv); $MT_BUNDLE_MODE_WHY: build the bundle on an older distribution"
        exit 1
      fi
      echo "bundled loader: $lv"
    fi
    note "$MT_BUNDLE_MODE_WHY"
    mtl=$(mt_ldd "$B/bin/real/megatrain" 2>&1)
    echo "== libraries ($MT_BUNDLE_MODE mode; LD_LIBRARY_PATH=$LD_LIBRARY_PATH${MT_LOADER_LIBRARY_PATH:+; loader --library-path $MT_LOADER_LIBRARY_PATH})"
    grep -E 'libc\.so|cuda|cublas|stdc\+\+|not found|GLIBC' <<< "$mtl"
    if grep -qE 'not found' <<< "$mtl"; then
      note "libraries not found: $(grep 'not found' <<< "$mtl" | awk '{print $1}' | sort -u | tr '\n' ' ')(searched MT_CUDA_LIBDIRS=${MT_CUDA_LIBDIRS:-})"
      exit 1
    fi
    p=$(awk 'index($1, "libcudart") == 1 {print $3; exit}' <<< "$mtl")
    echo "libcudart: $p -> $(readlink -f "$p")"
    # cuBLAS is loaded at run time by the cuda backend (cuda/cublas_api.c:
    # dlopen("libcublas.so.13"), the same search as NCCL's below); without
    # it every cuda run fails at its start, so it ends the check here
    cl=$("$PY" -c 'import ctypes, sys
try:
    ctypes.CDLL("libcublas.so.13")
except OSError as e:
    print("FAIL", e); sys.exit(0)
p = [x.split()[-1] for x in open("/proc/self/maps") if "libcublas.so" in x]
print("OK", p[0] if p else "libcublas.so.13")' 2>&1 | tail -1)
    case $cl in
      OK\ *) echo "libcublas.so.13 (loaded at run time by the cuda backend): ${cl#OK } -> $(readlink -f "${cl#OK }")";;
      *) note "dlopen(\"libcublas.so.13\") from $PY with this LD_LIBRARY_PATH failed (${cl#FAIL }); the cuda backend loads cuBLAS the same way, so every cuda run would fail (searched MT_CUDA_LIBDIRS=${MT_CUDA_LIBDIRS:-})"
         exit 1;;
    esac
    # NCCL is loaded at run time by the nccl engine (parallel/nccl_api.c:
    # dlopen("libnccl.so.2"): LD_LIBRARY_PATH, the run path, the ldconfig
    # cache, the default folders); python3's dlopen by the same name with
    # this LD_LIBRARY_PATH shows what it finds (the file from
    # /proc/self/maps) and its version. Only runs that call NCCL need it.
    nl=$("$PY" -c 'import ctypes, sys
try:
    l = ctypes.CDLL("libnccl.so.2")
except OSError as e:
    print("FAIL", e); sys.exit(0)
p = [x.split()[-1] for x in open("/proc/self/maps") if "libnccl" in x]
v = ctypes.c_int(0); r = l.ncclGetVersion(ctypes.byref(v)); c = v.value
if r != 0 or c <= 0: ver = "version unknown (ncclGetVersion returned %d)" % r
elif c >= 10000: ver = "%d.%d.%d" % (c // 10000, c // 100 % 100, c % 100)
else: ver = "%d.%d.%d" % (c // 1000, c // 100 % 10, c % 100)
old = " (older than 2.10: the NCCL engine refuses it)" if 0 < c < 21000 else ""
print("OK", (p[0] if p else "libnccl.so.2"), "NCCL", ver + old)' 2>&1 | tail -1)
    case $nl in
      OK\ *) note "libnccl.so.2 (loaded at run time by the nccl engine): ${nl#OK } (candidates env.sh found, in search order: ${MT_NCCL_CANDIDATES:-none})";;
      *) note "dlopen(\"libnccl.so.2\") from $PY with this LD_LIBRARY_PATH failed (${nl#FAIL }); the NCCL engine searches the same way, so the runs that call NCCL (nccl step) are expected to fail with its load message; the other steps do not need NCCL";;
    esac
    # the runtime found (libcudart.so.13.0.96 -> 13.0) must not be newer than the driver
    # cudaRuntimeGetVersion / cudaDriverGetVersion of that libcudart (no GPU needed)
    crt=$(awk '/libcudart/ {print $3; exit}' <<< "$mtl")
    read -r rt drt < <("$PY" -c 'import ctypes, sys
l = ctypes.CDLL(sys.argv[1]); r = ctypes.c_int(0); d = ctypes.c_int(0)
l.cudaRuntimeGetVersion(ctypes.byref(r)); l.cudaDriverGetVersion(ctypes.byref(d))
f = lambda v: "%d.%d" % (v // 1000, v % 1000 // 10)
print(f(r.value), f(d.value))' "$crt" 2>/dev/null)
    echo "cudaRuntimeGetVersion ${rt:-?}, cudaDriverGetVersion ${drt:-?}"
    echo "CUDA runtime found: ${rt:-unknown}"
    vcheck "the CUDA runtime found (libcudart)" "$rt"
    echo "== OpenMPI from the bundle"
    ompi_info --path all | grep -E 'Prefix|Pkglibdir|Pkgdatadir|Sysconfdir'
    gpu=$(cut -d, -f1,2 <<< "$q")
    note "$gpu, driver CUDA $drv_cuda, bundle CUDA ${built:-?}, runtime ${rt:-?}"
    # exit 3: a FAIL after which the steps still run (the single-process
    # ones do not need mpirun; the multi-rank runs will show the same error)
    timeout 10 mpirun -np 2 hostname || { note "bundled mpirun -np 2 hostname failed"; exit 3; }
    ;;
  ops)
    export CUDA_LAUNCH_BLOCKING=1
    # the CPU references of the realistic shapes are big GEMMs: every core
    n=$(nproc 2>/dev/null || echo 8); export OPENBLAS_NUM_THREADS=$n OMP_NUM_THREADS=$n
    rc=0
    for prec in fp32 bf16; do
      for shape in tiny realistic; do
        echo "== cuda_parity $prec $shape"
        lim=12; [ $shape = realistic ] && lim=33
        lim=$(cap $(( lim * TS ))); t0=$(date +%s)
        [ "$lim" -ge 5 ] || { note "cuda_parity $prec $shape not run: the step's time was used up"; rc=1; continue; }
        timeout -k 5 $lim $ub "$B/bin/cuda_parity" "$prec" "$shape" 2>&1 | tee "$W/parity_${prec}_$shape.log"
        r=${PIPESTATUS[0]}
        wall "cuda_parity_${prec}_$shape" $(( $(date +%s) - t0 )) "$lim" "$([ $r != 0 ] && echo $r)"
        [ $r = 0 ] || { note "cuda_parity $prec $shape: exit $r"; rc=1; }
        grep -q ' FAIL\|CUDA error\|illegal' "$W/parity_${prec}_$shape.log" && [ $r = 0 ] && rc=1
        # a fault names its op (the lead); each run is a fresh process, so
        # the next ones still tell something, unless the GPU stopped answering
        if [ -n "$(fault_line "$W/parity_${prec}_$shape.log")" ]; then
          note "CUDA fault in cuda_parity $prec $shape: $(fault_line "$W/parity_${prec}_$shape.log" | cut -c1-120)"; rc=1
          timeout 20 nvidia-smi -L >/dev/null 2>&1 || { note "the GPU stopped answering (nvidia-smi)"; exit 1; }
        fi
      done
    done
    # a cuda_parity without the realistic mode ignores the word and repeats
    # the tiny shapes: the same lines twice is no realistic check
    for prec in fp32 bf16; do
      if [ -s "$W/parity_${prec}_tiny.log" ] && cmp -s "$W/parity_${prec}_tiny.log" "$W/parity_${prec}_realistic.log"; then
        note "cuda_parity $prec realistic printed exactly what tiny did: no realistic mode in this build"; rc=1
      fi
    done
    echo "== test_cuda_table"
    lim=$(cap $(( 15 * TS ))); t0=$(date +%s)
    timeout -k 5 $lim $ub "$B/bin/test_cuda_table" 2>&1 | tee "$W/test_cuda_table.log"; r=${PIPESTATUS[0]}
    wall test_cuda_table $(( $(date +%s) - t0 )) "$lim" "$([ $r != 0 ] && echo $r)"
    [ $r = 0 ] || { note "test_cuda_table: exit $r"; rc=1; }
    # it passes without a GPU too; here a GPU is visible, so a backend it
    # could not create is a failure
    if grep -q 'cuda backend unavailable' "$W/test_cuda_table.log"; then
      note "test_cuda_table: $(grep -m1 'cuda backend unavailable' "$W/test_cuda_table.log" | cut -c1-150)"; rc=1
    fi
    # worst (error / tolerance) over every "max rel err E (tol T)" / "rel E (tol T)" line
    cat "$W"/parity_*.log | awk '
      match($0, /rel( err)? [0-9.e+-]+ \(tol [0-9.e+-]+\)/) {
        s = substr($0, RSTART, RLENGTH); gsub(/[()]/, "", s); n = split(s, f, " ")
        e = f[n - 2]; t = f[n]; if (t > 0 && e / t > w) { w = e / t; line = $0 } }
      END { if (line != "") { sub(/^ +/, "", line); printf "worst err/tol %.2f: %s\n", w, line } }' |
      while read -r l; do note "$l"; done
    exit $rc
    ;;
  trainer)
    cfg=(--config "$B/tests/configs/gpt-test.json" --set training.train_iters=10 --set training.eval_interval=10)
    rc=0
    # a failed reference does not hide the cuda runs (their faults, their losses)
    # cuda_fp32: the DEFAULT engine (on cuda "nccl": size-1 groups copy on
    # the device, no communicator), i.e. what `megatrain --config X --set
    # device=cuda` runs on one GPU; cuda_bf16 the mpi (staging) engine; the
    # multi-rank mpi-engine runs are in the mpi step
    run cpu_fp32 1 15 "${cfg[@]}" --set device=cpu || rc=1
    run ${RL}_fp32 1 15 "${cfg[@]}" --set device=$DEV && cmp_ref ${RL}_fp32 cpu_fp32 1e-4 || rc=1
    run ${RL}_bf16 1 12 "${cfg[@]}" --set device=$DEV $(bk mpi) --set training.precision=bf16 &&
      cmp_ref ${RL}_bf16 cpu_fp32 2e-2 || rc=1
    worst
    exit $rc
    ;;
  mpi)
    [ $HAS_BK = 1 ] || [ $DEV = cpu ] ||
      { note "this megatrain has no parallel.distributed_backend key (the mpi engine on device buffers)"; exit 1; }
    cfg=(--config "$B/tests/configs/gpt-test.json" --set training.train_iters=10 --set training.eval_interval=10
         --set model.num_layers=4 --set device=$DEV $(bk mpi))
    chk=(--set training.check_replicas_interval=1)
    rc=0
    moe=(--config "$B/configs/gpt-moe.json" --set training.train_iters=10 --set training.eval_interval=10
         --set training.eval_iters=1 --set device=$DEV $(bk mpi))
    # (tests/integration/test_cuda_layouts_accept.sh's GPU mode, one step of
    # each of 15 layouts, is not run here: it does not fit the 480 s and needs
    # the repository, not the bundle)
    # the most informative run first (8 ranks: tp2+SP, pp2, ep2, ZeRO-1 with
    # MoE), so that a step cut short still has it; then its 1-rank reference
    run moe_8 8 35 "${moe[@]}" --set training.check_replicas_interval=5; m8=$?
    run moe_1 1 14 "${moe[@]}" --set parallel.tensor_model_parallel_size=1 --set parallel.sequence_parallel=false \
        --set parallel.pipeline_model_parallel_size=1 --set parallel.expert_model_parallel_size=1 --set parallel.zero_stage=0 || rc=1
    [ $m8 = 0 ] && cmp_ref moe_8 moe_1 1e-4 || rc=1
    # a failed 1-rank reference does not hide the layouts' own failures
    run base4 1 14 "${cfg[@]}" || rc=1
    run tp2_sp 2 14 "${cfg[@]}" "${chk[@]}" --set parallel.tensor_model_parallel_size=2 \
        --set parallel.sequence_parallel=true && cmp_ref tp2_sp base4 1e-4 || rc=1
    run pp2_1f1b 2 14 "${cfg[@]}" "${chk[@]}" --set parallel.pipeline_model_parallel_size=2 &&
      cmp_ref pp2_1f1b base4 1e-4 || rc=1
    run pp2_v2 2 14 "${cfg[@]}" "${chk[@]}" --set parallel.pipeline_model_parallel_size=2 \
        --set parallel.virtual_pipeline_model_parallel_size=2 && cmp_ref pp2_v2 base4 1e-4 || rc=1
    run dp2_zero3 2 14 "${cfg[@]}" "${chk[@]}" --set parallel.zero_stage=3 && cmp_ref dp2_zero3 base4 1e-4 || rc=1
    worst
    exit $rc
    ;;
  nccl)
    cfg=(--config "$B/tests/configs/gpt-test.json" --set training.train_iters=10 --set training.eval_interval=10)
    rc=0
    # the trainer step's default-engine run is the reference; a rerun of this
    # step alone (its work folder is new) makes it first
    if [ ! -s "$W/${RL}_fp32.jsonl" ]; then
      echo "(no ${RL}_fp32 reference from the trainer step in this run: making it)"
      run ${RL}_fp32 1 15 "${cfg[@]}" --set device=$DEV || rc=1
    fi
    MEGATRAIN_NCCL_SIZE1=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN} run nccl_1rank 1 14 "${cfg[@]}" --set device=cuda \
        --set parallel.distributed_backend=nccl && cmp_ref nccl_1rank ${RL}_fp32 1e-4 || rc=1
    read -r -a cc <<< "${GPU_CHECK_NCCL_COMM:-comm_check --engine nccl}"
    echo "== ${cc[*]} (1 rank, MEGATRAIN_NCCL_SIZE1=1)"
    lim=$(cap $(( 16 * TS ))); t0=$(date +%s)
    MEGATRAIN_NCCL_SIZE1=1 timeout -k 5 $lim mpirun -np 1 -x PATH -x LD_LIBRARY_PATH -x MEGATRAIN_NCCL_SIZE1 \
      $ub "$B/bin/${cc[0]}" "${cc[@]:1}" > "$W/comm_nccl.log" 2>&1; r=$?
    wall comm_nccl $(( $(date +%s) - t0 )) "$lim" "$([ $r != 0 ] && echo $r)"
    cat "$W/comm_nccl.log"
    if [ $r = 77 ] || { [ $r != 0 ] && grep -qiE 'unknown option|usage:|expected mpi' "$W/comm_nccl.log"; }; then
      note "SKIP->FAIL: ${cc[0]} has no NCCL mode ('${cc[*]}' exit $r)"; rc=1
    elif [ $r != 0 ]; then note "${cc[*]}: exit $r"; rc=1; fi
    worst
    exit $rc
    ;;
  bench)
    BENCH_GPU=$B/bin/bench_gpu BENCH_GPU_TIMEOUT=$(( 31 * TS )) bash "$B/bench/bench_gpu.sh" "${GPU_CHECK_BENCH_STEPS:-3}" "${GPU_CHECK_BENCH_ACCUM:-8}"
    exit $?
    ;;
  *) echo "gpu-check.sh: unknown step '$step'" >&2; exit 2;;
  esac
  exit 0
fi

# ---- the driver
B=""; O=""
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) B=${2:?--bundle needs a folder}; shift 2;;
    -h|--help) sed -n '2,/^set -u/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    -*) echo "gpu-check.sh: unknown option '$1' (expected --bundle DIR, OUTDIR)" >&2; exit 2;;
    *) O=$1; shift;;
  esac
done
[ -n "$O" ] || { echo "usage: bash gpu-check.sh [--bundle DIR] OUTDIR" >&2; exit 2; }
mkdir -p "$O" || exit 2
O=$(cd "$O" && pwd)
rm -f "$O"/*.log "$O/summary.txt" "$O/run_times.txt"; rm -rf "$O/work"
if [ -z "$B" ]; then
  if [ -f "$here/env.sh" ] && [ -x "$here/bin/megatrain" ]; then B=$here
  else B=$here/../dist/gpu-bundle; fi
fi
t_start=$(date +%s)
budget=$(( ${GPU_CHECK_BUDGET:-520} * ${GPU_CHECK_TIME_SCALE:-1} ))
summary() { # lines... -> stdout and summary.txt
  printf '%s\n' "$@" | tee -a "$O/summary.txt"
}
# no GPU: one clear line, a summary that says so, a failure (not a pass)
gpu_seen=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_seen=$(nvidia-smi -L 2>/dev/null | grep -m1 '^GPU')
elif ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  gpu_seen="$(ls /dev/nvidia[0-9]* | head -1) (no nvidia-smi)"
fi
dry=""
if [ "${GPU_CHECK_DEVICE:-cuda}" = cpu ]; then
  dry="DRY RUN on the cpu backend (GPU_CHECK_DEVICE=cpu): not a GPU check"
  gpu_seen="none (dry run)"
  GPU_CHECK_STEPS=${GPU_CHECK_STEPS:-trainer mpi}
fi
if [ -z "$gpu_seen" ]; then
  summary "megatrain gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)" \
          "FAIL  probe: no GPU visible ($(command -v nvidia-smi >/dev/null && echo 'nvidia-smi lists none' || echo 'no nvidia-smi'), no /dev/nvidia0): nothing was checked" \
          "RESULT: FAIL (no GPU)"
  echo "gpu-check.sh: no GPU on this machine: nothing was checked" >&2
  exit 1
fi
if [ ! -f "$B/env.sh" ] || [ ! -x "$B/bin/megatrain" ]; then
  echo "gpu-check.sh: no GPU bundle at '$B' (make one with: bash scripts/gpu-bundle.sh)" >&2
  summary "FAIL  probe: no GPU bundle at '$B'" "RESULT: FAIL"
  exit 2
fi
B=$(cd "$B" && pwd)
# unpacks the gzipped libraries once, before the steps; the glibc mode
# (native, or every program through the bundled loader) heads the summary
glibc_mode=$(source "$B/env.sh" && echo "$MT_BUNDLE_MODE_WHY") || exit 1
steps=${GPU_CHECK_STEPS:-probe ops trainer mpi nccl bench}
results=(); failed=0
# summary.txt grows step by step (rewritten whole at the end), so a run cut
# short from outside (the device tool's limit) still leaves what it found
printf '%s\n' "megatrain gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) — IN PROGRESS (no RESULT line below: the run was cut short; step logs in $O)" \
  "GPU: $gpu_seen" "glibc: $glibc_mode" ${dry:+"$dry"} "" > "$O/summary.txt"
first=probe; [ -n "$dry" ] && first=""
for s in $first $steps; do
  case " ${done_steps:-} " in *" $s "*) continue;; esac
  done_steps="${done_steps:-} $s"
  lim=$(printf '%s\n' $STEP_LIMITS | sed -n "s/^$s://p"); lim=${lim:-60}
  # nccl without the trainer step in this invocation makes its own reference
  [ $s = nccl ] && case " $steps " in *" trainer "*) ;; *) lim=$(( lim + 15 ));; esac
  lim=$(( lim * ${GPU_CHECK_TIME_SCALE:-1} ))
  # the whole check's deadline (kill grace 5 s included)
  bleft=$(( t_start + budget - $(date +%s) - 5 ))
  if [ "$bleft" -lt 10 ]; then
    line=$(printf '%-4s  %-8s %4ss  %s' FAIL "$s" 0 "not run: the check's ${budget} s budget (GPU_CHECK_BUDGET) was used up")
    echo "$line"; results+=("$line"); echo "$line" >> "$O/summary.txt"; failed=$((failed + 1)); continue
  fi
  [ "$lim" -gt "$bleft" ] && { echo "(step limit ${lim}s cut to the ${bleft}s the check's budget has left)"; lim=$bleft; }
  echo "=== $s (limit ${lim}s) — log $O/$s.log"
  t0=$(date +%s)
  GPU_CHECK_STEP_END=$(( t0 + lim )) timeout -k 5 "$lim" bash "$self" --run-step "$s" "$O" "$B" > "$O/$s.log" 2>&1
  r=$?; dt=$(( $(date +%s) - t0 ))
  # probe: exit 3 (mpirun failed) or a time-out is a FAIL, but the steps can
  # still run (each has its own limit; nvidia-smi listed a GPU)
  go_on=""; [ $s = probe ] && case $r in 3|124|137) go_on=1;; esac
  fault=$(fault_line "$O/$s.log" | cut -c1-160)
  # a CUDA_LAUNCH_BLOCKING=1 rerun's fault line (the op named) first
  notes=$({ grep 'CUDA_LAUNCH_BLOCKING' "$O/work/$s.note"; grep -v 'CUDA_LAUNCH_BLOCKING' "$O/work/$s.note"; } 2>/dev/null |
          paste -sd ';' | sed 's/;/; /g' | cut -c1-300)
  case $r in
    0) res=PASS;;
    77) res=FAIL; notes="SKIP with a GPU visible: $(grep -m1 -o 'SKIP.*' "$O/$s.log")";;
    124|137) res=FAIL; notes="timed out after ${lim}s; ${notes}";;
    *) res=FAIL;;
  esac
  # (a CUDA_LAUNCH_BLOCKING=1 rerun's note already names the faulting op)
  [ -n "$fault" ] && [ $res = FAIL ] && case $notes in *CUDA_LAUNCH_BLOCKING*) ;; *) notes="CUDA fault: $fault; $notes";; esac
  [ $res = PASS ] || { failed=$((failed + 1)); tail -12 "$O/$s.log" | sed 's/^/  | /'; }
  line=$(printf '%-4s  %-8s %4ss  %s' "$res" "$s" "$dt" "$notes")
  echo "$line"; results+=("$line"); echo "$line" >> "$O/summary.txt"
  if [ $s = probe ] && [ $res = FAIL ] && [ -z "$go_on" ]; then echo "probe failed: the other steps would tell nothing"; break; fi
  if [ -n "$fault" ] && ! timeout 20 nvidia-smi -L >/dev/null 2>&1; then
    results+=("ABORT: the GPU stopped answering after $s (nvidia-smi); later steps not run"); failed=$((failed + 1)); break
  fi
done
ran=$(echo $done_steps)
for s in $steps; do case " $ran " in *" $s "*) ;; *) results+=("FAIL  $s  not run"); failed=$((failed + 1));; esac; done

rm -f "$O/summary.txt"
summary "megatrain gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) — $(grep -m1 '^# commit:' "$B/MANIFEST" | cut -c3-) — total $(( $(date +%s) - t_start ))s" \
        "GPU: $gpu_seen" "glibc: $glibc_mode" ${dry:+"$dry"} "" "${results[@]}"
# each run's wall time / its limit, one line per step (to size a rerun)
if [ -s "$O/run_times.txt" ]; then
  summary "" "run wall times (seconds / limit; $O/run_times.txt):"
  awk '{ t = $3; sub(/s$/, "", t); l = $5; sub(/s$/, "", l); x = (NF > 5 ? "!" $7 : "")
         r[$1] = r[$1] " " $2 " " t "/" l x; if (!($1 in o)) { o[$1] = ++n; k[n] = $1 } }
       END { for (i = 1; i <= n; i++) printf "  %-8s%s\n", k[i], r[k[i]] }' "$O/run_times.txt" |
    while IFS= read -r l; do summary "$l"; done
fi
if [ -f "$O/bench.log" ] && grep -q '^RESULT name=' "$O/bench.log"; then
  summary "" "MFU (bf16 storage, seq 1024, 1 GPU; peak $(sed -n 's/.*(peak \([0-9.]*\)).*/\1/p' "$O/bench.log" | head -1) TFLOP/s):" \
    "$(printf '  %-11s %6s %10s %9s %7s %9s' shape mb tokens/s TFLOP/s MFU 'peak mem')"
  sed -n 's/^RESULT name=\([^ ]*\) .*mb=\([0-9]*\) .*tokens\/s \([0-9.]*\) | \([0-9.]*\) TFLOP\/s | MFU \([0-9.]*%\).*peak mem \([0-9.]*\) GiB.*/\1 \2 \3 \4 \5 \6/p' "$O/bench.log" |
    while read -r n mb tps tf mfu mem; do summary "$(printf '  %-11s %6s %10s %9s %7s %9s' "$n" "$mb" "$tps" "$tf" "$mfu" "$mem GiB")"; done
fi
if [ $failed = 0 ]; then summary "" "RESULT: ${dry:+DRY RUN }PASS (every step${dry:+ run: $steps})"; exit 0; fi
summary "" "RESULT: FAIL ($failed step(s); logs in $O)"
exit 1
