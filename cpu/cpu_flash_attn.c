/* cpu/cpu_flash_attn.c — fused causal attention, forward / backward / merge
 * (FlashAttention-2, Dao 2023, arXiv:2307.08691, Algorithms 1 and 2), fp32.
 * The spec of each op is core/backend.h (flash_attn_fwd, attn_merge,
 * flash_attn_bwd; mt_attn_desc for the block fields).
 *
 * Tiles: FA_BR query rows x FA_BC key rows (64 x 64: the score tile, its
 * dropout scales and the running output fit in L1/L2 with hn 64). Q, K, V,
 * ctx and the gradients are read and written in place with their row
 * strides (no packing copies; a GQA query head reads its group's K/V head).
 * The tile products are single-threaded cblas_sgemm calls (OpenBLAS set to
 * one thread for the parallel region, restored after).
 *
 * Forward (Algorithm 1): per (batch row, head, query tile) an online softmax
 * over the key tiles that hold a visible key: running max m, running sum l
 * of the PRE-dropout exp(s - m), running output O += dropout(P~) V rescaled
 * by exp(m_old - m_new); at the end ctx = O / l and lse = m + log l. The
 * units are handed out dynamically, largest (last) query tiles first.
 *
 * Backward (Algorithm 2): per (batch row, K/V group) one thread runs the key
 * tiles in order; for each it loops over the group's query heads and the
 * query tiles, recomputes P = exp(s - lse) (and the dropout scales Z from
 * the counters), and accumulates dV += (P Z)^T dO, dS = P (dP Z - D),
 * dK += scale dS^T Q, dQ += scale dS K with D = rowsum(dO o O) formed once
 * per unit. dQ goes straight into dqkv (the unit owns its query heads), so
 * every output element is produced by one thread in a fixed order: results
 * do not depend on the thread count.
 *
 * Causality is by global position (two ranges per side, context
 * parallelism): key j is visible to query i iff kpos(j) <= qpos(i); a tile
 * pair with no visible key is skipped, one with every key visible skips the
 * mask. Dropout of element (bi, head, qpos, kpos) uses the counter of
 * mt_attn_desc with s_full (bitwise the masks of cpu_attention.c when the
 * block fields are zero).
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_internal.h"

#define FA_BR 64 /* query rows per tile */
#define FA_BC 64 /* key rows per tile */

/* Geometry of one call, resolved from the descriptor. */
typedef struct {
  int sq, sk, b, np, ng, npg, hn;
  int64_t ldq;        /* row stride of qkv (and dqkv)              */
  int64_t ldk;        /* row stride of the K/V source (qkv or kv)  */
  int64_t ldc;        /* row stride of ctx / dctx: b * np * hn      */
  int64_t kgs;        /* offset between (bi, g) K heads in the source */
  int64_t koff;       /* offset of the K head in its group slot    */
  int qp[2], qs;      /* query positions (q_pos, q_split)          */
  int kp[2], ks;      /* key positions                              */
  uint64_t sfull;     /* dropout counter sequence length            */
  float scale, p, inv_keep;
  const mt_attn_desc *d;
} fa_geom;

static fa_geom fa_geometry(const mt_attn_desc *d, int has_kv) {
  fa_geom G;
  G.d = d;
  G.b = d->b;
  G.np = d->np;
  G.hn = d->hn;
  G.ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(G.np % G.ng == 0);
  G.npg = G.np / G.ng;
  G.sq = d->sq > 0 ? d->sq : d->s;
  G.ldq = (int64_t)G.b * G.ng * (G.npg + 2) * G.hn;
  G.ldc = (int64_t)G.b * G.np * G.hn;
  G.qp[0] = d->q_pos[0], G.qp[1] = d->q_pos[1], G.qs = d->q_split;
  if (has_kv) {
    G.sk = d->sk > 0 ? d->sk : d->s;
    G.ldk = (int64_t)G.b * G.ng * 2 * G.hn;
    G.kgs = 2 * (int64_t)G.hn;
    G.koff = 0;
    G.kp[0] = d->k_pos[0], G.kp[1] = d->k_pos[1], G.ks = d->k_split;
  } else { /* keys are the query rows themselves: same count, same positions */
    G.sk = G.sq;
    G.ldk = G.ldq;
    G.kgs = (int64_t)(G.npg + 2) * G.hn;
    G.koff = (int64_t)G.npg * G.hn;
    G.kp[0] = G.qp[0], G.kp[1] = G.qp[1], G.ks = G.qs;
  }
  G.sfull = (uint64_t)(d->s_full > 0 ? d->s_full : d->s);
  G.scale = d->scale;
  G.p = d->dropout_p;
  G.inv_keep = d->dropout_p > 0.0f ? 1.0f / (1.0f - d->dropout_p) : 1.0f;
  return G;
}

