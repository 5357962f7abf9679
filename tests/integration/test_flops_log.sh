#!/usr/bin/env bash
# tests/integration/test_flops_log.sh — the trainer's model FLOPs (issue 32)
# in the log line and the JSONL: 3 steps of the test GPT on tinyshakespeare
# preprocessed one line per document. Each JSONL record's FLOPs (rebuilt
# from tflops_per_device x elapsed) equal model/gpt_flops.h's B s^2 count
# without data.reset_attention_mask (formula megatron and paper, their
# difference the causal half 6 L (a hn) B s^2); with reset_attention_mask
# they are below it by 6 L (a hn) (B s^2 - sum L_i^2) for an integer
# sum L_i^2 between B s and B s^2 that changes from batch to batch (the
# documents); the log line names the formula.
source "$(dirname "$0")/lib.sh"
TL=build/testdata/tinyshakespeare_lines_document
prepare_ts "$TL" --doc-sep line
run() { # name args...
  local name=$1; shift
  "$MT" --config $CFG --set "data.data_path=[\"$TL\"]" --set training.train_iters=3 --set training.lr_warmup_iters=1 \
    --set training.eval_interval=100 --set logging.log_interval=1 \
    --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
run megatron
run paper --set logging.flops_formula=paper
run docs --set data.reset_attention_mask=true
grep -q "FLOPs formula: megatron |" "$TMP/megatron.log" || { echo "FAIL: no formula in the log line"; exit 1; }
grep -q "FLOPs formula: paper |" "$TMP/paper.log" || { echo "FAIL: no paper formula in the log line"; exit 1; }
/usr/bin/python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
def flops(name):
    out = []
    for o in map(json.loads, open("%s/%s.jsonl" % (d, name))):
        if "tflops_per_device" in o:
            out.append((o["flops_formula"], o["tflops_per_device"] * 1e12 * o["elapsed_ms"] / 1e3))
    return out
L, h, a, s, B, V = 2, 64, 4, 32, 8, 50304  # tests/configs/gpt-test.json, Vp
T = B * s
linear = 3 * 2 * T * L * (4 * h * h + 2 * h * 4 * h) + 3 * 2 * T * h * V
half = 6 * L * h * B * s * s  # a hn = h
fails = 0
for name, formula, want in (("megatron", "megatron", linear + half), ("paper", "paper", linear + 2 * half)):
    for f, F in flops(name):
        ok = f == formula and abs(F - want) <= 1e-9 * want
        print("%-8s %-8s %.6e (want %.6e) %s" % (name, f, F, want, "ok" if ok else "FAIL"))
        fails += not ok
ssq = []
for f, F in flops("docs"):
    x = (F - linear) / (6 * L * h)
    ssq.append(x)
    ok = f == "megatron" and abs(x - round(x)) < 1e-3 and B * s < x < B * s * s
    print("docs     %-8s %.6e: sum L_i^2 = %.3f (unpacked %d) %s" % (f, F, x, B * s * s, "ok" if ok else "FAIL"))
    fails += not ok
if len(set(round(x) for x in ssq)) < 2:
    print("FAIL: sum L_i^2 the same in every batch: %s" % ssq); fails += 1
sys.exit(1 if fails else 0)
PY
