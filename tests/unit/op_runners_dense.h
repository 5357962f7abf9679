/* tests/unit/op_runners_dense.h — op-case runners (op_harness.h) for GEMM,
 * bias gradient, LayerNorm, GELU, embeddings and cross-entropy: each creates
 * its inputs, runs the op on r->be and registers its outputs with a
 * double-precision reference (naive loop, or central finite differences of
 * the double forward for nonlinear backward ops). "T" tensors use the
 * backend's storage dtype r->T; fp32 tensors stay fp32. */
#ifndef MT_TESTS_OP_RUNNERS_DENSE_H
#define MT_TESTS_OP_RUNNERS_DENSE_H

#include "op_harness.h"

#define OT_FD_EPS 1e-5

/* gemm: ne = {m, n, k, batch}; ip = {trans_a, trans_b, bias, fp32 C};
 * fp = {alpha, beta}. Leading dimensions and batch strides are padded; the
 * padding must stay untouched and beta == 0 must ignore C (filled with NaN).
 * Output "c": the whole C buffer, padding included. */
static void ot_run_gemm(ot_run *r) {
  const op_case *k = r->c;
  const int m = (int)k->ne[0], n = (int)k->ne[1], kk = (int)k->ne[2], batch = (int)k->ne[3];
  const int ta = k->ip[0], tb = k->ip[1];
  mt_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = kk, .alpha = k->fp[0],
                    .beta = k->fp[1], .a_type = r->T, .b_type = r->T,
                    .c_type = k->ip[3] ? MT_F32 : r->T, .batch = batch};
  int64_t ar = ta ? kk : m, ac = ta ? m : kk, br = tb ? n : kk, bc = tb ? kk : n;
  d.lda = ac + 3, d.ldb = bc + 1, d.ldc = n + 2;
  d.stride_a = ar * d.lda + 5, d.stride_b = br * d.ldb + 7, d.stride_c = m * d.ldc + 1;
  int64_t nc = d.stride_c * batch;
  ot_t *A = ot_rnd(r, d.stride_a * batch, r->T, -1, 1), *B = ot_rnd(r, d.stride_b * batch, r->T, -1, 1);
  ot_t *C = ot_rnd(r, nc, d.c_type, -1, 1), *bias = k->ip[2] ? ot_rnd(r, n, r->T, -1, 1) : NULL;
  float *c0 = malloc((size_t)nc * 4);
  memcpy(c0, C->h, (size_t)nc * 4);
  if (d.beta == 0.0f) {
    for (int bt = 0; bt < batch; bt++)
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) C->h[bt * d.stride_c + (int64_t)i * d.ldc + j] = NAN;
    ot_put(r, C);
  }
  d.a = A->d, d.b = B->d, d.c = C->d, d.bias = bias ? bias->d : NULL;
  r->be->ops->gemm(r->be, &d);
  double *want = ot_dbl(nc);
  for (int64_t i = 0; i < nc; i++) want[i] = c0[i];
  const float *a = A->h, *b = B->h;
  for (int bt = 0; r->want_ref && bt < batch; bt++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int l = 0; l < kk; l++) {
          double av = ta ? a[bt * d.stride_a + l * d.lda + i] : a[bt * d.stride_a + i * d.lda + l];
          double bv = tb ? b[bt * d.stride_b + j * d.ldb + l] : b[bt * d.stride_b + l * d.ldb + j];
          acc += av * bv;
        }
        int64_t ci = bt * d.stride_c + (int64_t)i * d.ldc + j;
        double v = d.alpha * acc + (d.beta != 0.0f ? d.beta * (double)c0[ci] : 0.0);
        if (bias) v += bias->h[j];
        want[ci] = v;
      }
  ot_output(r, "c", C, want, NULL);
  const double *got = r->outs[r->no - 1].got;
  for (int bt = 0; bt < batch; bt++)
    for (int i = 0; i < m; i++)
      for (int64_t j = n, ci; j < d.ldc && (ci = bt * d.stride_c + (int64_t)i * d.ldc + j) < nc; j++)
        if (got[ci] != (double)c0[ci])
          ot_failf(r, "padding changed: batch %d row %d col %lld got %.9g want %.9g", bt, i,
                   (long long)j, got[ci], (double)c0[ci]);
  free(c0);
}

