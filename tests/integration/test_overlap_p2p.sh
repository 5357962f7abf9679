#!/usr/bin/env bash
# Overlapped point-to-point communication changes timing, never results
# (docs/communication.md, "Overlap: pipeline, CP ring, MoE shared expert"):
#   - pp=2 1F1B and pp=2 v=2 interleaved with parallel.overlap_p2p_comm on
#     and off (MEGATRAIN_TEST_FULL=1 adds pp=2 x dp=2 ZeRO-1 with
#     overlap_grad_reduce);
#   - ep=2 with a shared expert, model.moe_shared_expert_overlap on and off
#     (MEGATRAIN_TEST_FULL=1 adds tp=2 + SP + ep=2 on 4 ranks);
#   - cp=2 (the K/V ring always posts the next block's transfer before the
#     current block's attention; Megatron has no key for it) with the
#     simulated link and without;
# each pair bitwise equal: every JSONL record (losses, grad norm, validation
# loss, lr, the per-group byte counters; timing fields left out) and the
# final checkpoint (sha256 of the shard files and of index.bin up to its two
# CRCs; metadata.json equal once the overlap key itself is dropped from its
# config). The runs go
# through MEGATRAIN_SIM_LINK (a slow, high-latency link, so that overlap
# moves the transfers in time; without a simulated link on the engine the
# variable is ignored and the check still holds). A few iterations of the
# 2-layer test model (4 layers for v=2; the 4-layer MoE test model with
# dropout on), evaluation and a checkpoint at the last one.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
LINK="pp=0.05,200;cp=0.05,200;ep=0.05,200" # GB/s, latency in µs: the overlapped kinds only
ITERS=3
RCFG=$CFG
run() { # name np args...
  local name=$1 np=$2; shift 2
  local link=()
  [ -n "${MEGATRAIN_SIM_LINK:-}" ] && link=(-x MEGATRAIN_SIM_LINK)
  $MPI "${link[@]}" -np "$np" "$MT" --config "$RCFG" --set training.train_iters=$ITERS --set training.lr_warmup_iters=1 \
    --set logging.log_interval=1 --set training.eval_interval=2 --set training.eval_iters=1 \
    --set checkpoint.save="$TMP/ck" --set checkpoint.save_interval=$ITERS \
    --set logging.metrics_file="$TMP/m.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
  # one save path and metrics file for all: the config in metadata.json names them
  mv "$TMP/ck" "$TMP/ck_$name"; mv "$TMP/m.jsonl" "$TMP/$name.jsonl"
}
same() { # a b: bitwise equal records and checkpoints
  echo "== $1 vs $2"
  /usr/bin/python3 - "$TMP/$1" "$TMP/$2" <<'PY'
import hashlib, json, os, re, sys
TIMING = re.compile(r"(_ms|_s|per_s|tflops|bubble|straggler|exposed|timer)")
DROP = {"overlap_p2p_comm", "moe_shared_expert_overlap"}
def records(p):
    out = []
    for line in open(p + ".jsonl"):
        o = json.loads(line)
        out.append({k: v for k, v in o.items() if not TIMING.search(k)})
    return out
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in DROP}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
def ckpt(p):
    d = {}
    root = os.path.dirname(p) + "/ck_" + os.path.basename(p)
    for dirpath, _, files in os.walk(root):
        for f in files:
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, root)
            if f.startswith(".") or f.endswith(".lock"):
                continue
            if f == "metadata.json":
                d[rel] = strip(json.load(open(full)))
            elif f == "index.bin":  # its last 8 bytes: CRC-32 of metadata.json, of the file
                d[rel] = hashlib.sha256(open(full, "rb").read()[:-8]).hexdigest()
            else:
                d[rel] = hashlib.sha256(open(full, "rb").read()).hexdigest()
    return d
a, b = records(sys.argv[1]), records(sys.argv[2])
assert a and len(a) == len(b), "record counts differ: %d vs %d" % (len(a), len(b))
for x, y in zip(a, b):
    if x != y:
        keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        sys.exit("iteration %s differs in %s: %r vs %r" % (x.get("iteration"), keys,
                 [x.get(k) for k in keys], [y.get(k) for k in keys]))
assert any("val_loss" in x for x in a), "no validation record"
assert any(x.get("comm_bytes") for x in a), "no byte counters"
ca, cb = ckpt(sys.argv[1]), ckpt(sys.argv[2])
assert any(k.endswith(".bin") for k in ca), "no checkpoint files in %s" % sys.argv[1]
if ca != cb:
    sys.exit("checkpoints differ: %s" % sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k)))
last = a[-1]
print("bitwise equal: %d records (last: lm_loss %r, grad_norm %r, comm_bytes %s), %d checkpoint files"
      % (len(a), last["lm_loss"], last["grad_norm"], json.dumps(last["comm_bytes"]), len(ca)))
PY
}
PP="parallel.pipeline_model_parallel_size"; VP="parallel.virtual_pipeline_model_parallel_size"
export MEGATRAIN_SIM_LINK=$LINK
run pp2_on 2 --set $PP=2 --set parallel.overlap_p2p_comm=true
run pp2_off 2 --set $PP=2 --set parallel.overlap_p2p_comm=false
same pp2_on pp2_off
run pp2v2_on 2 --set model.num_layers=4 --set $PP=2 --set $VP=2 --set parallel.overlap_p2p_comm=true
run pp2v2_off 2 --set model.num_layers=4 --set $PP=2 --set $VP=2 --set parallel.overlap_p2p_comm=false
same pp2v2_on pp2v2_off
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then # beside the overlapped gradient reduction
  DP=(--set $PP=2 --set parallel.overlap_grad_reduce=true --set parallel.zero_stage=1)
  run pp2dp2_on 4 "${DP[@]}" --set parallel.overlap_p2p_comm=true
  run pp2dp2_off 4 "${DP[@]}" --set parallel.overlap_p2p_comm=false
  same pp2dp2_on pp2dp2_off
fi
run cp2_link 2 --set parallel.context_parallel_size=2
(unset MEGATRAIN_SIM_LINK; run cp2_nolink 2 --set parallel.context_parallel_size=2)
same cp2_link cp2_nolink
# MoE, ep=2 with a shared expert: the shared expert during the token all-to-alls
RCFG=tests/configs/gpt-moe-test.json
MOE=(--set model.moe_shared_expert_intermediate_size=96 --set parallel.expert_model_parallel_size=2
     --set model.hidden_dropout=0.1 --set model.attention_dropout=0.1)
run ep2_on 2 "${MOE[@]}" --set model.moe_shared_expert_overlap=true
run ep2_off 2 "${MOE[@]}" --set model.moe_shared_expert_overlap=false
same ep2_on ep2_off
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then # the shared expert's TP collectives inside the overlap
  TPSP=(--set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true)
  run tp2ep2_on 4 "${MOE[@]}" "${TPSP[@]}" --set model.moe_shared_expert_overlap=true
  run tp2ep2_off 4 "${MOE[@]}" "${TPSP[@]}" --set model.moe_shared_expert_overlap=false
  same tp2ep2_on tp2ep2_off
fi
