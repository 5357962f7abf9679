/* cpu/cpu_attention.c — causal self-attention core, forward and backward
 * (Vaswani et al. 2017; Megatron "core attention").
 *
 * Layouts (core/backend.h, mt_attn_desc): qkv [s, b, ng, np/ng + 2, hn]
 * (grouped-query attention, Ainslie et al. 2023: query head n reads the key
 * and value heads of its group g = n / (np/ng); ng = np is the plain
 * [s, b, np, 3, hn]), ctx [s, b, np, hn], probs [b, np, s, s]. For one
 * (bi, head n) the q/k/v rows are strided by b*ng*(np/ng+2)*hn and the ctx
 * rows by b*np*hn, so each product is a single cblas_sgemm with that leading
 * dimension and no copies.
 *
 * Forward: the (bi, head) pairs are handed out dynamically to OpenMP
 * threads. Backward: the (bi, group) pairs are, each thread running the
 * group's query heads in order; the shared dK/dV are the first head's
 * products (beta = 0) plus the next heads' (beta = 1), so with ng = np the
 * calls and their order are exactly those of plain multi-head attention
 * (bitwise identical). Threads call single-threaded sgemm on their own slice
 * of the per-thread workspace (OpenBLAS is switched to 1 thread for the
 * region and restored after). Every output element is written by exactly one
 * thread, so the result does not depend on the thread count.
 */
#include <cblas.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_internal.h"

/* Local query groups of d (ng = 0 is read as np); ng must divide np. */
static int attn_groups(const mt_attn_desc *d) {
  int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  return ng;
}

/* Offset in qkv of query head n of micro-batch row bi at s = 0; its group's
 * key head is at attn_k_off(d, ng, bi, n / (np/ng)), the value head hn after. */
static int64_t attn_q_off(const mt_attn_desc *d, int ng, int bi, int n) {
  int npg = d->np / ng, g = n / npg, j = n % npg;
  return (((int64_t)bi * ng + g) * (npg + 2) + j) * d->hn;
}

static int64_t attn_k_off(const mt_attn_desc *d, int ng, int bi, int g) {
  int npg = d->np / ng;
  return (((int64_t)bi * ng + g) * (npg + 2) + npg) * d->hn;
}

/* Counter of dropout element (bi, n, q, 0). */
static uint64_t attn_row_counter(const mt_attn_desc *d, int bi, int n, int q) {
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
    cpu_rng_uniform_range(d->key, attn_row_counter(d, bi, n, q), q + 1, row);
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

void cpu_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, void *probs_,
                  const void *qkv_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn, ng = attn_groups(d);
  const int64_t ld = (int64_t)b * ng * (np / ng + 2) * hn, ldc = (int64_t)b * np * hn;
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
    const float *q = qkv + attn_q_off(d, ng, bi, n);
    const float *k = qkv + attn_k_off(d, ng, bi, n / (np / ng)), *v = k + hn;
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

void cpu_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv_, const void *dctx_,
                  const void *qkv_, const void *probs_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn, ng = attn_groups(d), npg = np / ng;
  const int64_t ld = (int64_t)b * ng * (npg + 2) * hn, ldc = (int64_t)b * np * hn;
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
  for (int grp = 0; grp < b * ng; grp++) {
    int bi = grp / ng, g = grp % ng;
    int64_t koff = attn_k_off(d, ng, bi, g);
    const float *k = qkv + koff, *v = k + hn;
    float *dk = dqkv + koff, *dv = dk + hn;
    float *dp = ws + (int64_t)omp_get_thread_num() * per_thr;
    float *m = use_drop ? dp + ss : NULL, *pd = use_drop ? dp + 2 * ss : NULL;
    for (int j = 0; j < npg; j++) {
      int n = g * npg + j, pair = bi * np + n;
      const float kv_beta = j == 0 ? 0.0f : 1.0f; /* dK/dV: sum over the group's heads */
      int64_t qoff = attn_q_off(d, ng, bi, n);
      const float *q = qkv + qoff;
      float *dq = dqkv + qoff;
      const float *dc = dctx + ((int64_t)bi * np + n) * hn;
      const float *p = probs + (int64_t)pair * ss;
      const float *pused = p;
      if (use_drop) {
        attn_dropout_scales(d, bi, n, m);
        for (int64_t i = 0; i < ss; i++) pd[i] = p[i] * m[i];
        pused = pd;
      }
      /* dV (+)= dropout(P)^T dctx */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, hn, s, 1.0f, pused, s, dc,
                  (blasint)ldc, kv_beta, dv, (blasint)ld);
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
        for (int t = 0; t <= qi; t++) dot += dr[t] * pr[t];
#pragma omp simd
        for (int t = 0; t <= qi; t++) dr[t] = scale * pr[t] * (dr[t] - dot);
        for (int t = qi + 1; t < s; t++) dr[t] = 0.0f;
      }
      /* dQ = dS K, dK (+)= dS^T Q */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, hn, s, 1.0f, dp, s, k,
                  (blasint)ld, 0.0f, dq, (blasint)ld);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, hn, s, 1.0f, dp, s, q,
                  (blasint)ld, kv_beta, dk, (blasint)ld);
    }
  }
  attn_blas_restore(prev);
}
