#!/usr/bin/env bash
# PyTorch parity of multi-latent attention (issue 31): megatrain's model
# (fp32, tests/tools/gpt_dump) against the independent fp64 reference
# (tests/reference/mla_reference.py on the decoder of llama_reference.py):
# parameter names, shapes and initialisation, the loss (1e-6 rel.), every
# gradient (1e-5 rel.) and a 10-step AdamW curve (1e-6 rel.).
# Cases (CI): q compression (q_lora_rank) with RMSNorm latent norms
# (qk_layernorm) and YaRN (rotary_scaling_factor 4, mscale and
# mscale_all_dim not 1, a correction range inside the rotated channels),
# untied; a direct linear_q_proj with plain RoPE, LayerNorm latent norm and
# linear_proj biases (GPT-2 block otherwise), tied. MEGATRAIN_TEST_FULL=1
# adds q compression with LayerNorm latents and an MTP depth (whose layer is
# MLA as well), and the Llama block without latent norms.
set -eu
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi
[ -x build/tests/tools/gpt_dump ] || { echo "SKIP: build/tests/tools/gpt_dump not built"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
D=build/tests/tools/gpt_dump
MLA="position_embedding_type=rope multi_latent_attention=1 kv_lora_rank=16 qk_head_dim=8 \
qk_pos_emb_head_dim=4 v_head_dim=12"
LLAMA="normalization=RMSNorm swiglu=1 add_bias_linear=0"
YARN="rope_type=yarn rotary_scaling_factor=4 original_max_position_embeddings=8 mscale=0.7 \
mscale_all_dim=0.5 beta_fast=4 beta_slow=1"
# case               layers hidden heads seq batch vocab ffn untie steps  options
run() { local name=$1; shift; $D "$tmp/$name" "$@" init_method_std=0.1 >/dev/null; cases="${cases:-} $tmp/$name"; }
# shellcheck disable=SC2086
run mla_q_yarn       2 64 4 16 3 500 128 1 10 $MLA $LLAMA $YARN q_lora_rank=24 qk_layernorm=1
# shellcheck disable=SC2086
run mla_noq_ln       2 64 4 16 3 500 0   0 10 $MLA rope_type=rope rotary_scaling_factor=1 \
  qk_layernorm=1
if [ "${MEGATRAIN_TEST_FULL:-0}" = 1 ]; then
  # shellcheck disable=SC2086
  run mla_ln_mtp     2 64 4 16 3 500 0   0 10 $MLA $YARN q_lora_rank=20 qk_layernorm=1 \
    mtp_num_layers=1
  # shellcheck disable=SC2086
  run mla_noq_rope   2 64 4 16 3 500 128 0 10 $MLA $LLAMA rope_type=rope rotary_scaling_factor=1
fi
# shellcheck disable=SC2086
/usr/bin/python3 tests/reference/test_llama_parity.py $cases
