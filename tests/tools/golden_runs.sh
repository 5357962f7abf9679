#!/usr/bin/env bash
# tests/tools/golden_runs.sh OUTDIR [RUN...] — short training runs whose
# outputs must not change under a refactoring that claims bitwise parity
# (model layout, parameter registration order, config plumbing): for each
# run OUTDIR/<run>/ receives
#   metrics.jsonl   every iteration's record without the timings and measured pipeline
#                   bubbles (lm_loss, grad_norm, val_loss, lr, comm bytes, MoE stats, ...:
#                   exact floats)
#   log.txt         the "lm loss" / "validation loss" lines of the log, timing columns cut
#   ckpt.sha256     sha256 of every checkpoint file (the lock file excluded: host/pid/time)
# plus, for the quick-start run, the greedy `generate` ids and logits.
#
# Procedure (before/after): build the old tree, `bash tests/tools/golden_runs.sh /tmp/before`;
# build the new tree, `bash tests/tools/golden_runs.sh /tmp/after`; then
# `diff -r /tmp/before /tmp/after` must print nothing (identical losses, bitwise, and
# identical checkpoint bytes). Every run writes into the same scratch directory
# (build/golden-run) so that the paths recorded in the checkpoints (the config) match.
#
# Runs (all on the tests' tinyshakespeare data, CPU, fp32, dropout on where the config has it):
#   quick      configs/gpt-tiny.json (the quick start), 6 iterations, 1 process
#   tp2sp_pp2_dp2_zero1  tests/configs/gpt-test.json (4 layers), tp 2 + SP, pp 2, dp 2, ZeRO-1; 8 ranks
#   interleaved_dp2      the same model, pp 2 x vpp 2, dp 2, ZeRO-1, untied; 4 ranks
#   tp2sp_dp2_zero3      gpt-test.json, tp 2 + SP, dp 2, ZeRO-3 (re-pointed weights), full recompute; 4 ranks
#   moe_ep2    tests/configs/gpt-moe-test.json, ep 2; 2 ranks
#   deepseek   tests/configs/gpt-moe-deepseek-test.json (shared experts, expert bias), tp 2 + SP, ep 2; 4 ranks
#   llama      configs/llama-tiny.json, 6 iterations, 1 process
#   llama_qk_tp2_zero2   gpt-test.json as Llama (RoPE, RMSNorm, SwiGLU, GQA, qk_layernorm), tp 2, dp 2, ZeRO-2; 4 ranks
set -eu
OUT=${1:?usage: golden_runs.sh OUTDIR [RUN...]}
shift
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
SHARED=${MEGATRAIN_SHARED_DATA:-$ROOT/../shared/data}
MT=$ROOT/megatrain
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$MT" ] || { echo "golden_runs: ./megatrain not built" >&2; exit 1; }
TS=build/testdata/tinyshakespeare_text_document
if [ ! -f "$TS.idx" ]; then
  mkdir -p build/testdata
  "$MT" preprocess --input "$SHARED/tinyshakespeare.txt" --output-prefix "$TS.tmp" \
    --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
    --append-eod --workers 2 >/dev/null
  mv "$TS.tmp.bin" "$TS.bin"; mv "$TS.tmp.idx" "$TS.idx"
fi
RUN=build/golden-run

# common overrides: short, logged every iteration, evaluated and saved mid-way and at the end
short() {
  echo --set training.train_iters=6 --set training.eval_interval=3 --set training.eval_iters=2 \
    --set training.lr_warmup_iters=2 --set training.lr_decay_iters=6 \
    --set logging.log_interval=1 --set checkpoint.save_interval=3 \
    --set checkpoint.save=$RUN/ckpt --set logging.metrics_file=$RUN/metrics.jsonl \
    --set "data.data_path=[\"$TS\"]"
}
tiny_data() {
  echo --set data.vocab_file=$SHARED/gpt2-vocab.json --set data.merge_file=$SHARED/gpt2-merges.txt
}

golden_log_filter() {
  sed -E 's/^ *\[[^]]*\] //; s/(elapsed time|tokens\/s|throughput|pipeline bubble|ETA|straggler)[^|]*\|?//g;
          s/[| ]+/ /g; s/ $//'
}

