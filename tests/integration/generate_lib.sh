# tests/integration/generate_lib.sh — shared helpers of the generate tests
# (sourced after lib.sh; not a test itself: the runner takes test_*.sh).
#   ids_of LOG              the token ids of a generate --print-ids log
#   greedy_vs_reference NAME DIR IDS N
#                           the fp64 PyTorch reference (generate_reference.py)
#                           continues DIR.g1.log's prompt greedily for N tokens:
#                           its tokens equal IDS and its logits match DIR.kv.f32
#                           within 1e-5 of the largest (exit 1 otherwise)
#   maxdiff A.f32 B.f32 WHAT  two logit dumps agree within 1e-5 of B's
#                           largest |logit| (prints the figure; exit 1 otherwise)
PY=${PY:-/usr/bin/python3}
ids_of() { grep '^ids:' "$1" | sed 's/^ids: //'; }
greedy_vs_reference() {
  local n=$1 d=$2 ids=$3 len=$4 prompt_ids
  prompt_ids=$(grep '^prompt_ids:' "$d.g1.log" | sed 's/^prompt_ids: //')
  $PY tests/reference/generate_reference.py "$d" --ids "$prompt_ids" --max-new-tokens "$len" \
    --logits "$d.kv.f32" >"$d.ref.log"
  [ "$(ids_of "$d.ref.log")" = "$ids" ] || {
    echo "$n: greedy tokens differ from the PyTorch reference"; echo " megatrain: $ids"
    echo " reference: $(ids_of "$d.ref.log")"; exit 1; }
  $PY - "$d.ref.log" "$n" <<'PYEOF'
import sys
w = [l.split() for l in open(sys.argv[1]) if l.startswith("max_abs_logit_diff")][0]
d, m = float(w[1]), float(w[3])
print("%s: greedy tokens = PyTorch reference, max |logit diff| %.2e (%.1e of max |logit| %.2f)"
      % (sys.argv[2], d, d / m, m))
sys.exit(d > 1e-5 * m)
PYEOF
}
maxdiff() { # maxdiff A.f32 B.f32 WHAT
  $PY - "$@" <<'PYEOF'
import sys, numpy as np
a, b = (np.fromfile(p, dtype=np.float32) for p in sys.argv[1:3])
assert a.shape == b.shape, (a.shape, b.shape)
w, m = float(np.max(np.abs(a - b))), float(np.max(np.abs(b)))
print("%s: max |logit diff| %.2e (%.1e of max |logit| %.2f)" % (sys.argv[3], w, w / m, m))
sys.exit(w > 1e-5 * m)
PYEOF
}
