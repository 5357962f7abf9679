/* cpu/cpu_norm.c — the normalisations of the CPU backend, forward and
 * backward: LayerNorm (Ba et al. 2016), RMSNorm (Zhang & Sennrich 2019) and
 * qk_layernorm (Megatron-core; Dehghani et al. 2023 §3.1: per-head LayerNorm
 * or RMSNorm of the query and key heads of the GQA qkv layout
 * [rows, ng, np/ng + 2, hn], mt_qknorm_desc), in fp32 and bf16 storage
 * (cuda/cuda_norm.cu is the GPU counterpart).
 *
 * Statistics in fp32: LayerNorm's variance in two passes; RMSNorm's
 * rstd = 1 / sqrt(mean_h(in^2) + eps). The backward of each writes the
 * input gradient row by row and, in the same pass, the chunk partials of its
 * weight (and bias) gradients, which the chunked column reduction
 * (cpu_col_chunks, cpu_col_reduce.c) sums in chunk order: bitwise
 * independent of the thread count. qk-norm: the q heads share (wq, bq), the
 * k heads (wk, bk); v heads are copied. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/util.h"
#include "cpu_bf16.h"

/* ---- LayerNorm ---- */

void cpu_layernorm_fwd(mt_backend *be, void *out_, float *mean, float *rstd, const void *in_,
                       const void *w_, const void *b_, int64_t rows, int64_t h, float eps) {
  (void)be;
  float *out = (float *)out_;
  const float *in = (const float *)in_, *w = (const float *)w_, *b = (const float *)b_;
#pragma omp parallel for schedule(static) if (rows * h >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *x = in + r * h;
    float *y = out + r * h;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < h; j++) s += x[j];
    float mu = s / (float)h;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < h; j++) {
      float t = x[j] - mu;
      v += t * t;
    }
    float rs = 1.0f / sqrtf(v / (float)h + eps);
#pragma omp simd
    for (int64_t j = 0; j < h; j++) y[j] = (x[j] - mu) * rs * w[j] + b[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

/* Operands of a norm backward, for its chunk callback. */
typedef struct {
  float *din;
  const float *dout, *in, *w, *mean, *rstd;
  int64_t h;
} norm_bwd_rows;

/* LayerNorm rows [r0, r1): din += the input gradient; part = {dw partial
 * [h], db partial [h]} of these rows. */
static void ln_bwd_chunk(const void *ctx, int64_t r0, int64_t r1, float *part) {
  const norm_bwd_rows *a = ctx;
  const int64_t h = a->h;
  const float *dout = a->dout, *in = a->in, *w = a->w;
  float *din = a->din, *pdw = part, *pdb = part + h;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = in + r * h, *g = dout + r * h;
    float *dx = din + r * h;
    float mu = a->mean[r], rs = a->rstd[r];
    float sg = 0.0f, sgx = 0.0f; /* sum(g*w), sum(g*w*xhat) */
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < h; j++) {
      float xh = (x[j] - mu) * rs;
      float gw = g[j] * w[j];
      sg += gw;
      sgx += gw * xh;
      pdw[j] += g[j] * xh;
      pdb[j] += g[j];
    }
    float mg = sg / (float)h, mgx = sgx / (float)h;
#pragma omp simd
    for (int64_t j = 0; j < h; j++) {
      float xh = (x[j] - mu) * rs;
      dx[j] += rs * (g[j] * w[j] - mg - xh * mgx);
    }
  }
}

void cpu_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                       const void *in, const void *w, const float *mean, const float *rstd,
                       int64_t rows, int64_t h) {
  const norm_bwd_rows a = {(float *)din, dout, in, w, mean, rstd, h};
  float *const out[2] = {dw, db};
  cpu_col_chunks(be, rows * h >= cpu_par_min(be), rows, h, 2, out, ln_bwd_chunk, &a);
}

/* ---- RMSNorm ---- */

