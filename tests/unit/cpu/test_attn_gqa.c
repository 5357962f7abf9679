/* tests/unit/cpu/test_attn_gqa.c — grouped-query attention (mt_attn_desc.ng):
 *
 *  - the unfused reference op (tests/tools/attn_unfused.h, formerly the CPU
 *    backend's attention) with ng = np and ng = 0 against a verbatim copy of
 *    the cpu attention as it was before GQA (the [s, b, np, 3, hn] kernels of
 *    commit d6d3d68, below): ctx, probs and dqkv bitwise identical, with and
 *    without dropout, with the default thread count and with 1 thread;
 *  - the FUSED op of the backend (flash_attn_fwd / flash_attn_bwd) with
 *    ng < np against ng = np on the expanded layout (each group's K/V head
 *    copied to its query heads, what the fused op must NOT do): ctx, lse and
 *    dQ equal within 1e-6 relative (bitwise when the kernel computes each
 *    query head alike; reported), dK/dV equal to the sum of the expanded
 *    heads' dK/dV within 1e-6 relative.
 * The fused op against the unfused reference: test_attn_fused_ref.c; per-op
 * numerics against double loops and finite differences: the op-case table
 * (op_cases.h). */
#include <cblas.h>
#include <omp.h>

#include "tests/unit/cpu_test_common.h"
#include "tests/tools/attn_unfused.h"

/* ---- legacy: cpu/cpu_attention.c at d6d3d68 (plain multi-head; its
 * dropout counters and softmax are the reference's, same arithmetic) ---- */
static void legacy_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, void *probs_,
                            const void *qkv_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn;
  const int64_t ld = (int64_t)b * np * 3 * hn, ldc = (int64_t)b * np * hn;
  const int use_drop = d->dropout_p > 0.0f;
  const int nthr = omp_get_max_threads();
  const int64_t per_thr = use_drop ? (int64_t)s * s : 0;
  float *ws = use_drop ? cpu_workspace(be, (size_t)(per_thr * nthr) * sizeof(float)) : NULL;
  const float *qkv = (const float *)qkv_;
  float *ctx = (float *)ctx_, *probs = (float *)probs_;
  int prev = ref_attn_blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int pair = 0; pair < b * np; pair++) {
    int bi = pair / np, n = pair % np;
    const float *q = qkv + ((int64_t)bi * np + n) * 3 * hn;
    const float *k = q + hn, *v = q + 2 * hn;
    float *p = probs + (int64_t)pair * s * s;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, hn, d->scale, q, (blasint)ld, k,
                (blasint)ld, 0.0f, p, s);
    ref_causal_softmax(p, s, NULL);
    const float *pd = p;
    if (use_drop) {
      float *m = ws + (int64_t)omp_get_thread_num() * per_thr;
      ref_attn_dropout_scales(d, bi, n, m);
      for (int64_t i = 0; i < (int64_t)s * s; i++) m[i] *= p[i];
      pd = m;
    }
    float *c = ctx + ((int64_t)bi * np + n) * hn;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, hn, s, 1.0f, pd, s, v, (blasint)ld,
                0.0f, c, (blasint)ldc);
  }
  ref_attn_blas_restore(prev);
}

static void legacy_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv_,
                            const void *dctx_, const void *qkv_, const void *probs_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn;
  const int64_t ld = (int64_t)b * np * 3 * hn, ldc = (int64_t)b * np * hn;
  const int use_drop = d->dropout_p > 0.0f;
  const int nthr = omp_get_max_threads();
  const int64_t ss = (int64_t)s * s, per_thr = (use_drop ? 3 : 1) * ss;
  float *ws = cpu_workspace(be, (size_t)(per_thr * nthr) * sizeof(float));
  const float *qkv = (const float *)qkv_, *dctx = (const float *)dctx_;
  const float *probs = (const float *)probs_;
  float *dqkv = (float *)dqkv_;
  const float scale = d->scale;
  int prev = ref_attn_blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int pair = 0; pair < b * np; pair++) {
    int bi = pair / np, n = pair % np;
    int64_t off = ((int64_t)bi * np + n) * 3 * hn;
    const float *q = qkv + off, *k = q + hn, *v = q + 2 * hn;
    float *dq = dqkv + off, *dk = dq + hn, *dv = dq + 2 * hn;
    const float *dc = dctx + ((int64_t)bi * np + n) * hn;
    const float *p = probs + (int64_t)pair * ss;
    float *dp = ws + (int64_t)omp_get_thread_num() * per_thr;
    float *m = use_drop ? dp + ss : NULL, *pd = use_drop ? dp + 2 * ss : NULL;
    const float *pused = p;
    if (use_drop) {
      ref_attn_dropout_scales(d, bi, n, m);
      for (int64_t i = 0; i < ss; i++) pd[i] = p[i] * m[i];
      pused = pd;
    }
    /* dV = dropout(P)^T dctx */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, hn, s, 1.0f, pused, s, dc,
                (blasint)ldc, 0.0f, dv, (blasint)ld);
    /* dP = dctx V^T (then through the dropout mask) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, hn, 1.0f, dc, (blasint)ldc, v,
                (blasint)ld, 0.0f, dp, s);
    if (use_drop)
      for (int64_t i = 0; i < ss; i++) dp[i] *= m[i];
    /* dS = scale * P * (dP - rowsum(dP * P)), causal */
    for (int qi = 0; qi < s; qi++) {
      float *dr = dp + (int64_t)qi * s;
      const float *pr = p + (int64_t)qi * s;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j <= qi; j++) dot += dr[j] * pr[j];
