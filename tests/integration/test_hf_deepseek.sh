#!/usr/bin/env bash
# Hugging Face export and import of DeepseekV3ForCausalLM with multi-latent
# attention, YaRN and MTP (issue 31 item 4): a tiny MLA (q_lora_rank 32,
# kv_lora_rank 16, 16 nope + 8 rope channels, values of 16, latent norms;
# YaRN factor 4 over 16 original positions) + sigmoid MoE (expert bias,
# groups, a shared expert, a dense first layer) + one MTP depth model:
#  - megatrain's loss of a trained checkpoint on real tokens
#    (tests/tools/ckpt_loss) equals the independent PyTorch forward of the
#    fp32 export (tests/reference/hf_forward.py, fp64, its MLA and YaRN
#    written from HF's DeepseekV3Attention / _compute_yarn_parameters) within
#    1e-5 relative;
#  - the reader's greedy tokens (8 after a prompt) equal megatrain
#    generate's (MLA latent KV cache);
#  - megatrain -> HF -> megatrain and HF -> megatrain -> HF are bitwise;
#  - "rope_interleave": false: the export with its rope rows moved as HF's
#    interleave moves q_pe/k_pe gives the reader the same loss and tokens
#    (rotate_half on the unpermuted channels), and imports bitwise to the
#    trained checkpoint;
#  - the MTP layer carries DeepSeek's embed_tokens and shared_head.head
#    copies: an import whose copy differs is refused; so are a config.json
#    whose kv_lora_rank or YaRN factor differ, or whose rope_interleave is not
#    a boolean.
# MEGATRAIN_TEST_FULL=1 adds q_lora_rank null (q_proj), tied embeddings,
# mscale = mscale_all_dim and two MTP depths, the greedy tokens of the
# rope_interleave false import, and the bad YaRN factor, MTP depth count and
# MTP head copy (CI: the kv_lora_rank and non-boolean rope_interleave cases).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hf_lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
TOOL=build/tests/tools/ckpt_loss
[ -x $TOOL ] || { echo "SKIP: $TOOL not built"; exit 77; }

$PY - "$CFG" "$TMP" "$TS.bin" <<'PY'
import json, sys, numpy as np
cfg, tmp, data = sys.argv[1:4]
c = json.load(open(cfg))
seq = c["model"]["seq_length"]
c["model"].update(init_method_std=0.1, position_embedding_type="rope", normalization="RMSNorm",
                  swiglu=True, add_bias_linear=False, untie_embeddings_and_output_weights=True,
                  ffn_hidden_size=96, multi_latent_attention=True, q_lora_rank=32,
                  kv_lora_rank=16, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
                  qk_layernorm=True, rope_type="yarn", rotary_scaling_factor=4,
                  original_max_position_embeddings=seq // 4, max_position_embeddings=seq,
                  beta_fast=32, beta_slow=1, mscale=0.8, mscale_all_dim=0.6,
                  num_experts=8, moe_router_topk=4, moe_ffn_hidden_size=48,
                  moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
                  moe_router_bias_update_rate=0.01, moe_router_num_groups=4,
                  moe_router_group_topk=2, moe_router_topk_scaling_factor=2.5,
                  moe_shared_expert_intermediate_size=48, moe_layer_freq=[0, 1],
                  moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=1e-3,
                  mtp_num_layers=1)
c["model"].pop("kv_channels", None)
json.dump(c, open(tmp + "/ds.json", "w"))
q = json.loads(json.dumps(c))
q["model"].update(q_lora_rank=None, untie_embeddings_and_output_weights=False, mtp_num_layers=2,
                  mscale=1.0, mscale_all_dim=1.0)
json.dump(q, open(tmp + "/ds_noq.json", "w"))
b = c["training"]["micro_batch_size"]
tok = np.fromfile(data, dtype=np.uint16)[1000:1000 + 4 * b * (seq + 1)]
tok.astype("<i4").tofile(tmp + "/tok.bin")  # 4 micro-batches of real text
PY
SEQ=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["seq_length"])' "$CFG")

