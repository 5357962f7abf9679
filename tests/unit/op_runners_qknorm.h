/* tests/unit/op_runners_qknorm.h — op-case runners (op_harness.h) for
 * qk_layernorm (qknorm_fwd / qknorm_bwd, mt_qknorm_desc): per-head LayerNorm
 * or RMSNorm of the q and k heads of the GQA qkv layout, checked against a
 * naive double loop, and the backward against central finite differences
 * and the analytic double backward ("_a" outputs). Included by
 * op_runners_llama.h. */
#ifndef MT_TESTS_OP_RUNNERS_QKNORM_H
#define MT_TESTS_OP_RUNNERS_QKNORM_H

#include "op_runners_misc.h"

/* qknorm: ne = {rows, np, ng, hn}; ip[0] = rms. */
static mt_qknorm_desc ot_qkn_desc(const op_case *c) {
  mt_qknorm_desc d = {.rows = c->ne[0], .np = (int)c->ne[1], .ng = (int)c->ne[2],
                      .hn = (int)c->ne[3], .rms = c->ip[0], .eps = 1e-5f};
  return d;
}

static int64_t ot_qkn_n(const mt_qknorm_desc *d) {
  return d->rows * d->ng * (d->np / d->ng + 2) * d->hn;
}

/* Forward in double: y, and per (row, group, slot) mean / rstd (may be
 * NULL); p = [x (n), wq, bq, wk, bk (hn each)]. */
static void ot_ref_qkn(const mt_qknorm_desc *d, const double *p, double *y, double *mean,
                       double *rstd) {
  int npg = d->np / d->ng, hn = d->hn;
  int64_t n = ot_qkn_n(d);
  const double *wq = p + n, *bq = wq + hn, *wk = bq + hn, *bk = wk + hn;
  memcpy(y, p, (size_t)n * sizeof(double));
  for (int64_t u = 0; u < d->rows * d->ng; u++)
    for (int slot = 0; slot <= npg; slot++) {
      const double *x = p + (u * (npg + 2) + slot) * hn;
      double *o = y + (u * (npg + 2) + slot) * hn;
      const double *w = slot == npg ? wk : wq, *b = slot == npg ? bk : bq;
      double m = 0, v = 0;
      if (!d->rms) {
        for (int j = 0; j < hn; j++) m += x[j];
        m /= hn;
      }
      for (int j = 0; j < hn; j++) v += (x[j] - m) * (x[j] - m);
      double rs = 1.0 / sqrt(v / hn + d->eps);
      for (int j = 0; j < hn; j++) o[j] = (x[j] - m) * rs * w[j] + (d->rms ? 0.0 : b[j]);
      if (mean) mean[u * (npg + 1) + slot] = m;
      if (rstd) rstd[u * (npg + 1) + slot] = rs;
    }
}

/* Inputs p = [x, wq, bq, wk, bk] as device tensors (biases NULL with rms)
 * and their double copy. */
typedef struct {
  ot_t *x, *wq, *bq, *wk, *bk;
  double *p;
} ot_qkn_in;
static ot_qkn_in ot_qkn_inputs(ot_run *r, const mt_qknorm_desc *d) {
  int64_t n = ot_qkn_n(d);
  int hn = d->hn;
  ot_qkn_in in = {0};
  in.x = ot_rnd(r, n, r->T, -2, 3);
  in.wq = ot_rnd(r, hn, r->T, 0.5, 1.5);
  in.bq = d->rms ? NULL : ot_rnd(r, hn, r->T, -0.5, 0.5);
  in.wk = ot_rnd(r, hn, r->T, 0.5, 1.5);
  in.bk = d->rms ? NULL : ot_rnd(r, hn, r->T, -0.5, 0.5);
  in.p = ot_dbl(n + 4 * hn);
  for (int64_t i = 0; i < n; i++) in.p[i] = in.x->h[i];
  for (int j = 0; j < hn; j++) {
    in.p[n + j] = in.wq->h[j];
    in.p[n + hn + j] = in.bq ? in.bq->h[j] : 0.0;
    in.p[n + 2 * hn + j] = in.wk->h[j];
    in.p[n + 3 * hn + j] = in.bk ? in.bk->h[j] : 0.0;
  }
  return in;
}

/* qknorm_fwd: outputs "y" (T), "mean" (LayerNorm rows only), "rstd" (fp32). */
static void ot_run_qknorm_fwd(ot_run *r) {
  mt_qknorm_desc d = ot_qkn_desc(r->c);
  int64_t n = ot_qkn_n(&d), ns = d.rows * (d.np + d.ng);
  ot_qkn_in in = ot_qkn_inputs(r, &d);
  ot_t *y = ot_rnd(r, n, r->T, -1, 1), *mu = ot_rnd(r, ns, MT_F32, -1, 1);
  ot_t *rs = ot_rnd(r, ns, MT_F32, -1, 1);
  r->be->ops->qknorm_fwd(r->be, &d, y->d, d.rms ? NULL : mu->d, rs->d, in.x->d, in.wq->d,
                         in.bq ? in.bq->d : NULL, in.wk->d, in.bk ? in.bk->d : NULL);
  double *wy = ot_dbl(n), *wm = ot_dbl(ns), *wr = ot_dbl(ns);
  ot_ref_qkn(&d, in.p, wy, wm, wr);
  free(in.p);
  ot_output(r, "y", y, wy, NULL);
  if (!d.rms)
    ot_output(r, "mean", mu, wm, NULL);
  else
    free(wm);
  ot_output(r, "rstd", rs, wr, NULL);
}