/* bias_grad: ne = {rows, n}; "db" (fp32) accumulates column sums of dout. */
static void ot_run_bias_grad(ot_run *r) {
  int64_t rows = r->c->ne[0], n = r->c->ne[1];
  ot_t *g = ot_rnd(r, rows * n, r->T, -1, 1), *db = ot_rnd(r, n, MT_F32, -1, 1);
  r->be->ops->bias_grad(r->be, db->d, g->d, rows, n);
  double *want = ot_dbl(n);
  for (int64_t j = 0; j < n; j++) want[j] = db->h[j];
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < n; j++) want[j] += g->h[i * n + j];
  ot_output(r, "db", db, want, db->h);
}

/* Mean and 1/sqrt(var + eps) of each row of x [rows, h], in double. */
static void ot_ln_stats(const double *x, int64_t rows, int64_t h, double eps, double *mu,
                        double *rs) {
  for (int64_t i = 0; i < rows; i++) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < h; j++) m += x[i * h + j];
    m /= h;
    for (int64_t j = 0; j < h; j++) v += (x[i * h + j] - m) * (x[i * h + j] - m);
    mu[i] = m;
    rs[i] = 1.0 / sqrt(v / h + eps);
  }
}

/* layernorm_fwd: ne = {rows, h}; outputs "y" (T), "mean", "rstd" (fp32). */
static void ot_run_layernorm_fwd(ot_run *r) {
  int64_t rows = r->c->ne[0], h = r->c->ne[1];
  const float eps = 1e-5f;
  ot_t *x = ot_rnd(r, rows * h, r->T, -2, 3), *w = ot_rnd(r, h, r->T, 0.5, 1.5);
  ot_t *b = ot_rnd(r, h, r->T, -0.5, 0.5), *y = ot_rnd(r, rows * h, r->T, -1, 1);
  ot_t *mu = ot_rnd(r, rows, MT_F32, -1, 1), *rs = ot_rnd(r, rows, MT_F32, -1, 1);
  r->be->ops->layernorm_fwd(r->be, y->d, mu->d, rs->d, x->d, w->d, b->d, rows, h, eps);
  double *xd = ot_dbl(rows * h), *wy = ot_dbl(rows * h), *wmu = ot_dbl(rows), *wrs = ot_dbl(rows);
  for (int64_t i = 0; i < rows * h; i++) xd[i] = x->h[i];
  ot_ln_stats(xd, rows, h, eps, wmu, wrs);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < h; j++)
      wy[i * h + j] = (xd[i * h + j] - wmu[i]) * wrs[i] * w->h[j] + b->h[j];
  free(xd);
  ot_output(r, "y", y, wy, NULL);
  ot_output(r, "mean", mu, wmu, NULL);
  ot_output(r, "rstd", rs, wrs, NULL);
}

/* L = sum(layernorm(x; w, b) * R) in double; p = [x (rows*h), w (h), b (h)]. */
static double ot_ln_loss(int64_t rows, int64_t h, double eps, const double *R, const double *p) {
  const double *x = p, *w = p + rows * h, *b = w + h;
  double *mu = ot_dbl(rows), *rs = ot_dbl(rows), L = 0;
  ot_ln_stats(x, rows, h, eps, mu, rs);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < h; j++) L += ((x[i * h + j] - mu[i]) * rs[i] * w[j] + b[j]) * R[i * h + j];
  free(mu), free(rs);
  return L;
}

