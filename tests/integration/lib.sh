# tests/integration/lib.sh — shared helpers for integration tests (sourced).
# Prepares build/testdata/tinyshakespeare_text_document from ../shared/data
# once, and offers metric comparison helpers.
set -eu
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SHARED=${MEGATRAIN_SHARED_DATA:-$ROOT/../shared/data}
MT=$ROOT/megatrain
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$MT" ] || { echo "SKIP: ./megatrain not built"; exit 77; }
[ -f "$SHARED/tinyshakespeare.txt" ] || { echo "SKIP: $SHARED/tinyshakespeare.txt not found"; exit 77; }
# prepare_ts PREFIX [preprocess args...]: tokenize tinyshakespeare into
# PREFIX.{bin,idx} once; tests may run side by side (tests/run_tests.sh -j),
# so the first one writes under a lock and the others wait for it
prepare_ts() {
  local prefix=$1; shift
  [ -f "$prefix.idx" ] && return 0
  mkdir -p "$(dirname "$prefix")"
  (
    flock 9
    if [ ! -f "$prefix.idx" ]; then
      "$MT" preprocess --input "$SHARED/tinyshakespeare.txt" --output-prefix "$prefix.tmp$$" \
        --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
        --append-eod --workers 2 "$@" >/dev/null
      mv "$prefix.tmp$$.bin" "$prefix.bin"; mv "$prefix.tmp$$.idx" "$prefix.idx"
    fi
  ) 9>"$prefix.lock"
}
TS=build/testdata/tinyshakespeare_text_document
prepare_ts "$TS"
CFG=tests/configs/gpt-test.json
# full_or FULL CI -> FULL under MEGATRAIN_TEST_FULL=1, CI otherwise (the CI
# mode runs a smaller matrix or fewer steps; docs/testing.md lists what)
full_or() { if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then echo "$1"; else echo "$2"; fi; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# metrics_field FILE KEY -> one line per training record: "iteration value"
metrics_field() {
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if sys.argv[2] in o and "lm_loss" in o:
        print(o["iteration"], repr(o[sys.argv[2]]))' "$1" "$2"
}

# compare_metrics A B RELTOL: lm_loss, grad_norm (and val_loss) per iteration within RELTOL
# (0 = bitwise); prints the worst relative difference.
compare_metrics() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def load(p):
    d = {}
    for line in open(p):
        o = json.loads(line)
        if "lm_loss" in o:
            d[o["iteration"]] = o
    return d
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys() and a, "iterations differ: %s vs %s" % (sorted(a), sorted(b))
worst = 0.0
for it in sorted(a):
    for k in ("lm_loss", "grad_norm", "val_loss"):
        if k not in a[it] and k not in b[it]:
            continue
        assert k in a[it] and k in b[it], "iteration %d: %s only in one run" % (it, k)
        x, y = a[it][k], b[it][k]
        r = abs(x - y) / max(abs(y), 1e-30)
        worst = max(worst, r)
        if (tol == 0 and x != y) or r > tol:
            sys.exit("iteration %d %s: %r vs %r (rel %.3e > %g)" % (it, k, x, y, r, tol))
print("metrics agree over %d iterations (worst rel diff %.3e, tolerance %g)" % (len(a), worst, tol))
PY
}

# compare_metrics_mtp A B TOL [GNTOL]: compare_metrics over lm_loss, grad_norm
# and every MTP depth's loss (mtp_loss) at every iteration; GNTOL (default
# TOL) for the grad norm
compare_metrics_mtp() {
  /usr/bin/python3 - "$1" "$2" "$3" "${4:-$3}" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b, tol, gtol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
assert a.keys() == b.keys() and a, "iterations differ: %s vs %s" % (sorted(a), sorted(b))
worst, gworst = 0.0, 0.0
for it in sorted(a):
    x, y = a[it]["grad_norm"], b[it]["grad_norm"]
    r = abs(x - y) / max(abs(y), 1e-30)
    gworst = max(gworst, r)
    if (gtol == 0 and x != y) or r > gtol:
        sys.exit("iteration %d grad_norm: %r vs %r (rel %.3e > %g)" % (it, x, y, r, gtol))
    pairs = [("lm_loss", a[it]["lm_loss"], b[it]["lm_loss"])]
    ma, mb = a[it].get("mtp_loss", []), b[it].get("mtp_loss", [])
    assert len(ma) == len(mb) and ma, "iteration %d: mtp_loss %r vs %r" % (it, ma, mb)
    pairs += [("mtp_loss[%d]" % d, x, y) for d, (x, y) in enumerate(zip(ma, mb))]
    for k, x, y in pairs:
        r = abs(x - y) / max(abs(y), 1e-30)
        worst = max(worst, r)
        if (tol == 0 and x != y) or r > tol:
            sys.exit("iteration %d %s: %r vs %r (rel %.3e > %g)" % (it, k, x, y, r, tol))
print("metrics agree over %d iterations: lm loss and MTP losses worst rel diff %.3e (tolerance "
      "%g), grad norm %.3e (tolerance %g)" % (len(a), worst, tol, gworst, gtol))
PY
}
