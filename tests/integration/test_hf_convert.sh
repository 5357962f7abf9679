#!/usr/bin/env bash
# Hugging Face export and import (issue 17), GPT-2 and Llama naming:
#  - megatrain's loss of a checkpoint on real tokens (tests/tools/ckpt_loss)
#    equals an independent PyTorch forward written from the HF layout alone
#    (tests/reference/hf_forward.py, own safetensors reader, fp64) on the fp32
#    export, within 1e-5 relative;
#  - megatrain -> HF -> megatrain is bitwise on every weight, also through a
#    sharded export (tiny --max-shard-size, index file), whose tensors equal
#    the single-file export's bit for bit; a bf16 export stores BF16;
#  - bad input is refused with one message and exit 1, nothing written: a
#    truncated header, overlapping offsets, an unknown dtype, a missing
#    tensor, a shape that differs from the config (a transposed c_attn), a
#    tensor the model has no place for, a config.json that disagrees; a
#    model no naming expresses (interleaved RoPE) is refused by the export;
#    an output directory that is not empty is refused (exit 2).
#  - fine-tuning from the imported GPT-2 checkpoint (training.finetune) under
#    tp=2, and under pp=2 (tied embedding on both stages), equals the same
#    fine-tuning in one process within 1e-5, and starts from the imported
#    weights (its first loss is not a fresh start's).
# MEGATRAIN_TEST_FULL=1 adds the Llama model with biases and tied embeddings
# and GPT-2's sharded and bf16 exports (CI: Llama's).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hf_lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
TOOL=build/tests/tools/ckpt_loss
[ -x $TOOL ] || { echo "SKIP: $TOOL not built"; exit 77; }
$PY tests/reference/hf_forward.py selftest

# GPT-2 (the test config, learned positions, tied; and untied: lm_head) and
# Llama-style (RoPE, RMSNorm, SwiGLU, 2 query groups for 4 heads, no biases,
# untied; and with biases and tied embeddings; and with qk_layernorm = Qwen3
# naming) models;
# init std 0.1 so that a wrong head or channel order moves the loss visibly
$PY - "$CFG" "$TMP" "$TS.bin" <<'PY'
import json, sys, numpy as np
cfg, tmp, data = sys.argv[1:4]
c = json.load(open(cfg))
c["model"]["init_method_std"] = 0.1
json.dump(c, open(tmp + "/gpt2.json", "w"))
c["model"].update(position_embedding_type="rope", normalization="RMSNorm", swiglu=True,
                  group_query_attention=True, num_query_groups=2, add_bias_linear=False,
                  untie_embeddings_and_output_weights=True, ffn_hidden_size=128)
json.dump(c, open(tmp + "/llama.json", "w"))
c["model"]["qk_layernorm"] = True
json.dump(c, open(tmp + "/qwen3.json", "w"))
c["model"]["qk_layernorm"] = False
c["model"].update(add_bias_linear=True, untie_embeddings_and_output_weights=False)
json.dump(c, open(tmp + "/llama_bias_tied.json", "w"))
c["model"]["rotary_interleaved"] = True
json.dump(c, open(tmp + "/interleaved.json", "w"))
c["model"].update(rotary_interleaved=False, use_rope_scaling=True)
json.dump(c, open(tmp + "/rope_scaling.json", "w"))
g = json.load(open(tmp + "/gpt2.json"))
g["model"]["untie_embeddings_and_output_weights"] = True
json.dump(g, open(tmp + "/gpt2_untied.json", "w"))
seq, b = c["model"]["seq_length"], c["training"]["micro_batch_size"]
tok = np.fromfile(data, dtype=np.uint16)[1000:1000 + 4 * b * (seq + 1)]
tok.astype("<i4").tofile(tmp + "/tok.bin")  # 4 micro-batches of real text
PY
SEQ=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["seq_length"])' "$CFG")