/* Central finite differences of f(p) over all np_ entries of p. */
typedef double (*ot_fd_fn)(const void *ctx, const double *p);
static double *ot_fd(ot_fd_fn f, const void *ctx, double *p, int64_t np_) {
  double *fd = ot_dbl(np_);
  for (int64_t i = 0; i < np_; i++) {
    double s = p[i];
    p[i] = s + OT_FD_EPS;
    double lp = f(ctx, p);
    p[i] = s - OT_FD_EPS;
    double lm = f(ctx, p);
    p[i] = s;
    fd[i] = (lp - lm) / (2 * OT_FD_EPS);
  }
  return fd;
}

typedef struct {
  int64_t rows, h;
  double eps;
  const double *R;
} ot_ln_ctx;
static double ot_ln_fd(const void *c, const double *p) {
  const ot_ln_ctx *k = c;
  return ot_ln_loss(k->rows, k->h, k->eps, k->R, p);
}

/* layernorm_bwd: ne = {rows, h}; the saved statistics are computed on the
 * host (so the cuda column isolates the backward); "din" (T), "dw", "db"
 * (fp32) accumulate into random initial values. */
static void ot_run_layernorm_bwd(ot_run *r) {
  int64_t rows = r->c->ne[0], h = r->c->ne[1], nx = rows * h;
  const float eps = 1e-5f;
  ot_t *x = ot_rnd(r, nx, r->T, -2, 2), *w = ot_rnd(r, h, r->T, 0.5, 1.5);
  ot_t *R = ot_rnd(r, nx, r->T, -1, 1), *mu = ot_rnd(r, rows, MT_F32, 0, 1);
  ot_t *rs = ot_rnd(r, rows, MT_F32, 0, 1), *dx = ot_rnd(r, nx, r->T, -1, 1);
  ot_t *dw = ot_rnd(r, h, MT_F32, -1, 1), *db = ot_rnd(r, h, MT_F32, -1, 1);
  double *p = ot_dbl(nx + 2 * h), *dmu = ot_dbl(rows), *drs = ot_dbl(rows), *Rd = ot_dbl(nx);
  for (int64_t i = 0; i < nx; i++) p[i] = x->h[i], Rd[i] = R->h[i];
  for (int64_t j = 0; j < h; j++) p[nx + j] = w->h[j], p[nx + h + j] = 0.0;
  ot_ln_stats(p, rows, h, eps, dmu, drs);
  for (int64_t i = 0; i < rows; i++) mu->h[i] = (float)dmu[i], rs->h[i] = (float)drs[i];
  ot_put(r, mu), ot_put(r, rs);
  r->be->ops->layernorm_bwd(r->be, dx->d, dw->d, db->d, R->d, x->d, w->d, mu->d, rs->d, rows, h);
  double *fd = NULL;
  if (r->want_ref) {
    ot_ln_ctx c = {rows, h, eps, Rd};
    fd = ot_fd(ot_ln_fd, &c, p, nx + 2 * h);
  }
  double *wx = ot_dbl(nx), *ww = ot_dbl(h), *wb = ot_dbl(h);
  for (int64_t i = 0; fd && i < nx; i++) wx[i] = dx->h[i] + fd[i];
  for (int64_t j = 0; fd && j < h; j++) ww[j] = dw->h[j] + fd[nx + j], wb[j] = db->h[j] + fd[nx + h + j];
  ot_output(r, "din", dx, wx, dx->h);
  ot_output(r, "dw", dw, ww, dw->h);
  ot_output(r, "db", db, wb, db->h);
  free(p), free(dmu), free(drs), free(Rd), free(fd);
}

