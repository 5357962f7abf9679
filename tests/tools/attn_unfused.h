/* tests/tools/attn_unfused.h — the unfused causal attention of the CPU
 * backend, kept as the REFERENCE op of the fused one (issue 15: "the unfused
 * path may stay as a reference op in tests only"). It is cpu/cpu_attention.c
 * as it was before the fused op (FlashAttention-2) replaced it in the op
 * table, unchanged in its arithmetic, plus the log-sum-exp the fused op
 * returns. Header-only (each test/bench binary is one translation unit);
 * CPU backend only (fp32, OpenBLAS + OpenMP, the backend's workspace).
 *
 *  - mt_ref_attn_fwd / mt_ref_attn_bwd: the unfused op itself. Layouts as
 *    core/backend.h (mt_attn_desc, plain causal case: sq = sk = s, positions
 *    0..s-1): qkv [s, b, ng, np/ng + 2, hn], ctx [s, b, np, hn], probs
 *    [b, np, s, s] (the PRE-dropout softmax, zeros above the diagonal), lse
 *    [b, np, s] fp32 (optional). The dropout mask of element (bi, n, q, k) is
 *    the counter of mt_attn_desc, so ctx equals the fused op's within fp32
 *    rounding. Forward: OpenMP over (bi, head); backward: over (bi, group),
 *    the group's query heads in order (dK/dV summed over them).
 *  - mt_unfused_attn: a copy of a backend's op table whose flash_attn_fwd /
 *    flash_attn_bwd are the unfused op behind the fused interface (kv == NULL
 *    and the plain causal case only). The forward allocates the [b, np, s, s]
 *    probabilities under MT_MEM_ACT and keeps them, keyed by the qkv pointer,
 *    until the backward of the same qkv frees them — what the unfused model
 *    kept per layer between its forward and its backward, so the allocator's
 *    activation peak of a model run through this table is the unfused one
 *    (+ the fused lse the model still allocates). The bench's "unfused" model
 *    path (bench/bench_gpt.c) and the memory test (tests/unit/
 *    test_attn_memory.c) use it. It must be the table installed LAST (its ops
 *    find their state through be->ops). */
#ifndef MT_TESTS_TOOLS_ATTN_UNFUSED_H
#define MT_TESTS_TOOLS_ATTN_UNFUSED_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "core/backend.h"
#include "core/scalar_math.h"
#include "core/util.h"
#include "cpu/cpu_internal.h"

/* Local query groups of d (ng = 0 is read as np); ng must divide np. */
static inline int ref_attn_groups(const mt_attn_desc *d) {
  int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  return ng;
}

/* Offset in qkv of query head n of micro-batch row bi at s = 0; its group's
 * key head is at ref_attn_k_off(d, ng, bi, n / (np/ng)), the value head hn after. */
static inline int64_t ref_attn_q_off(const mt_attn_desc *d, int ng, int bi, int n) {
  int npg = d->np / ng, g = n / npg, j = n % npg;
  return (((int64_t)bi * ng + g) * (npg + 2) + j) * d->hn;
}

static inline int64_t ref_attn_k_off(const mt_attn_desc *d, int ng, int bi, int g) {
  int npg = d->np / ng;
  return (((int64_t)bi * ng + g) * (npg + 2) + npg) * d->hn;
}

/* Counter of dropout element (bi, n, q, 0). */
static inline uint64_t ref_attn_row_counter(const mt_attn_desc *d, int bi, int n, int q) {
  uint64_t head = (uint64_t)d->sample_ids[bi] * (uint64_t)d->n_heads_total +
                  (uint64_t)(d->head_offset + n);
  return (head * (uint64_t)d->s + (uint64_t)q) * (uint64_t)d->s;
}

/* m[q, k] = keep(q, k) / (1 - p) for k <= q, 0 above the diagonal. */
static inline void ref_attn_dropout_scales(const mt_attn_desc *d, int bi, int n, float *m) {
  const int s = d->s;
  const float p = d->dropout_p, inv = 1.0f / (1.0f - d->dropout_p);
  for (int q = 0; q < s; q++) {
    float *row = m + (int64_t)q * s;
    cpu_rng_uniform_range(d->key, ref_attn_row_counter(d, bi, n, q), q + 1, row);
    for (int k = 0; k <= q; k++) row[k] = row[k] >= p ? inv : 0.0f;
    for (int k = q + 1; k < s; k++) row[k] = 0.0f;
  }
}

