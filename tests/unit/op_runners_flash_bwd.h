/* tests/unit/op_runners_flash_bwd.h — op-case runners for the fused
 * attention backward, the context-parallel ring (forward, attn_merge,
 * backward over every key block) and the fused-vs-unfused comparison.
 * Conventions (global problem G, ne, ip, fp): op_runners_flash.h.
 * Included from op_runners_flash.h only. */
#ifndef MT_TESTS_OP_RUNNERS_FLASH_BWD_H
#define MT_TESTS_OP_RUNNERS_FLASH_BWD_H

#include "tests/tools/attn_unfused.h"

/* Loss sum(ctx o R) of queries qpos over keys kpos (finite differences). */
typedef struct {
  const of_prob *P;
  const int *qpos, *kpos;
  int sk;
  const double *R;
  double *ctx, *lse;
  int64_t nc;
} of_loss_ctx;
static double of_loss(const void *c, const double *G) {
  const of_loss_ctx *k = c;
  of_ref(k->P, G, k->P->s, k->qpos, k->sk, k->kpos, k->ctx, k->lse);
  double L = 0;
  for (int64_t i = 0; i < k->nc; i++) L += k->ctx[i] * k->R[i];
  return L;
}

/* want of a local qkv gradient: base (or 0) plus dG at rows qpos; slots
 * q_only: only the query slots take dG (kv form: its k/v heads untouched). */
static double *of_gather_dqkv(const of_set *S, const double *dG, const float *base, int q_only) {
  const of_prob *P = &S->P;
  const int64_t row = of_row(P);
  double *w = ot_dbl((int64_t)P->s * row);
  for (int i = 0; i < P->s; i++)
    for (int bi = 0; bi < P->b; bi++)
      for (int g = 0; g < P->ng; g++)
        for (int t = 0; t < P->npg + 2; t++)
          for (int e = 0; e < of_width(P, t); e++) {
            int64_t lo = i * row + of_slot(P, bi, g, t) + e;
            double add = !q_only || t < P->npg ? dG[S->qpos[i] * row + of_slot(P, bi, g, t) + e] : 0;
            w[lo] = (base ? base[lo] : 0.0) + add;
          }
  return w;
}

/* want of a kv-block gradient [nk, b, ng, hn + hv]: base + dG at rows kpos. */
static double *of_gather_dkv(const of_prob *P, const double *dG, const float *base,
                             const int *kpos, int nk) {
  const int64_t kr = of_kvrow(P);
  double *w = ot_dbl((int64_t)nk * kr);
  for (int j = 0; j < nk; j++)
    for (int bi = 0; bi < P->b; bi++)
      for (int g = 0; g < P->ng; g++)
        for (int t = 0; t < 2; t++)
          for (int e = 0; e < of_width(P, P->npg + t); e++) {
            int64_t lo = j * kr + of_kvslot(P, bi, g, t) + e;
            w[lo] = base[lo] + dG[kpos[j] * of_row(P) + of_slot(P, bi, g, P->npg + t) + e];
          }
  return w;
}

/* Device pointer to element `off` of tensor x. */
static void *of_at(const ot_t *x, int64_t off) {
  return (char *)x->d + off * (int64_t)mt_dtype_size(x->t);
}

/* flash_attn_bwd: one call (key block as in flash_attn_fwd) given the
 * reference's ctx and lse (the final ones: this block is every key), dctx
 * random. kv == NULL: "dqkv" overwritten (starts NaN); kv form: "dqkv"
 * accumulates dQ into its query heads (k/v heads must stay as they were)
 * and "dkv" accumulates dK, dV (both start random). Reference: finite
 * differences of sum(ctx o dctx) over G. */
