#!/usr/bin/env bash
# The CUDA backend's op table under the host emulation (build-emu/, make
# CUDA_EMU=1): tests/unit/backends/test_ops.c's cuda column — every op-case row in
# fp32 and bf16 storage against the cpu backend, with every kernel's
# accesses checked (bounds, shared-memory races, host pointers) — must run
# (not skip) and pass; test_cuda_table creates the backend on the emulated
# device; test_nccl_api loads the NCCL stand-in through LD_LIBRARY_PATH.
# tests/tools/comm_check --engine nccl on 4 ranks (tp=2, pp=2): every
# collective in every dtype, batched and tagged send/recv (the p2p channels of
# a 4-rank ring) on the NCCL stand-in against a serial reference.
# MEGATRAIN_TEST_FULL=1 adds comm_check with cp=2 ep=2 and tp=2 etp=2 ep=2,
# and tests/tools/cuda_parity fp32 and bf16 at its tiny shapes (unfused
# attention reference, allocator churn, ...; about 10 minutes).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_emu_lib.sh"
T=$EMU_BUILD/tests
for t in test_ops test_cuda_table test_nccl_api tools/comm_check; do
  [ -x "$T/$t" ] || { echo "SKIP: $T/$t not built (make CUDA_EMU=1)"; exit 77; }
done
t_start=$(date +%s)
fails=0
for t in test_cuda_table test_nccl_api test_ops; do
  t0=$(date +%s)
  if timeout 900 "$T/$t" >"$TMP/$t.log" 2>&1; then
    echo "ok   $t ($(( $(date +%s) - t0 )) s)"
  else
    echo "FAIL $t:"; tail -30 "$TMP/$t.log"; fails=$((fails + 1))
  fi
done
grep -q 'cuda backend unavailable' "$TMP/test_cuda_table.log" &&
  { echo "FAIL test_cuda_table: the emulated backend was not created"; fails=$((fails + 1)); }
grep -q 'loaded NCCL 2\.[0-9.]* (.*build-emu/nccl/libnccl.so.2)' "$TMP/test_nccl_api.log" ||
  { echo "FAIL test_nccl_api did not load the stand-in:"; grep -m2 loaded "$TMP/test_nccl_api.log"; fails=$((fails + 1)); }
# the cuda column ran: "op cases '': N on cpu, M on cpu-bf16, K on cuda, 0 failed"
line=$(grep -m1 "^op cases '':" "$TMP/test_ops.log")
echo "     $line"
k=$(sed -n 's/.* \([0-9]*\) on cuda,.*/\1/p' <<< "$line")
grep -q 'cuda column skipped' "$TMP/test_ops.log" && { echo "FAIL: the cuda column was skipped"; fails=$((fails + 1)); }
[ "${k:-0}" -ge 250 ] || { echo "FAIL: only ${k:-0} rows ran on cuda"; fails=$((fails + 1)); }
layouts=("--tp 2 --pp 2")
[ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] && layouts+=("--cp 2 --ep 2" "--tp 2 --etp 2 --ep 2")
for l in "${layouts[@]}"; do
  t0=$(date +%s)
  # shellcheck disable=SC2086
  if timeout 900 "${EMU_MPI[@]}" -np 4 "$T/tools/comm_check" $l --engine nccl >"$TMP/comm.log" 2>&1 &&
     grep -q '^comm_check OK' "$TMP/comm.log"; then
    echo "ok   comm_check $l --engine nccl, 4 ranks ($(( $(date +%s) - t0 )) s)"
  else
    echo "FAIL comm_check $l --engine nccl:"; tail -15 "$TMP/comm.log"; fails=$((fails + 1))
  fi
done
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  for prec in fp32 bf16; do
    t0=$(date +%s)
    if timeout 1800 "$T/tools/cuda_parity" $prec tiny >"$TMP/parity_$prec.log" 2>&1; then
      echo "ok   cuda_parity $prec tiny ($(( $(date +%s) - t0 )) s): $(grep -c '^PASS case' "$TMP/parity_$prec.log") cases"
    else
      echo "FAIL cuda_parity $prec tiny:"; grep -E 'FAIL|ERROR' "$TMP/parity_$prec.log" | head; tail -5 "$TMP/parity_$prec.log"
      fails=$((fails + 1))
    fi
  done
fi
dt=$(( $(date +%s) - t_start ))
[ $fails = 0 ] || { echo "$fails failure(s) (${dt} s)"; exit 1; }
echo "op table on cuda-emu: $k rows (fp32 and bf16) against cpu, all pass (${dt} s)"
