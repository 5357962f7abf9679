/* cpu/cpu_flash_attn_bwd.c — fused causal attention of the CPU backend,
 * backward (FlashAttention-2, Dao 2023, arXiv:2307.08691, Algorithm 2); the
 * forward and merge are cpu_flash_attn.c, the shared geometry cpu_flash.h.
 * Spec: core/backend.h flash_attn_bwd (given the FINAL ctx and lse of the
 * query rows, so one call per key block of the context-parallel ring).
 *
 * One unit per (batch row, K/V group g), run by one thread: it packs the
 * group's K^T [hn, sk], V^T [hv, sk] and K [sk, hn], its query heads' Q
 * [npg, sq, hn] and dO [npg, sq, hv] (hv: the value width, mt_attn_desc.hv;
 * K, Q and dO stay in place when there is one tile pair per
 * head), forms D = rowsum(dO o O) [npg, sq], zeroes a dQ accumulator
 * [npg, sq, hn], then runs the key tiles in order; for each it loops over
 * the group's query heads and the query tiles with a visible key,
 * recomputes P = exp(scale Q K^T - lse) (0 where masked: causality and,
 * with mt_attn_desc.doc_start, the query's document) and the dropout
 * scales Z from the counters, and accumulates
 *   dV += (P Z)^T dO,  dP = dO V^T,  dS = P (dP Z - D),
 *   dK += scale dS^T Q,  dQ += scale dS K.
 * dK/dV of the tile are then written (kv == NULL) or added (kv form) to
 * their rows; at the end dQ is written (kv == NULL) or added (kv form) to
 * the query heads of dqkv. Every output element is produced by one thread in
 * a fixed order, so the result does not depend on the thread count. With
 * fewer than 8 (batch row, group) units the key tiles are also split into
 * chunks (fa_bwd_chunks, from the shape only): each (bi, g, chunk) unit
 * writes its own dK/dV rows and a partial dQ, and the partials are summed
 * in chunk order afterwards (fa_bwd_reduce).
 * Workspace per thread: O((3 sk + 3 npg sq) hn) floats (plus the partial
 * dQ buffers of a chunked call, at most 64 MiB); nothing of size sq x sk. */
#include <math.h>
#include <omp.h>

#include "cpu_flash.h"

/* Workspace floats of one backward unit. */
static int64_t fa_ws_bwd(const fa_geom *G) {
  const int64_t hn = G->hn, hv = G->hv, nq = (int64_t)G->npg * G->sq;
  return fa_round16(2 * hn * G->skp + hv * G->skp + 2 * nq * hn + nq * hv + nq +
                    4 * FA_BR * FA_BC + FA_BC * hn + FA_BC * hv);
}

/* Key tiles [kt0, kt1) of (bi, g). dQ goes to dqpart [npg, sq, hn]
 * (overwritten; summed over the key chunks by fa_bwd_reduce) or, when
 * dqpart is NULL, to dqkv (written or added). */
