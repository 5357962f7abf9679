#!/usr/bin/env bash
# Started collectives on device buffers (parallel/comm.h, "Non-blocking
# collectives"; docs/communication.md, "The NCCL engine"):
#  1. build/ (no CUDA): tests/tools/comm_async_dev_check on 2 ranks, the
#     staging engine on the cpu backend's test device buffers
#     (MEGATRAIN_TEST_DEVICE_BUFFERS=1), with the communication thread and
#     without it (MEGATRAIN_COMM_THREAD=0: started collectives run at start);
#  2. build-emu/ (make CUDA_EMU=1; skipped with a note when absent): the same
#     check on device: cuda, the NCCL engine (communication stream and
#     events) and the staging engine (parallel.distributed_backend "mpi"),
#     every cross-stream access checked by the emulation's race checker;
#  3. build-emu/: a tiny dp=2 run on device: cuda, ZeRO-1, with
#     overlap_grad_reduce + overlap_param_gather off and on, on the NCCL
#     engine, under a simulated link (MEGATRAIN_SIM_LINK): the metric
#     records (losses, grad norm, byte counters) and the checkpoint tensor
#     files bitwise equal; MEGATRAIN_TEST_FULL=1 adds the staging engine
#     (parallel.distributed_backend "mpi") and ZeRO-0 and ZeRO-3.
# The emulation's race checker catching a missing event on the NCCL
# engine's communication stream is test_cuda_emu_bugs.sh's
# missing_start_event and missing_wait_event (MEGATRAIN_TEST_FULL=1).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/overlap_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
CHECK=build/tests/tools/comm_async_dev_check
[ -x $CHECK ] || { echo "missing $CHECK (run make tests)"; exit 1; }
fails=0
# check NAME NP CMD...: CMD must print "comm_async_dev_check OK"
check() {
  local name=$1 np=$2 rc=0 t0; shift 2
  t0=$(date +%s)
  timeout 900 "$@" >"$TMP/check.log" 2>&1 || rc=$?
  if [ $rc = 0 ] && grep -q "^comm_async_dev_check OK" "$TMP/check.log"; then
    echo "ok   $name ($(( $(date +%s) - t0 )) s): $(grep -m1 '^comm_async_dev_check OK' "$TMP/check.log")"
  else
    echo "FAIL $name (exit $rc):"; tail -20 "$TMP/check.log"; fails=$((fails + 1))
  fi
}
MPI=(mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS)
check "staged on cpu test buffers, 2 ranks, thread" 2 "${MPI[@]}" -x MEGATRAIN_COMM_THREAD=1 \
  -np 2 $CHECK --engine mpi --device cpu
check "staged on cpu test buffers, 2 ranks, no thread" 2 "${MPI[@]}" -x MEGATRAIN_COMM_THREAD=0 \
  -np 2 $CHECK --engine mpi --device cpu
[ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] &&
  check "staged on cpu test buffers, 4 ranks, thread" 4 "${MPI[@]}" -np 4 $CHECK --engine mpi --device cpu

EMU_BUILD=${MEGATRAIN_EMU_BUILD:-$ROOT/build-emu}
if [ ! -x "$EMU_BUILD/tests/tools/comm_async_dev_check" ] || [ ! -f "$EMU_BUILD/nccl/libnccl.so.2" ]; then
  echo "note: $EMU_BUILD not built (make CUDA_EMU=1): the device: cuda parts did not run"
  [ $fails = 0 ] || exit 1
  exit 0
fi
source "$(dirname "$0")/cuda_emu_lib.sh"
ECHECK=$EMU_BUILD/tests/tools/comm_async_dev_check
for eng in nccl mpi; do
  check "device cuda (emulated), engine $eng, 2 ranks" 2 "${EMU_MPI[@]}" -np 2 $ECHECK --engine $eng
done

# same A B: the metric records (losses, grad norm, byte counters per group
# kind) and the checkpoint's tensor files of runs A and B are identical
same() {
  same_records "$TMP/$1.jsonl" "$TMP/$2.jsonl" || return 1
  local n
  n=$(same_tensor_files "$TMP/$1.ckpt" "$TMP/$2.ckpt") \
    || { echo "   $1 vs $2: checkpoint files differ (or none)"; return 1; }
  echo "ok   $1 vs $2: metric records, byte counters and $n checkpoint tensor file(s) identical"
}
# dp=2 on device: cuda, overlap off and on: ZeRO-1 with overlap_param_gather
# (started reduce-scatters and all-gathers) on the NCCL engine in CI (two
# runs of about a minute each); the staging engine, ZeRO-0 (started
# all-reduces) and ZeRO-3 too under MEGATRAIN_TEST_FULL=1
TRAIN=(--config "$CFG" --set model.num_layers=2 --set model.seq_length=16
       --set training.global_batch_size=4 --set training.micro_batch_size=1
       --set training.train_iters=2 --set training.lr_warmup_iters=0
       --set training.eval_interval=0 --set logging.log_interval=1
       --set parallel.ddp_bucket_size=20001)
export MEGATRAIN_SIM_LINK="dp=0.5,2000"
EMU_MPI+=(-x MEGATRAIN_SIM_LINK)
stages=$(full_or "0 1 3" "1")
for eng in $(full_or "nccl mpi" "nccl"); do
  for st in $stages; do
    on=(--set parallel.overlap_grad_reduce=true)
    [ "$st" != 0 ] && on+=(--set parallel.overlap_param_gather=true)
    for ov in off on; do
      keys=(); [ $ov = on ] && keys=("${on[@]}")
      emu_run "${eng}_z${st}_$ov" 2 "$EMU_MT" cuda "${TRAIN[@]}" --set parallel.zero_stage=$st \
        --set parallel.distributed_backend=$eng --set checkpoint.save="$TMP/${eng}_z${st}_$ov.ckpt" \
        "${keys[@]}" || fails=$((fails + 1))
    done
    same "${eng}_z${st}_off" "${eng}_z${st}_on" || fails=$((fails + 1))
  done
done
[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "started collectives on device buffers: every check passed"
