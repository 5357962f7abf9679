#!/usr/bin/env bash
# `megatrain generate` for multi-latent attention models (issue 31 item 5)
# with the latent KV cache (Megatron's cache_mla_latents: per layer and
# position the normalised kv latent and the rotated shared RoPE key), on two
# tiny models trained a few steps:
#  - mla: tests/configs/gpt-mla-test.json (q_lora_rank 24, kv_lora_rank 16,
#    heads of 8 + 4 rotated channels, values of 12, latent norms, YaRN);
#  - deepseek: the same with a direct q projection (q_lora_rank null), RoPE
#    scaling of DeepSeek-tiny's kind, MoE of DeepSeek's kind (sigmoid, group
#    routing, expert bias, shared expert, a dense first layer) and one MTP
#    depth (trained; not used for decoding);
# checks for each (deepseek with MEGATRAIN_TEST_FULL=1 only: CI time):
#  - 24 greedy tokens equal a greedy decode of the same checkpoint by the
#    independent fp64 PyTorch model (tests/reference/generate_reference.py:
#    llama_reference.py with mla_reference.py's MLA, whole-sequence
#    recompute), logits within 1e-5 of the largest |logit|;
#  - KV-cache decoding equals --no-kv-cache, which
#    recomputes the whole sequence every step (tokens identical, logits within
#    1e-5 of the largest |logit|), and --mla-absorb (weight absorption: the
#    attention over the cached latents with W_UK folded into the queries and
#    W_UV after) equals the up-projected cache the same way;
#  - pp=2 (one stage per rank) gives the tokens of one process (deepseek),
#    and tp=2 (mla), logits within 1e-5 of the largest;
#  - the printed cache bytes per token equal the analytic figures from the
#    checkpoint's config: layers x (kv_lora_rank + qk_pos_emb_head_dim) x 4
#    bytes, and with full K/V layers x heads x (qk_head_dim +
#    qk_pos_emb_head_dim + v_head_dim) x 4 bytes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/generate_lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no torch"; exit 77; }
TOK="--set data.vocab_file=$SHARED/gpt2-vocab.json --set data.merge_file=$SHARED/gpt2-merges.txt"
PROMPT="First Citizen: Before we proceed any further, hear me"
N=24
MLA=tests/configs/gpt-mla-test.json

train() { # name, extra --set options...
  local n=$1; shift
  # shellcheck disable=SC2086
  "$MT" --config $MLA --set training.train_iters=4 --set training.eval_interval=0 \
    --set model.init_method_std=0.2 --set model.max_position_embeddings=64 \
    --set checkpoint.save="$TMP/$n" $TOK "$@" >"$TMP/$n.train.log" \
    || { echo "$n: training failed"; tail -5 "$TMP/$n.train.log"; exit 1; }
}
check_bytes() { # name: the printed figures against the checkpoint config's shapes
  local n=$1 d="$TMP/$1"
  $PY - "$d" "$d.g1.err" "$n" <<'PYEOF'
import glob, json, re, sys
meta = sorted(glob.glob(sys.argv[1] + "/iter_*/metadata.json"))[-1]
m = json.load(open(meta))["config"]["model"]
L, es = m["num_layers"], 4  # fp32 storage
want_c = L * (m["kv_lora_rank"] + m["qk_pos_emb_head_dim"]) * es
want_f = L * m["num_attention_heads"] * (m["qk_head_dim"] + m["qk_pos_emb_head_dim"] + m["v_head_dim"]) * es
line = [l for l in open(sys.argv[2]) if "bytes per token" in l][0]
got = re.search(r"kv cache (\d+) bytes per token \(all layers, fp32\), (\d+) with full K/V", line)
c, f = int(got.group(1)), int(got.group(2))
print("%s: kv cache %d bytes per token, %d with full K/V (%.2fx; formula %d, %d)"
      % (sys.argv[3], c, f, f / c, want_c, want_f))
sys.exit(c != want_c or f != want_f)
PYEOF
}
check_model() { # name
  local n=$1 d="$TMP/$1"
  "$MT" generate --load "$d" --prompt "$PROMPT" --max-new-tokens $N --temperature 0 \
    --print-ids --dump-logits "$d.kv.f32" >"$d.g1.log" 2>"$d.g1.err" \
    || { echo "$n: generate failed"; cat "$d.g1.err"; exit 1; }
  grep '^generate:' "$d.g1.err"
  local ids distinct
  ids=$(ids_of "$d.g1.log")
  distinct=$(echo "$ids" | tr ' ' '\n' | sort -u | wc -l)
  [ "$distinct" -ge 10 ] || { echo "$n: greedy continuation too uniform to prove much: $ids"; exit 1; }
  greedy_vs_reference "$n" "$d" "$ids" $N
  "$MT" generate --load "$d" --prompt "$PROMPT" --max-new-tokens $N --temperature 0 \
    --print-ids --no-kv-cache --dump-logits "$d.nc.f32" >"$d.nc.log" 2>"$d.nc.err" \
    || { echo "$n: generate --no-kv-cache failed"; cat "$d.nc.err"; exit 1; }
  [ "$(ids_of "$d.nc.log")" = "$ids" ] || { echo "$n: --no-kv-cache tokens differ"; exit 1; }
  maxdiff "$d.kv.f32" "$d.nc.f32" "$n: latent KV cache = recompute, tokens identical"
  "$MT" generate --load "$d" --prompt "$PROMPT" --max-new-tokens $N --temperature 0 \
    --print-ids --mla-absorb --dump-logits "$d.ab.f32" >"$d.ab.log" 2>"$d.ab.err" \
    || { echo "$n: generate --mla-absorb failed"; cat "$d.ab.err"; exit 1; }
  [ "$(ids_of "$d.ab.log")" = "$ids" ] || { echo "$n: --mla-absorb tokens differ"; exit 1; }
  maxdiff "$d.kv.f32" "$d.ab.f32" "$n: weight absorption = up-projected latents, tokens identical"
  check_bytes "$n"
}