static double ot_gelu(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* gelu_fwd: ne = {n}; x in [-8, 8] plus 0, -30, 30, 1e-6; output "y". */
static void ot_run_gelu_fwd(ot_run *r) {
  int64_t n = r->c->ne[0];
  ot_t *x = ot_rnd(r, n, r->T, -8, 8), *y = ot_rnd(r, n, r->T, -1, 1);
  const float sp[4] = {0.0f, -30.0f, 30.0f, 1e-6f};
  for (int i = 0; i < 4 && i < n; i++) ot_set(r, x, i, sp[i]);
  ot_put(r, x);
  r->be->ops->gelu_fwd(r->be, y->d, x->d, n);
  double *want = ot_dbl(n);
  for (int64_t i = 0; i < n; i++) want[i] = ot_gelu(x->h[i]);
  ot_output(r, "y", y, want, NULL);
}

/* gelu_bwd: ne = {n}; output "din" = dout * gelu'(x) (reference: central
 * difference of the double GELU). ip[0] = 1: din aliasing dout must give
 * bitwise the same result. */
static void ot_run_gelu_bwd(ot_run *r) {
  int64_t n = r->c->ne[0];
  ot_t *x = ot_rnd(r, n, r->T, -6, 6), *g = ot_rnd(r, n, r->T, -1, 1), *d = ot_rnd(r, n, r->T, -1, 1);
  r->be->ops->gelu_bwd(r->be, d->d, x->d, g->d, n);
  double *want = ot_dbl(n);
  for (int64_t i = 0; i < n; i++)
    want[i] = g->h[i] * (ot_gelu(x->h[i] + 1e-6) - ot_gelu(x->h[i] - 1e-6)) / 2e-6;
  ot_output(r, "din", d, want, NULL);
  if (r->c->ip[0]) {
    r->be->ops->gelu_bwd(r->be, g->d, x->d, g->d, n);
    float *a = ot_get(r, g), *b = ot_get(r, d);
    for (int64_t i = 0; i < n; i++)
      if (memcmp(&a[i], &b[i], 4)) {
        ot_failf(r, "din aliasing dout differs at index %lld: %.9g vs %.9g", (long long)i,
                 (double)a[i], (double)b[i]);
        break;
      }
    free(a), free(b);
  }
}

/* embedding_fwd: ne = {n, h, v_start, v_end}; tokens t*7 % 37 (some outside
 * the slice); output "out" (overwrite, 0 for tokens outside). */
static void ot_run_embedding_fwd(ot_run *r) {
  int64_t n = r->c->ne[0], h = r->c->ne[1], v0 = r->c->ne[2], v1 = r->c->ne[3];
  int32_t *tok = malloc((size_t)n * 4);
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)(t * 7 % 37);
  int32_t *td = ot_ints(r, tok, n);
  ot_t *w = ot_rnd(r, (v1 - v0) * h, r->T, -1, 1), *out = ot_rnd(r, n * h, r->T, -1, 1);
  r->be->ops->embedding_fwd(r->be, out->d, td, n, w->d, v0, v1, h);
  double *want = ot_dbl(n * h);
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < h; j++)
      want[t * h + j] = (tok[t] >= v0 && tok[t] < v1) ? w->h[(tok[t] - v0) * h + j] : 0.0;
  ot_output(r, "out", out, want, NULL);
  free(tok);
}

/* embedding_bwd: ne = {n, h, v_start, v_end}; random tokens in [0, 32)
 * (repeats, some outside); "dw" (fp32) accumulates the scattered rows. */
static void ot_run_embedding_bwd(ot_run *r) {
  int64_t n = r->c->ne[0], h = r->c->ne[1], v0 = r->c->ne[2], v1 = r->c->ne[3], nv = v1 - v0;
  int32_t *tok = malloc((size_t)n * 4);
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)ot_rand(r, 0, 32);
  int32_t *td = ot_ints(r, tok, n);
  ot_t *R = ot_rnd(r, n * h, r->T, -1, 1), *dw = ot_rnd(r, nv * h, MT_F32, -1, 1);
  r->be->ops->embedding_bwd(r->be, dw->d, td, n, R->d, v0, v1, h);
  double *want = ot_dbl(nv * h);
  for (int64_t i = 0; i < nv * h; i++) want[i] = dw->h[i];
  for (int64_t t = 0; t < n; t++)
    if (tok[t] >= v0 && tok[t] < v1)
      for (int64_t j = 0; j < h; j++) want[(tok[t] - v0) * h + j] += R->h[t * h + j];
  ot_output(r, "dw", dw, want, dw->h);
  free(tok);
}