static void fa_bwd_unit(const fa_geom *G, int bi, int g, int kt0, int kt1, float *dqpart,
                        float *dqkv, float *dkv, const float *dctx, const float *ctx,
                        const float *lse, const float *qkv, const float *ksrc, int has_kv,
                        float *ws) {
  const int hn = G->hn, hv = G->hv, npg = G->npg, sq = G->sq, sk = G->sk, drop = G->p > 0.0f;
  const int64_t skp = G->skp, nq = (int64_t)npg * sq, tile = FA_BR * FA_BC;
  float *Kt = ws, *Vt = Kt + hn * skp, *Kp = Vt + hv * skp;
  float *Qp = Kp + skp * hn, *dOp = Qp + nq * hn, *dQp = dOp + nq * hv, *D = dQp + nq * hn;
  float *P = D + nq, *Z = P + tile, *Pd = Z + tile, *dP = Pd + tile;
  float *dK = dP + tile, *dV = dK + (int64_t)FA_BC * hn;
  const int64_t kofs = fa_k_off(G, bi, g);
  const float *k = ksrc + kofs, *v = k + hn;
  /* one tile pair per head: Q, dO and K are read once each, so in place */
  const int direct = sq <= FA_BR && sk <= FA_BC;
  const int64_t qld = direct ? G->ldq : hn, dld = direct ? G->ldc : hv, kld = direct ? G->ldk : hn;
  const float *kb = direct ? k : Kp;
  cpu_fa_transpose(sk, hn, k, G->ldk, Kt, skp);
  cpu_fa_transpose(sk, hv, v, G->ldk, Vt, skp);
  if (!direct) fa_pack_rows(k, G->ldk, 0, sk, hn, Kp);
  for (int jn = 0; jn < npg; jn++) {
    const int n = g * npg + jn;
    const int64_t co = ((int64_t)bi * G->np + n) * hv;
    const float *dh = dctx + co;
    if (!direct) {
      fa_pack_rows(qkv + fa_q_off(G, bi, n), G->ldq, 0, sq, hn, Qp + (int64_t)jn * sq * hn);
      fa_pack_rows(dctx + co, G->ldc, 0, sq, hv, dOp + (int64_t)jn * sq * hv);
      dh = dOp + (int64_t)jn * sq * hv;
    }
    for (int i = 0; i < sq; i++) { /* D = rowsum(dO o O) */
      const float *a = dh + (int64_t)i * dld, *o = ctx + co + (int64_t)i * G->ldc;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int e = 0; e < hv; e++) s += a[e] * o[e];
      D[(int64_t)jn * sq + i] = s;
    }
  }
  if (dqpart) dQp = dqpart;
  memset(dQp, 0, (size_t)(nq * hn) * sizeof(float));
  int qpos[FA_BR], kpos[FA_BC], qds[FA_BR];
  const int jend = kt1 * FA_BC < sk ? kt1 * FA_BC : sk;
  for (int j0 = kt0 * FA_BC; j0 < jend; j0 += FA_BC) {
    int bc = sk - j0 < FA_BC ? sk - j0 : FA_BC, kmin, kmax, any = 0;
    fa_tile_pos(G->kp, G->ks, j0, bc, kpos, &kmin, &kmax);
    memset(dK, 0, (size_t)bc * hn * sizeof(float));
    memset(dV, 0, (size_t)bc * hv * sizeof(float));
    for (int jn = 0; jn < npg; jn++) {
      const int n = g * npg + jn;
      const float *lh = lse + ((int64_t)bi * G->np + n) * sq, *Dh = D + (int64_t)jn * sq;
      for (int i0 = 0; i0 < sq; i0 += FA_BR) {
        int br = sq - i0 < FA_BR ? sq - i0 : FA_BR, qmin, qmax, dmin, dmax;
        fa_tile_pos(G->qp, G->qs, i0, br, qpos, &qmin, &qmax);
        if (kmin > qmax) continue;
        fa_tile_docs(G, bi, qpos, br, qds, &dmin, &dmax);
        if (kmax < dmin) continue; /* every key before the rows' documents */
        any = 1;
        const int full = kmax <= qmin && kmin >= dmax, dg = !full && fa_diag(qpos, br, kpos, bc);
        const int tn = dg ? FA_TRI_NLOW : FA_TRI_NONE, tl = dg ? FA_TRI_KLOW : FA_TRI_NONE;
        const int th = dg ? FA_TRI_KHIGH : FA_TRI_NONE;
        const int64_t ro = ((int64_t)jn * sq + i0) * hn;
        const float *qi = direct ? qkv + fa_q_off(G, bi, n) : Qp + ro;
        const float *doi =
            direct ? dctx + ((int64_t)bi * G->np + n) * hv : dOp + ((int64_t)jn * sq + i0) * hv;
        /* P = exp(scale Q K^T - lse), 0 where masked */
        fa_mm(G, br, bc, hn, G->scale, qi, qld, 1, Kt + j0, skp, 0.0f, P, bc, tn);
        for (int i = 0; i < br; i++) {
          float *p = P + (int64_t)i * bc;
          const float L = lh[i0 + i];
          const int qp = qpos[i], di = qds[i];
          if (L == -INFINITY) {
            memset(p, 0, (size_t)bc * sizeof(float));
          } else if (full) {
#pragma omp simd
            for (int j = 0; j < bc; j++) p[j] = mt_fast_expf(p[j] - L);
          } else {
#pragma omp simd
            for (int j = 0; j < bc; j++)
              p[j] = kpos[j] > qp || kpos[j] < di ? 0.0f : mt_fast_expf(p[j] - L);
          }
          if (drop) {
            float *z = Z + (int64_t)i * bc, *pd = Pd + (int64_t)i * bc;
            fa_dropout_row(G, bi, n, qp, j0, dg ? i + 1 : bc, bc, z);
#pragma omp simd
            for (int j = 0; j < bc; j++) pd[j] = p[j] * z[j];
          }
        }
        /* dV += (P Z)^T dO */
        fa_mm(G, bc, hv, br, 1.0f, drop ? Pd : P, 1, bc, doi, dld, 1.0f, dV, hv, th);
        /* dP = dO V^T; dS = P (dP Z - D) (into dP) */
        fa_mm(G, br, bc, hv, 1.0f, doi, dld, 1, Vt + j0, skp, 0.0f, dP, bc, tn);
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
        fa_mm(G, bc, hn, br, G->scale, dP, 1, bc, qi, qld, 1.0f, dK, hn, th);
        fa_mm(G, br, hn, bc, G->scale, dP, bc, 1, kb + (int64_t)j0 * kld, kld, 1.0f, dQp + ro, hn,
              tl);
      }
    }
    if (has_kv && !any) continue; /* nothing to add */
    float *base = has_kv ? dkv : dqkv;
    float *dk = base + kofs + (int64_t)j0 * G->ldk, *dv = dk + hn;
    for (int j = 0; j < bc; j++) {
      float *a = dk + (int64_t)j * G->ldk, *c = dv + (int64_t)j * G->ldk;
      const float *x = dK + (int64_t)j * hn, *y = dV + (int64_t)j * hv;
      if (has_kv) {
#pragma omp simd
        for (int e = 0; e < hn; e++) a[e] += x[e];
#pragma omp simd
        for (int e = 0; e < hv; e++) c[e] += y[e];
      } else {
        memcpy(a, x, (size_t)hn * sizeof(float));
        memcpy(c, y, (size_t)hv * sizeof(float));
      }
    }
  }
  for (int jn = 0; jn < npg && !dqpart; jn++) { /* dQ: write (kv NULL) or add (kv form) */
    float *dq = dqkv + fa_q_off(G, bi, g * npg + jn);
    const float *src = dQp + (int64_t)jn * sq * hn;
    for (int i = 0; i < sq; i++) {
      float *a = dq + (int64_t)i * G->ldq;
      const float *x = src + (int64_t)i * hn;
      if (has_kv) {
#pragma omp simd
        for (int e = 0; e < hn; e++) a[e] += x[e];
      } else {
        memcpy(a, x, (size_t)hn * sizeof(float));
      }
    }
  }
}

