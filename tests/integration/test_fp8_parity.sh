#!/usr/bin/env bash
# FP8 layout parity (docs/fp8.md): the 2-layer test model in bf16 with FP8
# linear layers (hybrid), 4 steps, dropout on; each layout stays within 2e-2
# relative of the 1-process FP8 run on lm loss and grad norm at every step:
# tp=2 + sequence parallel (delayed: amaxes all-reduced over tp), cp=2
# (delayed: over cp) and pp=2 delayed, which must end with the 1-process
# run's amax histories bitwise (the checkpoints' fp8_meta tensors), in CI;
# MEGATRAIN_TEST_FULL=1 runs every recipe on tp=2+SP, cp=2, pp=2 and dp=2
# ZeRO-1 (delayed: amaxes reduced over dp too), dp=2 ZeRO-1 delayed with
# tp_only_amax_red, and one process with ZeRO-3 delayed against one
# without within 1e-8; MoE with ep=2 (and etp=2, FULL) below;
# fp8_param_gather (dp=2 ZeRO-1 in CI, and its gather bytes) below. About 50 s.
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
BASE=(--config $CFG --set training.precision=bf16 --set training.train_iters=4
      --set logging.log_interval=1 --set training.eval_interval=0 --set training.fp8_format=hybrid)
run() { # name np recipe args...
  local name=$1 np=$2 r=$3; shift 3
  local cmd=("$MT" "${BASE[@]}" --set training.fp8_recipe=$r --set logging.metrics_file="$TMP/$name.jsonl" "$@")
  case "$name" in one-delayed|pp2-delayed) cmd+=(--set checkpoint.save="$TMP/$name") ;; esac
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
declare -A LAYOUT=(
  [tp2sp]="--set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true"
  [cp2]="--set parallel.context_parallel_size=2"
  [pp2]="--set parallel.pipeline_model_parallel_size=2"
  [dp2z1]="--set parallel.zero_stage=1"
  [dp2z1tponly]="--set parallel.zero_stage=1 --set training.tp_only_amax_red=true")
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  CASES=""
  for l in tp2sp cp2 pp2 dp2z1; do for r in tensorwise delayed blockwise mxfp8; do CASES+="$l:$r "; done; done
  CASES+="dp2z1tponly:delayed"
else
  CASES="tp2sp:delayed cp2:delayed pp2:delayed"