static void ot_run_flash_bwd(ot_run *r) {
  OF_NEED(r, flash_attn_bwd);
  of_set S = of_setup(r);
  const of_prob *P = &S.P;
  const int kr = r->c->ip[3], own = !P->cp || kr == P->rank;
  int64_t nc = of_nctx(P), nl = (int64_t)P->b * P->np * P->s;
  int64_t nq = (int64_t)P->s * of_row(P), nk = (int64_t)P->s * of_kvrow(P);
  int *kpos = of_kpos(P, own ? P->rank : kr);
  ot_t *qkv = of_local_qkv(r, &S), *R = ot_rnd(r, nc, r->T, -1, 1);
  ot_t *ctx = ot_rnd(r, nc, r->T, 0, 1), *lse = ot_rnd(r, nl, MT_F32, 0, 1);
  ot_t *dq = ot_rnd(r, nq, r->T, -1, 1);
  double *rd = ot_dbl(nc), *wc = ot_dbl(nc), *wl = ot_dbl(nl);
  for (int64_t i = 0; i < nc; i++) rd[i] = R->h[i];
  of_ref(P, S.Gd, P->s, S.qpos, P->s, kpos, wc, wl);
  for (int64_t i = 0; i < nc; i++) ot_set(r, ctx, i, (float)wc[i]);
  for (int64_t i = 0; i < nl; i++) lse->h[i] = (float)wl[i];
  if (own)
    for (int64_t i = 0; i < nq; i++) dq->h[i] = NAN;
  ot_put(r, ctx), ot_put(r, lse), ot_put(r, dq);
  ot_t *kv = NULL, *dkv = NULL;
  if (own) {
    r->be->ops->flash_attn_bwd(r->be, &P->d, dq->d, NULL, R->d, ctx->d, lse->d, qkv->d, NULL);
  } else {
    kv = of_kv_block(r, &S, kpos);
    dkv = ot_rnd(r, nk, r->T, -1, 1);
    mt_attn_desc d = of_kv_desc(P, kr % P->cp);
    r->be->ops->flash_attn_bwd(r->be, &d, dq->d, dkv->d, R->d, ctx->d, lse->d, qkv->d, kv->d);
  }
  double *wq = NULL, *wk = NULL;
  if (r->want_ref) {
    of_loss_ctx lc = {P, S.qpos, kpos, P->s, rd, wc, wl, nc};
    double *dG = ot_fd(of_loss, &lc, S.Gd, S.G->n);
    wq = of_gather_dqkv(&S, dG, own ? NULL : dq->h, !own);
    if (!own) wk = of_gather_dkv(P, dG, dkv->h, kpos, P->s);
    free(dG);
  }
  ot_output(r, "dqkv", dq, wq, own ? NULL : dq->h);
  if (!own) ot_output(r, "dkv", dkv, wk, dkv->h);
  free(rd), free(wc), free(wl), free(kpos);
  of_free(&S);
}

/* flash_attn_ring: one CP rank's whole attention (ip[1] = cp >= 1, ip[2] =
 * rank): forward over its own block (kv NULL), then the other ranks' blocks
 * in ring order (rank-1, rank-2, ...), each merged with attn_merge; backward
 * with the merged (final) ctx and lse: own block (dqkv overwritten), then
 * each other block (dQ accumulated into dqkv, dK/dV into that block's dkv,
 * which starts random). Outputs "ctx", "lse" (vs the double loop over every
 * key), "dqkv" and "dkv" (all other blocks, in ring order; finite
 * differences of sum(ctx o dctx) over G). */
