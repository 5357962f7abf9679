# tests/integration/moe_lib.sh — shared helpers of the MoE layout-parity
# tests (sourced after lib.sh; not a test itself: the runner takes test_*.sh).
#   run NAME NP ARGS...  trains with $CFG, the test's COMMON arguments and ARGS
#                        in one process (NP 1) or NP MPI ranks; metrics in
#                        $TMP/NAME.jsonl, output in $TMP/NAME.log
#   cmp_moe A B [OPTIONS] compares two runs' metrics (moe_compare.py: keys,
#                        tolerance 1e-5, MOE_ITERS steps; OPTIONS as documented there)
# MOE_ITERS (set by the test before run/cmp_moe; default 20, the configs'
# train_iters): every run trains MOE_ITERS steps and cmp_moe expects them all.
#   launch NP CMD...     CMD alone (NP 1) or under mpirun -np NP
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
CFG=tests/configs/gpt-moe-test.json
COMMON=()    # arguments of every run (set by the test)
MOE_ITERS=20
CMP_ARGS=()  # options of every cmp_moe (set by the test)
launch() { # np cmd...
  local np=$1; shift
  if [ "$np" = 1 ]; then "$@"
  else mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
         -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$@"
  fi
}
run() { # name np args...
  local name=$1 np=$2; shift 2
  launch "$np" "$MT" --config "$CFG" --set logging.metrics_file="$TMP/$name.jsonl" \
    --set training.train_iters=$MOE_ITERS "${COMMON[@]}" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
cmp_moe() { # a b [moe_compare.py options]
  local a=$1 b=$2; shift 2
  /usr/bin/python3 "$ROOT/tests/integration/moe_compare.py" "$TMP/$a.jsonl" "$TMP/$b.jsonl" \
    "$a" "$b" --last $MOE_ITERS "${CMP_ARGS[@]}" "$@"
}
