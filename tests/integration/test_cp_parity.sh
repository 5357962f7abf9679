#!/usr/bin/env bash
# Context parallelism through the trainer (issue 15): 20 steps with dropout
# on (hidden and attention 0.1); every layout reproduces its single-process
# run, lm loss and grad norm (and validation loss) within 1e-5 relative every
# step, and the trainer checks after every step
# (training.check_replicas_interval=1) that the parameters are bitwise
# identical on all data x context parallel ranks (replicated ones on all TP
# ranks, experts on all expert-data-parallel ranks). Layouts: cp=2, cp=4,
# tp=2 + SP + cp=2, pp=2 + cp=2, cp=2 + dp=2 + ZeRO-2, an MoE model (4
# experts top-2, capacity 1.0, aux losses) at cp=2 with ep=2, and the
# Llama-style model (RoPE, RMSNorm, SwiGLU, GQA, no biases, qk norm) at cp=2;
# the MoE run's routing statistics (load balancing and z loss, dropped
# tokens) equal one process's too; the training loop's activation peak per
# rank (allocator) at cp=2 and cp=4 is exactly 1/cp of one process's.
# The CP group's logged bytes per step equal the analytic ring count.
# CI (MEGATRAIN_TEST_FULL unset) trains 10 steps instead of 20 on every
# layout; FULL trains 20.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
export MEGATRAIN_MEM_REPORT=1 # per-rank allocator peaks on stderr (trainer/train.c)
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_MEM_REPORT"
LLAMA=(--set model.position_embedding_type=rope --set model.normalization=RMSNorm
       --set model.swiglu=true --set model.group_query_attention=true --set model.num_query_groups=2
       --set model.add_bias_linear=false --set model.qk_layernorm=true --set training.lr=5e-4)
MOE=(--set model.num_experts=4 --set model.moe_router_topk=2 --set model.moe_ffn_hidden_size=64
     --set model.moe_layer_freq=1 --set model.moe_aux_loss_coeff=1e-2 --set model.moe_z_loss_coeff=1e-3
     --set model.moe_expert_capacity_factor=1.0 --set parallel.expert_tensor_parallel_size=1)
CP="parallel.context_parallel_size"; TP="parallel.tensor_model_parallel_size"
SP="parallel.sequence_parallel"; PP="parallel.pipeline_model_parallel_size"
run() { # name np args...
  local name=$1 np=$2; shift 2
  local cmd=("$MT" --config $CFG --set logging.metrics_file="$TMP/$name.jsonl"
             --set training.check_replicas_interval=1 --set logging.log_interval=1
             --set training.train_iters=$ITERS "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
  if [ "$np" != 1 ]; then grep -q "identical on all" "$TMP/$name.log" ||
    { echo "run $name: no replica check reported"; tail -5 "$TMP/$name.log"; exit 1; }; fi
}
check() { echo "== $1 vs $2"; compare_metrics "$TMP/$1.jsonl" "$TMP/$2.jsonl" 1e-5; }
ITERS=$(full_or 20 10)
t0=$SECONDS
run base 1
run cp2 2 --set $CP=2
check cp2 base
run cp4 4 --set $CP=4
check cp4 base
grep -h "identical on all" "$TMP/cp4.log"
# activation peak of the training loop per rank (allocator): exactly 1/cp of
# one process's (every saved tensor is per local token, the lse [b, np, s/cp];
# nothing of the activations is replicated over CP)
/usr/bin/python3 - "$TMP" <<'PY'
import json, sys
def peaks(name):  # stderr lines of the ranks may land inside the logger's stdout lines
    text, tag, out = open("%s/%s.log" % (sys.argv[1], name)).read(), "megatrain-mem-peak ", []
    i = text.find(tag)
    while i >= 0:
        o, _ = json.JSONDecoder().raw_decode(text, i + len(tag))
        out.append(o["peak"]["activations"])
        i = text.find(tag, i + 1)
    return out
base = peaks("base")[0]
for name, cp in (("cp2", 2), ("cp4", 4)):
    p = peaks(name)
    assert len(p) == cp and all(x * cp == base for x in p), "%s: activation peaks %s, want %d / %d" % (name, p, base, cp)
    print("activation peak per rank at cp=%d: %d bytes = %d / %d (cp=1)" % (cp, p[0], base, cp))
PY
run tp2_sp_cp2 4 --set $TP=2 --set $SP=true --set $CP=2
check tp2_sp_cp2 base
run pp2_cp2 4 --set $PP=2 --set $CP=2
check pp2_cp2 base
run cp2_dp2_z2 4 --set $CP=2 --set parallel.zero_stage=2
check cp2_dp2_z2 base
run moe_base 1 "${MOE[@]}"
run moe_cp2_ep2 2 "${MOE[@]}" --set $CP=2 --set parallel.expert_model_parallel_size=2
check moe_cp2_ep2 moe_base
# routing statistics count each micro-batch once (CP rank 0 records, the
# trainer sums over dp x cp): equal to one process's every step
/usr/bin/python3 - "$TMP/moe_cp2_ep2.jsonl" "$TMP/moe_base.jsonl" <<'PY'
import json, sys
ld = lambda p: {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o}
a, b = ld(sys.argv[1]), ld(sys.argv[2])
for it in sorted(b):
    for k in ("load_balancing_loss", "z_loss", "dropped_fraction", "dropped_tokens"):
        x, y = a[it][k], b[it][k]
        assert abs(x - y) <= 1e-5 * max(abs(y), 1e-30), "iteration %d %s: %r vs %r" % (it, k, x, y)
print("MoE statistics agree over %d iterations (load balancing, z loss, dropped tokens)" % len(b))
PY
run llama_base 1 "${LLAMA[@]}"
run llama_cp2 2 "${LLAMA[@]}" --set $CP=2
check llama_cp2 llama_base
# bytes sent over the CP group per step (logged comm_bytes "cp") equal the
# analytic ring count: per micro-batch and layer (cp-1) K/V blocks forward,
# (cp-1) K/V + cp dK/dV blocks backward, a block = s/cp * b * ng_local * 2 *
# hn * 4 bytes (gpt-test.json: s 32, b 2, 2 layers, 8 samples, hn 16)
/usr/bin/python3 - "$TMP" <<'PY'
import json, sys
for name, cp, tp, dp, ng in (("cp2", 2, 1, 1, 4), ("cp4", 4, 1, 1, 4), ("tp2_sp_cp2", 2, 2, 1, 4),
                             ("cp2_dp2_z2", 2, 1, 2, 4), ("llama_cp2", 2, 1, 1, 2)):
    block = 32 // cp * 2 * (ng // tp) * 2 * 16 * 4
    want = (8 // (2 * dp)) * 2 * (3 * cp - 2) * block
    for o in map(json.loads, open("%s/%s.jsonl" % (sys.argv[1], name))):
        if "lm_loss" in o:
            got = o["comm_bytes"]["cp"]
            assert got == want, "%s iteration %d: cp bytes %d, analytic %d" % (name, o["iteration"], got, want)
    print("%s: %d bytes over the CP group per step per rank = analytic ring count" % (name, want))
PY
echo "test_cp_parity: all layouts agree ($((SECONDS - t0)) s)"
