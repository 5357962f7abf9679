#!/usr/bin/env bash
# scripts/asan-test.sh — the runner behind `make asan`: runs the unit tests
# of an AddressSanitizer + UndefinedBehaviorSanitizer build (default
# build-asan/, made by `make asan`) and one 2-rank parity case with its
# binary: tensor parallelism 2 with sequence parallelism and dropout against
# one process (tests/configs/gpt-test.json, 20 steps, lm loss and grad norm
# within 1e-5 relative, replicated parameters checked every step). Any
# sanitizer report fails the test (UBSan does not recover; LeakSanitizer
# ignores only the MPI stack's allocations, scripts/lsan.supp). The parity
# case uses tests/integration/lib.sh, which prepares the data with the normal
# ./megatrain. Ends with "N passed, N failed, N skipped" like
# tests/run_tests.sh. Usage: bash scripts/asan-test.sh [build-dir]
# (--parity BUILD-DIR runs the parity case alone).
set -u
cd "$(dirname "$0")/.."
mode=all; [ "${1:-}" = --parity ] && { mode=parity; shift; }
B=${1:-build-asan}
export ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_stack_use_after_return=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
pass=0; fail=0; skip=0; failed=()
logdir=$B/test-logs; mkdir -p "$logdir"
run_one() {
  local name="$1"; shift
  local log="$logdir/$name.log" t0=$SECONDS rc
  timeout 900 "$@" >"$log" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q 'Sanitizer' "$log"; then rc=1; fi
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  asan:$name ($((SECONDS-t0))s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  asan:$name: $(grep -m1 -o 'SKIP.*' "$log")"
  else fail=$((fail+1)); failed+=("asan:$name")
    echo "FAIL  asan:$name (exit $rc, $((SECONDS-t0))s); last lines:"; tail -n 25 "$log" | sed 's/^/      /'
  fi
}
parity() { # one process vs tp=2 + SP on 2 ranks with $B/megatrain (exits)
  source tests/integration/lib.sh
  command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
  MT=$ROOT/$B/megatrain
  local common=(--config "$CFG" --set training.check_replicas_interval=1)
  "$MT" "${common[@]}" --set logging.metrics_file="$TMP/one.jsonl" >"$TMP/one.log" 2>&1 ||
    { tail -n 40 "$TMP/one.log"; exit 1; }
  mpirun -np 2 --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS -x UBSAN_OPTIONS -x OPENBLAS_NUM_THREADS \
    -x OMP_NUM_THREADS -x OMPI_MCA_mpi_yield_when_idle "$MT" "${common[@]}" \
    --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
    --set logging.metrics_file="$TMP/tp2.jsonl" >"$TMP/tp2.log" 2>&1 || { tail -n 40 "$TMP/tp2.log"; exit 1; }
  cat "$TMP/one.log" "$TMP/tp2.log"   # sanitizer reports, if any, reach run_one's log
  grep -h "identical on all 2 tensor-parallel" "$TMP/tp2.log"
  compare_metrics "$TMP/tp2.jsonl" "$TMP/one.jsonl" 1e-5
}
[ $mode = parity ] && { parity; exit 0; }
for t in "$B"/tests/test_*; do
  [ -x "$t" ] && [ -f "$t" ] || continue
  run_one "$(basename "$t")" "$t"
done
if [ -x "$B/megatrain" ]; then run_one parity_tp2_sp bash "$0" --parity "$B"
else fail=$((fail+1)); failed+=("asan:parity_tp2_sp"); echo "FAIL  asan:parity_tp2_sp: $B/megatrain not built"
fi
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