/* pos_embedding_fwd: ne = {s, b, h, s_offset}; wpe has s + s_offset + 2
 * rows; output "x" += wpe[s_offset + si] (float add, bitwise). */
static void ot_run_pos_embedding_fwd(ot_run *r) {
  int64_t s = r->c->ne[0], b = r->c->ne[1], h = r->c->ne[2], so = r->c->ne[3];
  ot_t *x = ot_rnd(r, s * b * h, r->T, -1, 1), *wpe = ot_rnd(r, (s + so + 2) * h, r->T, -1, 1);
  double *want = ot_dbl(s * b * h);
  for (int64_t si = 0; si < s; si++)
    for (int64_t bi = 0; bi < b; bi++)
      for (int64_t j = 0; j < h; j++) {
        int64_t i = (si * b + bi) * h + j;
        want[i] = (float)(x->h[i] + wpe->h[(so + si) * h + j]);
      }
  r->be->ops->pos_embedding_fwd(r->be, x->d, wpe->d, s, b, h, so);
  ot_output(r, "x", x, want, NULL);
}

/* pos_embedding_bwd: ne = {s, b, h, s_offset}; "dwpe" (fp32, s + s_offset
 * + 2 rows) accumulates sum_bi dout; rows outside the shard stay bitwise. */
static void ot_run_pos_embedding_bwd(ot_run *r) {
  int64_t s = r->c->ne[0], b = r->c->ne[1], h = r->c->ne[2], so = r->c->ne[3], sf = s + so + 2;
  ot_t *R = ot_rnd(r, s * b * h, r->T, -1, 1), *dw = ot_rnd(r, sf * h, MT_F32, -1, 1);
  r->be->ops->pos_embedding_bwd(r->be, dw->d, R->d, s, b, h, so);
  double *want = ot_dbl(sf * h);
  for (int64_t i = 0; i < sf * h; i++) want[i] = dw->h[i];
  for (int64_t si = 0; si < s; si++)
    for (int64_t bi = 0; bi < b; bi++)
      for (int64_t j = 0; j < h; j++) want[(so + si) * h + j] += R->h[(si * b + bi) * h + j];
  ot_output(r, "dwpe", dw, want, dw->h);
  const double *got = r->outs[r->no - 1].got;
  for (int64_t i = 0; i < sf * h; i++)
    if ((i / h < so || i / h >= so + s) && got[i] != (double)dw->h[i]) {
      ot_failf(r, "row %lld outside the shard changed: got %.9g want %.9g", (long long)(i / h),
               got[i], (double)dw->h[i]);
      break;
    }
}

/* Cross-entropy pieces: ne = {n, vl, valid, v_start}; logits U(-5, 5) with
 * padding columns 1e3 (must be ignored); targets v_start - 3 + 5i (some on
 * other ranks, some in the padding). Outputs "max", "sumexp", "tgt_logit",
 * "loss" and "dlogits" (xent_bwd with scale fp[0], in place; reference:
 * finite differences; padding columns must be exactly 0). ip[0] = 1: a
 * loss mask (Megatron's eod_mask_loss) of 0 on rows i % 3 == 1, 1 elsewhere,
 * given to xent_loss and xent_bwd: those rows' loss and gradient must be
 * exactly 0. */
typedef struct {
  int64_t vl, valid, t;
  double scale;
} ot_xe_ctx;
static double ot_xe_loss(const void *c, const double *row) {
  const ot_xe_ctx *k = c;
  double m = -INFINITY, se = 0;
  for (int64_t j = 0; j < k->valid; j++) m = fmax(m, row[j]);
  for (int64_t j = 0; j < k->valid; j++) se += exp(row[j] - m);
  return k->scale * (log(se) + m - ((k->t >= 0 && k->t < k->valid) ? row[k->t] : 0.0));
}

