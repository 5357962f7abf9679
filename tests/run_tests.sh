#!/usr/bin/env bash
# tests/run_tests.sh — the test runner behind `make test`.
# Runs every unit test binary (build/tests/test_*) and every integration test
# script (tests/integration/test_*.sh), each with a time limit. Exit code 0 =
# pass, 77 = skip (the test prints "SKIP: reason"), anything else = fail.
# Prints each test's wall time as it ends; ends with the ten slowest tests
# and the summary line "N passed, N failed, N skipped".
#
# Tests run MEGATRAIN_TEST_JOBS at a time (default 2: most tests are one
# process with one BLAS thread, so two of them fill 2 cores). A script whose
# header holds the line "# runner: alone" (hang diagnosis, signals, Slurm,
# anything timed) runs with nothing beside it, after the others.
# Usage: bash tests/run_tests.sh [name-filter-regex]
set -u
cd "$(dirname "$0")/.."
filter="${1:-.}"
jobs="${MEGATRAIN_TEST_JOBS:-2}"
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export MEGATRAIN_SHARED_DATA="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
pass=0; fail=0; skip=0; failed=(); times=()
logdir=build/test-logs; mkdir -p "$logdir"
rm -f "$logdir"/*.rc

# start NAME CMD...: run one test in the background; its exit code and wall
# time land in $logdir/NAME.rc when it ends
start() {
  local name="$1"; shift
  (
    t0=$(date +%s.%N)
    timeout 900 "$@" >"$logdir/$name.log" 2>&1; rc=$?
    echo "$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
      >"$logdir/$name.rc.tmp"
    mv "$logdir/$name.rc.tmp" "$logdir/$name.rc"
  ) &
  running[$!]=$name
}
# report NAME: print the result of a test that ended
report() {
  local name="$1" rc dt
  read -r rc dt <"$logdir/$name.rc"
  times+=("$dt $name")
  if [ "$rc" -eq 0 ]; then pass=$((pass+1)); echo "PASS  $name (${dt}s)"
  elif [ "$rc" -eq 77 ]; then skip=$((skip+1)); echo "SKIP  $name (${dt}s): $(grep -m1 -o 'SKIP.*' "$logdir/$name.log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL  $name (exit $rc, ${dt}s); last lines:"; tail -n 25 "$logdir/$name.log" | sed 's/^/      /'
  fi
}
# reap [N]: wait until at most N tests run (default 0), reporting each end
declare -A running=()
reap() {
  local limit="${1:-0}" pid
  while [ ${#running[@]} -gt "$limit" ]; do
    wait -n "${!running[@]}" 2>/dev/null || sleep 0.2
    for pid in "${!running[@]}"; do
      [ -f "$logdir/${running[$pid]}.rc" ] || continue
      wait "$pid" 2>/dev/null
      report "${running[$pid]}"
      unset "running[$pid]"
    done
  done
}

alone=()
for t in build/tests/test_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t"); [[ "$n" =~ $filter ]] || continue
  reap $((jobs - 1)); start "$n" "$t"
done
for t in tests/integration/test_*.sh; do
  [ -f "$t" ] || continue
  n=$(basename "$t" .sh); [[ "$n" =~ $filter ]] || continue
  if head -40 "$t" | grep -q '^# runner: alone'; then alone+=("$t"); continue; fi
  reap $((jobs - 1)); start "$n" bash "$t"
done
reap 0
for t in "${alone[@]}"; do
  start "$(basename "$t" .sh)" bash "$t"
  reap 0
done
echo
if [ ${#times[@]} -gt 0 ]; then
  echo "slowest tests:"
  printf '%s\n' "${times[@]}" | sort -rn | head -10 | awk '{ printf "  %8.1fs  %s\n", $1, $2 }'
fi
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
