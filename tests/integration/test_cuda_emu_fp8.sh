#!/usr/bin/env bash
# FP8 linear layers on the cuda backend under the host emulation (build-emu/,
# make CUDA_EMU=1; docs/fp8.md "On the cuda backend"):
#  - model/fp8_linear.c on bf16 device memory (tests/tools/fp8_linear_dev,
#    3 steps, M 32, OUT 48, IN 64, with a bias) on cpu, on cuda through the
#    dequantize path (MEGATRAIN_CUDA_FP8_GEMM=0) and on cuda through
#    cuBLASLt's FP8 matmul (the emulated sm_90 default): the FP8 codes and
#    scales of x, w and dy bitwise the cpu backend's at every step (hash), the
#    delayed recipe's amax histories and scales bitwise on all three; y, dx,
#    dw of cuda-dequantize vs cpu, and of cuda-cuBLASLt vs cuda-dequantize,
#    within TOLS (the GEMMs' summation order and where the scales are
#    applied; the measured worst is printed);
#  - the cuBLASLt path ran (MT_EMU_PROFILE lists the transpose kernel of
#    its TN copies) and the dequantize path did not;
#    M 20 (not a multiple of 16) falls back: bitwise the dequantize path;
#  - blockwise and mxfp8 (the dequantize path on cuda): codes bitwise.
# CI: tensorwise and delayed hybrid, blockwise and mxfp8 e4m3 (a few
# seconds). MEGATRAIN_TEST_FULL=1 adds e4m3 for the per-tensor recipes and
# FP8 training of the GPT and Llama-style test models, cuda-emu (cuBLASLt
# and dequantize paths) against the cpu backend, every recipe, hybrid.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_emu_lib.sh"
FULL=${MEGATRAIN_TEST_FULL:-0}
LIN=build/tests/tools/fp8_linear_dev
ELIN=$EMU_BUILD/tests/tools/fp8_linear_dev
[ -x "$LIN" ] && [ -x "$ELIN" ] || { echo "SKIP: fp8_linear_dev not built in build/ and build-emu/"; exit 77; }
# max |diff| / max |ref| per tensor: y, dx (bf16) within one bf16 ulp of
# the largest value (2^-8: an fp32 sum in another order may round the other
# way); dw (fp32, accumulated over the steps) within 1e-5
TOLS="4e-3 1e-5"
fails=0
t0=$(date +%s)