# llama_tp2: the Llama model trained under tp=2 with sequence parallelism
# (its GQA query groups split over the ranks), exported from that checkpoint
cp $TMP/llama.json $TMP/llama_tp2.json
for fam in $(full_or "gpt2 llama gpt2_untied llama_bias_tied qwen3 llama_tp2" "gpt2 llama gpt2_untied qwen3 llama_tp2"); do
  ck=$TMP/ck_$fam
  # trained weights (a training failure fails the test)
  launch="" par=""
  if [ $fam = llama_tp2 ]; then
    launch="mpirun -np 2 --oversubscribe --bind-to none"
    par="--set parallel.tensor_model_parallel_size=2 --set parallel.sequence_parallel=true"
  fi
  # shellcheck disable=SC2086
  $launch "$MT" --config $TMP/$fam.json --set checkpoint.save="$ck" --set training.train_iters=6 \
    --set training.eval_interval=0 $par >"$TMP/train_$fam.log" 2>&1 \
    || { echo "$fam: training failed"; tail -5 "$TMP/train_$fam.log"; exit 1; }
  grep -qs megatrain-dist-v2 "$ck"/iter_*/metadata.json \
    || { echo "$fam: training wrote no layout-free checkpoint in $ck"; exit 1; }
  what="trained 6 iterations"
  "$MT" convert --to hf --load "$ck" --output $TMP/hf_$fam 2>/dev/null
  a=$($TOOL loss "$ck" $TMP/tok.bin)
  b=$($PY tests/reference/hf_forward.py loss $TMP/hf_$fam $TMP/tok.bin $SEQ)
  relcheck "$fam ($what) fp32 export, loss on $(($(stat -c %s $TMP/tok.bin) / 4)) tokens" "$a" "$b" 1e-5
  "$MT" convert --from hf --input $TMP/hf_$fam --output $TMP/rt_$fam --config $TMP/$fam.json 2>/dev/null
  $TOOL same "$ck" $TMP/rt_$fam
  case $fam in llama) ;; gpt2) [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] || continue ;; *) continue ;; esac
  # sharded export: an index and several files, the same tensors bit for bit
  "$MT" convert --to hf --load "$ck" --output $TMP/sh_$fam --max-shard-size 50KB 2>/dev/null
  [ -f $TMP/sh_$fam/model.safetensors.index.json ] && [ ! -f $TMP/sh_$fam/model.safetensors ]
  n=$(ls $TMP/sh_$fam/model-*-of-*.safetensors | wc -l)
  echo "sharded export ($n files) vs single file: $($PY tests/reference/hf_forward.py same $TMP/hf_$fam $TMP/sh_$fam)"
  "$MT" convert --from hf --input $TMP/sh_$fam --output $TMP/rts_$fam --config $TMP/$fam.json 2>/dev/null
  $TOOL same "$ck" $TMP/rts_$fam >/dev/null
  echo "sharded import: bitwise equal to the checkpoint"
  # bf16 export: BF16 tensors, torch_dtype bfloat16, loss close to fp32's
  "$MT" convert --to hf --load "$ck" --output $TMP/bf_$fam --dtype bf16 2>/dev/null
  grep -q '"torch_dtype":[[:space:]]*"bfloat16"' $TMP/bf_$fam/config.json
  head -c 4000 $TMP/bf_$fam/model.safetensors | grep -q '"BF16"'
  b16=$($PY tests/reference/hf_forward.py loss $TMP/bf_$fam $TMP/tok.bin $SEQ)
  relcheck "$fam bf16 export (rounding only)" "$a" "$b16" 1e-2
done

HF_GPT2=$TMP/hf_gpt2
# names without "transformer." (the hub's gpt2 files, saved from GPT2Model)
mkdir -p $TMP/bare; cp $TMP/hf_gpt2/config.json $TMP/bare/
$PY tests/reference/st_edit.py strip $TMP/hf_gpt2/model.safetensors $TMP/bare/model.safetensors transformer.
"$MT" convert --from hf --input $TMP/bare --output $TMP/rt_bare --config $TMP/gpt2.json 2>/dev/null
$TOOL same $TMP/ck_gpt2 $TMP/rt_bare >/dev/null
echo "GPT-2 names without 'transformer.': imported bitwise equal"

