/* cpu/cpu_flash.h — private to the fused attention of the CPU backend
 * (cpu_flash_attn.c: forward and merge; cpu_flash_attn_bwd.c: backward):
 * the call geometry resolved from mt_attn_desc, global positions and their
 * causal visibility, the dropout scales of a tile row, the tile GEMM switch
 * (cpu_fa_gemm or OpenBLAS) and the tile sizes. */
#ifndef MT_CPU_FLASH_H
#define MT_CPU_FLASH_H

#include <cblas.h>
#include <limits.h>

#include "core/util.h"
#include "cpu_internal.h"

#define FA_BR 64 /* query rows per tile */
#define FA_BC 64 /* key rows per tile */

/* Geometry of one call. Q heads are read from qkv [sq, b, ng, gw] (a
 * group's slot: npg q heads and the k head of hn channels, the v head of hv;
 * gw = (npg + 2) hn when hv = hn); K/V heads from the source (qkv itself,
 * or kv [sk, b, ng, hn + hv]). */
typedef struct {
  int sq, sk, b, np, ng, npg, hn;
  int hv;             /* value head width (mt_attn_desc.hv; hn when 0)      */
  int64_t gw;         /* floats of one group's slot of qkv                  */
  int64_t skp;        /* packed K^T / V^T row length: sk rounded up to 16,
                       * plus 16 (rows 4 KiB apart alias in L1)            */
  int64_t ldq;        /* row stride of qkv (and dqkv)                       */
  int64_t ldk;        /* row stride of the K/V source                       */
  int64_t ldc;        /* row stride of ctx / dctx: b * np * hv              */
  int64_t kgs;        /* offset between (bi, g) K heads in the source       */
  int64_t koff;       /* offset of the K head in its group slot             */
  int qp[2], qs;      /* query positions (q_pos, q_split)                   */
  int kp[2], ks;      /* key positions                                      */
  uint64_t sfull;     /* dropout counter sequence length                    */
  const int32_t *ds;  /* document starts [b, sfull] (mt_attn_desc.doc_start) or NULL */
  float scale, p, inv_keep;
  int blas;           /* tile products through OpenBLAS (else cpu_fa_gemm)  */
  const mt_attn_desc *d;
} fa_geom;

static inline fa_geom fa_geometry(mt_backend *be, const mt_attn_desc *d, int has_kv) {
  fa_geom G;
  G.d = d;
  G.blas = cpu_impl_of(be)->flash_blas;
  G.b = d->b, G.np = d->np, G.hn = d->hn;
  G.ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(G.np % G.ng == 0);
  G.npg = G.np / G.ng;
  G.hv = d->hv > 0 ? d->hv : d->hn;
  G.gw = (int64_t)(G.npg + 1) * G.hn + G.hv;
  G.sq = d->sq > 0 ? d->sq : d->s;
  G.ldq = (int64_t)G.b * G.ng * G.gw;
  G.ldc = (int64_t)G.b * G.np * G.hv;
  G.qp[0] = d->q_pos[0], G.qp[1] = d->q_pos[1], G.qs = d->q_split;
  if (has_kv) {
    G.sk = d->sk > 0 ? d->sk : d->s;
    G.ldk = (int64_t)G.b * G.ng * (G.hn + G.hv);
    G.kgs = (int64_t)G.hn + G.hv;
    G.koff = 0;
    G.kp[0] = d->k_pos[0], G.kp[1] = d->k_pos[1], G.ks = d->k_split;
  } else { /* the keys are the query rows: same count, same positions */
    G.sk = G.sq;
    G.ldk = G.ldq;
    G.kgs = G.gw;
    G.koff = (int64_t)G.npg * G.hn;
    G.kp[0] = G.qp[0], G.kp[1] = G.qp[1], G.ks = G.qs;
  }
  G.skp = (((int64_t)G.sk + 15) & ~(int64_t)15) + 16;
  G.sfull = (uint64_t)(d->s_full > 0 ? d->s_full : d->s);
  G.ds = d->doc_start;
  G.scale = d->scale;
  G.p = d->dropout_p;
  G.inv_keep = d->dropout_p > 0.0f ? 1.0f / (1.0f - d->dropout_p) : 1.0f;
  return G;
}

/* Global position of row i of a side with ranges p[] split at `split`. */
static inline int fa_pos(const int p[2], int split, int i) {
  return split > 0 && i >= split ? p[1] + (i - split) : p[0] + i;
}

/* Positions of rows [r0, r0 + n) into pos[] (may be NULL), their min, max. */
static inline void fa_tile_pos(const int p[2], int split, int r0, int n, int *pos, int *mn,
                               int *mx) {
  int lo = 0, hi = 0;
  for (int i = 0; i < n; i++) {
    int v = fa_pos(p, split, r0 + i);
    if (pos) pos[i] = v;
    if (!i || v < lo) lo = v;
    if (!i || v > hi) hi = v;
  }
  *mn = lo, *mx = hi;
}

/* Document starts of the query rows [r0, r0 + n) of batch row bi into
 * ds[] (INT_MIN each without document masking), their min and max: key
 * position k is visible to a row at position q with start d iff
 * d <= k <= q. */