static void ot_run_flash_ring(ot_run *r) {
  OF_NEED(r, flash_attn_fwd);
  OF_NEED(r, flash_attn_bwd);
  OF_NEED(r, attn_merge);
  of_set S = of_setup(r);
  const of_prob *P = &S.P;
  const int cp = P->cp, nb = cp - 1;
  int64_t nc = of_nctx(P), nl = (int64_t)P->b * P->np * P->s;
  int64_t nq = (int64_t)P->s * of_row(P), nk = (int64_t)P->s * of_kvrow(P);
  ot_t *qkv = of_local_qkv(r, &S), *R = ot_rnd(r, nc, r->T, -1, 1);
  ot_t *ctx = ot_rnd(r, nc, r->T, 0, 1), *lse = ot_rnd(r, nl, MT_F32, 0, 1);
  ot_t *cb = ot_rnd(r, nc, r->T, 0, 1), *lb = ot_rnd(r, nl, MT_F32, 0, 1);
  ot_t *dq = ot_rnd(r, nq, r->T, 0, 1);
  ot_t *kvs = nb ? ot_rnd(r, nb * nk, r->T, 0, 1) : NULL;
  ot_t *dkvs = nb ? ot_rnd(r, nb * nk, r->T, -1, 1) : NULL;
  int **kp = malloc(sizeof(int *) * (size_t)(nb + 1));
  for (int t = 1; t <= nb; t++) {
    kp[t] = of_kpos(P, (P->rank - t + cp) % cp);
    ot_t *blk = of_kv_block(r, &S, kp[t]);
    memcpy(kvs->h + (t - 1) * nk, blk->h, (size_t)nk * sizeof(float));
  }
  if (nb) ot_put(r, kvs);
  for (int64_t i = 0; i < nq; i++) dq->h[i] = NAN;
  ot_put(r, dq);
  const mt_backend_ops *op = r->be->ops;
  op->flash_attn_fwd(r->be, &P->d, ctx->d, lse->d, qkv->d, NULL);
  for (int t = 1; t <= nb; t++) {
    mt_attn_desc d = of_kv_desc(P, (P->rank - t + cp) % cp);
    op->flash_attn_fwd(r->be, &d, cb->d, lb->d, qkv->d, of_at(kvs, (t - 1) * nk));
    op->attn_merge(r->be, &d, ctx->d, lse->d, cb->d, lb->d);
  }
  op->flash_attn_bwd(r->be, &P->d, dq->d, NULL, R->d, ctx->d, lse->d, qkv->d, NULL);
  for (int t = 1; t <= nb; t++) {
    mt_attn_desc d = of_kv_desc(P, (P->rank - t + cp) % cp);
    op->flash_attn_bwd(r->be, &d, dq->d, of_at(dkvs, (t - 1) * nk), R->d, ctx->d, lse->d,
                       qkv->d, of_at(kvs, (t - 1) * nk));
  }
  int *all = malloc(sizeof(int) * (size_t)P->s_full);
  for (int j = 0; j < P->s_full; j++) all[j] = j;
  double *rd = ot_dbl(nc), *wc = ot_dbl(nc), *wl = ot_dbl(nl), *wq = NULL, *wk = NULL;
  for (int64_t i = 0; i < nc; i++) rd[i] = R->h[i];
  of_ref(P, S.Gd, P->s, S.qpos, P->s_full, all, wc, wl);
  if (r->want_ref) {
    double *tc = ot_dbl(nc), *tl = ot_dbl(nl);
    of_loss_ctx lc = {P, S.qpos, all, P->s_full, rd, tc, tl, nc};
    double *dG = ot_fd(of_loss, &lc, S.Gd, S.G->n);
    wq = of_gather_dqkv(&S, dG, NULL, 0);
    if (nb) {
      wk = ot_dbl(nb * nk);
      for (int t = 1; t <= nb; t++) {
        double *w = of_gather_dkv(P, dG, dkvs->h + (t - 1) * nk, kp[t], P->s);
        memcpy(wk + (t - 1) * nk, w, (size_t)nk * sizeof(double));
        free(w);
      }
    }
    free(dG), free(tc), free(tl);
  }
  ot_output(r, "ctx", ctx, wc, NULL);
  of_output_lse(r, "lse", lse, wl);
  ot_output(r, "dqkv", dq, wq, NULL);
  if (nb) ot_output(r, "dkv", dkvs, wk, dkvs->h);
  for (int t = 1; t <= nb; t++) free(kp[t]);
  free(kp), free(all), free(rd);
  of_free(&S);
}

/* attn_merge (plain problem, s >= 2): the keys split into block A (rows
 * [0, h)) and B ([h, s)), h = s / 2, each through the kv form; B's result
 * first (its rows i < h have lse -inf), A merged into it; against ONE
 * kv == NULL call over all keys ("ctx", "lse"; the want column is that
 * call's result, not a double loop). */
