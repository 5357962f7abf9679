/* cpu/cpu_flash_attn.c — fused causal attention of the CPU backend, forward
 * and merge (FlashAttention-2, Dao 2023, arXiv:2307.08691, Algorithm 1);
 * the backward is cpu_flash_attn_bwd.c, the shared geometry cpu_flash.h.
 * The spec of each op is core/backend.h (flash_attn_fwd, attn_merge; the
 * block fields of mt_attn_desc), fp32; the bf16 storage entries of all
 * three ops are at the end (fp32 inside). cuda/cuda_flash_attn.cu is the
 * GPU counterpart.
 *
 * Forward: per (batch row, head, chunk of query tiles) an online softmax
 * over the FA_BC-row key tiles that hold a visible key: running max m,
 * running sum l of the PRE-dropout exp(s - m), running output O +=
 * dropout(P~) V rescaled by exp(m_old - m_new); at the end ctx = O / l and
 * lse = m + log l (a row with no visible key: ctx 0, lse -inf). A unit
 * first packs its K head transposed (K^T [hn, sk]) and its V head ([sk, hv];
 * hv = hn except with multi-latent attention's value width, mt_attn_desc.hv)
 * for the key tiles it can see, and each FA_BR-row query tile into [br, hn]
 * (Q and V stay in place when there is one key tile: each is read once),
 * so the tile products (cpu_fa_gemm, or OpenBLAS with
 * MEGATRAIN_CPU_FLASH_GEMM=blas) run on contiguous L1/L2-resident operands;
 * a GQA query head reads its group's K/V head (packed per unit, never
 * copied per head in memory that outlives the unit).
 *
 * Threads: the units are handed out dynamically, heaviest (last) chunks
 * first; the query tiles of a (batch row, head) are split into as many
 * chunks as keep every thread busy. A row's result depends only on its own
 * loop over the key tiles, so the output is the same for any thread count.
 *
 * Causality is by global position (two ranges per side, context
 * parallelism): key j is visible to query i iff kpos(j) <= qpos(i), and
 * with document masking (mt_attn_desc.doc_start) also kpos(j) >= the start
 * of qpos(i)'s document; tile pairs with no visible key are skipped, those
 * with every key visible skip the mask. Dropout: cpu_flash.h fa_dropout_row (the counters of
 * mt_attn_desc with s_full: bitwise the masks of the unfused op, now the
 * reference tests/tools/attn_unfused.h, when the block fields are zero).
 */
#include <math.h>
#include <omp.h>

#include "cpu_bf16.h"
#include "cpu_flash.h"

/* ---------------------------------------------------------------- forward */

/* Workspace floats of one forward unit. */
static int64_t fa_ws_fwd(const fa_geom *G) {
  const int64_t hn = G->hn, hv = G->hv;
  return fa_round16(hn * G->skp + G->skp * hv + FA_BR * hn + FA_BR * FA_BC + FA_BC + FA_BR * hv +
                    2 * FA_BR);
}

