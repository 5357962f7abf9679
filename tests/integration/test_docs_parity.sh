#!/usr/bin/env bash
# Documents inside packed samples (issue 30): data.reset_attention_mask,
# data.reset_position_ids and data.eod_mask_loss together, on tinyshakespeare
# preprocessed one line per document (about three end-of-document tokens in
# every 32-token sample), 10 steps with dropout on (hidden and attention 0.1).
# Every layout reproduces the single-process run, lm loss and grad norm (and
# validation loss) within 1e-5 relative every step, with the trainer's
# replica check after every step: tp=2 + SP, cp=2 (load-balanced chunks and
# the K/V ring read the document starts by global position), cp=2 + tp=2,
# pp=2, dp=2 + ZeRO-1; and cp=2 of the Llama-style block (RoPE, which keeps
# the positions; reset_attention_mask and eod_mask_loss). The flags change
# the run: each one alone moves the loss of one process away from the run
# without it. The model against Megatron's explicit mask is
# test_llama_pytorch.sh (docs_* cases).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
MPI="mpirun --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS"
TL=build/testdata/tinyshakespeare_lines_document
prepare_ts "$TL" --doc-sep line
DOCS=(--set data.reset_attention_mask=true --set data.reset_position_ids=true
      --set data.eod_mask_loss=true)
LLAMA=(--set model.position_embedding_type=rope --set model.normalization=RMSNorm
       --set model.swiglu=true --set model.group_query_attention=true --set model.num_query_groups=2
       --set model.add_bias_linear=false --set data.reset_attention_mask=true
       --set data.eod_mask_loss=true)
TP="parallel.tensor_model_parallel_size"; CP="parallel.context_parallel_size"
SP="parallel.sequence_parallel"; PP="parallel.pipeline_model_parallel_size"
run() { # name np args...
  local name=$1 np=$2; shift 2
  local cmd=("$MT" --config $CFG --set "data.data_path=[\"$TL\"]" --set training.train_iters=10
             --set training.eval_interval=5 --set logging.metrics_file="$TMP/$name.jsonl"
             --set training.check_replicas_interval=1 --set logging.log_interval=1 "$@")
  if [ "$np" = 1 ]; then "${cmd[@]}" >"$TMP/$name.log" 2>&1; else $MPI -np "$np" "${cmd[@]}" >"$TMP/$name.log" 2>&1; fi ||
    { echo "run $name failed:"; tail -20 "$TMP/$name.log"; exit 1; }
  if [ "$np" != 1 ]; then grep -q "identical on all" "$TMP/$name.log" ||
    { echo "run $name: no replica check reported"; tail -5 "$TMP/$name.log"; exit 1; }; fi
}
check() { echo "== $1 vs $2"; compare_metrics "$TMP/$1.jsonl" "$TMP/$2.jsonl" 1e-5; }
differs() { # name base: some step's lm loss must differ by more than 1e-4 relative
  /usr/bin/python3 - "$TMP/$1.jsonl" "$TMP/$2.jsonl" "$1" <<'PY'
import json, sys
curve = lambda p: [o["lm_loss"] for o in map(json.loads, open(p)) if "lm_loss" in o]
a, b = curve(sys.argv[1]), curve(sys.argv[2])
r = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print("%s changes the loss curve: largest rel difference %.2e (step 1: %.9f vs %.9f)"
      % (sys.argv[3], r, a[0], b[0]))
sys.exit(0 if r > 1e-4 else 1)
PY
}
run base 1 "${DOCS[@]}"
run plain 1
run mask_only 1 --set data.reset_attention_mask=true
run pos_only 1 --set data.reset_position_ids=true
run loss_only 1 --set data.eod_mask_loss=true
for f in mask_only pos_only loss_only base; do differs $f plain; done
run tp2sp 2 "${DOCS[@]}" --set $TP=2 --set $SP=true
check tp2sp base
run cp2 2 "${DOCS[@]}" --set $CP=2
check cp2 base
run cp2tp2 4 "${DOCS[@]}" --set $CP=2 --set $TP=2
check cp2tp2 base
run pp2 2 "${DOCS[@]}" --set $PP=2
check pp2 base
run dp2z1 2 "${DOCS[@]}" --set parallel.zero_stage=1
check dp2z1 base
run llama 1 "${LLAMA[@]}"
run llama_cp2 2 "${LLAMA[@]}" --set $CP=2
check llama_cp2 llama