# F16 input: imported exactly (an fp32 export of the import equals numpy's
# float16 -> float32 of the same values, subnormals included)
mkdir -p $TMP/f16; cp $TMP/hf_llama/config.json $TMP/f16/
$PY tests/reference/st_edit.py f16 $TMP/hf_llama/model.safetensors $TMP/f16/model.safetensors
"$MT" convert --from hf --input $TMP/f16 --output $TMP/ck_f16 --config $TMP/llama.json 2>/dev/null
"$MT" convert --to hf --load $TMP/ck_f16 --output $TMP/hf_f16 2>/dev/null
echo "F16 import, exported again: $($PY tests/reference/hf_forward.py same $TMP/f16 $TMP/hf_f16)"
# a tied model's file that keeps lm_head: accepted when equal to the embedding
mkdir -p $TMP/tied; cp $HF_GPT2/config.json $TMP/tied/
$PY tests/reference/st_edit.py copy $HF_GPT2/model.safetensors $TMP/tied/model.safetensors transformer.wte.weight
"$MT" convert --from hf --input $TMP/tied --output $TMP/rt_tied --config $TMP/gpt2.json 2>/dev/null
$TOOL same $TMP/ck_gpt2 $TMP/rt_tied >/dev/null
echo "tied GPT-2 with an lm_head equal to wte: imported bitwise equal"

# ---- bad input: one message, exit 1, no output directory
HF=$TMP/hf_gpt2
bad() { # bad NAME EXPECTED-MESSAGE-PART [convert args...]
  local name=$1 want=$2; shift 2
  set +e
  "$MT" convert "$@" >"$TMP/bad.log" 2>&1; local rc=$?
  set -e
  local out=$TMP/out_$name
  [ $rc = 1 ] || { echo "$name: exit $rc, expected 1"; cat "$TMP/bad.log"; exit 1; }
  grep -q -- "$want" "$TMP/bad.log" || { echo "$name: message lacks '$want'"; cat "$TMP/bad.log"; exit 1; }
  [ "$(grep -c 'error' "$TMP/bad.log")" = 1 ] || { echo "$name: not one message"; cat "$TMP/bad.log"; exit 1; }
  [ ! -e "$out" ] || { echo "$name: $out was written"; exit 1; }
  ls "$TMP" | grep -q "out_$name.tmp" && { echo "$name: temporary left behind"; exit 1; }
  echo "$name: exit 1, $(grep error "$TMP/bad.log")"
}
badhf() { # badhf NAME MODE TENSOR EXPECTED
  mkdir -p $TMP/in_$1; cp $HF/config.json $TMP/in_$1/
  $PY tests/reference/st_edit.py $2 $HF/model.safetensors $TMP/in_$1/model.safetensors $3
  bad $1 "$4" --from hf --input $TMP/in_$1 --output $TMP/out_$1 --config $TMP/gpt2.json
}
badhf truncated truncate "" "beyond the end of the file"
badhf overlap overlap transformer.h.0.ln_1.bias "overlap"
badhf dtype dtype transformer.h.1.mlp.c_fc.weight 'unknown dtype "F31"'
badhf missing missing transformer.h.1.attn.c_proj.weight "tensor 'transformer.h.1.attn.c_proj.weight' is missing"
badhf shape transpose transformer.h.0.attn.c_attn.weight "is \[192, 64\] but config .* needs \[64, 192\]"
badhf extra extra transformer.h.0.attn.rotary "has no place in the model"
badhf headdiff copy- transformer.wte.weight "'lm_head.weight' .* differs from the word embedding"
mkdir -p $TMP/in_cfg; cp $HF/model.safetensors $TMP/in_cfg/
sed 's/"n_head":[[:space:]]*4/"n_head": 8/' $HF/config.json > $TMP/in_cfg/config.json
bad cfg '"n_head" is 8 but the config gives 4' --from hf --input $TMP/in_cfg --output $TMP/out_cfg --config $TMP/gpt2.json
$TOOL init $TMP/interleaved.json $TMP/ck_il
bad interleaved "model.rotary_interleaved is true" --to hf --load $TMP/ck_il --output $TMP/out_interleaved
# Llama-3.1 frequency scaling (issue 31) has no "rope_scaling" entry in the export yet: refused
$TOOL init $TMP/rope_scaling.json $TMP/ck_rs
bad rope_scaling "model.use_rope_scaling is true" --to hf --load $TMP/ck_rs --output $TMP/out_rope_scaling
mkdir -p $TMP/full; touch $TMP/full/x
set +e; "$MT" convert --to hf --load $TMP/ck_gpt2 --output $TMP/full >"$TMP/bad.log" 2>&1; rc=$?; set -e
[ $rc = 2 ] && grep -q "not an empty directory" "$TMP/bad.log" || { echo "non-empty output: exit $rc"; cat "$TMP/bad.log"; exit 1; }
echo "non-empty output: exit 2, $(grep error "$TMP/bad.log")"
# the model's config disagrees on tied embeddings: the message names the key
bad untie "model.untie_embeddings_and_output_weights" --from hf --input $TMP/hf_gpt2_untied \
  --output $TMP/out_untie --config $TMP/gpt2.json