/* Global position of row i of a side with ranges p[] split at `split`. */
static inline int fa_pos(const int p[2], int split, int i) {
  return split > 0 && i >= split ? p[1] + (i - split) : p[0] + i;
}

/* Positions of rows [r0, r0 + n) into pos[], their min and max. */
static void fa_tile_pos(const int p[2], int split, int r0, int n, int *pos, int *mn, int *mx) {
  int lo = 0, hi = 0;
  for (int i = 0; i < n; i++) {
    pos[i] = fa_pos(p, split, r0 + i);
    if (!i || pos[i] < lo) lo = pos[i];
    if (!i || pos[i] > hi) hi = pos[i];
  }
  *mn = lo, *mx = hi;
}

/* Offset of query head n of batch row bi (row 0) in qkv. */
static inline int64_t fa_q_off(const fa_geom *G, int bi, int n) {
  int g = n / G->npg, j = n % G->npg;
  return (((int64_t)bi * G->ng + g) * (G->npg + 2) + j) * G->hn;
}

/* Offset of the K head of (bi, g) (row 0) in the K/V source; V is hn after. */
static inline int64_t fa_k_off(const fa_geom *G, int bi, int g) {
  return ((int64_t)bi * G->ng + g) * G->kgs + G->koff;
}

/* z[j] = dropout scale (1/(1-p) kept, 0 dropped) of (bi, head n, query at
 * qpos, keys j0 + j, j < bc) from the global counters. */
static void fa_dropout_row(const fa_geom *G, int bi, int n, int qpos, int j0, int bc, float *z) {
  const mt_attn_desc *d = G->d;
  uint64_t head = (uint64_t)d->sample_ids[bi] * (uint64_t)d->n_heads_total +
                  (uint64_t)(d->head_offset + n);
  uint64_t row = (head * G->sfull + (uint64_t)qpos) * G->sfull;
  int j = 0;
  while (j < bc) { /* runs of consecutive key positions (one per range) */
    int a = j0 + j, len = bc - j;
    if (G->ks > 0 && a < G->ks && G->ks - a < len) len = G->ks - a;
    cpu_rng_uniform_range(d->key, row + (uint64_t)fa_pos(G->kp, G->ks, a), len, z + j);
    j += len;
  }
  const float p = G->p, inv = G->inv_keep;
#pragma omp simd
  for (int t = 0; t < bc; t++) z[t] = z[t] >= p ? inv : 0.0f;
}

/* Switch OpenBLAS to one thread while OpenMP threads call it. */
static int fa_blas_single(void) {
  int prev = openblas_get_num_threads();
  if (prev != 1) openblas_set_num_threads(1);
  return prev;
}

static void fa_blas_restore(int prev) {
  if (prev != 1) openblas_set_num_threads(prev);
}

/* Floats of per-thread workspace, rounded to 64 bytes. */
static int64_t fa_round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* ---------------------------------------------------------------- forward */

/* One (bi, head n, query rows [i0, i0 + br)) unit. ws: FA_BR*FA_BC (scores)
 * + FA_BR*FA_BC (dropout) + FA_BR*hn (output) + 2*FA_BR floats. */
