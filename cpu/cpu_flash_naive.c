/* cpu/cpu_flash_naive.c — TEMPORARY (branch cp-model only): a plain
 * double-loop implementation of flash_attn_fwd / attn_merge / flash_attn_bwd
 * (core/backend.h) so the context-parallel ring can be developed and tested
 * before the tiled kernel of branch f-cpu lands. Drop this file and its
 * three table entries at the merge with f-cpu. */
#include <math.h>
#include <stdlib.h>

#include "core/util.h"
#include "cpu_internal.h"

static int ngroups(const mt_attn_desc *d) { return d->ng > 0 ? d->ng : d->np; }
static int nq(const mt_attn_desc *d) { return d->sq > 0 ? d->sq : d->s; }
static int nk(const mt_attn_desc *d) { return d->sk > 0 ? d->sk : d->s; }
static int sfull(const mt_attn_desc *d) { return d->s_full > 0 ? d->s_full : d->s; }
static int qpos(const mt_attn_desc *d, int i) {
  return d->q_split > 0 && i >= d->q_split ? d->q_pos[1] + i - d->q_split : d->q_pos[0] + i;
}
static int kpos(const mt_attn_desc *d, int j) {
  return d->k_split > 0 && j >= d->k_split ? d->k_pos[1] + j - d->k_split : d->k_pos[0] + j;
}

/* pointers of query head n of row i, and the K head of row j (V = K + hn) */
static int64_t q_off(const mt_attn_desc *d, int i, int bi, int n) {
  const int ng = ngroups(d), npg = d->np / ng, g = n / npg;
  return ((((int64_t)i * d->b + bi) * ng + g) * (npg + 2) + n % npg) * d->hn;
}
static int64_t k_off(const mt_attn_desc *d, int j, int bi, int g, int in_qkv) {
  const int ng = ngroups(d), npg = d->np / ng;
  if (in_qkv) return ((((int64_t)j * d->b + bi) * ng + g) * (npg + 2) + npg) * d->hn;
  return ((((int64_t)j * d->b + bi) * ng + g) * 2) * d->hn;
}

static float drop_scale(const mt_attn_desc *d, int bi, int n, int qp, int kp) {
  if (d->dropout_p <= 0.0f) return 1.0f;
  const uint64_t S = (uint64_t)sfull(d);
  uint64_t head = (uint64_t)d->sample_ids[bi] * (uint64_t)d->n_heads_total +
                  (uint64_t)(d->head_offset + n);
  uint64_t ctr = (head * S + (uint64_t)qp) * S + (uint64_t)kp;
  return mt_rng_uniform(d->key, ctr) >= d->dropout_p ? 1.0f / (1.0f - d->dropout_p) : 0.0f;
}

static double dot(const float *a, const float *b, int n) {
  double s = 0;
  for (int t = 0; t < n; t++) s += (double)a[t] * b[t];
  return s;
}

void cpu_flash_naive_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                         const void *qkv_, const void *kv_) {
  (void)be;
  const int sq = nq(d), sk = nk(d), b = d->b, np = d->np, hn = d->hn, npg = np / ngroups(d);
  const float *qkv = qkv_, *kvb = kv_ ? (const float *)kv_ : qkv;
  float *ctx = ctx_;
  double *sc = mt_xmalloc(sizeof(double) * (size_t)(sk > 0 ? sk : 1));
  double *acc = mt_xmalloc(sizeof(double) * (size_t)hn);
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int i = 0; i < sq; i++) {
        const float *q = qkv + q_off(d, i, bi, n);
        const int qp = qpos(d, i);
        double mx = -INFINITY;
        for (int j = 0; j < sk; j++) {
          sc[j] = -INFINITY;
          if (kpos(d, j) > qp) continue;
          sc[j] = d->scale * dot(q, kvb + k_off(d, j, bi, n / npg, kv_ == NULL), hn);
          if (sc[j] > mx) mx = sc[j];
        }
        float *c = ctx + (((int64_t)i * b + bi) * np + n) * hn;
        float *l = lse + ((int64_t)bi * np + n) * sq + i;
        if (mx == -INFINITY) {
          for (int t = 0; t < hn; t++) c[t] = 0.0f;
          *l = -INFINITY;
          continue;
        }
        double sum = 0;
        for (int j = 0; j < sk; j++)
          if (sc[j] != -INFINITY) sum += exp(sc[j] - mx);
        const double ls = mx + log(sum);
        for (int t = 0; t < hn; t++) acc[t] = 0;
        for (int j = 0; j < sk; j++) {
          if (sc[j] == -INFINITY) continue;
          double p = exp(sc[j] - ls) * drop_scale(d, bi, n, qp, kpos(d, j));
          const float *v = kvb + k_off(d, j, bi, n / npg, kv_ == NULL) + hn;
          for (int t = 0; t < hn; t++) acc[t] += p * v[t];
        }
        for (int t = 0; t < hn; t++) c[t] = (float)acc[t];
        *l = (float)ls;
      }
  free(sc);
  free(acc);
}

