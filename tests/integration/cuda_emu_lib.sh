# tests/integration/cuda_emu_lib.sh — helpers of the tests that run the
# CUDA backend and the NCCL engine under the host emulation (sourced after
# lib.sh): the emulated tree is build-emu/ (make CUDA_EMU=1; or the whole CI
# part at once: bash scripts/cuda-emu-check.sh), its megatrain EMU_MT, the
# NCCL stand-in found by the engine's dlopen through LD_LIBRARY_PATH.
EMU_BUILD=${MEGATRAIN_EMU_BUILD:-$ROOT/build-emu}
EMU_MT=$EMU_BUILD/megatrain
[ -x "$EMU_MT" ] || { echo "SKIP: $EMU_MT not built (make CUDA_EMU=1, or bash scripts/cuda-emu-check.sh)"; exit 77; }
[ -f "$EMU_BUILD/nccl/libnccl.so.2" ] || { echo "SKIP: $EMU_BUILD/nccl/libnccl.so.2 not built (make CUDA_EMU=1)"; exit 77; }
export LD_LIBRARY_PATH=$EMU_BUILD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# a wait without progress this long is a hang (the emulation is slow: a
# rank may compute for a minute while its peers wait)
export MT_EMU_HANG_S=${MT_EMU_HANG_S:-300}
EMU_MPI=(mpirun --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x MT_EMU_HANG_S
         -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS)

# emu_run NAME NP BINARY DEVICE [args...]: one training run, metrics in
# $TMP/NAME.jsonl, log $TMP/NAME.log (its tail shown on failure); the start-up
# line must name the device and, for several ranks on cuda, the engine asked
# for (parallel.distributed_backend among args).
emu_run() {
  local name=$1 np=$2 bin=$3 dev=$4; shift 4
  local cmd=("$bin" --set device="$dev" --set logging.metrics_file="$TMP/$name.jsonl" "$@")
  local t0 rc=0
  t0=$(date +%s)
  if [ "$np" = 1 ]; then timeout 1500 "${cmd[@]}" >"$TMP/$name.log" 2>&1 || rc=$?
  else timeout 1500 "${EMU_MPI[@]}" -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1 || rc=$?; fi
  if [ $rc != 0 ]; then
    echo "run $name ($np rank(s), $dev) failed (exit $rc):"; tail -25 "$TMP/$name.log"; return 1
  fi
  grep -q "^> megatrain: device $dev" "$TMP/$name.log" ||
    { echo "run $name: not a $dev run"; grep -m1 "megatrain: device" "$TMP/$name.log"; return 1; }
  echo "   run $name: $np rank(s), $(( $(date +%s) - t0 )) s"
}

# emu_cmp A B TOL: compare_metrics (lib.sh) of $TMP/A.jsonl against
# $TMP/B.jsonl; its line is printed and kept in $TMP/cmp.log (the input of
# tests/tools/cuda_emu_table.py)
emu_cmp() {
  local out rc=0
  out=$(compare_metrics "$TMP/$1.jsonl" "$TMP/$2.jsonl" "$3") || rc=1
  echo "   $1 vs $2: $out" | tee -a "$TMP/cmp.log"
  return $rc
}