# under a launcher with several processes: refused, exit 2, nothing written
for v in OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_SIZE; do
  set +e; env $v=2 "$MT" convert --to hf --load $TMP/ck_gpt2 --output $TMP/out_mpi >"$TMP/bad.log" 2>&1
  rc=$?; set -e
  [ $rc = 2 ] && grep -q "runs in one process; run it without mpirun/srun" "$TMP/bad.log" \
    && [ ! -e $TMP/out_mpi ] || { echo "$v=2: exit $rc"; cat "$TMP/bad.log"; exit 1; }
done
set +e; mpirun -np 2 --oversubscribe --bind-to none "$MT" convert --from hf --input $HF \
  --output $TMP/out_mpi --config $TMP/gpt2.json >"$TMP/bad.log" 2>&1; rc=$?; set -e
[ $rc = 2 ] && [ ! -e $TMP/out_mpi ] || { echo "convert under mpirun: exit $rc"; cat "$TMP/bad.log"; exit 1; }
echo "convert under mpirun: exit 2, $(grep -m1 error "$TMP/bad.log")"
# SLURM_NTASKS alone (sbatch/salloc, no srun step) is one process
env SLURM_NTASKS=4 "$MT" convert --to hf --load $TMP/ck_gpt2 --output $TMP/out_slurm 2>/dev/null
# a temporary directory a killed export left behind (its process gone) is
# removed by the next export; one of a live process is kept
sleep 60 & live=$!
dead=$(sh -c 'echo $$')
mkdir -p $TMP/out_kill.tmp.$dead $TMP/out_kill.tmp.$live
touch $TMP/out_kill.tmp.$dead/model.safetensors
"$MT" convert --to hf --load $TMP/ck_gpt2 --output $TMP/out_kill 2>"$TMP/kill.log"
kill $live
[ ! -e $TMP/out_kill.tmp.$dead ] && [ -d $TMP/out_kill.tmp.$live ] && [ -f $TMP/out_kill/config.json ] \
  || { echo "stale temporary: not removed (or the live one was)"; cat "$TMP/kill.log"; exit 1; }
echo "stale export temporary removed: $(cat "$TMP/kill.log" | head -1)"

# ---- fine-tuning from the imported GPT-2 checkpoint: tp=2 equals one process
ft() { # ft NAME NP [--set ...]
  local name=$1 np=$2; shift 2
  mpirun -np $np --oversubscribe --bind-to none "$MT" --config $TMP/gpt2.json \
    --set checkpoint.load=$TMP/rt_gpt2 --set training.finetune=true --set training.train_iters=6 \
    --set training.eval_interval=0 --set logging.log_interval=1 \
    --set logging.metrics_file=$TMP/ft_$name.jsonl "$@" >"$TMP/ft_$name.log" 2>&1 \
    || { echo "fine-tuning $name failed"; tail -5 "$TMP/ft_$name.log"; exit 1; }
}
ft one 1
ft tp2 2 --set parallel.tensor_model_parallel_size=2
compare_metrics $TMP/ft_tp2.jsonl $TMP/ft_one.jsonl 1e-5
# pp=2: the tied embedding's last-stage copy is loaded from the import too
ft pp2 2 --set parallel.pipeline_model_parallel_size=2
compare_metrics $TMP/ft_pp2.jsonl $TMP/ft_one.jsonl 1e-5
grep -m1 -i "finetune\|fine-tun" $TMP/ft_one.log || true
# the imported weights were used: the first loss is not that of a fresh start
"$MT" --config $TMP/gpt2.json --set training.train_iters=6 --set training.eval_interval=0 \
  --set logging.log_interval=1 --set logging.metrics_file=$TMP/fresh.jsonl >/dev/null 2>&1
$PY -c 'import json, sys
first = lambda p: [json.loads(l) for l in open(p) if "lm_loss" in l][0]["lm_loss"]
ft, fresh = first(sys.argv[1]), first(sys.argv[2])
print("first loss: fine-tuning from the import %.6f, fresh start %.6f" % (ft, fresh))
sys.exit(abs(ft - fresh) < 1e-3 * fresh)' $TMP/ft_one.jsonl $TMP/fresh.jsonl
