#!/usr/bin/env bash
# PyTorch parity of multi-token prediction (issue 31): megatrain's model
# (fp32, tests/tools/gpt_dump) against the independent fp64 reference
# (tests/reference/mtp_reference.py on the decoder of llama_reference.py):
# parameter names, shapes and initialisation, the main loss (1e-6 rel.),
# each depth's MTP loss (1e-6 rel.), every gradient (1e-5 rel.) and a
# 10-step AdamW curve (1e-6 rel.) whose objective carries the MTP term.
# Cases: two depths on the GPT-2 block (learned positions rolled with the
# tokens, tied output layer); one depth with lambda 0.3 on a Llama-style MoE
# model (the MTP layer is MoE like the last decoder layer; untied); two
# depths with eod_mask_loss (the rolled loss mask).
set -eu
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"; exit 77
fi
[ -x build/tests/tools/gpt_dump ] || { echo "SKIP: build/tests/tools/gpt_dump not built"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
D=build/tests/tools/gpt_dump
LLAMA="position_embedding_type=rope normalization=RMSNorm swiglu=1 num_query_groups=2 add_bias_linear=0"
MOE="num_experts=4 moe_router_topk=2 moe_ffn_hidden_size=48 moe_aux_loss_coeff=0.01 moe_z_loss_coeff=0.001"
# case               layers hidden heads seq batch vocab ffn untie steps  options
run() { local name=$1; shift; $D "$tmp/$name" "$@" init_method_std=0.1 >/dev/null; cases="${cases:-} $tmp/$name"; }
run mtp2_gpt2        2 64 4 16 3 500 0   0 10 mtp_num_layers=2
run mtp1_llama_moe   2 64 4 16 3 500 128 1 10 $LLAMA $MOE moe_layer_freq=[0,1] mtp_num_layers=1 \
  mtp_loss_scaling_factor=0.3
run mtp2_eod         2 64 4 16 3 500 0   0 10 mtp_num_layers=2 eod_mask_loss=1
# shellcheck disable=SC2086
/usr/bin/python3 tests/reference/test_llama_parity.py $cases