static void ot_run_xent(ot_run *r) {
  int64_t n = r->c->ne[0], vl = r->c->ne[1], valid = r->c->ne[2], vs = r->c->ne[3];
  const mt_backend_ops *op = r->be->ops;
  ot_t *lg = ot_rnd(r, n * vl, r->T, -5, 5);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = valid; j < vl; j++) ot_set(r, lg, i * vl + j, 1e3f);
  ot_put(r, lg);
  int32_t *tg = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) tg[i] = (int32_t)(vs - 3 + i * 5);
  int32_t *td = ot_ints(r, tg, n);
  ot_t *mx = ot_rnd(r, n, MT_F32, 0, 1), *se = ot_rnd(r, n, MT_F32, 0, 1);
  ot_t *tl = ot_rnd(r, n, MT_F32, 0, 1), *loss = ot_rnd(r, n, MT_F32, 0, 1);
  op->xent_max(r->be, mx->d, lg->d, n, vl, valid);
  op->xent_stats(r->be, se->d, tl->d, lg->d, mx->d, td, n, vl, valid, vs);
  float *wm = NULL; /* loss mask (device) */
  ot_t *mk = NULL;
  if (r->c->ip[0]) {
    mk = ot_rnd(r, n, MT_F32, 0, 1);
    for (int64_t i = 0; i < n; i++) mk->h[i] = i % 3 == 1 ? 0.0f : 1.0f;
    ot_put(r, mk);
    wm = mk->d;
  }
  op->xent_loss(r->be, loss->d, mx->d, se->d, tl->d, n, wm);
  op->xent_bwd(r->be, lg->d, mx->d, se->d, td, n, vl, valid, vs, r->c->fp[0], wm);
  double *wmx = ot_dbl(n), *wse = ot_dbl(n), *wtl = ot_dbl(n), *wl = ot_dbl(n), *wd = ot_dbl(n * vl);
  double *row = ot_dbl(vl);
  for (int64_t i = 0; i < n; i++) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < valid; j++) m = fmax(m, lg->h[i * vl + j]);
    for (int64_t j = 0; j < valid; j++) s += exp(lg->h[i * vl + j] - m);
    int64_t t = tg[i] - vs;
    wmx[i] = m, wse[i] = s;
    wtl[i] = (t >= 0 && t < valid) ? lg->h[i * vl + t] : 0.0;
    const double w = mk ? mk->h[i] : 1.0;
    wl[i] = w * (log(s) + m - wtl[i]);
    if (!r->want_ref || w == 0.0) continue; /* a masked row: want 0 */
    for (int64_t j = 0; j < vl; j++) row[j] = lg->h[i * vl + j];
    ot_xe_ctx c = {vl, valid, t, r->c->fp[0] * w};
    double *fd = ot_fd(ot_xe_loss, &c, row, valid);
    memcpy(wd + i * vl, fd, (size_t)valid * sizeof(double)); /* padding stays 0 */
    free(fd);
  }
  free(row);
  ot_output(r, "max", mx, wmx, NULL);
  ot_output(r, "sumexp", se, wse, NULL);
  ot_output(r, "tgt_logit", tl, wtl, NULL);
  ot_output(r, "loss", loss, wl, NULL);
  ot_output(r, "dlogits", lg, wd, NULL);
  const double *got = r->outs[r->no - 1].got;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = valid; j < vl; j++)
      if (got[i * vl + j] != 0.0)
        ot_failf(r, "padding gradient row %lld col %lld is %.9g, want 0", (long long)i,
                 (long long)j, got[i * vl + j]);
  for (int64_t i = 0; mk && i < n; i++)
    for (int64_t j = 0; j < vl && mk->h[i] == 0.0f; j++)
      if (got[i * vl + j] != 0.0 || r->outs[r->no - 2].got[i] != 0.0)
        ot_failf(r, "masked row %lld: loss %.9g, gradient col %lld %.9g (want exactly 0)",
                 (long long)i, r->outs[r->no - 2].got[i], (long long)j, got[i * vl + j]);
  free(tg);
}

#endif
