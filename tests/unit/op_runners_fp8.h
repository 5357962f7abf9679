/* tests/unit/op_runners_fp8.h — op-table runner of the FP8 quantization ops
 * (fp8_amax, fp8_quantize, fp8_dequantize; cpu/cpu_fp8.c, cuda/cuda_fp8.cu).
 * The bit-exact check of the codes and scales against an independent
 * reference is tests/reference/fp8_reference.py (test_fp8_reference.sh);
 * here the round trip is checked against the double input within the
 * format's rounding, the amax exactly, and cuda against cpu bitwise. */
#ifndef MT_TESTS_OP_RUNNERS_FP8_H
#define MT_TESTS_OP_RUNNERS_FP8_H

#include "op_harness.h"

/* fp8_quantize: ne = {rows, cols}, ip = {fmt (0 e4m3, 1 e5m2), blocking
 * (mt_fp8_blocking), pow2}; x in T with a dynamic range of 2^±8 across
 * rows; outputs "amax" (fp32, per block), "scale_inv" (fp32, per block) and
 * "y" = dequantize(quantize(x)) (T), whose reference is x itself. */
static void ot_run_fp8_quantize(ot_run *r) {
  const int64_t rows = r->c->ne[0], cols = r->c->ne[1], n = rows * cols;
  mt_fp8_desc d = {.fmt = r->c->ip[0], .blocking = (mt_fp8_blocking)r->c->ip[1],
                   .rows = rows, .cols = cols, .pow2 = r->c->ip[2]};
  const int64_t ns = mt_fp8_n_scales(&d);
  int64_t bh, bw;
  mt_fp8_block_dims(&d, &bh, &bw);
  ot_t *x = ot_rnd(r, n, r->T, -1, 1);
  for (int64_t i = 0; i < rows; i++) /* rows spanning 2^-8 .. 2^8 */
    for (int64_t j = 0; j < cols; j++)
      x->h[i * cols + j] = (float)ldexp(x->h[i * cols + j], (int)(i % 17) - 8);
  if (r->T == MT_BF16)
    for (int64_t i = 0; i < n; i++) x->h[i] = ot_bf2f(ot_f2bf(x->h[i]));
  ot_put(r, x);
  ot_t *amax = ot_rnd(r, ns, MT_F32, -1, 1), *sinv = ot_rnd(r, ns, MT_F32, -1, 1);
  ot_t *y = ot_rnd(r, n, r->T, -1, 1);
  int32_t *zero = calloc((size_t)(n / 4 + 1), sizeof(int32_t));
  uint8_t *q = (uint8_t *)ot_ints(r, zero, n / 4 + 1);
  free(zero);
  r->be->ops->fp8_amax(r->be, &d, amax->d, x->d);
  r->be->ops->fp8_quantize(r->be, &d, q, sinv->d, x->d, amax->d, NULL);
  r->be->ops->fp8_dequantize(r->be, &d, y->d, q, sinv->d);
  double *wa = ot_dbl(ns), *wy = ot_dbl(n);
  const int64_t nbc = (cols + bw - 1) / bw;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double *m = &wa[(i / bh) * nbc + j / bw];
      *m = fmax(*m, fabs(x->h[i * cols + j]));
      wy[i * cols + j] = x->h[i * cols + j];
    }
  ot_output(r, "amax", amax, wa, NULL);
  ot_output(r, "scale_inv", sinv, NULL, NULL);
  ot_output(r, "y", y, wy, NULL);
}

#endif
