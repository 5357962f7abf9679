#!/usr/bin/env bash
# tests/integration/test_flops_formula.sh — megatrain's model FLOPs per
# iteration (model/gpt_flops.c, as `megatrain plan --json` reports them from
# a config) against tests/reference/flops_reference.py, which counts the
# same iteration GEMM by GEMM from the config file: dense GPT-2, GQA +
# SwiGLU (llama-tiny, and with kv_channels != h / heads), MoE with shared
# experts and a moe_layer_freq list (deepseek-tiny, with one MTP depth), MoE every other layer
# (gpt-moe, moe_layer_freq 2), multi-latent attention on deepseek-tiny with and
# without q compression (MoE + MTP) and the DeepSeek-V3 / V2-Lite configs, under logging.flops_formula megatron
# (today's Megatron: causal core attention at half) and paper (the 2021/2022
# papers' full s x s), and the 1T paper config. Relative difference <= 1e-6.
set -u
cd "$(dirname "$0")/../.."
bin="${MEGATRAIN:-./megatrain}"
[ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
py=/usr/bin/python3
fails=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# case: name config world-size [--set k=v]...
check() {
  local name=$1 cfg=$2 world=$3; shift 3
  local sets=() refsets=()
  while [ $# -gt 0 ]; do sets+=(--set "$2"); refsets+=(--set "$2"); shift 2; done
  if ! "$bin" plan --config "$cfg" --world-size "$world" --hardware h100-sxm --json \
      "${sets[@]}" >"$tmp/j" 2>"$tmp/e"; then
    echo "FAIL $name: megatrain plan: $(cat "$tmp/e")"; fails=$((fails+1)); return
  fi
  local ref
  ref=$($py tests/reference/flops_reference.py "$cfg" "${refsets[@]}") || {
    echo "FAIL $name: reference"; fails=$((fails+1)); return; }
  if $py - "$tmp/j" "$ref" "$name" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["time"]
mt, ref = t["model_flops"], float(sys.argv[2])
rel = abs(mt - ref) / ref
print("%-34s %-8s megatrain %.10e reference %.10e rel %.1e" % (sys.argv[3], t["flops_formula"], mt, ref, rel))
sys.exit(0 if rel <= 1e-6 else 1)
PY
  then :; else echo "FAIL $name"; fails=$((fails+1)); fi
}

MLA=(--set model.group_query_attention=false --set model.num_query_groups=null
     --set model.multi_latent_attention=true --set model.kv_lora_rank=32
     --set model.qk_head_dim=32 --set model.qk_pos_emb_head_dim=16 --set model.v_head_dim=24)
for f in megatron paper; do
  check "gpt-tiny dense" configs/gpt-tiny.json 1 --set logging.flops_formula=$f
  check "gpt-tiny s=2048" configs/gpt-tiny.json 1 --set logging.flops_formula=$f \
    --set model.seq_length=2048 --set model.max_position_embeddings=2048
  check "llama-tiny GQA SwiGLU" configs/llama-tiny.json 1 --set logging.flops_formula=$f
  check "llama-tiny kv_channels 96" configs/llama-tiny.json 1 --set logging.flops_formula=$f \
    --set model.kv_channels=96
  check "deepseek-tiny MoE shared list" configs/deepseek-tiny.json 1 --set logging.flops_formula=$f
  check "gpt-moe freq 2" configs/gpt-moe.json 8 --set logging.flops_formula=$f \
    --set model.moe_layer_freq=2
  # multi-latent attention on the MoE + MTP model, with and without q compression
  for q in 48 null; do
    check "deepseek-tiny MLA q_lora_rank $q" configs/deepseek-tiny.json 1 \
      --set logging.flops_formula=$f "${MLA[@]}" --set model.q_lora_rank=$q
  done
  check "deepseek-v3 (MLA, MoE, MTP)" configs/models/deepseek-v3.json 1024 \
    --set logging.flops_formula=$f
  check "deepseek-v2-lite (MLA, no q_lora)" configs/models/deepseek-v2-lite.json 8 \
    --set logging.flops_formula=$f
done
check "korthikanti22-1t (paper)" configs/papers/korthikanti22-1t.json 512
check "korthikanti22-1t megatron" configs/papers/korthikanti22-1t.json 512 \
  --set logging.flops_formula=megatron

# a name that is not a formula: exit 2 naming the key
"$bin" plan --config configs/gpt-tiny.json --world-size 1 --hardware h100-sxm \
  --set logging.flops_formula=causal >"$tmp/o" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "flops_formula" "$tmp/o"; then echo "ok   bad formula name refused"
else echo "FAIL bad formula name: rc $rc: $(cat "$tmp/o")"; fails=$((fails+1)); fi

# plan takes an MLA config on any device; train takes MLA on both devices
# (the cuda fused attention takes v_head_dim != the q/k width on its FFMA
# kernels), with FP8 too since the FP8 linears run on cuda (issue 32): the
# config rules pass MLA + FP8 on device cuda (no exit 2 naming fp8_format;
# without a GPU the run then stops at the device, exit 1)
"$bin" train --config configs/deepseek-tiny.json "${MLA[@]}" --set device=cuda \
  --set training.precision=bf16 --set training.fp8_format=hybrid \
  --set training.train_iters=1 >"$tmp/o" 2>&1
rc=$?
if [ $rc -ne 2 ] && ! grep -q "training.fp8_format" "$tmp/o"; then
  echo "ok   train accepts MLA with fp8_format on device cuda (rc $rc: $(grep -m1 -o 'no usable CUDA device' "$tmp/o" || echo ran))"
else echo "FAIL train with MLA and fp8 on cuda: rc $rc: $(cat "$tmp/o")"; fails=$((fails+1)); fi

[ $fails -eq 0 ]