# one NAME NP ARGS...: run, then collect metrics, log lines and checkpoint hashes
one() {
  local name=$1 np=$2; shift 2
  rm -rf "$RUN"; mkdir -p "$RUN"
  local launch=("$MT")
  [ "$np" -gt 1 ] && launch=(mpirun -np "$np" --oversubscribe "$MT")
  echo "golden_runs: $name ($np rank(s))" >&2
  if ! "${launch[@]}" "$@" >"$RUN/out.txt" 2>&1; then
    tail -n 20 "$RUN/out.txt" >&2
    echo "golden_runs: $name failed" >&2
    exit 1
  fi
  mkdir -p "$OUT/$name"
  # every field but the timings, floats as JSON wrote them (round-trip exact)
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    for k in ("elapsed_ms", "tokens_per_s", "tflops_per_device", "pp_bubble",
              "pp_bubble_busiest_stage") + tuple(k for k in o if k.startswith("straggler")):
        o.pop(k, None)
    print(json.dumps(o, sort_keys=True))' "$RUN/metrics.jsonl" >"$OUT/$name/metrics.jsonl"
  # the loss lines without what varies from run to run (time stamp, timings,
  # throughput, ETA, straggler, measured pipeline bubble); separators collapsed
  grep -E 'lm loss|validation loss' "$RUN/out.txt" | golden_log_filter >"$OUT/$name/log.txt"
  (cd "$RUN/ckpt" && find . -type f ! -name .megatrain.lock | LC_ALL=C sort | xargs sha256sum) \
    >"$OUT/$name/ckpt.sha256"
  [ -s "$OUT/$name/ckpt.sha256" ] || { echo "golden_runs: $name saved no checkpoint" >&2; exit 1; }
}

want() { [ $# -eq 0 ] && return 0; local r; for r in "${SEL[@]}"; do [ "$r" = "$1" ] && return 0; done; return 1; }
SEL=("$@")
sel() { [ ${#SEL[@]} -eq 0 ] || want "$1"; }

if sel quick; then
  one quick 1 --config configs/gpt-tiny.json $(short) $(tiny_data)
  "$MT" generate --load "$RUN/ckpt" --prompt "ROMEO: What" --max-new-tokens 8 --temperature 0 \
    --print-ids --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
    --dump-logits "$OUT/quick/generate.logits" >"$OUT/quick/generate.txt" 2>/dev/null
fi
sel tp2sp_pp2_dp2_zero1 &&
  one tp2sp_pp2_dp2_zero1 8 --config tests/configs/gpt-test.json $(short) --set model.num_layers=4 \
    --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
    --set parallel.pipeline_model_parallel_size=2 --set parallel.zero_stage=1
sel interleaved_dp2 &&
  one interleaved_dp2 4 --config tests/configs/gpt-test.json $(short) --set model.num_layers=4 \
    --set parallel.pipeline_model_parallel_size=2 \
    --set parallel.virtual_pipeline_model_parallel_size=2 --set parallel.zero_stage=1 \
    --set model.untie_embeddings_and_output_weights=true
sel tp2sp_dp2_zero3 &&
  one tp2sp_dp2_zero3 4 --config tests/configs/gpt-test.json $(short) \
    --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
    --set parallel.zero_stage=3 --set model.recompute_granularity=full
sel moe_ep2 &&
  one moe_ep2 2 --config tests/configs/gpt-moe-test.json $(short) \
    --set parallel.expert_model_parallel_size=2
sel deepseek &&
  one deepseek 4 --config tests/configs/gpt-moe-deepseek-test.json $(short) \
    --set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true \
    --set parallel.expert_model_parallel_size=2
sel llama &&
  one llama 1 --config configs/llama-tiny.json $(short) $(tiny_data)
sel llama_qk_tp2_zero2 &&
  one llama_qk_tp2_zero2 4 --config tests/configs/gpt-test.json $(short) \
    --set model.position_embedding_type=rope --set model.normalization=RMSNorm \
    --set model.swiglu=true --set model.add_bias_linear=false \
    --set model.group_query_attention=true --set model.num_query_groups=2 \
    --set model.qk_layernorm=true --set model.untie_embeddings_and_output_weights=true \
    --set parallel.tensor_model_parallel_size=2 --set parallel.zero_stage=2
rm -rf "$RUN"
echo "golden_runs: wrote $OUT" >&2
