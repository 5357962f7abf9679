#!/usr/bin/env bash
# bench/bench_overlap.sh — communication hidden behind computation (issue 29),
# measured under the simulated link and predicted by the planner.
#
# For each layout on 2 ranks — dp=2 ZeRO-1, dp=2 ZeRO-3, pp=2 1F1B, pp=2 v=2,
# ep=2 with a shared expert, cp=2 — with overlap off and on: the measured step
# time (mean elapsed_ms of the timed iterations), the exposed and the total
# communication of the logging rank (JSONL exposed_comm_ms / comm_ms), and
# `megatrain plan`'s prediction of the same config (time.iteration_s,
# exposed_communication_s, communication_s) with configs/hardware/cpu-sim.json,
# its link fields set to the case's simulated link and its peak to the GEMM
# rate measured at the start (GEMM_GFLOPS=<x> to give it).
#
# The models. dp cases: a layer-dominated model, 16 layers of hidden 256
# (4 heads, seq 128, micro-batch 8, one micro-batch per rank), vocabulary
# 1024 — the test corpus's GPT-2 ids taken mod 1024 (written to $TMP), since
# with the GPT-2 vocabulary the embedding and output layer hold most of a
# small model's gradients, final last and read first, and nothing could
# hide; one bucket per layer (ZeRO buckets never cross a layer). Link
# 0.085,50 (GB/s, µs): the step's reduce-scatter and all-gather (2 x 13 MB
# bus bytes per rank) take about as long as the backward pass. The other
# cases: the test model (tests/configs/gpt-test.json: hidden 64, GPT-2
# vocabulary) with 4 layers; link 0.25,50 for the ep and cp cases (the
# 13 MB of gradients ~ 53 ms per collective). The pp cases run
# untied (no embedding all-reduce; dp 1) with 0.004,100 (the 16 KB stage
# transfers ~ 4 ms each, 8 per stage and step ~ the backward).
# Overlap keys: parallel.overlap_grad_reduce + parallel.overlap_param_gather
# (dp), parallel.overlap_p2p_comm (pp), model.moe_shared_expert_overlap (ep);
# the CP ring always overlaps (no key): one run.
#
# usage: [DP_ONLY=1] bench/bench_overlap.sh [iterations (default 8; the first 2 are not timed)]
# (DP_ONLY=1: the two dp cases only)
# The machine is shared: the load average is printed before and after.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ITERS=${1:-8}
make -s megatrain
source tests/integration/lib.sh   # build/testdata, $TMP, OMPI/BLAS variables
MPI="mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_SIM_LINK"
BASE=(--config "$CFG" --set model.num_layers=4 --set training.train_iters="$ITERS"
      --set training.lr_warmup_iters=1 --set training.eval_interval=0
      --set logging.log_interval="$ITERS")
MOE=(--set model.num_experts=4 --set model.moe_router_topk=2 --set model.moe_ffn_hidden_size=128
     --set model.moe_shared_expert_intermediate_size=128 --set parallel.expert_model_parallel_size=2)
echo "bench_overlap: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before; $ITERS iterations per run"
# the GEMM rate now (the machine is shared: it moves with the load):
# bench/bench_ops' average over a GPT-2 micro-batch's GEMMs, one thread; the
# hardware file's peak is that / its gemm_max (0.7, the ratio measured when
# the file was written), unless GEMM_GFLOPS is given
make -s build/bench/bench_ops
GEMM_GFLOPS=${GEMM_GFLOPS:-$(build/bench/bench_ops 1 3 gemm 2>/dev/null | sed -n 's/.*=> GEMM per micro-batch step: .* ms, \([0-9.]*\) GFLOP\/s average/\1/p')}
echo "GEMM rate: ${GEMM_GFLOPS:-?} GFLOP/s (bench/bench_ops 1 3 gemm)"

# hw LINK -> a hardware file with the link's bandwidth and latency
hw() {
  /usr/bin/python3 - "$1" "$TMP/hw.json" "${GEMM_GFLOPS:-}" <<'PY'
import json, sys
gbs, us = (float(x) for x in sys.argv[1].split(","))
h = json.load(open("configs/hardware/cpu-sim.json"))
h["intra_node_gbs"] = h["inter_node_gbs"] = gbs
h["intra_latency_us"] = h["inter_latency_us"] = us
g = sys.argv[3] if len(sys.argv) > 3 else ""
if g:
    h["peak_tflops_fp32"] = h["peak_tflops_bf16"] = float(g) / h["efficiency"]["gemm_max"] / 1e3
json.dump(h, open(sys.argv[2], "w"))
PY
}

# measure NAME LINK [--set ...] -> "step_ms exposed_ms comm_ms" (means over iterations 3..)
measure() {
  local name=$1 link=$2; shift 2
  MEGATRAIN_SIM_LINK=$link $MPI "$MT" "${BASE[@]}" --set logging.metrics_file="$TMP/$name.jsonl" "$@" \
    >"$TMP/$name.log" 2>&1 || { echo "FAILED: $name: $(grep -m1 error "$TMP/$name.log")" >&2; echo "- - -"; return 0; }
  /usr/bin/python3 - "$TMP/$name.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
r = [x for x in r if "lm_loss" in x and x["iteration"] > 2]
m = lambda k: sum(x[k] for x in r) / len(r)
print("%.1f %.1f %.1f" % (m("elapsed_ms"), m("exposed_comm_ms"), m("comm_ms")))
PY
}