# cmp_out A B "TOL_BF16 TOL_F32" RECIPE M OUT IN STEPS: max |a-b| / max |b| per tensor
cmp_out() {
  /usr/bin/python3 - "$@" <<'PY' || fails=$((fails + 1))
import struct, sys
a, b, recipe = sys.argv[1], sys.argv[2], sys.argv[4]
tol16, tol32 = map(float, sys.argv[3].split())
M, O, I, S = map(int, sys.argv[5:9])
def load(p):
    d = open(p, "rb").read()
    return struct.unpack("<%df" % (len(d) // 4), d)
fa, fb = load(a), load(b)
assert len(fa) == len(fb), "lengths differ"
parts, off = [], 0
for s in range(S):
    parts += [("y%d" % s, off, M * O), ("dx%d" % s, off + M * O, M * I)]
    off += M * O + M * I
parts.append(("dw", off, O * I)); off += O * I
worst, ok = {}, True
for name, o, n in parts:
    xa, xb = fa[o:o + n], fb[o:o + n]
    scale = max(abs(v) for v in xb) or 1.0
    d = max(abs(p - q) for p, q in zip(xa, xb)) / scale
    k = name.rstrip("0123456789")
    worst[k] = max(worst.get(k, 0.0), d)
    if not d <= (tol32 if k == "dw" else tol16): ok = False
if recipe == "delayed":
    if fa[off:] != fb[off:]:
        print("   amax histories / scales differ"); ok = False
    else:
        worst["meta"] = "bitwise"
print("   " + ", ".join("%s %s" % (k, v if isinstance(v, str) else "%.2g" % v) for k, v in worst.items()),
      "(max |diff| / max |ref|; tol y, dx %g, dw %g)" % (tol16, tol32))
sys.exit(0 if ok else 1)
PY
}

SH=(32 48 64 3)
run_lin() { # NAME BIN DEVICE RECIPE FORMAT M OUT IN STEPS [env...]
  local name=$1 bin=$2 dev=$3 rec=$4 fmt=$5 m=$6 o=$7 i=$8 s=$9; shift 9
  env "$@" "$bin" "$dev" "$rec" "$fmt" "$m" "$o" "$i" "$s" "$TMP/$name.bin" 1 \
    >"$TMP/$name.out" 2>"$TMP/$name.err" || { echo "   $name failed:"; tail -5 "$TMP/$name.err"; return 1; }
}
cases="tensorwise/hybrid delayed/hybrid blockwise/e4m3 mxfp8/e4m3"
[ "$FULL" = 1 ] && cases="$cases tensorwise/e4m3 delayed/e4m3 blockwise/hybrid mxfp8/hybrid"
for c in $cases; do
  rec=${c%/*} fmt=${c#*/} n=${c/\//_}
  echo "== $rec $fmt: M ${SH[0]}, OUT ${SH[1]}, IN ${SH[2]}, ${SH[3]} steps"
  run_lin cpu_$n "$LIN" cpu $rec $fmt "${SH[@]}" || { fails=$((fails + 1)); continue; }
  run_lin deq_$n "$ELIN" cuda $rec $fmt "${SH[@]}" MEGATRAIN_CUDA_FP8_GEMM=0 MT_EMU_PROFILE=1 ||
    { fails=$((fails + 1)); continue; }
  run_lin lt_$n "$ELIN" cuda $rec $fmt "${SH[@]}" MT_EMU_PROFILE=1 || { fails=$((fails + 1)); continue; }
  for v in deq lt; do
    if cmp -s "$TMP/cpu_$n.out" "$TMP/${v}_$n.out"; then echo "   codes and scales, 3 steps: cuda ($v) bitwise cpu"
    else echo "   codes differ, cuda ($v) vs cpu:"; paste "$TMP/cpu_$n.out" "$TMP/${v}_$n.out"; fails=$((fails + 1)); fi
  done
  echo -n "   cuda dequantize vs cpu:"; cmp_out "$TMP/deq_$n.bin" "$TMP/cpu_$n.bin" "$TOLS" $rec "${SH[@]}"
  # the TN copies run only inside the FP8 GEMM, just before its cublasLtMatmul
  # (the dequantize path's fp32 GEMM with a bias is a cublasLtMatmul too)
  ran_lt=$(grep -c 'k_fp8_transpose' "$TMP/lt_$n.err" || true)
  ran_deq=$(grep -c 'k_fp8_transpose' "$TMP/deq_$n.err" || true)
  if [ "$rec" = tensorwise ] || [ "$rec" = delayed ]; then
    echo -n "   cuda cuBLASLt vs cuda dequantize:"
    cmp_out "$TMP/lt_$n.bin" "$TMP/deq_$n.bin" "$TOLS" $rec "${SH[@]}"
    if [ "$ran_lt" = 1 ] && [ "$ran_deq" = 0 ]; then echo "   the FP8 GEMM ran (its TN transposes in the profile; dequantize run: none)"
    else echo "   expected k_fp8_transpose in the cuBLASLt run only ($ran_lt / $ran_deq)"; fails=$((fails + 1)); fi
  else
    if cmp -s "$TMP/lt_$n.bin" "$TMP/deq_$n.bin" && [ "$ran_lt" = 0 ]; then echo "   $rec: the dequantize path on cuda (bitwise, no cuBLASLt FP8)"
    else echo "   $rec: expected the dequantize path"; fails=$((fails + 1)); fi
  fi
done
echo "== M 20 (not a multiple of 16): the FP8 GEMM falls back to the dequantize path"
SH20=(20 48 64 2)
run_lin lt20 "$ELIN" cuda tensorwise hybrid "${SH20[@]}" MT_EMU_PROFILE=1 &&
  run_lin deq20 "$ELIN" cuda tensorwise hybrid "${SH20[@]}" MEGATRAIN_CUDA_FP8_GEMM=0 || fails=$((fails + 1))
if cmp -s "$TMP/lt20.bin" "$TMP/deq20.bin" && ! grep -q k_fp8_transpose "$TMP/lt20.err"; then
  echo "   bitwise the dequantize path, no FP8 GEMM"
else echo "   M 20: expected the dequantize path"; fails=$((fails + 1)); fi

if [ "$FULL" = 1 ]; then
  # FP8 training, 1 rank, 3 steps of 16 tokens x 4 micro-batches (as
  # test_cuda_emu_train), bf16 storage, dropout on: cuda-emu vs cpu
  SHAPE=(--set model.num_layers=4 --set model.seq_length=16 --set training.global_batch_size=4
         --set training.micro_batch_size=1 --set training.train_iters=3 --set training.lr_warmup_iters=1
         --set training.eval_interval=3 --set training.eval_iters=1 --set logging.log_interval=1
         --set training.precision=bf16 --set training.fp8_format=hybrid)
  LLAMA=(--set model.num_attention_heads=8 --set model.ffn_hidden_size=128
         --set model.position_embedding_type=rope --set model.normalization=RMSNorm
         --set model.swiglu=true --set model.group_query_attention=true --set model.num_query_groups=4
         --set model.add_bias_linear=false --set model.untie_embeddings_and_output_weights=true)
  for model in gpt llama; do
    M=(); [ $model = llama ] && M=("${LLAMA[@]}")
    for rec in tensorwise delayed blockwise mxfp8; do
      A=(--config "$CFG" "${SHAPE[@]}" "${M[@]}" --set training.fp8_recipe=$rec)
      emu_run cpu_${model}_$rec 1 "$MT" cpu "${A[@]}" || { fails=$((fails + 1)); continue; }
      emu_run lt_${model}_$rec 1 "$EMU_MT" cuda "${A[@]}" || { fails=$((fails + 1)); continue; }
      emu_cmp lt_${model}_$rec cpu_${model}_$rec 2e-2 || fails=$((fails + 1))
      if [ $rec = tensorwise ] || [ $rec = delayed ]; then
        MEGATRAIN_CUDA_FP8_GEMM=0 emu_run deq_${model}_$rec 1 "$EMU_MT" cuda "${A[@]}" ||
          { fails=$((fails + 1)); continue; }
        emu_cmp deq_${model}_$rec cpu_${model}_$rec 2e-2 || fails=$((fails + 1))
        emu_cmp lt_${model}_$rec deq_${model}_$rec 2e-2 || fails=$((fails + 1))
      fi
    done
  done
fi
dt=$(( $(date +%s) - t0 ))
[ $fails -eq 0 ] || { echo "$fails check(s) failed (${dt} s)"; exit 1; }
echo "FP8 on cuda-emu: codes bitwise, GEMMs within tolerance (${dt} s$([ "$FULL" = 1 ] && echo ', full'))"