void cpu_rmsnorm_fwd(mt_backend *be, void *out_, float *rstd, const void *in_, const void *w_,
                     int64_t rows, int64_t h, float eps) {
  float *out = (float *)out_;
  const float *in = (const float *)in_, *w = (const float *)w_;
#pragma omp parallel for schedule(static) if (rows * h >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *x = in + r * h;
    float *y = out + r * h;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < h; j++) ss += x[j] * x[j];
    float rs = 1.0f / sqrtf(ss / (float)h + eps);
#pragma omp simd
    for (int64_t j = 0; j < h; j++) y[j] = x[j] * rs * w[j];
    rstd[r] = rs;
  }
}

/* RMSNorm rows [r0, r1): din += the input gradient; part = dw partial [h]. */
static void rms_bwd_chunk(const void *ctx, int64_t r0, int64_t r1, float *part) {
  const norm_bwd_rows *a = ctx;
  const int64_t h = a->h;
  const float *dout = a->dout, *in = a->in, *w = a->w;
  float *din = a->din, *pdw = part;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = in + r * h, *g = dout + r * h;
    float *dx = din + r * h;
    float rs = a->rstd[r];
    float sgx = 0.0f; /* sum(g*w*xhat) */
#pragma omp simd reduction(+ : sgx)
    for (int64_t j = 0; j < h; j++) {
      float xh = x[j] * rs;
      sgx += g[j] * w[j] * xh;
      pdw[j] += g[j] * xh;
    }
    float mgx = sgx / (float)h;
#pragma omp simd
    for (int64_t j = 0; j < h; j++) {
      float xh = x[j] * rs;
      dx[j] += rs * (g[j] * w[j] - xh * mgx);
    }
  }
}

void cpu_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                     const void *w, const float *rstd, int64_t rows, int64_t h) {
  const norm_bwd_rows a = {(float *)din, dout, in, w, NULL, rstd, h};
  float *const out[1] = {dw};
  cpu_col_chunks(be, rows * h >= cpu_par_min(be), rows, h, 1, out, rms_bwd_chunk, &a);
}

/* ---- qk_layernorm ---- */

/* Normalise one head x [hn] into y; returns rstd, *mu the mean (0 with rms). */
static float qkn_head_fwd(float *y, const float *x, const float *w, const float *bias, int hn,
                          int rms, float eps, float *mu) {
  float m = 0.0f;
  if (!rms) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < hn; j++) s += x[j];
    m = s / (float)hn;
  }
  float v = 0.0f;
#pragma omp simd reduction(+ : v)
  for (int j = 0; j < hn; j++) {
    float t = x[j] - m;
    v += t * t;
  }
  float rs = 1.0f / sqrtf(v / (float)hn + eps);
  if (rms) {
#pragma omp simd
    for (int j = 0; j < hn; j++) y[j] = x[j] * rs * w[j];
  } else {
#pragma omp simd
    for (int j = 0; j < hn; j++) y[j] = (x[j] - m) * rs * w[j] + bias[j];
  }
  *mu = m;
  return rs;
}

void cpu_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out_, float *mean,
                    float *rstd, const void *in_, const void *wq_, const void *bq_,
                    const void *wk_, const void *bk_) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  const int npg = d->np / ng, hn = d->hn, rms = d->rms;
  const float *in = (const float *)in_;
  const float *wq = (const float *)wq_, *bq = (const float *)bq_;
  const float *wk = (const float *)wk_, *bk = (const float *)bk_;
  float *out = (float *)out_;
  const int64_t units = d->rows * ng; /* (row, group) */