static void ot_run_attn_merge(ot_run *r) {
  OF_NEED(r, flash_attn_fwd);
  OF_NEED(r, attn_merge);
  of_set S = of_setup(r);
  const of_prob *P = &S.P;
  const int h = P->s / 2;
  int64_t nc = of_nctx(P), nl = (int64_t)P->b * P->np * P->s;
  ot_t *qkv = of_local_qkv(r, &S), *ctx = ot_rnd(r, nc, r->T, 0, 1);
  ot_t *lse = ot_rnd(r, nl, MT_F32, 0, 1), *ca = ot_rnd(r, nc, r->T, 0, 1);
  ot_t *la = ot_rnd(r, nl, MT_F32, 0, 1), *c1 = ot_rnd(r, nc, r->T, 0, 1);
  ot_t *l1 = ot_rnd(r, nl, MT_F32, 0, 1);
  int *kpos = of_kpos(P, 0);
  ot_t *kv = of_kv_block(r, &S, kpos); /* rows 0..s-1: A then B */
  mt_attn_desc da = P->d, db = P->d;
  da.sk = h, da.k_pos[0] = 0;
  db.sk = P->s - h, db.k_pos[0] = h;
  const mt_backend_ops *op = r->be->ops;
  op->flash_attn_fwd(r->be, &db, ctx->d, lse->d, qkv->d, of_at(kv, h * of_kvrow(P)));
  op->flash_attn_fwd(r->be, &da, ca->d, la->d, qkv->d, kv->d);
  op->attn_merge(r->be, &P->d, ctx->d, lse->d, ca->d, la->d);
  op->flash_attn_fwd(r->be, &P->d, c1->d, l1->d, qkv->d, NULL);
  float *hc = ot_get(r, c1), *hl = ot_get(r, l1);
  double *wc = ot_dbl(nc), *wl = ot_dbl(nl);
  for (int64_t i = 0; i < nc; i++) wc[i] = hc[i];
  for (int64_t i = 0; i < nl; i++) wl[i] = hl[i];
  ot_output(r, "ctx", ctx, wc, NULL);
  of_output_lse(r, "lse", lse, wl);
  free(hc), free(hl), free(kpos);
  of_free(&S);
}

/* flash_vs_unfused (plain problem): "ctx" = flash_attn_fwd against the
 * unfused reference op's forward and "dqkv" = flash_attn_bwd (with its own
 * ctx, lse) against the reference's backward (with its forward's probs),
 * same inputs, same dropout key: the want column is the unfused op's result
 * (issue 15: equal within fp32 rounding). The reference
 * (tests/tools/attn_unfused.h, the CPU attention before issue 15) runs for
 * the cpu column only; the cuda column compares with the cpu fused op. */
static void ot_run_flash_vs_unfused(ot_run *r) {
  OF_NEED(r, flash_attn_fwd);
  OF_NEED(r, flash_attn_bwd);
  of_set S = of_setup(r);
  const of_prob *P = &S.P;
  int64_t nc = of_nctx(P), nl = (int64_t)P->b * P->np * P->s;
  int64_t nq = (int64_t)P->s * of_row(P), npb = (int64_t)P->b * P->np * P->s * P->s;
  ot_t *qkv = of_local_qkv(r, &S), *R = ot_rnd(r, nc, r->T, -1, 1);
  ot_t *cf = ot_rnd(r, nc, r->T, 0, 1), *cu = ot_rnd(r, nc, r->T, 0, 1);
  ot_t *lse = ot_rnd(r, nl, MT_F32, 0, 1), *pr = ot_rnd(r, npb, r->T, 0, 1);
  ot_t *dqf = ot_rnd(r, nq, r->T, 0, 1), *dqu = ot_rnd(r, nq, r->T, 0, 1);
  const mt_backend_ops *op = r->be->ops;
  op->flash_attn_fwd(r->be, &P->d, cf->d, lse->d, qkv->d, NULL);
  op->flash_attn_bwd(r->be, &P->d, dqf->d, NULL, R->d, cf->d, lse->d, qkv->d, NULL);
  double *wc = NULL, *wq = NULL;
  if (r->want_ref) { /* cpu column: r->be is the cpu backend (fp32) */
    mt_ref_attn_fwd(r->be, &P->d, cu->d, pr->d, NULL, qkv->d);
    mt_ref_attn_bwd(r->be, &P->d, dqu->d, R->d, qkv->d, pr->d);
    float *hc = ot_get(r, cu), *hq = ot_get(r, dqu);
    wc = ot_dbl(nc), wq = ot_dbl(nq);
    for (int64_t i = 0; i < nc; i++) wc[i] = hc[i];
    for (int64_t i = 0; i < nq; i++) wq[i] = hq[i];
    free(hc), free(hq);
  }
  ot_output(r, "ctx", cf, wc, NULL);
  ot_output(r, "dqkv", dqf, wq, NULL);
  of_free(&S);
}

#endif
