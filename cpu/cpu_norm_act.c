/* cpu/cpu_norm_act.c — LayerNorm forward/backward and tanh-GELU.
 *
 * LayerNorm (Ba et al. 2016) statistics are computed in fp32 with a two-pass
 * variance. The backward's dw/db reduce fixed 32-row chunk partials in chunk
 * order, so they are bitwise independent of the thread count.
 *
 * GELU (Hendrycks & Gimpel 2016), tanh form: the per-element math is
 * mt_gelu_tanh / mt_gelu_tanh_grad (core/scalar_math.h, shared with cuda/),
 * vectorised over the loop with mt_fast_expf.
 */
#include <math.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_internal.h"

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

#define LN_CHUNK 32
void cpu_layernorm_bwd(mt_backend *be, void *din_, float *dw, float *db, const void *dout_,
                       const void *in_, const void *w_, const float *mean, const float *rstd,
                       int64_t rows, int64_t h) {
  float *din = (float *)din_;
  const float *dout = (const float *)dout_, *in = (const float *)in_, *w = (const float *)w_;
  int64_t nchunk = (rows + LN_CHUNK - 1) / LN_CHUNK;
  /* part[c] = {dw partial [h], db partial [h]} of rows [c*32, c*32+32) */
  float *part = cpu_workspace(be, (size_t)(nchunk * 2 * h) * sizeof(float));
  int par = rows * h >= cpu_par_min(be);
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
      float *pdw = part + c * 2 * h, *pdb = pdw + h;
      for (int64_t j = 0; j < h; j++) pdw[j] = pdb[j] = 0.0f;
      int64_t r1 = (c + 1) * LN_CHUNK < rows ? (c + 1) * LN_CHUNK : rows;
      for (int64_t r = c * LN_CHUNK; r < r1; r++) {
        const float *x = in + r * h, *g = dout + r * h;
        float *dx = din + r * h;
        float mu = mean[r], rs = rstd[r];
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
    /* implicit barrier; reduce partials in chunk order */
#pragma omp for schedule(static)
    for (int64_t j = 0; j < h; j++) mt_layernorm_dwdb_reduce(dw, db, part, nchunk, h, j);
  }
}

void cpu_gelu_fwd(mt_backend *be, void *out_, const void *in_, int64_t n) {
  (void)be;
  float *out = (float *)out_;
  const float *in = (const float *)in_;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) out[i] = mt_gelu_tanh(in[i]);
}

void cpu_gelu_bwd(mt_backend *be, void *din_, const void *in_, const void *dout_, int64_t n) {
  (void)be;
  float *din = (float *)din_;
  const float *in = (const float *)in_, *dout = (const float *)dout_;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) din[i] = mt_gelu_tanh_grad(in[i], dout[i]);
}