#pragma omp parallel for schedule(static) if (units * (npg + 2) * hn >= cpu_par_min(be))
  for (int64_t u = 0; u < units; u++) {
    const float *x = in + u * (npg + 2) * hn;
    float *y = out + u * (npg + 2) * hn;
    for (int slot = 0; slot <= npg; slot++) {
      int isk = slot == npg;
      float mu;
      float rs = qkn_head_fwd(y + slot * hn, x + slot * hn, isk ? wk : wq, isk ? bk : bq, hn,
                              rms, d->eps, &mu);
      int64_t st = u * (npg + 1) + slot;
      rstd[st] = rs;
      if (!rms) mean[st] = mu;
    }
    memcpy(y + (npg + 1) * hn, x + (npg + 1) * hn, (size_t)hn * sizeof(float));
  }
}

/* Backward of one head: dx (overwrite) from g; accumulates pdw (and pdb
 * unless rms) over this head. */
static void qkn_head_bwd(float *dx, float *pdw, float *pdb, const float *g, const float *x,
                         const float *w, float mu, float rs, int hn, int rms) {
  float sg = 0.0f, sgx = 0.0f; /* sum(g*w), sum(g*w*xhat) */
#pragma omp simd reduction(+ : sg, sgx)
  for (int j = 0; j < hn; j++) {
    float xh = (x[j] - mu) * rs;
    float gw = g[j] * w[j];
    sg += gw;
    sgx += gw * xh;
    pdw[j] += g[j] * xh;
  }
  if (rms) {
    float mgx = sgx / (float)hn;
#pragma omp simd
    for (int j = 0; j < hn; j++) dx[j] = rs * (g[j] * w[j] - x[j] * rs * mgx);
  } else {
    float mg = sg / (float)hn, mgx = sgx / (float)hn;
#pragma omp simd
    for (int j = 0; j < hn; j++) {
      pdb[j] += g[j];
      dx[j] = rs * (g[j] * w[j] - mg - (x[j] - mu) * rs * mgx);
    }
  }
}

typedef struct {
  const mt_qknorm_desc *d;
  int ng, npg;
  float *din;
  const float *dout, *in, *wq, *wk, *mean, *rstd;
} qkn_bwd_rows;

/* qk-norm rows [r0, r1): din (overwrite) of every head; part = {dwq, dbq,
 * dwk, dbk} partials [4, hn] of these rows. */
static void qkn_bwd_chunk(const void *ctx, int64_t r0, int64_t r1, float *p) {
  const qkn_bwd_rows *a = ctx;
  const int ng = a->ng, npg = a->npg, hn = a->d->hn, rms = a->d->rms;
  const float *dout = a->dout, *in = a->in, *mean = a->mean, *rstd = a->rstd;
  float *din = a->din;
  for (int64_t r = r0; r < r1; r++)
    for (int g = 0; g < ng; g++) {
      int64_t u = r * ng + g, base = u * (npg + 2) * hn;
      for (int slot = 0; slot <= npg; slot++) {
        int isk = slot == npg;
        int64_t st = u * (npg + 1) + slot, o = base + (int64_t)slot * hn;
        float *pw = p + (isk ? 2 : 0) * hn;
        qkn_head_bwd(din + o, pw, pw + hn, dout + o, in + o, isk ? a->wk : a->wq,
                     rms ? 0.0f : mean[st], rstd[st], hn, rms);
      }
      int64_t ov = base + (int64_t)(npg + 1) * hn;
      memcpy(din + ov, dout + ov, (size_t)hn * sizeof(float));
    }
}

void cpu_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                    float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                    const void *wk, const float *mean, const float *rstd) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  const int npg = d->np / ng, hn = d->hn, rms = d->rms;
  const int64_t rows = d->rows, row_len = (int64_t)ng * (npg + 2) * hn;
  const qkn_bwd_rows a = {d, ng, npg, (float *)din, dout, in, wq, wk, mean, rstd};
  float *const out[4] = {dwq, rms ? NULL : dbq, dwk, rms ? NULL : dbk};
  cpu_col_chunks(be, rows * row_len >= cpu_par_min(be), rows, hn, 4, out, qkn_bwd_chunk, &a);
}

