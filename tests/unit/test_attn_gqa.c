/* tests/unit/test_attn_gqa.c — grouped-query attention (mt_attn_desc.ng)
 * keeps GPT-2 runs bitwise unchanged, and GQA equals multi-head attention on
 * replicated K/V heads.
 *
 *  - ng = np and ng = 0 against a verbatim copy of the cpu attention as it
 *    was before GQA (the [s, b, np, 3, hn] kernels of commit d6d3d68, below):
 *    ctx, probs and dqkv bitwise identical, with and without dropout, with
 *    the default thread count and with 1 thread;
 *  - ng < np against ng = np on the expanded layout (each group's K/V head
 *    copied to its query heads): ctx, probs and dQ bitwise identical (same
 *    products on the same values), dK/dV equal to the in-order sum of the
 *    expanded heads' dK/dV within 1e-6 relative.
 * Per-op numerics against double loops and finite differences are in the
 * op-case table (op_cases.h). */
#include <cblas.h>
#include <omp.h>

#include "cpu_test_common.h"
#include "cpu/cpu_internal.h"

/* ---- legacy: cpu/cpu_attention.c at d6d3d68 (plain multi-head) ---- */
/* Counter of dropout element (bi, n, q, 0). */
static uint64_t legacy_row_counter(const mt_attn_desc *d, int bi, int n, int q) {
  uint64_t head = (uint64_t)d->sample_ids[bi] * (uint64_t)d->n_heads_total +
                  (uint64_t)(d->head_offset + n);
  return (head * (uint64_t)d->s + (uint64_t)q) * (uint64_t)d->s;
}

/* m[q, k] = keep(q, k) / (1 - p) for k <= q, 0 above the diagonal. */
static void attn_dropout_scales(const mt_attn_desc *d, int bi, int n, float *m) {
  const int s = d->s;
  const float p = d->dropout_p, inv = 1.0f / (1.0f - d->dropout_p);
  for (int q = 0; q < s; q++) {
    float *row = m + (int64_t)q * s;
    cpu_rng_uniform_range(d->key, legacy_row_counter(d, bi, n, q), q + 1, row);
    for (int k = 0; k <= q; k++) row[k] = row[k] >= p ? inv : 0.0f;
    for (int k = q + 1; k < s; k++) row[k] = 0.0f;
  }
}

/* In place on p [s, s] holding scaled scores: causal softmax per row,
 * zeros above the diagonal. */
static void causal_softmax(float *p, int s) {
  for (int q = 0; q < s; q++) {
    float *row = p + (int64_t)q * s;
    float mx = row[0];
    for (int k = 1; k <= q; k++) mx = row[k] > mx ? row[k] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int k = 0; k <= q; k++) {
      float e = mt_fast_expf(row[k] - mx);
      row[k] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int k = 0; k <= q; k++) row[k] *= inv;
    for (int k = q + 1; k < s; k++) row[k] = 0.0f;
  }
}

/* Switch OpenBLAS to one thread while OpenMP threads call it; returns the
 * previous setting for attn_blas_restore. */
static int attn_blas_single(void) {
  int prev = openblas_get_num_threads();
  if (prev != 1) openblas_set_num_threads(1);
  return prev;
}

static void attn_blas_restore(int prev) {
  if (prev != 1) openblas_set_num_threads(prev);
}

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
  int prev = attn_blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int pair = 0; pair < b * np; pair++) {
    int bi = pair / np, n = pair % np;
    const float *q = qkv + ((int64_t)bi * np + n) * 3 * hn;
    const float *k = q + hn, *v = q + 2 * hn;
    float *p = probs + (int64_t)pair * s * s;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, hn, d->scale, q, (blasint)ld, k,
                (blasint)ld, 0.0f, p, s);
    causal_softmax(p, s);
    const float *pd = p;
    if (use_drop) {
      float *m = ws + (int64_t)omp_get_thread_num() * per_thr;
      attn_dropout_scales(d, bi, n, m);
      for (int64_t i = 0; i < (int64_t)s * s; i++) m[i] *= p[i];
      pd = m;
    }
    float *c = ctx + ((int64_t)bi * np + n) * hn;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, hn, s, 1.0f, pd, s, v, (blasint)ld,
                0.0f, c, (blasint)ldc);
  }
  attn_blas_restore(prev);
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
  int prev = attn_blas_single();
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
      attn_dropout_scales(d, bi, n, m);
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
  attn_blas_restore(prev);
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
    be->ops->attn_fwd(be, &d, c1, p1, qkv);
    be->ops->attn_bwd(be, &d, d1, dctx, qkv, p1);
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

/* ng < np against ng = np on the expanded layout. */
static void check_expanded(mt_backend *be, int s, int b, int np, int ng, int hn, float p) {
  const int npg = np / ng;
  int64_t nq = (int64_t)s * b * ng * (npg + 2) * hn, ne = (int64_t)s * b * np * 3 * hn;
  int64_t nc = (int64_t)s * b * np * hn, npb = (int64_t)b * np * s * s;
  float *qkv = tc_randf(be, nq, -2, 2), *dctx = tc_randf(be, nc, -1, 1);
  float *qe = tc_allocf(be, ne), *c0 = tc_allocf(be, nc), *c1 = tc_allocf(be, nc);
  float *p0 = tc_allocf(be, npb), *p1 = tc_allocf(be, npb);
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
  be->ops->attn_fwd(be, &dg, c0, p0, qkv);
  be->ops->attn_bwd(be, &dg, d0, dctx, qkv, p0);
  be->ops->attn_fwd(be, &de, c1, p1, qe);
  be->ops->attn_bwd(be, &de, d1, dctx, qe, p1);
  tg_bitwise(c0, c1, nc, "ctx (GQA vs expanded)");
  tg_bitwise(p0, p1, npb, "probs (GQA vs expanded)");
  for (int64_t r = 0; r < rows; r++)
    for (int g = 0; g < ng; g++) {
      const float *gq = d0 + ((r * ng + g) * (npg + 2)) * hn;
      for (int j = 0; j < npg; j++)
        tg_bitwise(gq + (int64_t)j * hn, d1 + (r * np + g * npg + j) * 3 * hn, hn,
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
  float *bufs[] = {qkv, dctx, qe, c0, c1, p0, p1, d0, d1};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
}

static void test_gqa_equals_expanded(void **state) {
  (void)state;
  mt_backend *be = tc_backend();
  check_expanded(be, 11, 2, 4, 2, 5, 0.0f);
  check_expanded(be, 11, 2, 4, 1, 5, 0.25f);
  check_expanded(be, 33, 3, 6, 3, 8, 0.1f);
  check_expanded(be, 7, 1, 6, 2, 3, 0.0f);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ng_np_bitwise_legacy),
      cmocka_unit_test(test_gqa_equals_expanded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
