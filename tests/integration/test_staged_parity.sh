#!/usr/bin/env bash
# The staging engine (parallel/comm_staged.c, MT_ENGINE_STAGED) against the
# MPI engine: with MEGATRAIN_TEST_DEVICE_BUFFERS=1 the cpu backend calls
# every buffer device memory, so every collective and point-to-point of the
# trainer's groups is copied to host staging buffers, run by the MPI
# engine's code and copied back. Each layout — tp=2 + SP, pp=2 (1F1B),
# pp=2 v=2 (interleaved), dp=2 ZeRO-3, ep=2 MoE, cp=2, and tp=2 + SP in
# bf16 (bf16 collectives); a few steps, tiny
# shapes, dropout on — must equal the same layout without the switch
# BITWISE (lm loss, grad norm, validation loss) with the same bytes per
# group in the metrics (comm counters unchanged), and the start-up line
# must name the engine.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x MEGATRAIN_TEST_DEVICE_BUFFERS"
MOE=tests/configs/gpt-moe-test.json
run() { # name switch config args...
  local name=$1 sw=$2 cfg=$3; shift 3
  MEGATRAIN_TEST_DEVICE_BUFFERS=$sw $MPI -np 2 "$MT" --config $cfg --set training.train_iters=2 \
    --set training.lr_warmup_iters=1 --set training.eval_interval=2 --set training.eval_iters=1 \
    --set logging.log_interval=1 --set model.hidden_dropout=0.1 --set model.attention_dropout=0.1 \
    --set logging.metrics_file="$TMP/$name.jsonl" "$@" >"$TMP/$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
same_comm_bytes() { # a.jsonl b.jsonl
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
def load(p):
    return [(o["iteration"], o.get("comm_bytes")) for o in map(json.loads, open(p)) if "lm_loss" in o]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a == b, "comm bytes differ:\n%s\n%s" % (a, b)
print("comm bytes per group equal over %d iterations (%s)" % (len(a), a[-1][1]))
PY
}
pair() { # name config args...
  local name=$1 cfg=$2; shift 2
  echo "== $name: staged vs mpi"
  run ${name}_mpi 0 $cfg "$@"
  run ${name}_staged 1 $cfg "$@"
  grep -q "communication: mpi$" "$TMP/${name}_mpi.log" ||
    { echo "the run without the switch does not use the mpi engine:"; grep "megatrain: device" "$TMP/${name}_mpi.log"; exit 1; }
  grep -q "communication: mpi (staged through host)" "$TMP/${name}_staged.log" ||
    { echo "the run with the switch does not use the staging engine:"; grep "megatrain: device" "$TMP/${name}_staged.log"; exit 1; }
  compare_metrics "$TMP/${name}_staged.jsonl" "$TMP/${name}_mpi.jsonl" 0
  same_comm_bytes "$TMP/${name}_staged.jsonl" "$TMP/${name}_mpi.jsonl"
}
P=parallel
pair tp2_sp $CFG --set $P.tensor_model_parallel_size=2 --set $P.sequence_parallel=true
pair pp2 $CFG --set model.num_layers=4 --set $P.pipeline_model_parallel_size=2
pair pp2_v2 $CFG --set model.num_layers=4 --set $P.pipeline_model_parallel_size=2 \
  --set $P.virtual_pipeline_model_parallel_size=2
pair dp2_zero3 $CFG --set $P.zero_stage=3
pair ep2_moe $MOE --set $P.expert_model_parallel_size=2
pair cp2 $CFG --set $P.context_parallel_size=2
pair tp2_sp_bf16 $CFG --set training.precision=bf16 --set $P.tensor_model_parallel_size=2 \
  --set $P.sequence_parallel=true
echo "staging engine: every layout bitwise equal to the MPI engine"