static void fa_fwd_unit(const fa_geom *G, int bi, int n, int i0, int br, float *ctx, float *lse,
                        const float *qkv, const float *ksrc, float *ws) {
  const int hn = G->hn;
  const float *q = qkv + fa_q_off(G, bi, n) + (int64_t)i0 * G->ldq;
  const float *k = ksrc + fa_k_off(G, bi, n / G->npg), *v = k + hn;
  float *S = ws, *Z = S + FA_BR * FA_BC, *O = Z + FA_BR * FA_BC, *m = O + FA_BR * hn,
        *l = m + FA_BR;
  int qpos[FA_BR], kpos[FA_BC], qmin, qmax;
  fa_tile_pos(G->qp, G->qs, i0, br, qpos, &qmin, &qmax);
  for (int i = 0; i < br; i++) m[i] = -INFINITY, l[i] = 0.0f;
  memset(O, 0, (size_t)br * hn * sizeof(float));
  const int drop = G->p > 0.0f;
  for (int j0 = 0; j0 < G->sk; j0 += FA_BC) {
    int bc = G->sk - j0 < FA_BC ? G->sk - j0 : FA_BC, kmin, kmax;
    fa_tile_pos(G->kp, G->ks, j0, bc, kpos, &kmin, &kmax);
    if (kmin > qmax) continue; /* no visible key in the tile */
    const int full = kmax <= qmin;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, hn, G->scale, q,
                (blasint)G->ldq, k + (int64_t)j0 * G->ldk, (blasint)G->ldk, 0.0f, S, bc);
    for (int i = 0; i < br; i++) {
      float *s = S + (int64_t)i * bc;
      if (!full)
        for (int j = 0; j < bc; j++)
          if (kpos[j] > qpos[i]) s[j] = -INFINITY;
      float mx = -INFINITY;
      for (int j = 0; j < bc; j++) mx = s[j] > mx ? s[j] : mx;
      float mnew = mx > m[i] ? mx : m[i];
      if (mnew == -INFINITY) { /* nothing visible to this row yet */
        memset(s, 0, (size_t)bc * sizeof(float));
        continue;
      }
      float alpha = m[i] == -INFINITY ? 0.0f : mt_fast_expf(m[i] - mnew), sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < bc; j++) {
        float e = mt_fast_expf(s[j] - mnew);
        e = s[j] == -INFINITY ? 0.0f : e;
        s[j] = e;
        sum += e;
      }
      l[i] = l[i] * alpha + sum;
      m[i] = mnew;
      if (alpha != 1.0f) {
        float *o = O + (int64_t)i * hn;
#pragma omp simd
        for (int e = 0; e < hn; e++) o[e] *= alpha;
      }
      if (drop) {
        float *z = Z + (int64_t)i * bc;
        fa_dropout_row(G, bi, n, qpos[i], j0, bc, z);
#pragma omp simd
        for (int j = 0; j < bc; j++) s[j] *= z[j];
      }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, hn, bc, 1.0f, S, bc,
                v + (int64_t)j0 * G->ldk, (blasint)G->ldk, 1.0f, O, hn);
  }
  float *c = ctx + ((int64_t)bi * G->np + n) * hn + (int64_t)i0 * G->ldc;
  float *ls = lse + ((int64_t)bi * G->np + n) * G->sq + i0;
  for (int i = 0; i < br; i++) {
    float *out = c + (int64_t)i * G->ldc;
    const float *o = O + (int64_t)i * hn;
    if (l[i] > 0.0f) {
      float inv = 1.0f / l[i];
#pragma omp simd
      for (int e = 0; e < hn; e++) out[e] = o[e] * inv;
      ls[i] = m[i] + logf(l[i]);
    } else {
      memset(out, 0, (size_t)hn * sizeof(float));
      ls[i] = -INFINITY;
    }
  }
}

void cpu_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                        const void *qkv_, const void *kv_) {
  const fa_geom G = fa_geometry(d, kv_ != NULL);
  const float *qkv = (const float *)qkv_;
  const float *ksrc = kv_ ? (const float *)kv_ : qkv;
  float *ctx = (float *)ctx_;
  const int nqt = (G.sq + FA_BR - 1) / FA_BR, pairs = G.b * G.np;
  const int nthr = omp_get_max_threads();
  const int64_t per_thr = fa_round16(2 * FA_BR * FA_BC + (int64_t)FA_BR * G.hn + 2 * FA_BR);
  float *ws = cpu_workspace(be, (size_t)(per_thr * nthr) * sizeof(float));
  int prev = fa_blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int u = 0; u < nqt * pairs; u++) {
    int qt = nqt - 1 - u / pairs, pair = u % pairs; /* largest query tiles first */
    int i0 = qt * FA_BR, br = G.sq - i0 < FA_BR ? G.sq - i0 : FA_BR;
    fa_fwd_unit(&G, pair / G.np, pair % G.np, i0, br, ctx, lse, qkv, ksrc,
                ws + (int64_t)omp_get_thread_num() * per_thr);
  }
  fa_blas_restore(prev);
}

/* ------------------------------------------------------------------ merge */

