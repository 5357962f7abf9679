/* tests/unit/op_runners_fp8.h — op-table runner of the FP8 quantization ops
 * (fp8_amax, fp8_quantize, fp8_dequantize; cpu/cpu_fp8.c, cuda/cuda_fp8.cu).
 * The bit-exact check of the codes and scales against an independent
 * reference is tests/reference/fp8_reference.py (test_fp8_reference.sh);
 * here the round trip is checked against the double input within the
 * format's rounding, the amax exactly, and cuda against cpu bitwise. */
#ifndef MT_TESTS_OP_RUNNERS_FP8_H
#define MT_TESTS_OP_RUNNERS_FP8_H

#include "core/fp8.h"
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

/* fp8_gemm: ne = {m, n, k}, ip = {trans_a, trans_b, a_fmt, b_fmt, c_f32, bias},
 * fp = {alpha, beta}. A and B (T) are quantized per tensor (fp8_amax,
 * fp8_quantize: current scaling), then C = alpha op(QA) op(QB) (+ beta C)
 * (+ bias) runs on the backend's fp8_gemm where it has one for the case
 * (cuda: cuBLASLt's FP8 matmul, dimensions multiples of 16) and otherwise as
 * model/fp8_linear.c's dequantize path does (fp8_dequantize to fp32, the
 * fp32 gemm, one cast to T). Output "c" (T, or fp32 with c_f32); reference:
 * the dequantized operands decode(q) · scale_inv summed in double. */
static void ot_run_fp8_gemm(ot_run *r) {
  const op_case *k = r->c;
  mt_backend *be = r->be;
  const int m = (int)k->ne[0], n = (int)k->ne[1], kk = (int)k->ne[2];
  const int ta = k->ip[0], tb = k->ip[1], fa = k->ip[2], fb = k->ip[3];
  const mt_dtype ct = k->ip[4] ? MT_F32 : r->T;
  const float alpha = k->fp[0], beta = k->fp[1];
  const int64_t ar = ta ? kk : m, ac = ta ? m : kk, br = tb ? n : kk, bc = tb ? kk : n;
  const int64_t na = ar * ac, nb = br * bc, nc = (int64_t)m * n;
  ot_t *A = ot_rnd(r, na, r->T, -1, 1), *B = ot_rnd(r, nb, r->T, -0.25, 0.25);
  ot_t *C = ot_rnd(r, nc, ct, -1, 1), *bias = k->ip[5] ? ot_rnd(r, n, r->T, -1, 1) : NULL;
  double *want = ot_dbl(nc);
  for (int64_t i = 0; i < nc; i++) want[i] = beta != 0.0f ? (double)beta * C->h[i] : 0.0;
  if (beta == 0.0f) {
    for (int64_t i = 0; i < nc; i++) C->h[i] = NAN;
    ot_put(r, C);
  }
  /* per-tensor quantization of A and B: codes (device ints), 1 scale each */
  ot_t *amax = ot_rnd(r, 2, MT_F32, -1, 1), *sinv = ot_rnd(r, 2, MT_F32, -1, 1);
  int32_t *zero = calloc((size_t)((na > nb ? na : nb) / 4 + 1), sizeof(int32_t));
  uint8_t *qa = (uint8_t *)ot_ints(r, zero, na / 4 + 1), *qb = (uint8_t *)ot_ints(r, zero, nb / 4 + 1);
  free(zero);
  const mt_fp8_desc da = {.fmt = fa, .rows = ar, .cols = ac},
                    db = {.fmt = fb, .rows = br, .cols = bc};
  float *am = amax->d, *si = sinv->d;
  be->ops->fp8_amax(be, &da, am, A->d);
  be->ops->fp8_quantize(be, &da, qa, si, A->d, am, NULL);
  be->ops->fp8_amax(be, &db, am + 1, B->d);
  be->ops->fp8_quantize(be, &db, qb, si + 1, B->d, am + 1, NULL);
  const mt_fp8_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = kk,
                              .alpha = alpha, .beta = beta, .a = qa, .lda = ac, .a_fmt = fa,
                              .a_sinv = si, .b = qb, .ldb = bc, .b_fmt = fb, .b_sinv = si + 1,
                              .c = C->d, .ldc = n, .c_type = ct, .bias = bias ? bias->d : NULL};
  if (!be->ops->fp8_gemm || be->ops->fp8_gemm(be, &g) != 0) { /* the dequantize path */
    ot_t *Ad = ot_rnd(r, na, MT_F32, -1, 1), *Bd = ot_rnd(r, nb, MT_F32, -1, 1);
    ot_t *C32 = ct == MT_F32 ? C : ot_rnd(r, nc, MT_F32, -1, 1);
    ot_t *b32 = bias ? ot_rnd(r, n, MT_F32, -1, 1) : NULL;
    mt_fp8_desc dqa = da, dqb = db;
    dqa.out_f32 = dqb.out_f32 = 1;
    be->ops->fp8_dequantize(be, &dqa, Ad->d, qa, si);
    be->ops->fp8_dequantize(be, &dqb, Bd->d, qb, si + 1);
    if (b32) be->ops->cast(be, b32->d, MT_F32, bias->d, r->T, n);
    mt_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = kk, .alpha = alpha,
                      .beta = ct == MT_F32 ? beta : 0.0f, .a = Ad->d, .lda = ac, .b = Bd->d,
                      .ldb = bc, .c = C32->d, .ldc = n, .a_type = MT_F32, .b_type = MT_F32,
                      .c_type = MT_F32, .bias = b32 ? b32->d : NULL, .batch = 1};
    MT_ASSERT(ct == MT_F32 || beta == 0.0f);
    be->ops->gemm(be, &d);
    if (C32 != C) be->ops->cast(be, C->d, ct, C32->d, MT_F32, nc);
  }
  if (r->want_ref) {
    uint8_t *ha = malloc((size_t)na), *hb = malloc((size_t)nb);
    be->ops->memcpy_d2h(be, ha, qa, (size_t)na);
    be->ops->memcpy_d2h(be, hb, qb, (size_t)nb);
    float *hs = ot_get(r, sinv);
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int l = 0; l < kk; l++) {
          const double av = mt_fp8_decode(ha[ta ? (int64_t)l * ac + i : (int64_t)i * ac + l],
                                          (mt_fp8_format)fa) * (double)hs[0];
          const double bv = mt_fp8_decode(hb[tb ? (int64_t)j * bc + l : (int64_t)l * bc + j],
                                          (mt_fp8_format)fb) * (double)hs[1];
          acc += av * bv;
        }
        want[(int64_t)i * n + j] += alpha * acc + (bias ? bias->h[j] : 0.0);
      }
    free(ha), free(hb), free(hs);
  }
  ot_output(r, "c", C, want, NULL);
}

#endif