/* In place on p [s, s] holding scaled scores: causal softmax per row, zeros
 * above the diagonal; lse[q] = log sum exp (when lse is not NULL). */
static inline void ref_causal_softmax(float *p, int s, float *lse) {
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
    if (lse) lse[q] = mx + logf(sum);
  }
}

/* OpenBLAS single-threaded inside the OpenMP region; returns the previous
 * setting for ref_attn_blas_restore. */
static inline int ref_attn_blas_single(void) {
  int prev = openblas_get_num_threads();
  if (prev != 1) openblas_set_num_threads(1);
  return prev;
}

static inline void ref_attn_blas_restore(int prev) {
  if (prev != 1) openblas_set_num_threads(prev);
}

/* The unfused forward: ctx, probs (and lse when not NULL) from qkv. */
static inline void mt_ref_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, void *probs_,
                            float *lse, const void *qkv_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn, ng = ref_attn_groups(d);
  const int64_t ld = (int64_t)b * ng * (np / ng + 2) * hn, ldc = (int64_t)b * np * hn;
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
    const float *q = qkv + ref_attn_q_off(d, ng, bi, n);
    const float *k = qkv + ref_attn_k_off(d, ng, bi, n / (np / ng)), *v = k + hn;
    float *p = probs + (int64_t)pair * s * s;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, hn, d->scale, q, (blasint)ld, k,
                (blasint)ld, 0.0f, p, s);
    ref_causal_softmax(p, s, lse ? lse + (int64_t)pair * s : NULL);
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

/* The unfused backward: dqkv (overwrite; shared K/V heads get the sum over
 * their query heads) from dctx and the probabilities of the forward. */
