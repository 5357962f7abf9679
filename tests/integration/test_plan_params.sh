#!/usr/bin/env bash
# The planner's parameter counts of the MoE model configs (issue 31 item 6):
# `megatrain plan --json` total (unpadded vocabulary) and activated counts of
# configs/models/mixtral-8x7b.json and qwen3-30b-a3b.json equal, to the
# parameter, those computed from the published Hugging Face config.json
# shapes by the independent counter tests/reference/hf_param_count.py.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
for m in mixtral-8x7b qwen3-30b-a3b; do
  "$MT" plan --config configs/models/$m.json --world-size 32 --hardware h100-sxm --json \
    >"$TMP/$m.json" 2>"$TMP/$m.err" || { echo "$m: plan failed"; cat "$TMP/$m.err"; exit 1; }
  $PY tests/reference/hf_param_count.py check $m "$TMP/$m.json"
done
