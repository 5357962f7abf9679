# tests/integration/hf_lib.sh — shared helper of the Hugging Face conversion
# tests (sourced after lib.sh; not a test itself: the runner takes test_*.sh).
#   relcheck WHAT A B TOL   prints megatrain's value A against the PyTorch
#                           reader's B; fails when |A - B| / |B| > TOL
#   bad NAME WANT ARGS...   `megatrain convert ARGS` is refused: exit 1, one
#                           message containing WANT, no $TMP/out_NAME written
PY=${PY:-/usr/bin/python3}
relcheck() {
  $PY -c 'import sys; a, b, t = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
r = abs(a - b) / abs(b)
print("%s: megatrain %.10f, PyTorch from HF %.10f, rel diff %.2e" % (sys.argv[1], a, b, r))
sys.exit(r > t)' "$@"
}
bad() { # bad NAME EXPECTED-MESSAGE-PART [convert args...]
  local name=$1 want=$2; shift 2
  set +e
  "$MT" convert "$@" >"$TMP/bad.log" 2>&1; local rc=$?
  set -e
  [ $rc = 1 ] || { echo "$name: exit $rc, expected 1"; cat "$TMP/bad.log"; exit 1; }
  grep -q -- "$want" "$TMP/bad.log" || { echo "$name: message lacks '$want'"; cat "$TMP/bad.log"; exit 1; }
  [ "$(grep -c 'error' "$TMP/bad.log")" = 1 ] || { echo "$name: not one message"; cat "$TMP/bad.log"; exit 1; }
  [ ! -e "$TMP/out_$name" ] || { echo "$name: output written"; exit 1; }
  echo "$name: exit 1, $(grep error "$TMP/bad.log")"
}