void cpu_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                    const void *ctx_b_, const float *lse_b) {
  const int sq = d->sq > 0 ? d->sq : d->s, b = d->b, np = d->np, hn = d->hn;
  float *ctx = (float *)ctx_;
  const float *cb = (const float *)ctx_b_;
  const int64_t rows = (int64_t)sq * b * np;
  const int par = rows * hn >= cpu_par_min(be);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < rows; r++) { /* r = (i * b + bi) * np + n, ctx's row order */
    int64_t i = r / ((int64_t)b * np), bn = r % ((int64_t)b * np);
    int64_t li = bn * sq + i; /* lse [b, np, sq] */
    float la = lse[li], lb = lse_b[li];
    float *o = ctx + r * hn;
    const float *ob = cb + r * hn;
    if (lb == -INFINITY) continue; /* nothing to add */
    if (la == -INFINITY) {
      memcpy(o, ob, (size_t)hn * sizeof(float));
      lse[li] = lb;
      continue;
    }
    float mx = la > lb ? la : lb;
    float ea = mt_fast_expf(la - mx), eb = mt_fast_expf(lb - mx), sum = ea + eb;
    float wa = ea / sum, wb = eb / sum;
#pragma omp simd
    for (int e = 0; e < hn; e++) o[e] = o[e] * wa + ob[e] * wb;
    lse[li] = mx + logf(sum);
  }
}

/* --------------------------------------------------------------- backward */

/* One (bi, group g) unit: dQ of the group's query heads, dK/dV of its K/V
 * head. ws: 4*FA_BR*FA_BC + 2*FA_BC*hn + npg*sq floats. */