typedef struct {
  const mt_qknorm_desc *d;
  const double *R;
  double *y;
} ot_qkn_ctx;
static double ot_qkn_fd(const void *c, const double *p) {
  const ot_qkn_ctx *k = c;
  ot_ref_qkn(k->d, p, k->y, NULL, NULL);
  double L = 0;
  for (int64_t i = 0; i < ot_qkn_n(k->d); i++) L += k->y[i] * k->R[i];
  return L;
}

/* Analytic backward in double: dx (overwrite) and dwq/dbq/dwk/dbk
 * (accumulate) from dout R; p as ot_ref_qkn. */
static void ot_ref_qkn_bwd(const mt_qknorm_desc *d, const double *p, const double *R, double *dx,
                           double *dwq, double *dbq, double *dwk, double *dbk) {
  int npg = d->np / d->ng, hn = d->hn;
  int64_t n = ot_qkn_n(d);
  memcpy(dx, R, (size_t)n * sizeof(double));
  for (int64_t u = 0; u < d->rows * d->ng; u++)
    for (int slot = 0; slot <= npg; slot++) {
      int64_t o = (u * (npg + 2) + slot) * hn;
      const double *x = p + o, *g = R + o;
      const double *w = p + n + (slot == npg ? 2 * hn : 0);
      double *dw = slot == npg ? dwk : dwq, *db = slot == npg ? dbk : dbq;
      double m = 0, v = 0, sg = 0, sgx = 0;
      if (!d->rms) {
        for (int j = 0; j < hn; j++) m += x[j];
        m /= hn;
      }
      for (int j = 0; j < hn; j++) v += (x[j] - m) * (x[j] - m);
      double rs = 1.0 / sqrt(v / hn + d->eps);
      for (int j = 0; j < hn; j++) {
        double xh = (x[j] - m) * rs;
        sg += g[j] * w[j];
        sgx += g[j] * w[j] * xh;
        dw[j] += g[j] * xh;
        db[j] += g[j];
      }
      for (int j = 0; j < hn; j++) {
        double xh = (x[j] - m) * rs;
        dx[o + j] = rs * (g[j] * w[j] - (d->rms ? 0.0 : sg / hn) - xh * sgx / hn);
      }
    }
}

/* qknorm_bwd: statistics computed on the host; "din" (T, overwrite: starts
 * as NaN) and "dwq", "dwk" (+ "dbq", "dbk" with LayerNorm; fp32,
 * accumulating) against finite differences, "din_a", "dwq_a", "dwk_a"
 * against the analytic backward. */
static void ot_run_qknorm_bwd(ot_run *r) {
  mt_qknorm_desc d = ot_qkn_desc(r->c);
  int64_t n = ot_qkn_n(&d), ns = d.rows * (d.np + d.ng), hn = d.hn;
  ot_qkn_in in = ot_qkn_inputs(r, &d);
  ot_t *R = ot_rnd(r, n, r->T, -1, 1), *dx = ot_rnd(r, n, r->T, -1, 1);
  ot_t *mu = ot_rnd(r, ns, MT_F32, -1, 1), *rs = ot_rnd(r, ns, MT_F32, -1, 1);
  ot_t *dwq = ot_rnd(r, hn, MT_F32, -1, 1), *dbq = ot_rnd(r, hn, MT_F32, -1, 1);
  ot_t *dwk = ot_rnd(r, hn, MT_F32, -1, 1), *dbk = ot_rnd(r, hn, MT_F32, -1, 1);
  double *y = ot_dbl(n), *wm = ot_dbl(ns), *wr = ot_dbl(ns), *Rd = ot_dbl(n);
  ot_ref_qkn(&d, in.p, y, wm, wr);
  for (int64_t i = 0; i < ns; i++) mu->h[i] = (float)wm[i], rs->h[i] = (float)wr[i];
  for (int64_t i = 0; i < n; i++) dx->h[i] = NAN, Rd[i] = R->h[i];
  ot_put(r, mu), ot_put(r, rs), ot_put(r, dx);
  r->be->ops->qknorm_bwd(r->be, &d, dx->d, dwq->d, d.rms ? NULL : dbq->d, dwk->d,
                         d.rms ? NULL : dbk->d, R->d, in.x->d, in.wq->d, in.wk->d,
                         d.rms ? NULL : mu->d, rs->d);
  double *fd = NULL;
  if (r->want_ref) {
    ot_qkn_ctx c = {&d, Rd, y};
    fd = ot_fd(ot_qkn_fd, &c, in.p, n + 4 * hn);
  }
  double *w[4], *a[4], *ax = ot_dbl(n);
  ot_t *acc[4] = {dwq, dbq, dwk, dbk};
  for (int t = 0; t < 4; t++) {
    w[t] = ot_dbl(hn), a[t] = ot_dbl(hn);
    for (int64_t j = 0; j < hn; j++)
      a[t][j] = acc[t]->h[j], w[t][j] = acc[t]->h[j] + (fd ? fd[n + t * hn + j] : 0.0);
  }
  ot_ref_qkn_bwd(&d, in.p, Rd, ax, a[0], a[1], a[2], a[3]);
  double *wx = ot_dbl(n);
  for (int64_t i = 0; fd && i < n; i++) wx[i] = fd[i];
  static const char *nm[4] = {"dwq", "dbq", "dwk", "dbk"}, *nma[4] = {"dwq_a", "dbq_a", "dwk_a", "dbk_a"};
  ot_output(r, "din", dx, wx, NULL);
  ot_output(r, "din_a", dx, ax, NULL);
  for (int t = 0; t < 4; t++) {
    if (d.rms && (t == 1 || t == 3)) {
      free(w[t]), free(a[t]);
      continue;
    }
    ot_output(r, nm[t], acc[t], w[t], acc[t]->h);
    ot_output(r, nma[t], acc[t], a[t], acc[t]->h);
  }
  free(in.p), free(y), free(wm), free(wr), free(Rd), free(fd);
}

#endif
