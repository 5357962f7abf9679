/* tests/unit/op_runners_llama.h — op-case runners (op_harness.h) for the
 * Llama-style block's ops: RMSNorm, SwiGLU, rotary embedding and qk
 * normalisation. Forward outputs are checked against naive double loops;
 * backward outputs against central finite differences of the double
 * forward (output name as the op's argument) and, under the name with "_a"
 * appended, against the analytic double backward. "T" tensors use the
 * backend's storage dtype r->T; fp32 tensors stay fp32. */
#ifndef MT_TESTS_OP_RUNNERS_LLAMA_H
#define MT_TESTS_OP_RUNNERS_LLAMA_H

#include "op_runners_misc.h"

/* 1/sqrt(mean(x^2) + eps) of each row of x [rows, h], in double. */
static void ot_rms_stats(const double *x, int64_t rows, int64_t h, double eps, double *rs) {
  for (int64_t i = 0; i < rows; i++) {
    double v = 0;
    for (int64_t j = 0; j < h; j++) v += x[i * h + j] * x[i * h + j];
    rs[i] = 1.0 / sqrt(v / h + eps);
  }
}

/* rmsnorm_fwd: ne = {rows, h}; outputs "y" (T), "rstd" (fp32). */
static void ot_run_rmsnorm_fwd(ot_run *r) {
  int64_t rows = r->c->ne[0], h = r->c->ne[1];
  const float eps = 1e-5f;
  ot_t *x = ot_rnd(r, rows * h, r->T, -2, 3), *w = ot_rnd(r, h, r->T, 0.5, 1.5);
  ot_t *y = ot_rnd(r, rows * h, r->T, -1, 1), *rs = ot_rnd(r, rows, MT_F32, -1, 1);
  r->be->ops->rmsnorm_fwd(r->be, y->d, rs->d, x->d, w->d, rows, h, eps);
  double *xd = ot_dbl(rows * h), *wy = ot_dbl(rows * h), *wrs = ot_dbl(rows);
  for (int64_t i = 0; i < rows * h; i++) xd[i] = x->h[i];
  ot_rms_stats(xd, rows, h, eps, wrs);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < h; j++) wy[i * h + j] = xd[i * h + j] * wrs[i] * w->h[j];
  free(xd);
  ot_output(r, "y", y, wy, NULL);
  ot_output(r, "rstd", rs, wrs, NULL);
}

typedef struct {
  int64_t rows, h;
  double eps;
  const double *R;
} ot_rms_ctx;
/* L = sum(rmsnorm(x; w) * R) in double; p = [x (rows*h), w (h)]. */
static double ot_rms_fd(const void *c, const double *p) {
  const ot_rms_ctx *k = c;
  const double *x = p, *w = p + k->rows * k->h;
  double *rs = ot_dbl(k->rows), L = 0;
  ot_rms_stats(x, k->rows, k->h, k->eps, rs);
  for (int64_t i = 0; i < k->rows; i++)
    for (int64_t j = 0; j < k->h; j++) L += x[i * k->h + j] * rs[i] * w[j] * k->R[i * k->h + j];
  free(rs);
  return L;
}

/* rmsnorm_bwd: ne = {rows, h}; the saved rstd is computed on the host;
 * "din" (T) and "dw" (fp32) accumulate into random initial values. */
