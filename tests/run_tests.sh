#!/usr/bin/env bash
# tests/run_tests.sh — the test runner behind `make test`.
# Runs every unit test binary (build/tests/test_*) and every integration test
# script (tests/integration/test_*.sh), each with a time limit. Exit code 0 =
# pass, 77 = skip (the test prints "SKIP: reason"), anything else = fail.
# Prints each test's wall time; ends with the ten slowest tests and the
# summary line "N passed, N failed, N skipped".
# Usage: bash tests/run_tests.sh [name-filter-regex]
set -u
cd "$(dirname "$0")/.."
filter="${1:-.}"
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
pass=0; fail=0; skip=0; failed=(); times=()
logdir=build/test-logs; mkdir -p "$logdir"
run_one() {
  local name="$1"; shift
  local log="$logdir/$name.log" t0=$(date +%s.%N) rc
  timeout 900 "$@" >"$log" 2>&1; rc=$?
  local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  times+=("$dt $name")
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS  $name (${dt}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name (${dt}s): $(grep -m1 -o 'SKIP.*' "$log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL  $name (exit $rc, ${dt}s); last lines:"; tail -n 25 "$log" | sed 's/^/      /'
  fi
}
for t in build/tests/test_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t"); [[ "$n" =~ $filter ]] || continue
  run_one "$n" "$t"
done
for t in tests/integration/test_*.sh; do
  [ -f "$t" ] || continue
  n=$(basename "$t" .sh); [[ "$n" =~ $filter ]] || continue
  run_one "$n" bash "$t"
done
echo
if [ ${#times[@]} -gt 0 ]; then
  echo "slowest tests:"
  printf '%s\n' "${times[@]}" | sort -rn | head -10 | awk '{ printf "  %8.1fs  %s\n", $1, $2 }'
fi
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