#pragma omp simd
      for (int j = 0; j <= qi; j++) dr[j] = scale * pr[j] * (dr[j] - dot);
      for (int j = qi + 1; j < s; j++) dr[j] = 0.0f;
    }
    /* dQ = dS K, dK = dS^T Q */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, hn, s, 1.0f, dp, s, k, (blasint)ld,
                0.0f, dq, (blasint)ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, hn, s, 1.0f, dp, s, q, (blasint)ld,
                0.0f, dk, (blasint)ld);
  }
  ref_attn_blas_restore(prev);
}

/* ---- tests ---- */

static const int64_t tg_ids[3] = {5, 2, 11};

static mt_attn_desc tg_desc(int s, int b, int np, int ng, int hn, float p) {
  mt_attn_desc d = {.s = s, .b = b, .np = np, .hn = hn, .ng = ng, .head_offset = 1,
                    .n_heads_total = np + 3, .scale = 1.0f / sqrtf((float)hn),
                    .dropout_p = p, .key = mt_rng_key(7, "attention_dropout", 2, 0),
                    .sample_ids = tg_ids};
  return d;
}

static void tg_bitwise(const float *a, const float *b, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)))
      fail_msg("%s differs at %lld: %.9g vs %.9g", what, (long long)i, (double)a[i],
               (double)b[i]);
}

/* ng = np (and 0) against the legacy kernels, bitwise. */
static void check_legacy(mt_backend *be, int s, int b, int np, int hn, float p) {
  int64_t nq = (int64_t)s * b * np * 3 * hn, nc = (int64_t)s * b * np * hn;
  int64_t npb = (int64_t)b * np * s * s;
  float *qkv = tc_randf(be, nq, -2, 2), *dctx = tc_randf(be, nc, -1, 1);
  float *c0 = tc_allocf(be, nc), *c1 = tc_allocf(be, nc), *p0 = tc_allocf(be, npb);
  float *p1 = tc_allocf(be, npb), *d0 = tc_allocf(be, nq), *d1 = tc_allocf(be, nq);
  for (int ng = 0; ng <= np; ng += np) {
    mt_attn_desc d = tg_desc(s, b, np, ng, hn, p);
    legacy_attn_fwd(be, &d, c0, p0, qkv);
    legacy_attn_bwd(be, &d, d0, dctx, qkv, p0);
    mt_ref_attn_fwd(be, &d, c1, p1, NULL, qkv);
    mt_ref_attn_bwd(be, &d, d1, dctx, qkv, p1);
    tg_bitwise(c0, c1, nc, "ctx (ng = np vs legacy)");
    tg_bitwise(p0, p1, npb, "probs (ng = np vs legacy)");
    tg_bitwise(d0, d1, nq, "dqkv (ng = np vs legacy)");
  }
  float *bufs[] = {qkv, dctx, c0, c1, p0, p1, d0, d1};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

static void test_ng_np_bitwise_legacy(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  int nt = omp_get_max_threads();
  for (int pass = 0; pass < 2; pass++) {
    if (pass) omp_set_num_threads(1);
    check_legacy(be, 13, 2, 3, 6, 0.0f);
    check_legacy(be, 13, 2, 3, 6, 0.3f);
    check_legacy(be, 64, 3, 4, 16, 0.1f);
    check_legacy(be, 5, 1, 1, 8, 0.0f);
  }
  omp_set_num_threads(nt);
  mt_backend_destroy(be);
}

/* Elementwise |a - b| <= tol (|b| + max |b|); tol 0: bitwise. Returns 1
 * when bitwise equal. */
static int tg_close(const float *a, const float *b, int64_t n, double tol, const char *what) {
  if (tol == 0) {
    tg_bitwise(a, b, n, what);
    return 1;
  }
  double mx = 0;
  int same = 1;
  for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)b[i]));
  for (int64_t i = 0; i < n; i++) {
    same &= !memcmp(&a[i], &b[i], sizeof(float));
    if (!(fabs((double)a[i] - b[i]) <= tol * (fabs((double)b[i]) + mx)))
      fail_msg("%s differs at %lld: %.9g vs %.9g (max |ref| %.3g)", what, (long long)i,
               (double)a[i], (double)b[i], mx);
  }
  return same;
}

/* ng < np against ng = np on the expanded layout; fused: the backend's
 * fused op (within 1e-6), else the unfused reference (bitwise). */