/* Query tiles [t0, t1) of (bi, head n). */
static void fa_fwd_unit(const fa_geom *G, int bi, int n, int t0, int t1, float *ctx, float *lse,
                        const float *qkv, const float *ksrc, float *ws) {
  const int hn = G->hn, hv = G->hv, sq = G->sq, sk = G->sk, drop = G->p > 0.0f;
  const int64_t skp = G->skp;
  float *Kt = ws, *Vp = Kt + hn * skp, *Qt = Vp + skp * hv, *S = Qt + FA_BR * hn;
  float *z = S + FA_BR * FA_BC, *O = z + FA_BC, *m = O + FA_BR * hv, *l = m + FA_BR;
  const float *q = qkv + fa_q_off(G, bi, n);
  const float *k = ksrc + fa_k_off(G, bi, n / G->npg), *v = k + hn;
  const int r0 = t0 * FA_BR, r1 = t1 * FA_BR < sq ? t1 * FA_BR : sq;
  /* one key tile: Q and V are read once per tile pair, so in place */
  const int direct = sk <= FA_BC;
  int qpos[FA_BR], kpos[FA_BC], qds[FA_BR], qmin, qmax, kmin, kmax, dmin, dmax;
  fa_tile_pos(G->qp, G->qs, r0, r1 - r0, NULL, &qmin, &qmax);
  for (int j0 = 0; j0 < sk; j0 += FA_BC) { /* pack the key tiles this chunk sees */
    int bc = sk - j0 < FA_BC ? sk - j0 : FA_BC;
    fa_tile_pos(G->kp, G->ks, j0, bc, NULL, &kmin, &kmax);
    if (kmin > qmax) continue;
    cpu_fa_transpose(bc, hn, k + (int64_t)j0 * G->ldk, G->ldk, Kt + j0, skp);
    if (!direct) fa_pack_rows(v, G->ldk, j0, bc, hv, Vp + (int64_t)j0 * hv);
  }
  const float *vb = direct ? v : Vp; /* V rows: packed, or in place (one key tile) */
  const int64_t vld = direct ? G->ldk : hv;
  for (int i0 = r0; i0 < r1; i0 += FA_BR) {
    const int br = r1 - i0 < FA_BR ? r1 - i0 : FA_BR;
    fa_tile_pos(G->qp, G->qs, i0, br, qpos, &qmin, &qmax);
    fa_tile_docs(G, bi, qpos, br, qds, &dmin, &dmax);
    const float *qt = direct ? q + (int64_t)i0 * G->ldq : Qt;
    const int64_t qld = direct ? G->ldq : hn;
    if (!direct) fa_pack_rows(q, G->ldq, i0, br, hn, Qt);
    for (int i = 0; i < br; i++) m[i] = -INFINITY, l[i] = 0.0f;
    memset(O, 0, (size_t)br * hv * sizeof(float));
    for (int j0 = 0; j0 < sk; j0 += FA_BC) {
      int bc = sk - j0 < FA_BC ? sk - j0 : FA_BC;
      fa_tile_pos(G->kp, G->ks, j0, bc, kpos, &kmin, &kmax);
      if (kmin > qmax || kmax < dmin) continue; /* no visible key in the tile */
      const int full = kmax <= qmin && kmin >= dmax, dg = !full && fa_diag(qpos, br, kpos, bc);
      /* S = scale Q K^T */
      fa_mm(G, br, bc, hn, G->scale, qt, qld, 1, Kt + j0, skp, 0.0f, S, bc,
            dg ? FA_TRI_NLOW : FA_TRI_NONE);
      for (int i = 0; i < br; i++) {
        float *s = S + (int64_t)i * bc;
        const int qi = qpos[i], di = qds[i];
        if (!full) {
#pragma omp simd
          for (int j = 0; j < bc; j++) s[j] = kpos[j] > qi || kpos[j] < di ? -INFINITY : s[j];
        }
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
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
          float *o = O + (int64_t)i * hv;
#pragma omp simd
          for (int e = 0; e < hv; e++) o[e] *= alpha;
        }
        if (drop) {
          fa_dropout_row(G, bi, n, qi, j0, dg ? i + 1 : bc, bc, z);
#pragma omp simd
          for (int j = 0; j < bc; j++) s[j] *= z[j];
        }
      }
      /* O += dropout(P~) V */
      fa_mm(G, br, hv, bc, 1.0f, S, bc, 1, vb + (int64_t)j0 * vld, vld, 1.0f, O, hv,
            dg ? FA_TRI_KLOW : FA_TRI_NONE);
    }
    float *c = ctx + ((int64_t)bi * G->np + n) * hv + (int64_t)i0 * G->ldc;
    float *ls = lse + ((int64_t)bi * G->np + n) * sq + i0;
    for (int i = 0; i < br; i++) {
      float *out = c + (int64_t)i * G->ldc;
      const float *o = O + (int64_t)i * hv;
      if (l[i] > 0.0f) {
        float inv = 1.0f / l[i];
#pragma omp simd
        for (int e = 0; e < hv; e++) out[e] = o[e] * inv;
        ls[i] = m[i] + logf(l[i]);
      } else {
        memset(out, 0, (size_t)hv * sizeof(float));
        ls[i] = -INFINITY;
      }
    }
  }
}

