#!/usr/bin/env bash
# The planner's parameter counts of the MoE model configs (issue 31 item 6):
# `megatrain plan --json` total (unpadded vocabulary) and activated counts of
# configs/models/mixtral-8x7b.json, qwen3-30b-a3b.json, and the multi-latent
# attention models deepseek-v3.json (with its MTP depth counted apart) and
# deepseek-v2-lite.json (no q compression) equal, to the parameter, those
# computed from the published Hugging Face config.json shapes by the
# independent counter tests/reference/hf_param_count.py.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
for mw in mixtral-8x7b:32 qwen3-30b-a3b:32 deepseek-v3:1024 deepseek-v2-lite:8; do
  m=${mw%%:*} world=${mw##*:}
  "$MT" plan --config configs/models/$m.json --world-size $world --hardware h100-sxm --json \
    >"$TMP/$m.json" 2>"$TMP/$m.err" || { echo "$m: plan failed"; cat "$TMP/$m.err"; exit 1; }
  $PY tests/reference/hf_param_count.py check $m "$TMP/$m.json"
done
# the per-rank flat buffer (planner/plan_flat.c, MLA's tensors one by one)
# holds every parameter on one rank
"$MT" plan --config configs/models/deepseek-v2-lite.json --world-size 1 --hardware h100-sxm \
  --set parallel.expert_model_parallel_size=1 --json >"$TMP/one.json"
$PY - "$TMP/one.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
print("deepseek-v2-lite on one rank: params_per_rank %d params_total %d"
      % (m["params_per_rank"], m["params_total"]))
sys.exit(0 if m["params_per_rank"] == m["params_total"] else 1)
PY