static void check_expanded(mt_backend *be, int s, int b, int np, int ng, int hn, float p,
                           int fused) {
  const int npg = np / ng;
  const double tol = fused ? 1e-6 : 0;
  int64_t nq = (int64_t)s * b * ng * (npg + 2) * hn, ne = (int64_t)s * b * np * 3 * hn;
  int64_t nc = (int64_t)s * b * np * hn, npb = (int64_t)b * np * s * s, nl = (int64_t)b * np * s;
  float *qkv = tc_randf(be, nq, -2, 2), *dctx = tc_randf(be, nc, -1, 1);
  float *qe = tc_allocf(be, ne), *c0 = tc_allocf(be, nc), *c1 = tc_allocf(be, nc);
  float *p0 = tc_allocf(be, npb), *p1 = tc_allocf(be, npb);
  float *l0 = tc_allocf(be, nl), *l1 = tc_allocf(be, nl);
  float *d0 = tc_allocf(be, nq), *d1 = tc_allocf(be, ne);
  int64_t rows = (int64_t)s * b;
  for (int64_t r = 0; r < rows; r++)
    for (int n = 0; n < np; n++) {
      int g = n / npg, j = n % npg;
      const float *src = qkv + ((r * ng + g) * (npg + 2)) * hn;
      float *dst = qe + (r * np + n) * 3 * hn;
      memcpy(dst, src + (int64_t)j * hn, (size_t)hn * 4);
      memcpy(dst + hn, src + (int64_t)npg * hn, (size_t)hn * 4);
      memcpy(dst + 2 * hn, src + (int64_t)(npg + 1) * hn, (size_t)hn * 4);
    }
  mt_attn_desc dg = tg_desc(s, b, np, ng, hn, p), de = tg_desc(s, b, np, np, hn, p);
  if (fused) {
    be->ops->flash_attn_fwd(be, &dg, c0, l0, qkv, NULL);
    be->ops->flash_attn_bwd(be, &dg, d0, NULL, dctx, c0, l0, qkv, NULL);
    be->ops->flash_attn_fwd(be, &de, c1, l1, qe, NULL);
    be->ops->flash_attn_bwd(be, &de, d1, NULL, dctx, c1, l1, qe, NULL);
  } else {
    mt_ref_attn_fwd(be, &dg, c0, p0, l0, qkv);
    mt_ref_attn_bwd(be, &dg, d0, dctx, qkv, p0);
    mt_ref_attn_fwd(be, &de, c1, p1, l1, qe);
    mt_ref_attn_bwd(be, &de, d1, dctx, qe, p1);
    tg_bitwise(p0, p1, npb, "probs (GQA vs expanded)");
  }
  int same = tg_close(c0, c1, nc, tol, "ctx (GQA vs expanded)");
  same &= tg_close(l0, l1, nl, tol, "lse (GQA vs expanded)");
  for (int64_t r = 0; r < rows; r++)
    for (int g = 0; g < ng; g++) {
      const float *gq = d0 + ((r * ng + g) * (npg + 2)) * hn;
      for (int j = 0; j < npg; j++)
        same &= tg_close(gq + (int64_t)j * hn, d1 + (r * np + g * npg + j) * 3 * hn, hn, tol,
                         "dQ (GQA vs expanded)");
      for (int kv = 1; kv <= 2; kv++)
        for (int e = 0; e < hn; e++) {
          float sum = 0.0f;
          for (int j = 0; j < npg; j++) sum += d1[(r * np + g * npg + j) * 3 * hn + kv * hn + e];
          float got = gq[(int64_t)(npg + kv - 1) * hn + e];
          if (!(fabsf(got - sum) <= 1e-6f * (1.0f + fabsf(sum))))
            fail_msg("d%c (GQA vs sum of expanded) row %lld group %d ch %d: %.9g vs %.9g",
                     kv == 1 ? 'K' : 'V', (long long)r, g, e, (double)got, (double)sum);
        }
    }
  if (fused)
    print_message("fused GQA s=%d b=%d np=%d ng=%d hn=%d p=%.2f: ctx, lse, dQ %s the expanded "
                  "layout's\n", s, b, np, ng, hn, (double)p, same ? "bitwise equal to" :
                  "within 1e-6 of");
  float *bufs[] = {qkv, dctx, qe, c0, c1, p0, p1, l0, l1, d0, d1};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

static void test_gqa_equals_expanded(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  for (int fused = 0; fused <= 1; fused++) {
    check_expanded(be, 11, 2, 4, 2, 5, 0.0f, fused);
    check_expanded(be, 11, 2, 4, 1, 5, 0.25f, fused);
    check_expanded(be, 33, 3, 6, 3, 8, 0.1f, fused);
    check_expanded(be, 7, 1, 6, 2, 3, 0.0f, fused);
    check_expanded(be, 100, 2, 8, 2, 64, 0.1f, fused);
  }
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ng_np_bitwise_legacy),
      cmocka_unit_test(test_gqa_equals_expanded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
