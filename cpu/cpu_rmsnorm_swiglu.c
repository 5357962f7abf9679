/* cpu/cpu_rmsnorm_swiglu.c — RMSNorm forward/backward and SwiGLU
 * forward/backward (the Llama-style block's norm and gated MLP unit).
 *
 * RMSNorm (Zhang & Sennrich 2019): out = in * rstd * w with
 * rstd = 1 / sqrt(mean_h(in^2) + eps), statistics in fp32. The backward's dw
 * reduces fixed 32-row chunk partials in chunk order (as layernorm_bwd), so
 * it is bitwise independent of the thread count.
 *
 * SwiGLU (Shazeer 2020): in [rows, 2f] holds per row the gate half then the
 * up half; out [rows, f] = silu(gate) * up. The per-element math is mt_silu /
 * mt_swiglu_grad (core/scalar_math.h, shared with cuda/).
 */
#include <math.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_internal.h"

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

#define RMS_CHUNK 32
void cpu_rmsnorm_bwd(mt_backend *be, void *din_, float *dw, const void *dout_, const void *in_,
                     const void *w_, const float *rstd, int64_t rows, int64_t h) {
  float *din = (float *)din_;
  const float *dout = (const float *)dout_, *in = (const float *)in_, *w = (const float *)w_;
  int64_t nchunk = (rows + RMS_CHUNK - 1) / RMS_CHUNK;
  /* part[c] = dw partial [h] of rows [c*32, c*32+32) */
  float *part = cpu_workspace(be, (size_t)(nchunk * h) * sizeof(float));
  int par = rows * h >= cpu_par_min(be);
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunk; c++) {
      float *pdw = part + c * h;
      for (int64_t j = 0; j < h; j++) pdw[j] = 0.0f;
      int64_t r1 = (c + 1) * RMS_CHUNK < rows ? (c + 1) * RMS_CHUNK : rows;
      for (int64_t r = c * RMS_CHUNK; r < r1; r++) {
        const float *x = in + r * h, *g = dout + r * h;
        float *dx = din + r * h;
        float rs = rstd[r];
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
    /* implicit barrier; reduce partials in chunk order */
#pragma omp for schedule(static)
    for (int64_t j = 0; j < h; j++) mt_rmsnorm_dw_reduce(dw, part, nchunk, h, j);
  }
}

void cpu_swiglu_fwd(mt_backend *be, void *out_, const void *in_, int64_t rows, int64_t f) {
  float *out = (float *)out_;
  const float *in = (const float *)in_;
#pragma omp parallel for schedule(static) if (rows * f >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *gate = in + r * 2 * f, *up = gate + f;
    float *y = out + r * f;
#pragma omp simd
    for (int64_t j = 0; j < f; j++) y[j] = mt_silu(gate[j]) * up[j];
  }
}

void cpu_swiglu_bwd(mt_backend *be, void *din_, const void *dout_, const void *in_, int64_t rows,
                    int64_t f) {
  float *din = (float *)din_;
  const float *dout = (const float *)dout_, *in = (const float *)in_;
#pragma omp parallel for schedule(static) if (rows * f >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *gate = in + r * 2 * f, *up = gate + f, *g = dout + r * f;
    float *dg = din + r * 2 * f, *du = dg + f;
#pragma omp simd
    for (int64_t j = 0; j < f; j++) {
      float a, c;
      mt_swiglu_grad(gate[j], up[j], g[j], &a, &c);
      dg[j] = a;
      du[j] = c;
    }
  }
}
