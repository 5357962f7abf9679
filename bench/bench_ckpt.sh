#!/usr/bin/env bash
# bench/bench_ckpt.sh — save and load time and size of the layout-free
# checkpoint (docs/checkpoint.md) of the GPT-2 124M shape (12 layers, hidden
# 768, 12 heads, vocabulary 50257, 1024 positions) with its AdamW state, on
# one rank and on 4 ranks (dp=4 ZeRO-1; tp=2 dp=2), and loading each
# checkpoint under every other layout against loading it under the layout
# that wrote it.
#
# Each save run trains 1 iteration (micro-batch 1, sequence 32: only the
# parameter and optimizer sizes matter) and saves; each load run loads and
# stops (train_iters = the saved iteration). Times are the trainer's own
# lines "saved checkpoint at iteration N to DIR in X s (Y MiB)" and
# "loaded checkpoint ... in X s" (the slowest rank's wall time of the
# collective save/load). The page cache is warm (the checkpoint was just
# written; the script does not drop caches): loads are memory-bound, not
# disk-bound. The ratio of a load is its time over the load of a checkpoint
# written by the same (target) layout.
#
# usage: bench/bench_ckpt.sh [--keep DIR]   (--keep: leave the checkpoints in DIR)
# About 3-5 minutes on 2 cores; needs ~1.5 GB of disk per checkpoint (three
# kept at a time) and ~6 GB of memory for the 4-rank runs.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KEEP=
if [ "${1:-}" = "--keep" ]; then KEEP=${2:?--keep needs a folder}; fi
make -s megatrain
source tests/integration/lib.sh # prepares build/testdata, sets 1 thread per rank, $TMP
WORK=${KEEP:-$TMP}
mkdir -p "$WORK"

# name | ranks | --set overrides
LAYOUTS=(
  "1-rank|1|"
  "dp4-zero1|4|parallel.zero_stage=1"
  "tp2-dp2|4|parallel.tensor_model_parallel_size=2"
)
COMMON=(--set model.num_layers=12 --set model.hidden_size=768 --set model.num_attention_heads=12
  --set model.seq_length=32 --set model.max_position_embeddings=1024 --set model.vocab_size=50257
  --set training.micro_batch_size=1 --set training.global_batch_size=4
  --set training.lr_warmup_iters=0 --set training.eval_interval=0 --set logging.log_interval=1
  --set logging.metrics_file=null)

run() { # np log overrides... ; runs megatrain, output to log
  local np=$1 log=$2
  shift 2
  local sets=()
  for s in "$@"; do [ -n "$s" ] && sets+=(--set "$s"); done
  if [ "$np" = 1 ]; then
    "$MT" --config "$CFG" "${COMMON[@]}" "${sets[@]}" >"$log" 2>&1
  else
    mpirun -np "$np" --oversubscribe --bind-to none "$MT" --config "$CFG" "${COMMON[@]}" \
      "${sets[@]}" >"$log" 2>&1
  fi || {
    echo "bench_ckpt: megatrain failed (np=$np $*), last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  }
}

RESULTS=$WORK/results.txt
: >"$RESULTS"
for a in "${LAYOUTS[@]}"; do
  IFS='|' read -r an anp aset <<<"$a"
  echo "== save under $an ($anp rank(s))"
  run "$anp" "$WORK/save_$an.log" "$aset" "training.train_iters=1" \
    "checkpoint.save=$WORK/ckpt_$an" "checkpoint.load=null"
  echo "save $an $an $(du -sm "$WORK/ckpt_$an/iter_0000001" | cut -f1) $WORK/save_$an.log" \
    >>"$RESULTS"
done
for a in "${LAYOUTS[@]}"; do
  IFS='|' read -r an _ _ <<<"$a"
  for b in "${LAYOUTS[@]}"; do
    IFS='|' read -r bn bnp bset <<<"$b"
    echo "== load $an checkpoint under $bn ($bnp rank(s))"
    run "$bnp" "$WORK/load_${an}_$bn.log" "$bset" "training.train_iters=1" \
      "checkpoint.load=$WORK/ckpt_$an" "checkpoint.save=null"
    echo "load $an $bn 0 $WORK/load_${an}_$bn.log" >>"$RESULTS"
  done
done

/usr/bin/python3 - "$RESULTS" <<'PY'
import re, sys
SAVE = re.compile(r"saved checkpoint at iteration \d+ to \S+ in ([0-9.]+) s \(([0-9.]+) MiB\)")
LOAD = re.compile(r"loaded checkpoint .* in ([0-9.]+) s")
rows, missing = [], False
for line in open(sys.argv[1]):
    kind, a, b, du_mib, log = line.split()
    text = open(log, errors="replace").read()
    m = (SAVE if kind == "save" else LOAD).search(text)
    if not m:
        missing = True
    rows.append((kind, a, b, float(du_mib), m))
save = {a: (float(m.group(1)) if m else None,
            float(m.group(2)) if m else du) for k, a, b, du, m in rows if k == "save"}
load = {(a, b): (float(m.group(1)) if m else None) for k, a, b, du, m in rows if k == "load"}
fmt = lambda x, f="%.2f": "n/a" if x is None else f % x
print("\nGPT-2 124M shape + AdamW state (fp32), warm page cache")
print("%-10s %10s %8s" % ("layout", "size MiB", "save s"))
for a, (t, mib) in save.items():
    print("%-10s %10.0f %8s" % (a, mib, fmt(t)))
print("\n%-10s %-10s %8s %8s %28s" % ("saved by", "loaded by", "load s", "ratio",
                                       "(vs load under same layout)"))
worst = None
for (a, b), t in load.items():
    same = load.get((b, b))
    r = t / same if t is not None and same else None
    if a != b and r is not None:
        worst = r if worst is None else max(worst, r)
    print("%-10s %-10s %8s %8s" % (a, b, fmt(t), "-" if a == b else fmt(r, "%.2fx")))
if missing:
    print("\nsome runs printed no timing line (a trainer without the layout-free checkpoint?)")
    sys.exit(1)
print("\nload under another layout <= 2x the same layout: %s (worst %.2fx)"
      % ("holds" if worst is not None and worst <= 2.0 else "DOES NOT hold", worst or 0))
PY
