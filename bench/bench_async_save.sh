#!/usr/bin/env bash
# bench/bench_async_save.sh — iteration time on checkpoint-save iterations
# and on the others, synchronous vs asynchronous saves (checkpoint.async_save,
# docs/checkpoint.md "Asynchronous saves"), for the GPT-2 124M shape (12
# layers, hidden 768, 12 heads, vocabulary 50257; sequence 64, micro-batch
# 1, global batch 1: a short step so that the save dominates), one process.
#
# Each run trains ITERS iterations saving every EVERY (and at the end). The
# time of iteration i is the wall-clock gap between the log lines of
# iterations i-1 and i as read from the trainer's stdout (log_interval 1):
# a synchronous save of iteration i-1 (written after its log line) lands in
# iteration i's gap, as do the host snapshot of an asynchronous save and
# its wait for the previous asynchronous save when that one is still being
# written (the trainer prints both); the background write overlaps the
# following iterations. The snapshot buffer is allocated and touched at the
# start of training, not in a save iteration. "save" rows are the
# gaps that follow a save iteration, "other" the rest (the first iteration
# and the end-of-training save are left out). The checkpoint is ~1.4 GiB
# (fp32 parameters + Adam moments).
#
# usage: bench/bench_async_save.sh [ITERS [EVERY]]   (defaults 19 6)
#   THREADS=N (env, default 1): training.num_threads.
# About 3-4 minutes on 2 shared cores; ~3 GiB of disk at most (checkpoints
# removed between runs), ~3 GiB of memory (the snapshot).
set -eu
ITERS=${1:-19} EVERY=${2:-6} THREADS=${THREADS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
make -s megatrain
source tests/integration/lib.sh # prepares build/testdata, 1 thread per rank, $TMP
COMMON=(--set model.num_layers=12 --set model.hidden_size=768 --set model.num_attention_heads=12
  --set model.seq_length=64 --set model.max_position_embeddings=1024 --set model.vocab_size=50257
  --set model.hidden_dropout=0 --set model.attention_dropout=0
  --set training.micro_batch_size=1 --set training.global_batch_size=1
  --set training.lr_warmup_iters=0 --set training.eval_interval=0 --set logging.log_interval=1
  --set training.train_iters="$ITERS" --set checkpoint.save_interval="$EVERY"
  --set training.num_threads="$THREADS" --set checkpoint.save="$TMP/ck")

run() { # MODE(sync|async)
  rm -rf "$TMP/ck"
  /usr/bin/python3 - "$1" "$TMP/$1.times" "$MT" --config "$CFG" "${COMMON[@]}" \
    --set checkpoint.async_save=$([ "$1" = async ] && echo true || echo false) <<'PY'
import re, subprocess, sys, time
mode, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
p = subprocess.Popen(["stdbuf", "-oL"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     text=True, bufsize=1)
t = {}
with open(out + ".log", "w") as log:
    for line in p.stdout:
        now = time.time()
        log.write(line)
        m = re.search(r"iteration\s+(\d+)/", line)
        if m: t[int(m.group(1))] = now
        if "saved checkpoint" in line or "asynchronous save" in line: print("   ", line.strip())
if p.wait() != 0: sys.exit("megatrain failed (%s), see %s.log" % (mode, out))
with open(out, "w") as f:
    for i in sorted(t):
        if i - 1 in t: f.write("%d %.4f\n" % (i, t[i] - t[i - 1]))
PY
}
echo "124M GPT shape, 1 process, $THREADS thread(s), $ITERS iterations, save every $EVERY"
for m in sync async; do echo "== $m"; run $m; done
/usr/bin/python3 - "$TMP/sync.times" "$TMP/async.times" "$EVERY" "$ITERS" <<'PY'
import statistics as st, sys
every, iters = int(sys.argv[3]), int(sys.argv[4])
def load(p):
    save, other = [], []
    for line in open(p):
        i, dt = line.split(); i = int(i); dt = float(dt)
        (save if (i - 1) % every == 0 else other).append(dt)
    return save, other
print("%-6s %22s %22s %14s" % ("mode", "save iterations (s)", "other iterations (s)", "sum (s)"))
rows = []
for name, p in (("sync", sys.argv[1]), ("async", sys.argv[2])):
    s, o = load(p)
    print("%-6s %10.3f (n=%2d)      %10.3f (n=%2d)      %10.2f" %
          (name, st.mean(s), len(s), st.mean(o), len(o), sum(s) + sum(o)))
    rows.append((name, [l.split() for l in open(p)]))
for name, r in rows:
    print("%-6s per iteration: %s" % (name, " ".join("%s:%.2f" % (i, float(d)) for i, d in r)))
PY