static void ot_run_rmsnorm_bwd(ot_run *r) {
  int64_t rows = r->c->ne[0], h = r->c->ne[1], nx = rows * h;
  const float eps = 1e-5f;
  ot_t *x = ot_rnd(r, nx, r->T, -2, 2), *w = ot_rnd(r, h, r->T, 0.5, 1.5);
  ot_t *R = ot_rnd(r, nx, r->T, -1, 1), *rs = ot_rnd(r, rows, MT_F32, 0, 1);
  ot_t *dx = ot_rnd(r, nx, r->T, -1, 1), *dw = ot_rnd(r, h, MT_F32, -1, 1);
  double *p = ot_dbl(nx + h), *drs = ot_dbl(rows), *Rd = ot_dbl(nx);
  for (int64_t i = 0; i < nx; i++) p[i] = x->h[i], Rd[i] = R->h[i];
  for (int64_t j = 0; j < h; j++) p[nx + j] = w->h[j];
  ot_rms_stats(p, rows, h, eps, drs);
  for (int64_t i = 0; i < rows; i++) rs->h[i] = (float)drs[i];
  ot_put(r, rs);
  r->be->ops->rmsnorm_bwd(r->be, dx->d, dw->d, R->d, x->d, w->d, rs->d, rows, h);
  double *fd = NULL;
  if (r->want_ref) {
    ot_rms_ctx c = {rows, h, eps, Rd};
    fd = ot_fd(ot_rms_fd, &c, p, nx + h);
  }
  double *wx = ot_dbl(nx), *ww = ot_dbl(h), *ax = ot_dbl(nx), *aw = ot_dbl(h);
  for (int64_t i = 0; fd && i < nx; i++) wx[i] = dx->h[i] + fd[i];
  for (int64_t j = 0; fd && j < h; j++) ww[j] = dw->h[j] + fd[nx + j];
  /* analytic: dx = rs (g w - xhat mean(g w xhat)), dw = sum g xhat */
  for (int64_t j = 0; j < h; j++) aw[j] = dw->h[j];
  for (int64_t i = 0; i < rows; i++) {
    double m = 0;
    for (int64_t j = 0; j < h; j++) m += Rd[i * h + j] * p[nx + j] * p[i * h + j] * drs[i];
    m /= h;
    for (int64_t j = 0; j < h; j++) {
      double xh = p[i * h + j] * drs[i];
      ax[i * h + j] = dx->h[i * h + j] + drs[i] * (Rd[i * h + j] * p[nx + j] - xh * m);
      aw[j] += Rd[i * h + j] * xh;
    }
  }
  ot_output(r, "din", dx, wx, dx->h);
  ot_output(r, "dw", dw, ww, dw->h);
  ot_output(r, "din_a", dx, ax, dx->h);
  ot_output(r, "dw_a", dw, aw, dw->h);
  free(p), free(drs), free(Rd), free(fd);
}

static double ot_silu(double x) { return x / (1.0 + exp(-x)); }

/* Inputs of the SwiGLU rows: [rows, 2f] U(-6, 6), with the specials 0, -30,
 * 30, -100 among the first gate entries. */
static ot_t *ot_swiglu_in(ot_run *r, int64_t rows, int64_t f) {
  ot_t *x = ot_rnd(r, rows * 2 * f, r->T, -6, 6);
  const float sp[4] = {0.0f, -30.0f, 30.0f, -100.0f};
  for (int i = 0; i < 4 && i < f; i++) ot_set(r, x, i, sp[i]);
  ot_put(r, x);
  return x;
}

/* swiglu_fwd: ne = {rows, f}; output "y" [rows, f] = silu(gate) * up. */
static void ot_run_swiglu_fwd(ot_run *r) {
  int64_t rows = r->c->ne[0], f = r->c->ne[1];
  ot_t *x = ot_swiglu_in(r, rows, f), *y = ot_rnd(r, rows * f, r->T, -1, 1);
  r->be->ops->swiglu_fwd(r->be, y->d, x->d, rows, f);
  double *want = ot_dbl(rows * f);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < f; j++)
      want[i * f + j] = ot_silu(x->h[i * 2 * f + j]) * x->h[i * 2 * f + f + j];
  ot_output(r, "y", y, want, NULL);
}

/* swiglu_bwd: ne = {rows, f}; output "din" [rows, 2f] (overwrite: starts
 * as NaN); reference: central differences of the double forward per
 * element ("din") and the analytic derivative ("din_a"). */
static void ot_run_swiglu_bwd(ot_run *r) {
  int64_t rows = r->c->ne[0], f = r->c->ne[1], n2 = rows * 2 * f;
  ot_t *x = ot_swiglu_in(r, rows, f), *g = ot_rnd(r, rows * f, r->T, -1, 1);
  ot_t *d = ot_rnd(r, n2, r->T, -1, 1);
  for (int64_t i = 0; i < n2; i++) d->h[i] = NAN;
  ot_put(r, d);
  r->be->ops->swiglu_bwd(r->be, d->d, g->d, x->d, rows, f);
  double *fd = ot_dbl(n2), *an = ot_dbl(n2);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < f; j++) {
      double a = x->h[i * 2 * f + j], u = x->h[i * 2 * f + f + j], go = g->h[i * f + j];
      double sg = 1.0 / (1.0 + exp(-a));
      fd[i * 2 * f + j] = go * u * (ot_silu(a + 1e-6) - ot_silu(a - 1e-6)) / 2e-6;
      fd[i * 2 * f + f + j] = go * ot_silu(a);
      an[i * 2 * f + j] = go * u * (sg + a * sg * (1.0 - sg));
      an[i * 2 * f + f + j] = go * a * sg;
    }
  ot_output(r, "din", d, fd, NULL);
  ot_output(r, "din_a", d, an, NULL);
}