/* ---- bf16 storage: widen, the fp32 op, round once (cpu_bf16.h) ---- */

void cpu_bf16_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                            const void *w, const void *b, int64_t rows, int64_t h, float eps) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, h, b ? h : 0}, p);
  bf_widen(be, p[0], in, rows * h);
  bf_widen(be, p[2], w, h);
  bf_widen(be, p[3], b, h);
  cpu_layernorm_fwd(be, p[1], mean, rstd, p[0], p[2], p[3], rows, h, eps);
  bf_narrow(be, out, p[1], rows * h);
}

void cpu_bf16_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                            const void *in, const void *w, const float *mean, const float *rstd,
                            int64_t rows, int64_t h) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, rows * h, h}, p);
  bf_widen(be, p[0], din, rows * h); /* accumulated into: read, add in fp32, round once */
  bf_widen(be, p[1], dout, rows * h);
  bf_widen(be, p[2], in, rows * h);
  bf_widen(be, p[3], w, h);
  cpu_layernorm_bwd(be, p[0], dw, db, p[1], p[2], p[3], mean, rstd, rows, h);
  bf_narrow(be, din, p[0], rows * h);
}

void cpu_bf16_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                          int64_t rows, int64_t h, float eps) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){rows * h, rows * h, h}, p);
  bf_widen(be, p[0], in, rows * h);
  bf_widen(be, p[2], w, h);
  cpu_rmsnorm_fwd(be, p[1], rstd, p[0], p[2], rows, h, eps);
  bf_narrow(be, out, p[1], rows * h);
}

void cpu_bf16_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                          const void *w, const float *rstd, int64_t rows, int64_t h) {
  float *p[4];
  bf_bufs(be, 4, (const int64_t[]){rows * h, rows * h, rows * h, h}, p);
  bf_widen(be, p[0], din, rows * h); /* accumulated into */
  bf_widen(be, p[1], dout, rows * h);
  bf_widen(be, p[2], in, rows * h);
  bf_widen(be, p[3], w, h);
  cpu_rmsnorm_bwd(be, p[0], dw, p[1], p[2], p[3], rstd, rows, h);
  bf_narrow(be, din, p[0], rows * h);
}

void cpu_bf16_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                         float *rstd, const void *in, const void *wq, const void *bq,
                         const void *wk, const void *bk) {
  const int64_t n = bf_qkv_elems(d->rows, d->np, d->ng, d->hn), hn = d->hn;
  const int hb = !d->rms;
  float *p[6];
  bf_bufs(be, 6, (const int64_t[]){n, n, hn, hb && bq ? hn : 0, hn, hb && bk ? hn : 0}, p);
  bf_widen(be, p[0], in, n);
  bf_widen(be, p[2], wq, hn);
  if (p[3]) bf_widen(be, p[3], bq, hn);
  bf_widen(be, p[4], wk, hn);
  if (p[5]) bf_widen(be, p[5], bk, hn);
  cpu_qknorm_fwd(be, d, p[1], mean, rstd, p[0], p[2], p[3], p[4], p[5]);
  bf_narrow(be, out, p[1], n);
}

void cpu_bf16_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq,
                         float *dbq, float *dwk, float *dbk, const void *dout, const void *in,
                         const void *wq, const void *wk, const float *mean, const float *rstd) {
  const int64_t n = bf_qkv_elems(d->rows, d->np, d->ng, d->hn), hn = d->hn;
  float *p[5];
  bf_bufs(be, 5, (const int64_t[]){n, n, n, hn, hn}, p);
  bf_widen(be, p[1], dout, n);
  bf_widen(be, p[2], in, n);
  bf_widen(be, p[3], wq, hn);
  bf_widen(be, p[4], wk, hn);
  cpu_qknorm_bwd(be, d, p[0], dwq, dbq, dwk, dbk, p[1], p[2], p[3], p[4], mean, rstd);
  bf_narrow(be, din, p[0], n);
}