/* Key chunks per (bi, g) unit, from the shape only (so the summation order
 * of dQ, and the result, do not depend on the thread count): 1 when there
 * are at least 8 (bi, g) units; else enough chunks for 8 units, at most one
 * per key tile and at most 64 MiB of partial dQ buffers. */
static int fa_bwd_chunks(const fa_geom *G) {
  const int64_t units = (int64_t)G->b * G->ng, nkt = (G->sk + FA_BC - 1) / FA_BC;
  if (units >= 8) return 1;
  int64_t c = (8 + units - 1) / units;
  const int64_t per = units * G->npg * (int64_t)G->sq * G->hn * (int64_t)sizeof(float);
  const int64_t cap = per > 0 ? ((int64_t)64 << 20) / per : c;
  c = c < nkt ? c : nkt;
  c = c < cap ? c : cap;
  return c < 1 ? 1 : (int)c;
}

/* dQ of every query head = sum over the chunks c = 0, 1, ... of the partial
 * buffers part [b, ng, nch, npg, sq, hn], written (kv NULL) or added (kv
 * form) to dqkv (the sum is formed in chunk 0's buffer). */
static void fa_bwd_reduce(mt_backend *be, const fa_geom *G, float *dqkv, float *part, int nch,
                          int has_kv) {
  const int hn = G->hn, sq = G->sq, npg = G->npg;
  const int64_t rows = (int64_t)G->b * G->np * sq, nq = (int64_t)npg * sq;
  const int par = rows * hn >= cpu_par_min(be);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < rows; r++) { /* r = ((bi * ng + g) * npg + jn) * sq + i */
    const int64_t unit = r / nq, rest = r % nq;
    const int bi = (int)(unit / G->ng), g = (int)(unit % G->ng);
    const int jn = (int)(rest / sq), i = (int)(rest % sq);
    float *a = dqkv + fa_q_off(G, bi, g * npg + jn) + (int64_t)i * G->ldq;
    float *x = part + (unit * nch * nq + rest) * hn; /* chunk 0 holds the sum */
    for (int c = 1; c < nch; c++) {
      const float *y = x + (int64_t)c * nq * hn;
#pragma omp simd
      for (int e = 0; e < hn; e++) x[e] += y[e];
    }
    if (has_kv) {
#pragma omp simd
      for (int e = 0; e < hn; e++) a[e] += x[e];
    } else {
      memcpy(a, x, (size_t)hn * sizeof(float));
    }
  }
}

void cpu_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                        const void *dctx, const void *ctx, const float *lse, const void *qkv_,
                        const void *kv) {
  const int has_kv = kv != NULL;
  const fa_geom G = fa_geometry(be, d, has_kv);
  const float *qkv = (const float *)qkv_;
  const float *ksrc = has_kv ? (const float *)kv : qkv;
  const int groups = G.b * G.ng, nch = fa_bwd_chunks(&G);
  const int nkt = (G.sk + FA_BC - 1) / FA_BC;
  const int nthr = omp_get_max_threads();
  const int64_t per_thr = fa_ws_bwd(&G), nq = (int64_t)G.npg * G.sq;
  const int64_t npart = nch > 1 ? fa_round16((int64_t)groups * nch * nq * G.hn) : 0;
  float *ws = cpu_workspace(be, (size_t)(per_thr * nthr + npart) * sizeof(float));
  float *part = ws + per_thr * nthr;
  int prev = fa_blas_single(&G);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int u = 0; u < groups * nch; u++) {
    const int c = u / groups, grp = u % groups; /* first key chunks (heaviest) first */
    const int kt0 = (int)((int64_t)nkt * c / nch), kt1 = (int)((int64_t)nkt * (c + 1) / nch);
    fa_bwd_unit(&G, grp / G.ng, grp % G.ng, kt0, kt1,
                nch > 1 ? part + ((int64_t)grp * nch + c) * nq * G.hn : NULL, (float *)dqkv,
                (float *)dkv, (const float *)dctx, (const float *)ctx, lse, qkv, ksrc, has_kv,
                ws + (int64_t)omp_get_thread_num() * per_thr);
  }
  fa_blas_restore(prev);
  if (nch > 1) fa_bwd_reduce(be, &G, (float *)dqkv, part, nch, has_kv);
}