train mla
check_model mla
if [ "${MEGATRAIN_TEST_FULL:-0}" != 1 ]; then
  echo "test_generate_mla: OK (deepseek: MoE + MTP, pp=2 and tp=2 with MEGATRAIN_TEST_FULL=1)"
  exit 0
fi
train deepseek --set model.q_lora_rank=null --set model.mtp_num_layers=1 \
  --set model.num_experts=8 --set model.moe_ffn_hidden_size=32 \
  --set 'model.moe_layer_freq=[0,1]' --set model.moe_router_topk=2 \
  --set model.moe_router_score_function=sigmoid --set model.moe_router_topk_scaling_factor=2.5 \
  --set model.moe_router_num_groups=4 --set model.moe_router_group_topk=2 \
  --set model.moe_router_enable_expert_bias=true --set model.moe_router_bias_update_rate=0.01 \
  --set model.moe_shared_expert_intermediate_size=64 \
  --set model.moe_router_load_balancing_type=seq_aux_loss --set model.moe_aux_loss_coeff=1e-3
check_model deepseek
d=$TMP/deepseek
mpirun -np 2 --oversubscribe --bind-to none "$MT" generate --load "$d" --prompt "$PROMPT" \
  --max-new-tokens $N --temperature 0 --print-ids --pipeline-model-parallel-size 2 \
  --dump-logits "$d.pp2.f32" >"$d.pp2.log" 2>"$d.pp2.err" || { echo "pp=2 failed"; cat "$d.pp2.err"; exit 1; }
[ "$(ids_of "$d.pp2.log")" = "$(ids_of "$d.g1.log")" ] || { echo "deepseek: pp=2 tokens differ"; exit 1; }
maxdiff "$d.kv.f32" "$d.pp2.f32" "deepseek: pp=2 = one process, tokens identical"
# tensor parallelism (heads split, latents replicated) on the mla model
d=$TMP/mla
mpirun -np 2 --oversubscribe --bind-to none "$MT" generate --load "$d" --prompt "$PROMPT" \
  --max-new-tokens $N --temperature 0 --print-ids --dump-logits "$d.tp2.f32" >"$d.tp2.log" \
  2>"$d.tp2.err" || { echo "tp=2 failed"; cat "$d.tp2.err"; exit 1; }
[ "$(ids_of "$d.tp2.log")" = "$(ids_of "$d.g1.log")" ] || { echo "mla: tp=2 tokens differ"; exit 1; }
maxdiff "$d.kv.f32" "$d.tp2.f32" "mla: tp=2 = one process, tokens identical"
echo "test_generate_mla: OK"
