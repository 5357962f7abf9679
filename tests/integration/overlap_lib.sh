# tests/integration/overlap_lib.sh — the bitwise comparison of two runs that
# differ only in overlap (test_overlap_grad.sh, test_cuda_emu_overlap.sh):
# sourced after lib.sh (or with $TMP set).
#
# same_records A.jsonl B.jsonl [eval]: the metric records (iteration, losses,
# grad norm, byte counters per group kind) are identical; every training
# record has byte counters, and with "eval" some record has a validation
# loss. Prints the differing records; returns 1 on a difference.
same_records() {
  /usr/bin/python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
def load(p):
    keep = ("iteration", "lm_loss", "grad_norm", "val_loss", "comm_bytes")
    return [{k: o[k] for k in keep if k in o} for o in map(json.loads, open(p))]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a and all(r.get("comm_bytes") for r in a if "lm_loss" in r), \
    "no records or no byte counters in %s" % sys.argv[1]
assert sys.argv[3] != "eval" or any("val_loss" in r for r in a), "no evaluation in %s" % sys.argv[1]
if a != b:
    for x, y in zip(a, b):
        if x != y: print("differs:", x, "\n    vs:", y)
    sys.exit("metric records differ between overlap off and on")
PY
}

# same_tensor_files DIR_A DIR_B: the checkpoints' tensor files (*.bin but
# index.bin, which carries the metadata's checksum) are bitwise equal and
# there is at least one; prints their count; returns 1 otherwise.
same_tensor_files() {
  local ha hb
  ha=$(cd "$1" && find . -type f -name '*.bin' ! -name index.bin | sort | xargs sha256sum)
  hb=$(cd "$2" && find . -type f -name '*.bin' ! -name index.bin | sort | xargs sha256sum)
  [ -n "$ha" ] && [ "$ha" = "$hb" ] || { diff <(echo "$ha") <(echo "$hb") | head -5; return 1; }
  echo "$ha" | wc -l
}