static void fa_bwd_unit(const fa_geom *G, int bi, int g, float *dqkv, float *dkv,
                        const float *dctx, const float *ctx, const float *lse, const float *qkv,
                        const float *ksrc, int has_kv, float *ws) {
  const int hn = G->hn, npg = G->npg, sq = G->sq, drop = G->p > 0.0f;
  const int64_t tile = FA_BR * FA_BC;
  float *P = ws, *Z = P + tile, *Pd = Z + tile, *dP = Pd + tile;
  float *dK = dP + tile, *dV = dK + (int64_t)FA_BC * hn, *D = dV + (int64_t)FA_BC * hn;
  const int64_t kofs = fa_k_off(G, bi, g);
  const float *k = ksrc + kofs, *v = k + hn;
  /* D = rowsum(dO o O) per query head and row; dQ zeroed for the overwrite form */
  for (int jn = 0; jn < npg; jn++) {
    int n = g * npg + jn;
    int64_t co = ((int64_t)bi * G->np + n) * hn;
    float *dq = dqkv + fa_q_off(G, bi, n);
    for (int i = 0; i < sq; i++) {
      const float *a = dctx + co + (int64_t)i * G->ldc, *o = ctx + co + (int64_t)i * G->ldc;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int e = 0; e < hn; e++) s += a[e] * o[e];
      D[(int64_t)jn * sq + i] = s;
      if (!has_kv) memset(dq + (int64_t)i * G->ldq, 0, (size_t)hn * sizeof(float));
    }
  }
  int qpos[FA_BR], kpos[FA_BC];
  for (int j0 = 0; j0 < G->sk; j0 += FA_BC) {
    int bc = G->sk - j0 < FA_BC ? G->sk - j0 : FA_BC, kmin, kmax, any = 0;
    fa_tile_pos(G->kp, G->ks, j0, bc, kpos, &kmin, &kmax);
    const float *kj = k + (int64_t)j0 * G->ldk, *vj = v + (int64_t)j0 * G->ldk;
    memset(dK, 0, (size_t)bc * hn * sizeof(float));
    memset(dV, 0, (size_t)bc * hn * sizeof(float));
    for (int jn = 0; jn < npg; jn++) {
      int n = g * npg + jn;
      const float *qh = qkv + fa_q_off(G, bi, n);
      float *dqh = dqkv + fa_q_off(G, bi, n);
      const float *doh = dctx + ((int64_t)bi * G->np + n) * hn;
      const float *lh = lse + ((int64_t)bi * G->np + n) * sq, *Dh = D + (int64_t)jn * sq;
      for (int i0 = 0; i0 < sq; i0 += FA_BR) {
        int br = sq - i0 < FA_BR ? sq - i0 : FA_BR, qmin, qmax;
        fa_tile_pos(G->qp, G->qs, i0, br, qpos, &qmin, &qmax);
        if (kmin > qmax) continue;
        any = 1;
        const int full = kmax <= qmin;
        const float *qi = qh + (int64_t)i0 * G->ldq, *doi = doh + (int64_t)i0 * G->ldc;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, hn, G->scale, qi,
                    (blasint)G->ldq, kj, (blasint)G->ldk, 0.0f, P, bc);
        for (int i = 0; i < br; i++) { /* P = exp(s - lse), 0 where masked */
          float *p = P + (int64_t)i * bc, L = lh[i0 + i];
          if (L == -INFINITY) {
            memset(p, 0, (size_t)bc * sizeof(float));
          } else {
#pragma omp simd
            for (int j = 0; j < bc; j++) p[j] = mt_fast_expf(p[j] - L);
            if (!full)
              for (int j = 0; j < bc; j++)
                if (kpos[j] > qpos[i]) p[j] = 0.0f;
          }
          if (drop) {
            float *z = Z + (int64_t)i * bc, *pd = Pd + (int64_t)i * bc;
            fa_dropout_row(G, bi, n, qpos[i], j0, bc, z);
#pragma omp simd
            for (int j = 0; j < bc; j++) pd[j] = p[j] * z[j];
          }
        }
        /* dV += (P Z)^T dO */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, hn, br, 1.0f, drop ? Pd : P, bc,
                    doi, (blasint)G->ldc, 1.0f, dV, hn);
        /* dP = dO V^T; dS = P (dP Z - D) (into dP) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, hn, 1.0f, doi,
                    (blasint)G->ldc, vj, (blasint)G->ldk, 0.0f, dP, bc);
        for (int i = 0; i < br; i++) {
          float *dp = dP + (int64_t)i * bc;
          const float *p = P + (int64_t)i * bc, *z = Z + (int64_t)i * bc;
          const float Di = Dh[i0 + i];
          if (drop) {
#pragma omp simd
            for (int j = 0; j < bc; j++) dp[j] = p[j] * (dp[j] * z[j] - Di);
          } else {
#pragma omp simd
            for (int j = 0; j < bc; j++) dp[j] = p[j] * (dp[j] - Di);
          }
        }
        /* dK += scale dS^T Q; dQ += scale dS K */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, hn, br, G->scale, dP, bc, qi,
                    (blasint)G->ldq, 1.0f, dK, hn);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, hn, bc, G->scale, dP, bc, kj,
                    (blasint)G->ldk, 1.0f, dqh + (int64_t)i0 * G->ldq, (blasint)G->ldq);
      }
    }
    if (has_kv) {
      if (!any) continue;
      float *dk = dkv + kofs + (int64_t)j0 * G->ldk, *dv = dk + hn;
      for (int j = 0; j < bc; j++) {
        float *a = dk + (int64_t)j * G->ldk, *c = dv + (int64_t)j * G->ldk;
        const float *x = dK + (int64_t)j * hn, *y = dV + (int64_t)j * hn;
#pragma omp simd
        for (int e = 0; e < hn; e++) a[e] += x[e], c[e] += y[e];
      }
    } else {
      float *dk = dqkv + kofs + (int64_t)j0 * G->ldk, *dv = dk + hn;
      for (int j = 0; j < bc; j++) {
        memcpy(dk + (int64_t)j * G->ldk, dK + (int64_t)j * hn, (size_t)hn * sizeof(float));
        memcpy(dv + (int64_t)j * G->ldk, dV + (int64_t)j * hn, (size_t)hn * sizeof(float));
      }
    }
  }
}

void cpu_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv_, void *dkv_,
                        const void *dctx_, const void *ctx_, const float *lse, const void *qkv_,
                        const void *kv_) {
  const int has_kv = kv_ != NULL;
  const fa_geom G = fa_geometry(d, has_kv);
  const float *qkv = (const float *)qkv_;
  const float *ksrc = has_kv ? (const float *)kv_ : qkv;
  const int units = G.b * G.ng;
  const int nthr = omp_get_max_threads();
  const int64_t per_thr =
      fa_round16(4 * FA_BR * FA_BC + 2 * (int64_t)FA_BC * G.hn + (int64_t)G.npg * G.sq);
  float *ws = cpu_workspace(be, (size_t)(per_thr * nthr) * sizeof(float));
  int prev = fa_blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int u = 0; u < units; u++)
    fa_bwd_unit(&G, u / G.ng, u % G.ng, (float *)dqkv_, (float *)dkv_, (const float *)dctx_,
                (const float *)ctx_, lse, qkv, ksrc, has_kv,
                ws + (int64_t)omp_get_thread_num() * per_thr);
  fa_blas_restore(prev);
}