fi
declare -A done_one=()
for c in $CASES; do
  l=${c%%:*} r=${c#*:}
  [ -n "${done_one[$r]:-}" ] || { run "one-$r" 1 "$r"; done_one[$r]=1; }
  # shellcheck disable=SC2086
  run "$l-$r" 2 "$r" ${LAYOUT[$l]}
  echo -n "$l $r vs 1 process: "; compare_metrics "$TMP/$l-$r.jsonl" "$TMP/one-$r.jsonl" 2e-2
done
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  # pp=2 keeps several micro-batches in flight: each backward (and each
  # recomputed forward) takes its own forward's delayed scales, so full
  # recomputation is bitwise the run without it
  run pp2-delayed-full 2 delayed ${LAYOUT[pp2]} --set model.recompute_granularity=full
  echo -n "pp2 delayed with full recomputation vs without: "
  compare_metrics "$TMP/pp2-delayed-full.jsonl" "$TMP/pp2-delayed.jsonl" 0
  # ZeRO-3 re-points the weights at gathered buffers every use: the delayed
  # state is keyed by (layer, linear), not by the weight's address (keyed by
  # address, one process with ZeRO-3 differed from one without by 3.1e-3)
  run z3-delayed 1 delayed --set parallel.zero_stage=3
  echo -n "1 process ZeRO-3 delayed vs without ZeRO: "
  compare_metrics "$TMP/z3-delayed.jsonl" "$TMP/one-delayed.jsonl" 1e-8
fi
# 1F1B runs a second forward before the first backward: each backward takes
# its own forward's scales, so the histories are one process's bitwise
# fp8_param_gather (docs/fp8.md "FP8 parameter gather"): ZeRO's parameter
# all-gather carries the FP8 linears' weights as e4m3 codes. Against one
# process with fp8_param_gather (ZeRO-1 over dp=1: the same quantization of
# the same weights): within 1e-6 (tensorwise: dp changes only the fp32
# reduction order; reading the stale bf16 copies of non-owned FP8 weights
# instead of the codes measured 1.6e-2, inside the issue's 2e-2); the
# bytes of the gather, from the dp group's all-gather counter, equal
# 2(S - F) + F for S sharded and F FP8-weight elements of this shape, and
# the amax all-reduce 4 bytes per FP8 weight (over dp, and again over tp).
# CI: dp=2 ZeRO-1 tensorwise; MEGATRAIN_TEST_FULL=1: also dp=2 ZeRO-2,
# tp=2+SP x dp=2 ZeRO-1, dp=2 ZeRO-1 bitwise the run without
# fp8_param_gather, and blockwise (dp=2, its bitwise twin, tp=2+SP x dp=2).
PG=(--set training.fp8_param_gather=true --set training.fp8_recipe=tensorwise)
pg_bytes() { # log tp dp [blockwise]: the printed bytes against the formula of gpt-test's shape
  /usr/bin/python3 - "$1" "$2" "$3" "${4:-tensorwise}" <<'PY'
import re, sys
log, tp, dp = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
block = sys.argv[4] == "blockwise"
h, L, s = 64, 2, 32                      # gpt-test; vocab 50257 padded to a multiple of 128 * tp
V = -(-50257 // (128 * tp)) * 128 * tp
layer = (2 * h + 3 * h * h // tp + 3 * h // tp + h * h // tp + h + 2 * h
         + 4 * h * h // tp + 4 * h // tp + 4 * h * h // tp + h)
S = V // tp * h + s * h + L * layer + 2 * h   # tied output layer, final norm
F = L * (12 * h * h) // tp
m = re.search(r"fp8_param_gather: (\d+) FP8 weights \((\d+) .*?\), (\d+) of (\d+) sharded.*?"
              r"over dp=(\d+).*?dp counter (\d+); amax all-reduce (\d+) bytes", log)
assert m, "no fp8_param_gather line in " + sys.argv[1]
nw, ns, f, s_, d, counter, amax = map(int, m.groups())
want = 2 * (S - F) + F
# scales: one per weight (tensorwise, its amax also reduced over tp), or one
# per 128x128 block of each weight's tp shard [rows, cols] (blockwise)
shapes = [(3 * h // tp, h), (h, h // tp), (4 * h // tp, h), (h, 4 * h // tp)]
blocks = L * sum(-(-r // 128) * -(-c // 128) for r, c in shapes)
assert (nw, ns, f, s_, d) == (4 * L, blocks if block else 4 * L, F, S, dp), (nw, ns, f, s_, d)
assert counter == want, "gathered %d bytes, formula %d" % (counter, want)
assert amax == 4 * ns * (1 + (tp > 1 and not block)), amax
print("fp8_param_gather bytes (tp %d dp %d): counter %d = 2(S-F)+F (S %d, F %d); bf16 gather "
      "%d: %.2f%% fewer; amax all-reduce %d" % (tp, dp, counter, S, F, 2 * S, 100 * F / (2 * S), amax))
PY
}
run one-pg 1 tensorwise "${PG[@]}" --set parallel.zero_stage=1
run dp2z1-pg 2 tensorwise "${PG[@]}" --set parallel.zero_stage=1
echo -n "dp2 ZeRO-1 fp8_param_gather vs 1 process: "
compare_metrics "$TMP/dp2z1-pg.jsonl" "$TMP/one-pg.jsonl" 1e-6
pg_bytes "$TMP/dp2z1-pg.log" 1 2
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  run dp2z2-pg 2 tensorwise "${PG[@]}" --set parallel.zero_stage=2
  echo -n "dp2 ZeRO-2 fp8_param_gather vs 1 process: "
  compare_metrics "$TMP/dp2z2-pg.jsonl" "$TMP/one-pg.jsonl" 1e-6
  pg_bytes "$TMP/dp2z2-pg.log" 1 2
  run tp2dp2-pg 4 tensorwise "${PG[@]}" --set parallel.zero_stage=1 ${LAYOUT[tp2sp]}
  echo -n "tp2+SP x dp2 ZeRO-1 fp8_param_gather vs 1 process: "
  compare_metrics "$TMP/tp2dp2-pg.jsonl" "$TMP/one-pg.jsonl" 2e-2
  pg_bytes "$TMP/tp2dp2-pg.log" 2 2
  [ -f "$TMP/dp2z1-tensorwise.jsonl" ] || run dp2z1-tensorwise 2 tensorwise ${LAYOUT[dp2z1]}
  echo -n "dp2 ZeRO-1 tensorwise with vs without fp8_param_gather: "
  compare_metrics "$TMP/dp2z1-pg.jsonl" "$TMP/dp2z1-tensorwise.jsonl" 0
  # blockwise: 128x128 weight blocks straddle the shard boundary (fc1's
  # rows 126/127 at dp=2): block amaxes reduced over dp, power-of-2 scales
  PGB=(--set training.fp8_param_gather=true --set parallel.zero_stage=1)
  run one-pgb 1 blockwise "${PGB[@]}"
  run dp2z1-pgb 2 blockwise "${PGB[@]}"
  echo -n "dp2 ZeRO-1 blockwise fp8_param_gather vs 1 process: "
  compare_metrics "$TMP/dp2z1-pgb.jsonl" "$TMP/one-pgb.jsonl" 1e-6
  pg_bytes "$TMP/dp2z1-pgb.log" 1 2 blockwise
  [ -f "$TMP/dp2z1-blockwise.jsonl" ] || run dp2z1-blockwise 2 blockwise ${LAYOUT[dp2z1]}
  echo -n "dp2 ZeRO-1 blockwise with vs without fp8_param_gather: "
  compare_metrics "$TMP/dp2z1-pgb.jsonl" "$TMP/dp2z1-blockwise.jsonl" 0
  run tp2dp2-pgb 4 blockwise "${PGB[@]}" ${LAYOUT[tp2sp]}
  echo -n "tp2+SP x dp2 ZeRO-1 blockwise fp8_param_gather vs 1 process: "
  compare_metrics "$TMP/tp2dp2-pgb.jsonl" "$TMP/one-pgb.jsonl" 2e-2
  pg_bytes "$TMP/tp2dp2-pgb.log" 2 2 blockwise
fi
echo -n "pp2 delayed amax histories vs 1 process:"
/usr/bin/python3 tests/integration/fp8_meta_check.py same "$TMP/pp2-delayed" "$TMP/one-delayed"
# MoE (gpt-moe-test cut to 2 layers, layer 0 MoE, no biases as ETP needs; 2
# steps of 2 micro-batches per rank): ep=2 (world 2: each expert on one rank, with its rows from both
# ranks) in CI with delayed scaling; MEGATRAIN_TEST_FULL=1 every recipe at
# ep=2 and at expert_tensor_parallel_size=2 (the experts' amaxes all-reduced
# over the ETP pair). Against one process with the same global batch.
MOE=(--config tests/configs/gpt-moe-test.json --set training.precision=bf16
     --set model.num_layers=2 --set training.train_iters=2 --set training.global_batch_size=8
     --set training.lr_warmup_iters=1 --set logging.log_interval=1 --set training.eval_interval=0
     --set training.fp8_format=hybrid --set model.add_bias_linear=false)
run_moe() { # name np recipe args...
  local name=$1 np=$2 r=$3; shift 3
  local cmd=("$MT" "${MOE[@]}" --set training.fp8_recipe=$r --set logging.metrics_file="$TMP/$name.jsonl" "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
declare -A MLAYOUT=(
  [ep2]="--set parallel.expert_model_parallel_size=2"
  [etp2]="--set parallel.expert_tensor_parallel_size=2")
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  CASES=""
  for l in ep2 etp2; do for r in tensorwise delayed blockwise mxfp8; do CASES+="$l:$r "; done; done
else
  CASES="ep2:delayed"
fi
declare -A done_moe=()
for c in $CASES; do
  l=${c%%:*} r=${c#*:}
  [ -n "${done_moe[$r]:-}" ] || { run_moe "moe-one-$r" 1 "$r"; done_moe[$r]=1; }
  # shellcheck disable=SC2086
  run_moe "moe-$l-$r" 2 "$r" ${MLAYOUT[$l]}
  echo -n "MoE $l $r vs 1 process: "; compare_metrics "$TMP/moe-$l-$r.jsonl" "$TMP/moe-one-$r.jsonl" 2e-2
done
# DeepSeek-tiny (tests/configs/deepseek-tiny-test.json: MLA + sigmoid MoE
# with a shared expert + one MTP depth), hybrid, 2 steps, against one
# process with the same global batch: lm loss, grad norm and MTP loss within
# 2e-2. Every delayed state is keyed by its global identity (layer, linear,
# global expert), so ZeRO-3's gathers and ep / etp keep one history each;
# MLA's replicated down projections reduce their amaxes over tp (each rank
# sees [s/tp] rows under SP). CI: delayed on tp=2+SP (experts split over
# etp = tp); MEGATRAIN_TEST_FULL=1: delayed on tp=2+SP, pp=2 (MTP on the
# last stage), ep=2 with etp=2 (world 4), dp=2 ZeRO-3 and cp=2, then every
# other recipe on tp=2+SP.
DS=(--config tests/configs/deepseek-tiny-test.json --set training.precision=bf16
    --set training.train_iters=2 --set training.global_batch_size=$(full_or 8 4)
    --set training.lr_warmup_iters=1 --set logging.log_interval=1 --set training.eval_interval=0
    --set training.fp8_format=hybrid)
run_ds() { # name np recipe args...
  local name=$1 np=$2 r=$3; shift 3
  local cmd=("$MT" "${DS[@]}" --set training.fp8_recipe=$r --set logging.metrics_file="$TMP/$name.jsonl" "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
}
declare -A DLAYOUT=(
  [tp2sp]="2 --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true"
  [pp2]="2 --set parallel.pipeline_model_parallel_size=2"
  [ep2etp2]="4 --set parallel.expert_model_parallel_size=2 --set parallel.expert_tensor_parallel_size=2"
  [dp2z3]="2 --set parallel.zero_stage=3"
  [cp2]="2 --set parallel.context_parallel_size=2")
CASES=$(full_or "tp2sp:delayed pp2:delayed ep2etp2:delayed dp2z3:delayed cp2:delayed
  tp2sp:tensorwise tp2sp:blockwise tp2sp:mxfp8" "tp2sp:delayed")
declare -A done_ds=()
for c in $CASES; do
  l=${c%%:*} r=${c#*:}
  [ -n "${done_ds[$r]:-}" ] || { run_ds "ds-one-$r" 1 "$r"; done_ds[$r]=1; }
  # shellcheck disable=SC2086
  run_ds "ds-$l-$r" ${DLAYOUT[$l]%% *} "$r" ${DLAYOUT[$l]#* }
  echo -n "DeepSeek-tiny $l $r vs 1 process: "
  compare_metrics_mtp "$TMP/ds-$l-$r.jsonl" "$TMP/ds-one-$r.jsonl" 2e-2
done
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  # one process with ZeRO-3 (weights re-pointed at gathered buffers at every
  # use) keeps the same delayed states as without: keyed by identity, the
  # experts', MTP's and MLA's included (by address they split)
  run_ds ds-z3-delayed 1 delayed --set parallel.zero_stage=3
  echo -n "DeepSeek-tiny 1 process ZeRO-3 delayed vs without ZeRO: "
  compare_metrics_mtp "$TMP/ds-z3-delayed.jsonl" "$TMP/ds-one-delayed.jsonl" 1e-8
fi
echo "fp8 layout parity: OK"