static inline void mt_ref_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv_,
                            const void *dctx_, const void *qkv_, const void *probs_) {
  const int s = d->s, b = d->b, np = d->np, hn = d->hn, ng = ref_attn_groups(d), npg = np / ng;
  const int64_t ld = (int64_t)b * ng * (npg + 2) * hn, ldc = (int64_t)b * np * hn;
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
  for (int grp = 0; grp < b * ng; grp++) {
    int bi = grp / ng, g = grp % ng;
    int64_t koff = ref_attn_k_off(d, ng, bi, g);
    const float *k = qkv + koff, *v = k + hn;
    float *dk = dqkv + koff, *dv = dk + hn;
    float *dp = ws + (int64_t)omp_get_thread_num() * per_thr;
    float *m = use_drop ? dp + ss : NULL, *pd = use_drop ? dp + 2 * ss : NULL;
    for (int j = 0; j < npg; j++) {
      int n = g * npg + j, pair = bi * np + n;
      const float kv_beta = j == 0 ? 0.0f : 1.0f; /* dK/dV: sum over the group's heads */
      int64_t qoff = ref_attn_q_off(d, ng, bi, n);
      const float *q = qkv + qoff;
      float *dq = dqkv + qoff;
      const float *dc = dctx + ((int64_t)bi * np + n) * hn;
      const float *p = probs + (int64_t)pair * ss;
      const float *pused = p;
      if (use_drop) {
        ref_attn_dropout_scales(d, bi, n, m);
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
  ref_attn_blas_restore(prev);
}

/* ---- the unfused op behind the fused interface ---- */

typedef struct {
  mt_backend_ops ops;         /* FIRST member: the table installed on the backend */
  const mt_backend_ops *prev; /* the table it replaced (restored by _uninstall) */
  int n, cap;                 /* probabilities kept from a forward to its backward */
  const void **keys;          /*   [cap] the qkv pointer of the forward */
  void **probs;               /*   [cap] [b, np, s, s] (MT_MEM_ACT) */
  size_t *bytes;
  double t_fwd, t_bwd;        /* seconds spent in the unfused forward / backward */
  long n_fwd, n_bwd;
} mt_unfused_attn;

static inline mt_unfused_attn *unfused_of(mt_backend *be) {
  return (mt_unfused_attn *)(void *)be->ops;
}

static inline void unfused_check_plain(const mt_attn_desc *d, const void *kv) {
  if (kv || (d->sq && d->sq != d->s) || (d->sk && d->sk != d->s) ||
      (d->s_full && d->s_full != d->s) || d->q_pos[0] || d->q_pos[1] || d->q_split ||
      d->k_pos[0] || d->k_pos[1] || d->k_split)
    mt_fatal("unfused reference attention: only the plain causal case (kv NULL, sq = sk = s, "
             "positions 0..s-1)");
}

static inline int unfused_find(const mt_unfused_attn *u, const void *qkv) {
  for (int i = 0; i < u->n; i++)
    if (u->keys[i] == qkv) return i;
  return -1;
}

static inline void unfused_flash_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                              const void *qkv, const void *kv) {
  mt_unfused_attn *u = unfused_of(be);
  unfused_check_plain(d, kv);
  double t0 = mt_now();
  size_t bytes = (size_t)d->b * d->np * d->s * d->s * sizeof(float);
  int i = unfused_find(u, qkv);
  if (i < 0) { /* a forward whose probabilities are kept until its backward */
    if (u->n == u->cap) {
      u->cap = u->cap ? 2 * u->cap : 16;
      u->keys = mt_xrealloc(u->keys, (size_t)u->cap * sizeof *u->keys);
      u->probs = mt_xrealloc(u->probs, (size_t)u->cap * sizeof *u->probs);
      u->bytes = mt_xrealloc(u->bytes, (size_t)u->cap * sizeof *u->bytes);
    }
    i = u->n++;
    u->keys[i] = qkv;
    u->probs[i] = u->prev->alloc(be, bytes, MT_MEM_ACT);
    u->bytes[i] = bytes;
  }
  MT_ASSERT(u->bytes[i] == bytes);
  mt_ref_attn_fwd(be, d, ctx, u->probs[i], lse, qkv);
  u->t_fwd += mt_now() - t0;
  u->n_fwd++;
}

static inline void unfused_flash_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                              const void *dctx, const void *ctx, const float *lse,
                              const void *qkv, const void *kv) {
  (void)dkv, (void)ctx, (void)lse;
  mt_unfused_attn *u = unfused_of(be);
  unfused_check_plain(d, kv);
  double t0 = mt_now();
  int i = unfused_find(u, qkv);
  if (i < 0) mt_fatal("unfused reference attention: backward without its forward");
  mt_ref_attn_bwd(be, d, dqkv, dctx, qkv, u->probs[i]);
  u->prev->free(be, u->probs[i]);
  u->n--;
  u->keys[i] = u->keys[u->n], u->probs[i] = u->probs[u->n], u->bytes[i] = u->bytes[u->n];
  u->t_bwd += mt_now() - t0;
  u->n_bwd++;
}

/* Put the unfused op behind be's flash_attn_fwd / flash_attn_bwd (the rest
 * of be's current table unchanged). u must outlive the installation. */
static inline void mt_unfused_attn_install(mt_unfused_attn *u, mt_backend *be) {
  memset(u, 0, sizeof *u);
  u->prev = be->ops;
  u->ops = *be->ops;
  u->ops.flash_attn_fwd = unfused_flash_fwd;
  u->ops.flash_attn_bwd = unfused_flash_bwd;
  be->ops = &u->ops;
}

/* Restore the previous table; frees probabilities still kept (forwards
 * without a backward, e.g. evaluation). */
static inline void mt_unfused_attn_uninstall(mt_unfused_attn *u, mt_backend *be) {
  MT_ASSERT(be->ops == &u->ops);
  for (int i = 0; i < u->n; i++) u->prev->free(be, u->probs[i]);
  be->ops = u->prev;
  free(u->keys), free(u->probs), free(u->bytes);
  u->keys = NULL, u->probs = NULL, u->bytes = NULL;
  u->n = u->cap = 0;
}

#endif
