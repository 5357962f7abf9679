# tests/integration/ckpt_lib.sh — helpers of the checkpoint tests (sourced
# after lib.sh): layout-free checkpoints (docs/checkpoint.md) compared file
# by file, and a resumed run's metrics compared with the uninterrupted one's.

# same_ckpt DIR_A DIR_B: the two iter_NNNNNNN directories hold the same files
# with the same bytes (shards, index but for its last 8 bytes: the CRC of
# metadata.json and its own), and metadata.json equal but for the saved
# config (which names the runs' own paths); prints the count.
same_ckpt() {
  local a=$1 b=$2 n=0
  [ -d "$a" ] && [ -d "$b" ] || { echo "missing checkpoint directory: $a or $b"; return 1; }
  diff <(cd "$a" && ls) <(cd "$b" && ls) >/dev/null \
    || { echo "file lists differ: $a vs $b"; diff <(cd "$a" && ls) <(cd "$b" && ls); return 1; }
  for f in $(cd "$a" && ls); do
    if [ "$f" = metadata.json ]; then
      /usr/bin/python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a.pop("config", None); b.pop("config", None)
sys.exit(0 if a == b else "metadata.json differs: %r vs %r" % (a, b))' "$a/$f" "$b/$f" || return 1
    elif [ "$f" = index.bin ]; then # all but its CRCs of metadata.json and of itself
      cmp <(head -c -8 "$a/$f") <(head -c -8 "$b/$f") || { echo "index.bin differs"; return 1; }
    else
      cmp "$a/$f" "$b/$f" || return 1
    fi
    n=$((n + 1))
  done
  echo "  checkpoints byte-identical ($n files in $(basename "$a"))"
}

# compare_resumed FULL.jsonl RESUMED.jsonl FIRST LAST RELTOL [LABEL]: lm_loss and
# grad_norm of iterations FIRST..LAST of the resumed run equal the full run's
# within RELTOL (relative; 0 = bitwise). Prints "LABEL worst-lm worst-gn".
compare_resumed() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
full, res, first, last, tol = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
label = sys.argv[6] if len(sys.argv) > 6 else "resumed"
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = load(full), load(res)
want = list(range(first, last + 1))
for it in want:
    if it not in a or it not in b:
        sys.exit("%s: iteration %d missing (full %s, resumed %s)" % (label, it, sorted(a), sorted(b)))
worst = {}
for k in ("lm_loss", "grad_norm"):
    w = 0.0
    for it in want:
        x, y = b[it][k], a[it][k]
        r = abs(x - y) / max(abs(y), 1e-30)
        w = max(w, r)
        if (tol == 0 and x != y) or r > tol:
            sys.exit("%s: iteration %d %s: resumed %r vs uninterrupted %r (rel %.3e > %g)"
                     % (label, it, k, x, y, r, tol))
    worst[k] = w
print("%-40s lm_loss %.2e  grad_norm %.2e  (iterations %d-%d, tolerance %g)"
      % (label, worst["lm_loss"], worst["grad_norm"], first, last, tol))
PY
}

# ckpt_at SRC_SAVE_DIR ITER DST: a save directory DST holding only
# SRC/iter_ITER with latest = ITER (a checkpoint taken mid-run).
ckpt_at() {
  local it; it=$(printf '%07d' "$2")
  mkdir -p "$3"
  cp -r "$1/iter_$it" "$3/"
  echo "$2" > "$3/latest_checkpointed_iteration.txt"
}
