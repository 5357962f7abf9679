/* cpu/cpu_qknorm.c — qk_layernorm (Megatron-core; Dehghani et al. 2023 §3.1):
 * per-head LayerNorm or RMSNorm of the query and key heads of the GQA qkv
 * layout [rows, ng, np/ng + 2, hn] (mt_qknorm_desc, core/backend.h); the q
 * heads share (wq, bq), the k heads (wk, bk); v heads are copied.
 *
 * Statistics in fp32 (LayerNorm with the two-pass variance of
 * cpu_layernorm_fwd). The backward's weight/bias gradients reduce fixed
 * 32-row chunk partials in chunk order, so they are bitwise independent of
 * the thread count.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/util.h"
#include "cpu_internal.h"

#define QKN_CHUNK 32

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

void cpu_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din_, float *dwq, float *dbq,
                    float *dwk, float *dbk, const void *dout_, const void *in_, const void *wq_,
                    const void *wk_, const float *mean, const float *rstd) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  const int npg = d->np / ng, hn = d->hn, rms = d->rms;
  const int64_t rows = d->rows, row_len = (int64_t)ng * (npg + 2) * hn;
  const float *dout = (const float *)dout_, *in = (const float *)in_;
  const float *wq = (const float *)wq_, *wk = (const float *)wk_;
  float *din = (float *)din_;
  const int64_t nchunk = (rows + QKN_CHUNK - 1) / QKN_CHUNK;
  /* part[c] = {dwq, dbq, dwk, dbk} partials [4, hn] of rows [c*32, c*32+32) */
  float *part = cpu_workspace(be, (size_t)(nchunk * 4 * hn) * sizeof(float));
  int par = rows * row_len >= cpu_par_min(be);
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
      float *p = part + c * 4 * hn;
      for (int j = 0; j < 4 * hn; j++) p[j] = 0.0f;
      int64_t r1 = (c + 1) * QKN_CHUNK < rows ? (c + 1) * QKN_CHUNK : rows;
      for (int64_t r = c * QKN_CHUNK; r < r1; r++)
        for (int g = 0; g < ng; g++) {
          int64_t u = r * ng + g, base = u * (npg + 2) * hn;
          for (int slot = 0; slot <= npg; slot++) {
            int isk = slot == npg;
            int64_t st = u * (npg + 1) + slot, o = base + (int64_t)slot * hn;
            float *pw = p + (isk ? 2 : 0) * hn;
            qkn_head_bwd(din + o, pw, pw + hn, dout + o, in + o, isk ? wk : wq,
                         rms ? 0.0f : mean[st], rstd[st], hn, rms);
          }
          int64_t ov = base + (int64_t)(npg + 1) * hn;
          memcpy(din + ov, dout + ov, (size_t)hn * sizeof(float));
        }
    }
    /* implicit barrier; reduce partials in chunk order */
#pragma omp for schedule(static)
    for (int j = 0; j < hn; j++) {
      float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t c = 0; c < nchunk; c++)
        for (int t = 0; t < 4; t++) a[t] += part[c * 4 * hn + t * hn + j];
      dwq[j] += a[0];
      dwk[j] += a[2];
      if (!rms) {
        dbq[j] += a[1];
        dbk[j] += a[3];
      }
    }
  }
}