void cpu_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                        const void *qkv_, const void *kv_) {
  const fa_geom G = fa_geometry(be, d, kv_ != NULL);
  const float *qkv = (const float *)qkv_;
  const float *ksrc = kv_ ? (const float *)kv_ : qkv;
  float *ctx = (float *)ctx_;
  const int nqt = (G.sq + FA_BR - 1) / FA_BR, pairs = G.b * G.np;
  const int nthr = omp_get_max_threads();
  /* chunks of query tiles per (bi, head): enough units for 4 per thread */
  int nch = (4 * nthr + pairs - 1) / pairs;
  nch = nch < 1 ? 1 : nch > nqt ? nqt : nch;
  const int64_t per_thr = fa_ws_fwd(&G);
  float *ws = cpu_workspace(be, (size_t)(per_thr * nthr) * sizeof(float));
  int prev = fa_blas_single(&G);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
  for (int u = 0; u < nch * pairs; u++) {
    int ch = nch - 1 - u / pairs, pair = u % pairs; /* heaviest (last) chunks first */
    int t0 = (int)((int64_t)nqt * ch / nch), t1 = (int)((int64_t)nqt * (ch + 1) / nch);
    fa_fwd_unit(&G, pair / G.np, pair % G.np, t0, t1, ctx, lse, qkv, ksrc,
                ws + (int64_t)omp_get_thread_num() * per_thr);
  }
  fa_blas_restore(prev);
}

/* ------------------------------------------------------------------ merge */

void cpu_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx_, float *lse,
                    const void *ctx_b_, const float *lse_b) {
  const int sq = d->sq > 0 ? d->sq : d->s, b = d->b, np = d->np;
  const int hn = d->hv > 0 ? d->hv : d->hn; /* ctx's head width */
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

/* ---- bf16 storage (forward, merge and backward): widen, the fp32 op
 * (lse fp32), round once (cpu_bf16.h) ---- */

/* Rows of the query block and of the key block of d. */
static int bf16_sq(const mt_attn_desc *d) { return d->sq > 0 ? d->sq : d->s; }
static int bf16_sk(const mt_attn_desc *d) { return d->sk > 0 ? d->sk : d->s; }
static int64_t bf16_kv_elems(const mt_attn_desc *d) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  return (int64_t)bf16_sk(d) * d->b * ng * (d->hn + (d->hv > 0 ? d->hv : d->hn));
}
/* Elements of ctx (hv wide heads). */
static int64_t bf16_ctx_elems(const mt_attn_desc *d) {
  return (int64_t)bf16_sq(d) * d->b * d->np * (d->hv > 0 ? d->hv : d->hn);
}

void cpu_bf16_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                             const void *qkv, const void *kv) {
  const int64_t sq = bf16_sq(d), nq = fa_qkv_elems(d, sq * d->b);
  const int64_t nkv = kv ? bf16_kv_elems(d) : 0, nc = bf16_ctx_elems(d);
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){nq, nkv, nc}, p);
  bf_widen(be, p[0], qkv, nq);
  bf_widen(be, p[1], kv, nkv);
  cpu_flash_attn_fwd(be, d, p[2], lse, p[0], kv ? p[1] : NULL);
  bf_narrow(be, ctx, p[2], nc);
}

void cpu_bf16_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *ctx_b, const float *lse_b) {
  const int64_t nc = bf16_ctx_elems(d);
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){nc, nc}, p);
  bf_widen(be, p[0], ctx, nc);
  bf_widen(be, p[1], ctx_b, nc);
  cpu_attn_merge(be, d, p[0], lse, p[1], lse_b);
  bf_narrow(be, ctx, p[0], nc);
}

void cpu_bf16_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                             const void *dctx, const void *ctx, const float *lse,
                             const void *qkv, const void *kv) {
  const int64_t sq = bf16_sq(d), nq = fa_qkv_elems(d, sq * d->b);
  const int64_t nkv = kv ? bf16_kv_elems(d) : 0, nc = bf16_ctx_elems(d);
  float *p[6];
  bf_bufs(be, 6, (const int64_t[]){nq, nkv, nc, nc, nq, nkv}, p);
  /* dqkv: overwritten (kv NULL) or its q heads accumulated, k/v heads kept
   * (kv given): widened either way; dkv accumulated */
  if (kv) bf_widen(be, p[0], dqkv, nq);
  bf_widen(be, p[1], dkv, nkv);
  bf_widen(be, p[2], dctx, nc);
  bf_widen(be, p[3], ctx, nc);
  bf_widen(be, p[4], qkv, nq);
  bf_widen(be, p[5], kv, nkv);
  cpu_flash_attn_bwd(be, d, p[0], kv ? p[1] : NULL, p[2], p[3], lse, p[4], kv ? p[5] : NULL);
  bf_narrow(be, dqkv, p[0], nq);
  if (kv) bf_narrow(be, dkv, p[1], nkv);
}