/* rope: ne = {s, b, np, hn}; ip = {ng (0 = np), rot_dim, interleaved,
 * s_offset, scaling (MT_ROPE_*), original_max}; fp = {base, factor,
 * beta_fast, beta_slow, attn_factor}. */
static mt_rope_desc ot_rope_desc(const op_case *c) {
  mt_rope_desc d = {.s = (int)c->ne[0], .b = (int)c->ne[1], .np = (int)c->ne[2],
                    .ng = c->ip[0] > 0 ? c->ip[0] : (int)c->ne[2], .hn = (int)c->ne[3],
                    .rot_dim = c->ip[1], .interleaved = c->ip[2], .base = c->fp[0],
                    .s_offset = c->ip[3], .scaling = c->ip[4], .factor = c->fp[1],
                    .original_max = c->ip[5], .beta_fast = c->fp[2], .beta_slow = c->fp[3],
                    .attn_factor = c->fp[4]};
  return d;
}

/* Inverse frequency of pair i, written from the published formulas (not
 * from core/rope_freq.h): plain RoFormer; Llama 3.1 (Meta's apply_scaling:
 * low/high frequency factors 1 and 4, old context 8192); YaRN as
 * DeepSeek-V3's precompute_freqs_cis (find_correction_range with floor/ceil
 * and clamping, linear_ramp_factor, freqs / factor · (1 − smooth) + freqs ·
 * smooth with smooth = 1 − ramp) — applied at every length, as Megatron. */
static double ot_ref_inv_freq(const mt_rope_desc *d, int i) {
  const double dim = d->rot_dim, base = d->base, f = pow(base, -2.0 * i / dim);
  if (d->scaling == 1) { /* Llama 3.1 */
    const double wl = 2.0 * M_PI / f;
    if (wl < 8192.0 / 4.0) return f;
    if (wl > 8192.0) return f / d->factor;
    const double sm = (8192.0 / wl - 1.0) / 3.0;
    return (1.0 - sm) * f / d->factor + sm * f;
  }
  if (d->scaling == 2) { /* YaRN */
    double lo = floor(dim * log(d->original_max / (d->beta_fast * 2.0 * M_PI)) / (2.0 * log(base)));
    double hi = ceil(dim * log(d->original_max / (d->beta_slow * 2.0 * M_PI)) / (2.0 * log(base)));
    lo = lo > 0.0 ? lo : 0.0;
    hi = hi < dim - 1.0 ? hi : dim - 1.0;
    if (lo == hi) hi += 0.001;
    double ramp = (i - lo) / (hi - lo);
    ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
    const double smooth = 1.0 - ramp;
    return f / d->factor * (1.0 - smooth) + f * smooth;
  }
  return f;
}

static int64_t ot_rope_n(const mt_rope_desc *d) {
  return (int64_t)d->s * d->b * d->ng * (d->np / d->ng + 2) * d->hn;
}

/* y = x with every q/k head rotated by sign * theta (double angles); v heads
 * and channels >= rot_dim copied. */
