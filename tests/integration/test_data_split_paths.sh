#!/usr/bin/env bash
# Megatron's per-split data paths and index cache (issue 30):
# data.train_data_path / valid_data_path take every document of their
# prefixes into their split, so a run with train_data_path = P trains on
# exactly the samples of data_path = P with split "1,0,0" (lm loss and grad
# norm bitwise equal every step), and its validation loss comes from
# valid_data_path (another corpus: one document per line); with
# data.data_cache_path the index files are written once and a second run
# reads them (bitwise the same run). Bad combinations are unit rows in
# tests/unit/test_config.c.
source "$(dirname "$0")/lib.sh"
TL=build/testdata/tinyshakespeare_lines_document
prepare_ts "$TL" --doc-sep line
# gpt-test.json without its split (the per-split paths exclude it)
/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1])); del c["data"]["split"]
json.dump(c, open(sys.argv[2], "w"))' $CFG "$TMP/cfg.json"
run() { # name args...
  local name=$1; shift
  "$MT" --config "$TMP/cfg.json" --set training.train_iters=6 --set training.eval_interval=3 \
    --set logging.log_interval=1 --set logging.metrics_file="$TMP/$name.jsonl" "$@" \
    >"$TMP/$name.log" 2>&1 || { echo "run $name failed:"; tail -5 "$TMP/$name.log"; exit 1; }
}
run split --set "data.data_path=[\"$TS\"]" --set data.split=1,0,0 --set training.eval_interval=0
run per_split --set data.data_path=null --set "data.train_data_path=[\"$TS\"]" \
  --set "data.valid_data_path=[\"$TL\"]"
/usr/bin/python3 - "$TMP/split.jsonl" "$TMP/per_split.jsonl" <<'PY'
import json, sys
load = lambda p: [o for o in map(json.loads, open(p))]
a, b = load(sys.argv[1]), load(sys.argv[2])
ta = [(o["iteration"], o["lm_loss"], o["grad_norm"]) for o in a if "lm_loss" in o]
tb = [(o["iteration"], o["lm_loss"], o["grad_norm"]) for o in b if "lm_loss" in o]
assert ta == tb and len(ta) == 6, (ta, tb)
vb = [o["val_loss"] for o in b if "val_loss" in o]
assert len(vb) >= 2, b
print("train_data_path = data_path with split 1,0,0: 6 steps bitwise; validation from "
      "valid_data_path: %s" % ", ".join("%.6f" % v for v in vb))
PY
# data_cache_path: the first run writes the index files, the second reads them
mkdir -p "$TMP/cache"
run cache1 --set "data.data_path=[\"$TS\"]" --set data.data_cache_path="$TMP/cache"
n=$(ls "$TMP/cache" | grep -c '^gpt_index_' || true)
[ "$n" -ge 1 ] || { echo "no index file written into data_cache_path"; ls -la "$TMP/cache"; exit 1; }
touch -d '2000-01-01' "$TMP/cache"/gpt_index_*
run cache2 --set "data.data_path=[\"$TS\"]" --set data.data_cache_path="$TMP/cache"
[ "$(find "$TMP/cache" -name 'gpt_index_*' -newer "$TMP/cache1.log" | wc -l)" = 0 ] ||
  { echo "the second run rewrote the index files"; exit 1; }
compare_metrics "$TMP/cache1.jsonl" "$TMP/cache2.jsonl" 0
echo "data_cache_path: $n index files written once, read by the second run (bitwise the same run)"