FAMS=$(full_or "ds ds_noq" "ds")
for fam in $FAMS; do
  ck=$TMP/ck_$fam
  "$MT" --config $TMP/$fam.json --set checkpoint.save="$ck" --set training.train_iters=2 --set training.lr_warmup_iters=1 \
    --set training.eval_interval=0 >"$TMP/train_$fam.log" 2>&1 \
    || { echo "$fam: training failed"; tail -5 "$TMP/train_$fam.log"; exit 1; }
  "$MT" convert --to hf --load "$ck" --output $TMP/hf_$fam 2>/dev/null
  grep -q '"model_type":[[:space:]]*"deepseek_v3"' $TMP/hf_$fam/config.json
  a=$($TOOL loss "$ck" $TMP/tok.bin)
  b=$($PY tests/reference/hf_forward.py loss $TMP/hf_$fam $TMP/tok.bin $SEQ)
  relcheck "$fam (trained 2 iterations) fp32 export, loss on $(($(stat -c %s $TMP/tok.bin) / 4)) tokens" "$a" "$b" 1e-5
  # greedy tokens: megatrain generate (MLA latent cache) = the reader's
  "$MT" generate --load "$ck" --prompt "First Citizen:" --max-new-tokens 8 --temperature 0 \
    --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
    --print-ids >"$TMP/g_$fam.log" 2>"$TMP/g_$fam.err" || { echo "$fam: generate failed"; cat "$TMP/g_$fam.err"; exit 1; }
  mt_ids=$(grep '^ids:' "$TMP/g_$fam.log")
  prompt_ids=$(grep '^prompt_ids:' "$TMP/g_$fam.log" | sed 's/^prompt_ids: //')
  hf=$($PY tests/reference/hf_forward.py greedy $TMP/hf_$fam "$prompt_ids" 8)
  [ "$hf" = "$mt_ids" ] || { echo "$fam: HF reader tokens differ"; echo " megatrain $mt_ids"; echo " reader    $hf"; exit 1; }
  echo "$fam: the HF reader's greedy tokens = megatrain generate's ($mt_ids)"
  # megatrain -> HF -> megatrain
  "$MT" convert --from hf --input $TMP/hf_$fam --output $TMP/rt_$fam --config $TMP/$fam.json 2>/dev/null
  $TOOL same "$ck" $TMP/rt_$fam
  # HF -> megatrain -> HF
  "$MT" convert --to hf --load $TMP/rt_$fam --output $TMP/hf2_$fam 2>/dev/null
  echo "$fam HF -> megatrain -> HF: $($PY tests/reference/hf_forward.py same $TMP/hf_$fam $TMP/hf2_$fam)"
  cmp $TMP/hf_$fam/config.json $TMP/hf2_$fam/config.json
  # rope_interleave false: the same model as HF's apply_rotary_pos_emb
  # (rotate_half on unpermuted channels) sees it, its rope rows moved the way
  # apply_rotary_pos_emb_interleave moves q_pe/k_pe (pairs (2i, 2i + 1) ->
  # channels i, i + dr/2), written here from HF's structure, not megatrain's map
  hf=$TMP/hfhalf_$fam; mkdir -p $hf
  $PY - $TMP/hf_$fam $hf <<'PY'
