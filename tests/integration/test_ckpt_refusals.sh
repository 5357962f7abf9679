#!/usr/bin/env bash
# Refusals of the layout-free checkpoint (issue 17): a model of another shape
# (hidden size, number of experts, fewer layers), a damaged checkpoint (a
# truncated piece, a missing piece, a flipped byte) and a weights-only
# checkpoint without training.finetune each stop the run with
# exit 1 and one message naming the tensor or file and what was expected,
# and nothing is written (the save directory, which is also the load
# directory, keeps its files byte for byte, no new iteration).
source "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
S=(--set training.train_iters=4 --set training.eval_interval=0 --set logging.log_interval=1
   --set training.lr_warmup_iters=1)
MOE=tests/configs/gpt-moe-test.json
mpirun -np 2 --oversubscribe --bind-to none -x OMPI_MCA_mpi_yield_when_idle -x OPENBLAS_NUM_THREADS \
  -x OMP_NUM_THREADS "$MT" --config $CFG "${S[@]}" --set training.train_iters=2 \
  --set parallel.zero_stage=1 --set checkpoint.save="$TMP/dense" >"$TMP/dense.log" 2>&1 \
  || { tail "$TMP/dense.log"; exit 1; }
"$MT" --config $MOE "${S[@]}" --set training.train_iters=2 --set checkpoint.save="$TMP/moe" \
  >"$TMP/moe.log" 2>&1 || { tail "$TMP/moe.log"; exit 1; }
ls "$TMP/dense/iter_0000002/shard_00000.bin" "$TMP/dense/iter_0000002/shard_00001.bin" >/dev/null
# (the lock file .megatrain.lock names the last run that wrote there: every
# run with checkpoint.save rewrites it, refused or not; docs/checkpoint.md)
snap() { (cd "$1" && find . -type f ! -name .megatrain.lock | sort | xargs md5sum); }
refused() { # name src-dir pattern [edit command] -- run args...
  local name=$1 src=$2 pat=$3; shift 3
  local d="$TMP/$name"
  cp -r "$TMP/$src" "$d"
  while [ "$1" != -- ]; do eval "$1"; shift; done; shift
  snap "$d" >"$TMP/$name.before"
  set +e
  "$MT" "$@" "${S[@]}" --set checkpoint.load="$d" --set checkpoint.save="$d" \
    --set checkpoint.save_interval=1 >"$TMP/$name.log" 2>&1
  local rc=$?
  set -e
  [ $rc = 1 ] || { echo "$name: exit $rc, expected 1"; cat "$TMP/$name.log"; exit 1; }
  grep -Eq "$pat" "$TMP/$name.log" || { echo "$name: message missing '$pat':"; cat "$TMP/$name.log"; exit 1; }
  snap "$d" | diff - "$TMP/$name.before" >/dev/null \
    || { echo "$name: the refused run changed the checkpoint directory"; snap "$d"; exit 1; }
  echo "$name (exit 1, nothing written): $(grep -m1 error "$TMP/$name.log" | sed 's/^.*error: //')"
}
IT=iter_0000002
refused hidden_size dense "embedding.word_embeddings.weight.*\[50257, 64\].*\[50257, 128\]" -- \
  --config $CFG --set model.hidden_size=128
refused num_experts moe "decoder.layers.0.mlp.router.weight.*\[8, 64\].*\[4, 64\]" -- \
  --config $MOE --set model.num_experts=4
refused fewer_layers dense "decoder.layers.1\." -- --config $CFG --set model.num_layers=1
# same tensor shapes, another head layout: refused by the saved config
refused heads dense "model.num_attention_heads 4 but the config gives 8" -- \
  --config $CFG --set model.num_attention_heads=8
# metadata.json is checksummed in index.bin: one digit of consumed_samples edited
bump_digit() { # the first digit of "consumed_samples" in metadata.json $1, plus one
  perl -pi -e 's/("consumed_samples":\s*)(\d)/$1.(($2 + 1) % 10)/e' "$1"
  grep -q '"consumed_samples"' "$1"
}
refused edited_metadata dense "checksum mismatch in '.*/iter_0000002/metadata.json' \(file corrupt or edited\)" \
  'bump_digit $d/$IT/metadata.json; if cmp -s $d/$IT/metadata.json $TMP/dense/$IT/metadata.json; then echo "edit failed"; exit 1; fi' \
  -- --config $CFG
refused truncated_piece dense "shard_00001.bin" \
  'f=$d/$IT/shard_00001.bin; truncate -s $(( $(stat -c %s $f) / 2 )) $f' -- --config $CFG
refused missing_piece dense "shard_00000.bin" 'rm $d/$IT/shard_00000.bin' -- --config $CFG
refused flipped_byte dense "checksum|CRC|crc" \
  'f=$d/$IT/shard_00001.bin; printf "\x55" | dd of=$f bs=1 seek=$(( $(stat -c %s $f) / 3 )) conv=notrunc status=none' \
  -- --config $CFG
# a weights-only checkpoint (has_optimizer false, as `convert --from hf`
# writes) trains only with training.finetune
WO='p=$d/$IT/metadata.json; /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); m[\"has_optimizer\"]=False; json.dump(m,open(sys.argv[1],\"w\"))" $p; /usr/bin/python3 tests/reference/dist_ckpt.py reseal $d/$IT'
refused weights_only dense "model weights only .*set training.finetune: true" "$WO" -- --config $CFG
"$MT" --config $CFG "${S[@]}" --set training.train_iters=1 --set checkpoint.load="$TMP/weights_only" \
  --set training.finetune=true >"$TMP/wo_ft.log" 2>&1 || { cat "$TMP/wo_ft.log"; exit 1; }
grep -q "fine-tuning from the weights of" "$TMP/wo_ft.log"
echo "weights-only checkpoint trains with training.finetune: true"
# model.moe_layer_freq 2 and its list form [1, 0, 1, 0] are one setting: accepted
"$MT" --config $MOE "${S[@]}" --set training.train_iters=2 --set 'model.moe_layer_freq=[1,0,1,0]' \
  --set checkpoint.load="$TMP/moe" >"$TMP/moe_list.log" 2>&1 || { cat "$TMP/moe_list.log"; exit 1; }
grep -q "loaded checkpoint at iteration 2" "$TMP/moe_list.log"
echo "moe_layer_freq 2 = [1, 0, 1, 0]: accepted"
echo "test_ckpt_refusals OK"
