# tests/integration/hf_lib.sh — shared helper of the Hugging Face conversion
# tests (sourced after lib.sh; not a test itself: the runner takes test_*.sh).
#   relcheck WHAT A B TOL   prints megatrain's value A against the PyTorch
#                           reader's B; fails when |A - B| / |B| > TOL
PY=${PY:-/usr/bin/python3}
relcheck() {
  $PY -c 'import sys; a, b, t = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
r = abs(a - b) / abs(b)
print("%s: megatrain %.10f, PyTorch from HF %.10f, rel diff %.2e" % (sys.argv[1], a, b, r))
sys.exit(r > t)' "$@"
}