static void ot_ref_rope(const mt_rope_desc *d, const double *x, double *y, double sign) {
  int npg = d->np / d->ng, hn = d->hn, half = d->rot_dim / 2;
  int64_t n = ot_rope_n(d);
  memcpy(y, x, (size_t)n * sizeof(double));
  for (int si = 0; si < d->s; si++)
    for (int bi = 0; bi < d->b; bi++)
      for (int g = 0; g < d->ng; g++)
        for (int slot = 0; slot <= npg; slot++) {
          int64_t o = ((((int64_t)si * d->b + bi) * d->ng + g) * (npg + 2) + slot) * hn;
          for (int i = 0; i < half; i++) {
            double th = (d->s_offset + si) * ot_ref_inv_freq(d, i);
            int a = d->interleaved ? 2 * i : i, b = d->interleaved ? 2 * i + 1 : i + half;
            const double m = d->attn_factor != 0.0f ? d->attn_factor : 1.0;
            double c = m * cos(th), sn = sign * m * sin(th);
            y[o + a] = x[o + a] * c - x[o + b] * sn;
            y[o + b] = x[o + b] * c + x[o + a] * sn;
          }
        }
}

/* rope_fwd: output "qkv" (in place) against the double rotation. */
static void ot_run_rope_fwd(ot_run *r) {
  mt_rope_desc d = ot_rope_desc(r->c);
  int64_t n = ot_rope_n(&d);
  ot_t *x = ot_rnd(r, n, r->T, -2, 2);
  double *xd = ot_dbl(n), *want = ot_dbl(n);
  for (int64_t i = 0; i < n; i++) xd[i] = x->h[i];
  ot_ref_rope(&d, xd, want, 1.0);
  r->be->ops->rope_fwd(r->be, &d, x->d);
  ot_output(r, "qkv", x, want, NULL);
  free(xd);
}

typedef struct {
  const mt_rope_desc *d;
  const double *R;
  double *y;
} ot_rope_ctx;
static double ot_rope_fd(const void *c, const double *x) {
  const ot_rope_ctx *k = c;
  ot_ref_rope(k->d, x, k->y, 1.0);
  double L = 0;
  for (int64_t i = 0; i < ot_rope_n(k->d); i++) L += k->y[i] * k->R[i];
  return L;
}

/* rope_bwd: output "dqkv" (in place on dout) against finite differences of
 * sum(rope(x) * dout) and ("dqkv_a") the inverse rotation in double; also
 * rope_bwd(rope_fwd(x)) must give back x within 1e-6. */
static void ot_run_rope_bwd(ot_run *r) {
  mt_rope_desc d = ot_rope_desc(r->c);
  int64_t n = ot_rope_n(&d);
  ot_t *g = ot_rnd(r, n, r->T, -1, 1), *x = ot_rnd(r, n, r->T, -2, 2);
  double *gd = ot_dbl(n), *an = ot_dbl(n), *xd = ot_dbl(n), *y = ot_dbl(n), *fd = NULL;
  for (int64_t i = 0; i < n; i++) gd[i] = g->h[i], xd[i] = x->h[i];
  ot_ref_rope(&d, gd, an, -1.0);
  if (r->want_ref) {
    ot_rope_ctx c = {&d, gd, y};
    fd = ot_fd(ot_rope_fd, &c, xd, n);
  }
  r->be->ops->rope_bwd(r->be, &d, g->d);
  ot_output(r, "dqkv", g, fd, NULL);
  ot_output(r, "dqkv_a", g, an, NULL);
  r->be->ops->rope_fwd(r->be, &d, x->d);
  r->be->ops->rope_bwd(r->be, &d, x->d);
  float *back = ot_get(r, x);
  double tol = r->T == MT_F32 ? 1e-5 : 0.05;
  /* the transpose of m·R(θ) is m·R(−θ): the round trip scales by m² (YaRN's
   * cos/sin factor m; 1 otherwise), a rotation's component otherwise */
  const double m2 = d.attn_factor != 0.0f ? (double)d.attn_factor * d.attn_factor : 1.0;
  const int rot_q = d.np / d.ng + 1, per = (d.np / d.ng + 2) * d.hn;
  for (int64_t i = 0; i < n; i++) {
    const int64_t e = i % per;
    const int rotated = e / d.hn < rot_q && e % d.hn < d.rot_dim;
    const double want = rotated ? m2 * x->h[i] : x->h[i];
    if (!(fabs(back[i] - want) <= tol * (rotated ? m2 : 1.0))) {
      ot_failf(r, "rope_bwd(rope_fwd(x)) differs from x at %lld: %.9g vs %.9g", (long long)i,
               (double)back[i], want);
      break;
    }
  }
  free(back), free(gd), free(xd), free(y);
}

#include "op_runners_qknorm.h"

#endif
