#!/usr/bin/env bash
# tests/integration/test_cuda_layouts_accept.sh — every layout is accepted on
# device "cuda" (issue 19, item 1): nothing in the layout table is refused at
# configuration time or set-up because of the device.
#
# The trainer's order is: every configuration check (config/config_check.c,
# through mt_config_load, and mt_config_check_trainable) in main.c, then
# mt_trainer_setup, whose first device step is the backend. So a run with
# `--set device=cuda` on a machine WITHOUT a GPU passes every config and layout
# check and stops at backend creation: exit 1 with "no usable CUDA device".
# (A CUDA=0 build stops there too, saying it was built with CUDA=0.) A config
# refusal would be exit 2 with the key's message instead.
#
# Each layout runs under `mpirun -np N` with device=cuda:
#   tp=2+SP, pp=2 1F1B, pp=2 v=2 (interleaved) with selective recompute,
#   uneven pp (3 layers: 1 + 2) in bf16, dp=2 ZeRO-1/2/3, cp=2 with full
#   recompute; MoE: ep=2 (tests/configs/gpt-moe-test.json), etp=2, MoE + pp=2, and
#   ep=2 + ZeRO-3 in bf16, configs/gpt-moe.json as shipped (tp=2+SP, pp=2, ep=2, ZeRO-1: 8 ranks);
#   parallel.distributed_backend "mpi" and "nccl" when this build has the key.
# A control case (tensor_model_parallel_size 3 on 2 ranks, device cuda) must
# still be refused with exit 2: config checks come before the backend.
#
# With a GPU (nvidia-smi lists one) each layout instead trains one step on
# that GPU and must exit 0; multi-rank layouts then share the one GPU through
# parallel.distributed_backend "mpi" (NCCL refuses two ranks on one GPU).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
t_start=$(date +%s.%N)
gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then gpu=1; fi
# does this build know parallel.distributed_backend? (topology runs the config checks only)
db=0
if "$MT" topology --config "$CFG" --world-size 1 --set parallel.distributed_backend=mpi \
  >/dev/null 2>&1; then db=1; fi
# the backend's refusal without a GPU (a CUDA=0 build says so instead)
NOGPU='no usable CUDA device|built with CUDA=0'
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails+1)); }

# run NAME NP CONFIG [--set k=v]...
run() {
  local name=$1 np=$2 cfg=$3; shift 3
  local extra=()
  [ $gpu = 1 ] && [ $db = 1 ] && [ "$np" -gt 1 ] && extra=(--set parallel.distributed_backend=mpi)
  local log="$TMP/$name.log" rc=0
  timeout 120 mpirun -np "$np" --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle \
    -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$MT" --config "$cfg" --set device=cuda \
    --set training.train_iters=1 --set training.lr_warmup_iters=0 --set training.eval_interval=0 \
    --set checkpoint.save=null \
    --set checkpoint.load=null --set logging.metrics_file=null \
    --set data.data_path='["build/testdata/tinyshakespeare_text_document"]' \
    "$@" "${extra[@]}" >"$log" 2>&1 || rc=$?
  if [ $gpu = 1 ]; then
    if [ $rc -eq 0 ]; then ok "$name ($np ranks): one step on the GPU"
    else bad "$name ($np ranks): exit $rc on the GPU"; grep -m3 'error' "$log"; fi
  elif [ $rc -eq 1 ] && grep -qE "$NOGPU" "$log"; then
    ok "$name ($np ranks): past every config check, stopped at the backend"
  else
    bad "$name ($np ranks): exit $rc, expected 1 with 'no usable CUDA device'"
    grep -m3 'error' "$log" || tail -3 "$log"
  fi
}

G="$CFG"
M=tests/configs/gpt-moe-test.json
P="parallel.pipeline_model_parallel_size"
run tp2_sp 2 "$G" --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true
run pp2_1f1b 2 "$G" --set $P=2
run pp2_v2_recompute_selective 2 "$G" --set model.num_layers=4 --set $P=2 \
  --set parallel.virtual_pipeline_model_parallel_size=2 --set model.recompute_granularity=selective
run pp2_uneven_bf16 2 "$G" --set model.num_layers=3 --set $P=2 \
  --set parallel.num_layers_in_first_pipeline_stage=1 --set training.precision=bf16
for z in 1 2 3; do run dp2_zero$z 2 "$G" --set parallel.zero_stage=$z; done
run cp2_recompute_full 2 "$G" --set parallel.context_parallel_size=2 \
  --set model.recompute_granularity=full
run moe_ep2 2 "$M" --set parallel.expert_model_parallel_size=2
run moe_etp2 2 "$M" --set parallel.expert_tensor_parallel_size=2 --set model.add_bias_linear=false
run moe_pp2 2 "$M" --set $P=2
run moe_bf16_zero3 2 "$M" --set training.precision=bf16 --set parallel.expert_model_parallel_size=2 \
  --set parallel.zero_stage=3
run gpt_moe_json 8 configs/gpt-moe.json
if [ $db = 1 ] && [ $gpu = 0 ]; then
  run backend_mpi 2 "$G" --set parallel.distributed_backend=mpi --set $P=2
  run backend_nccl 2 "$M" --set parallel.distributed_backend=nccl \
    --set parallel.expert_model_parallel_size=2
elif [ $db = 0 ]; then
  echo "note: this build has no parallel.distributed_backend key: its cases are not run"
fi

# control: a real config error on cuda is still refused (exit 2) before any backend
rc=0
timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$MT" --config "$G" --set device=cuda \
  --set parallel.tensor_model_parallel_size=3 >"$TMP/ctl.log" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -q 'tensor_model_parallel_size' "$TMP/ctl.log" &&
   ! grep -qE "$NOGPU" "$TMP/ctl.log"; then
  ok "control: tp=3 on 2 ranks refused by the config check (exit 2) before the backend"
else
  bad "control: tp=3 on 2 ranks: exit $rc"; head -3 "$TMP/ctl.log"
fi
dt=$(/usr/bin/python3 -c "import time,sys; print('%.1f' % (time.time() - float(sys.argv[1])))" "$t_start")
[ $fails -eq 0 ] || { echo "$fails case(s) failed (${dt} s)"; exit 1; }
echo "every layout accepted on device cuda ($([ $gpu = 1 ] && echo 'one step each on the GPU' || echo 'no GPU: each stopped at the backend'), ${dt} s)"