# plan LINK [plan args...] -> "step_ms exposed_ms comm_ms"
plan() {
  local link=$1; shift
  hw "$link"
  if ! "$MT" plan "${BASE[@]}" --world-size 2 --hardware "$TMP/hw.json" --json "$@" >"$TMP/plan.json" \
       2>"$TMP/plan.err"; then
    echo "plan failed: $(head -1 "$TMP/plan.err")" >&2; echo "- - -"; return 0
  fi
  /usr/bin/python3 - "$TMP/plan.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["time"]
print("%.1f %.1f %.1f" % (1e3 * t["iteration_s"], 1e3 * t["exposed_communication_s"], 1e3 * t["communication_s"]))
PY
}

printf "\n%-12s %-4s | %9s %9s %9s %6s | %9s %9s %9s\n" case overlap "step ms" "exposed" "comm" "exp%" \
  "plan step" "exposed" "comm"
row() { # case ov "measured" "planned"
  local m=($3) p=($4) pct=-
  [ "${m[2]}" != - ] && pct=$(/usr/bin/python3 -c "print('%.0f' % (100 * ${m[1]} / max(${m[2]}, 1e-9)))")
  printf "%-12s %-4s | %9s %9s %9s %6s | %9s %9s %9s\n" "$1" "$2" "${m[0]}" "${m[1]}" "${m[2]}" "$pct" \
    "${p[0]}" "${p[1]}" "${p[2]}"
}
DPL=0.25,50; PPL=0.004,100; DPZ=0.085,50
/usr/bin/python3 - "$TS" "$TMP/ts1k_text_document" <<'PY'
import shutil, sys
import numpy as np
np.fromfile(sys.argv[1] + ".bin", dtype=np.uint16).__mod__(1024).astype(np.uint16).tofile(sys.argv[2] + ".bin")
shutil.copy(sys.argv[1] + ".idx", sys.argv[2] + ".idx")
PY
DPM=(--set model.num_layers=16 --set model.hidden_size=256 --set model.seq_length=128
     --set model.vocab_size=1024 --set training.micro_batch_size=8 --set training.global_batch_size=16
     --set "data.data_path=[\"$TMP/ts1k_text_document\"]")
for z in 1 3; do
  Z=("${DPM[@]}" --set parallel.zero_stage=$z)
  OFF=(--set parallel.overlap_grad_reduce=false --set parallel.overlap_param_gather=false)
  ON=(--set parallel.overlap_grad_reduce=true --set parallel.overlap_param_gather=true)
  row "dp2_zero$z" off "$(measure dp$z-off $DPZ "${Z[@]}" "${OFF[@]}")" "$(plan $DPZ "${Z[@]}" "${OFF[@]}")"
  row "dp2_zero$z" on "$(measure dp$z-on $DPZ "${Z[@]}" "${ON[@]}")" "$(plan $DPZ "${Z[@]}" "${ON[@]}" \
    --overlap-grad-reduce --overlap-param-gather)"
done
if [ -z "${DP_ONLY:-}" ]; then
for v in 1 2; do
  P=(--set parallel.pipeline_model_parallel_size=2 --set model.untie_embeddings_and_output_weights=true)
  [ $v = 2 ] && P+=(--set parallel.virtual_pipeline_model_parallel_size=2)
  name=pp2_1f1b; [ $v = 2 ] && name=pp2_v2
  row $name off "$(measure $name-off $PPL "${P[@]}" --set parallel.overlap_p2p_comm=false)" \
    "$(plan $PPL "${P[@]}" --set parallel.overlap_p2p_comm=false)"
  row $name on "$(measure $name-on $PPL "${P[@]}" --set parallel.overlap_p2p_comm=true)" \
    "$(plan $PPL "${P[@]}" --set parallel.overlap_p2p_comm=true --overlap-p2p-comm)"
done
row ep2_shared off "$(measure ep-off $DPL "${MOE[@]}" --set model.moe_shared_expert_overlap=false)" \
  "$(plan $DPL "${MOE[@]}" --set model.moe_shared_expert_overlap=false)"
row ep2_shared on "$(measure ep-on $DPL "${MOE[@]}" --set model.moe_shared_expert_overlap=true)" \
  "$(plan $DPL "${MOE[@]}" --set model.moe_shared_expert_overlap=true --moe-shared-expert-overlap)"
C=(--set parallel.context_parallel_size=2)
row cp2 on "$(measure cp $DPL "${C[@]}")" "$(plan $DPL "${C[@]}")"
fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after"
echo "exp% = exposed / total communication of the logging rank; plan: megatrain plan with configs/hardware/cpu-sim.json and the case's link"