static inline void fa_tile_docs(const fa_geom *G, int bi, const int *qpos, int n, int *ds,
                                int *mn, int *mx) {
  int lo = INT_MIN, hi = INT_MIN;
  const int32_t *row = G->ds ? G->ds + (int64_t)bi * (int64_t)G->sfull : NULL;
  for (int i = 0; i < n; i++) {
    int v = row ? row[qpos[i]] : INT_MIN;
    ds[i] = v;
    if (!i || v < lo) lo = v;
    if (!i || v > hi) hi = v;
  }
  *mn = lo, *mx = hi;
}

/* Offset of query head n of batch row bi (row 0) in qkv. */
static inline int64_t fa_q_off(const fa_geom *G, int bi, int n) {
  int g = n / G->npg, j = n % G->npg;
  return ((int64_t)bi * G->ng + g) * G->gw + (int64_t)j * G->hn;
}

/* Offset of the K head of (bi, g) (row 0) in the K/V source; V (hv wide)
 * is hn after. */
static inline int64_t fa_k_off(const fa_geom *G, int bi, int g) {
  return ((int64_t)bi * G->ng + g) * G->kgs + G->koff;
}

/* z[j] = dropout scale (1/(1-p) kept, 0 dropped) of (bi, local head n,
 * query at global position qpos, key rows j0 + j, j < nv): counter
 * ((sample * n_heads_total + head_offset + n) * s_full + qpos) * s_full +
 * kpos, drawn per run of consecutive key positions; z[j] = 0 for nv <= j <
 * bc (keys the caller knows to be masked). */
static inline void fa_dropout_row(const fa_geom *G, int bi, int n, int qpos, int j0, int nv,
                                  int bc, float *z) {
  const mt_attn_desc *d = G->d;
  uint64_t head = (uint64_t)d->sample_ids[bi] * (uint64_t)d->n_heads_total +
                  (uint64_t)(d->head_offset + n);
  uint64_t row = (head * G->sfull + (uint64_t)qpos) * G->sfull;
  int j = 0;
  while (j < nv) {
    int a = j0 + j, len = nv - j;
    if (G->ks > 0 && a < G->ks && G->ks - a < len) len = G->ks - a;
    cpu_rng_uniform_range(d->key, row + (uint64_t)fa_pos(G->kp, G->ks, a), len, z + j);
    j += len;
  }
  const float p = G->p, inv = G->inv_keep;
#pragma omp simd
  for (int t = 0; t < nv; t++) z[t] = z[t] >= p ? inv : 0.0f;
  for (int t = nv; t < bc; t++) z[t] = 0.0f;
}

/* C[m x n] = beta C + alpha A B with A(i, k) = A[i rsa + k csa] (csa 1: A
 * row-major; rsa 1: A^T row-major), B and C row-major; tri: the FA_TRI_*
 * shape of a diagonal tile (cpu_internal.h; OpenBLAS computes it whole). */
static inline void fa_mm(const fa_geom *G, int m, int n, int k, float alpha, const float *A,
                         int64_t rsa, int64_t csa, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc, int tri) {
  if (!G->blas)
    cpu_fa_gemm(m, n, k, alpha, A, rsa, csa, B, ldb, beta, C, ldc, tri);
  else if (csa == 1)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, A, (blasint)rsa, B,
                (blasint)ldb, beta, C, (blasint)ldc);
  else
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, alpha, A, (blasint)csa, B,
                (blasint)ldb, beta, C, (blasint)ldc);
}

/* OpenBLAS at one thread while OpenMP threads call it (blas path only);
 * returns the previous setting for fa_blas_restore. */
static inline int fa_blas_single(const fa_geom *G) {
  int prev = G->blas ? openblas_get_num_threads() : 1;
  if (prev != 1) openblas_set_num_threads(1);
  return prev;
}

static inline void fa_blas_restore(int prev) {
  if (prev != 1) openblas_set_num_threads(prev);
}

/* 1 when a br x bc tile pair is diagonal: the same strictly increasing
 * positions on both sides, so key j is visible to query i iff j <= i. */
static inline int fa_diag(const int *qpos, int br, const int *kpos, int bc) {
  if (br != bc) return 0;
  for (int t = 0; t < br; t++)
    if (qpos[t] != kpos[t] || (t && qpos[t] <= qpos[t - 1])) return 0;
  return 1;
}

/* Elements of a qkv tensor of `rows` rows (sq·b) for d (mt_attn_desc.hv). */
static inline int64_t fa_qkv_elems(const mt_attn_desc *d, int64_t rows) {
  const int ng = d->ng > 0 ? d->ng : d->np, hv = d->hv > 0 ? d->hv : d->hn;
  return rows * ng * ((int64_t)(d->np / ng + 1) * d->hn + hv);
}

/* Floats rounded up to 64 bytes. */
static inline int64_t fa_round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* Copy rows [r0, r0 + n) of a strided head (row stride ld, hn wide) into
 * dst [n, hn]. */
static inline void fa_pack_rows(const float *src, int64_t ld, int r0, int n, int hn, float *dst) {
  for (int i = 0; i < n; i++) {
    const float *a = src + (int64_t)(r0 + i) * ld;
    float *b = dst + (int64_t)i * hn;
#pragma omp simd
    for (int e = 0; e < hn; e++) b[e] = a[e];
  }
}

#endif