void cpu_flash_naive_merge(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                           const void *ctx_b_, const float *lse_b) {
  (void)be;
  const int sq = nq(d), b = d->b, np = d->np, hn = d->hn;
  float *ctx = ctx_;
  const float *cb = ctx_b_;
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int i = 0; i < sq; i++) {
        float *l = lse + ((int64_t)bi * np + n) * sq + i;
        const float lb = lse_b[((int64_t)bi * np + n) * sq + i];
        float *c = ctx + (((int64_t)i * b + bi) * np + n) * hn;
        const float *c2 = cb + (((int64_t)i * b + bi) * np + n) * hn;
        if (lb == -INFINITY) continue;
        if (*l == -INFINITY) {
          for (int t = 0; t < hn; t++) c[t] = c2[t];
          *l = lb;
          continue;
        }
        double mx = *l > lb ? *l : lb;
        double ln = mx + log(exp(*l - mx) + exp(lb - mx));
        double wa = exp(*l - ln), wb = exp(lb - ln);
        for (int t = 0; t < hn; t++) c[t] = (float)(wa * c[t] + wb * c2[t]);
        *l = (float)ln;
      }
}

void cpu_flash_naive_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv_, void *dkv_,
                         const void *dctx_, const void *ctx_, const float *lse,
                         const void *qkv_, const void *kv_) {
  (void)be;
  const int sq = nq(d), sk = nk(d), b = d->b, np = d->np, hn = d->hn, ng = ngroups(d);
  const int npg = np / ng, in_qkv = kv_ == NULL;
  const float *qkv = qkv_, *kvb = in_qkv ? qkv : (const float *)kv_;
  const float *dctx = dctx_, *ctx = ctx_;
  float *dqkv = dqkv_, *dkvb = in_qkv ? dqkv : (float *)dkv_;
  if (in_qkv) memset(dqkv, 0, sizeof(float) * (size_t)sq * b * ng * (npg + 2) * hn);
  for (int bi = 0; bi < b; bi++)
    for (int n = 0; n < np; n++)
      for (int i = 0; i < sq; i++) {
        const float l = lse[((int64_t)bi * np + n) * sq + i];
        if (l == -INFINITY) continue;
        const int64_t co = (((int64_t)i * b + bi) * np + n) * hn;
        const float *dc = dctx + co;
        const double D = dot(dc, ctx + co, hn);
        const float *q = qkv + q_off(d, i, bi, n);
        float *dq = dqkv + q_off(d, i, bi, n);
        const int qp = qpos(d, i);
        for (int j = 0; j < sk; j++) {
          const int kp = kpos(d, j);
          if (kp > qp) continue;
          const int64_t ko = k_off(d, j, bi, n / npg, in_qkv);
          const float *k = kvb + ko, *v = k + hn;
          float *dk = dkvb + ko, *dv = dk + hn;
          const double p = exp(d->scale * dot(q, k, hn) - l);
          const double m = drop_scale(d, bi, n, qp, kp);
          for (int t = 0; t < hn; t++) dv[t] += (float)(p * m * dc[t]);
          const double dp = dot(dc, v, hn) * m;
          const double ds = p * (dp - D) * d->scale;
          for (int t = 0; t < hn; t++) {
            dq[t] += (float)(ds * k[t]);
            dk[t] += (float)(ds * q[t]);
          }
        }
      }
}