import json, struct, sys, numpy as np
src, dst = sys.argv[1:3]
c = json.load(open(src + "/config.json"))
kr, dn, dr, nh = c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["num_attention_heads"]
c["rope_interleave"] = False
json.dump(c, open(dst + "/config.json", "w"), indent=2)
raw = bytearray(open(src + "/model.safetensors", "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
halves = np.arange(dr).reshape(dr // 2, 2).T.reshape(dr)  # HF's view(.., dr/2, 2).transpose
done = 0
for k, e in h.items():
    if k == "__metadata__" or not k.endswith(("q_b_proj.weight", "self_attn.q_proj.weight",
                                              "kv_a_proj_with_mqa.weight")):
        continue
    assert e["dtype"] == "F32"
    a, b = e["data_offsets"]
    w = np.frombuffer(bytes(raw[8 + n + a:8 + n + b]), dtype="<f4").reshape(e["shape"])
    if k.endswith("kv_a_proj_with_mqa.weight"):
        rows = np.concatenate([np.arange(kr), kr + halves])
    else:
        rows = np.concatenate([hd * (dn + dr) + np.concatenate([np.arange(dn), dn + halves])
                               for hd in range(nh)])
    raw[8 + n + a:8 + n + b] = np.ascontiguousarray(w[rows]).tobytes()
    done += 1
assert done >= 2 * c["num_hidden_layers"], done
open(dst + "/model.safetensors", "wb").write(raw)
PY
  b=$($PY tests/reference/hf_forward.py loss $hf $TMP/tok.bin $SEQ)
  relcheck "$fam rope_interleave false: the reader on the permuted checkpoint" "$a" "$b" 1e-5
  "$MT" convert --from hf --input $hf --output $TMP/rth_$fam --config $TMP/$fam.json 2>/dev/null
  $TOOL same "$ck" $TMP/rth_$fam  # the import permutes back: bitwise the trained checkpoint
  if [ "${MEGATRAIN_TEST_FULL:-0}" != 1 ]; then # CI: the loss and the bitwise import
    echo "$fam rope_interleave false: imported bitwise"; continue
  fi
  "$MT" generate --load $TMP/rth_$fam --prompt "First Citizen:" --max-new-tokens 8 --temperature 0 \
    --vocab-file "$SHARED/gpt2-vocab.json" --merge-file "$SHARED/gpt2-merges.txt" \
    --print-ids >"$TMP/gh_$fam.log" 2>"$TMP/gh_$fam.err" || { echo "$fam: generate failed"; cat "$TMP/gh_$fam.err"; exit 1; }
  r=$($PY tests/reference/hf_forward.py greedy $hf "$prompt_ids" 8)
  [ "$r" = "$(grep '^ids:' "$TMP/gh_$fam.log")" ] || { echo "$fam rope_interleave false: tokens differ: $r"; exit 1; }
  echo "$fam rope_interleave false: imported bitwise, the reader's greedy tokens = megatrain's ($r)"
done

# ---- bad input: one message naming the field, exit 1, no output directory
badcfg() { # badcfg NAME PY-EDIT EXPECTED
  mkdir -p $TMP/in_$1; cp $TMP/hf_ds/model.safetensors $TMP/in_$1/
  $PY -c 'import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))' $TMP/hf_ds/config.json $TMP/in_$1/config.json "$2"
  bad $1 "$3" --from hf --input $TMP/in_$1 --output $TMP/out_$1 --config $TMP/ds.json
}
badcfg kv_rank 'c["kv_lora_rank"] = 512' '"kv_lora_rank" is 512 but the config gives 16'
badcfg interleave 'c["rope_interleave"] = 1' '"rope_interleave" is not a boolean'
[ "${MEGATRAIN_TEST_FULL:-0}" = 1 ] || { echo "test_hf_deepseek OK (CI part)"; exit 0; }
badcfg factor 'c["rope_scaling"]["factor"] = 40' '"factor" is 40 but the config gives 4'
badcfg mtp 'c["num_nextn_predict_layers"] = 0' '"num_nextn_predict_layers" is 0 but the config gives 1'
mkdir -p $TMP/in_copy; cp $TMP/hf_ds/config.json $TMP/in_copy/
$PY - $TMP/hf_ds/model.safetensors $TMP/in_copy/model.safetensors <<'PY'
import json, struct, sys
src, dst = sys.argv[1:3]
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
off = h["model.layers.2.shared_head.head.weight"]["data_offsets"][0]
b[8 + n + off] ^= 1  # one bit of the MTP layer's copy of lm_head
open(dst, "wb").write(b)
PY
bad copy "tensor 'model.layers.2.shared_head.head.weight' in '.*' differs from the model's 'lm_head.weight'" \
  --from hf --input $TMP/in_copy --output $TMP/out_copy --config $TMP/ds.json
