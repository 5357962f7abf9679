#!/usr/bin/env bash
# FP8 quantization bit-exact against an independent reference
# (tests/reference/fp8_reference.py: exact decoding from the bits, encoding by
# exact nearest-value search with ties to even, TE's scale rules in numpy
# float32): all 256 codes of e4m3 and e5m2 decoded, every value, tie and
# tie ± 1 ulp, saturation, subnormal, zero, inf and NaN encoded, and 200
# tensors through the cpu backend's fp8_amax + fp8_quantize ops (tensorwise,
# 1x128, 128x128, mxfp8; pow2 and epsilon scales; zero, tiny, huge, inf/nan
# amax) plus 56 delayed-scaling updates (history max / most_recent, margin)
# — codes, amax and scale_inv compared bit for bit; and the FP8 linear layer
# (tests/tools/fp8_linear: model/fp8_linear.c's fprop, dgrad and wgrad, every
# recipe and format) against products of the reference's quantized operands,
# each element within 1e-5 of its sum |a b| (fp32 accumulation); and the MoE
# experts in FP8 (tests/tools/fp8_experts: model/moe_experts.c, one scale set
# per expert over its rows from every source peer, as TE's GroupedLinear)
# against the same products of each expert's gathered rows. About 22 s.
# MEGATRAIN_TEST_FP8_DEVICE=cuda runs the same cases on the cuda backend
# (a CUDA or CUDA_EMU=1 build).
set -eu
cd "$(dirname "$0")/../.."
TOOL=build/tests/tools/fp8_quant LIN=build/tests/tools/fp8_linear EXP=build/tests/tools/fp8_experts
[ -x "$TOOL" ] && [ -x "$LIN" ] && [ -x "$EXP" ] || { echo "SKIP: $TOOL, $LIN or $EXP not built"; exit 77; }
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy not found"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1
if [ "${MEGATRAIN_TEST_FP8_DEVICE:-cpu}" = cpu ]; then
  /usr/bin/python3 -W ignore tests/reference/fp8_reference.py "$TOOL" cpu "$LIN" "$EXP"
else
  /usr/bin/python3 -W ignore tests/reference/fp8_reference.py "$TOOL" "$MEGATRAIN_TEST_FP8_DEVICE" "$LIN"
fi
