/* cpu/cpu_activation.c — the activations of the CPU backend, forward and
 * backward, in fp32 and bf16 storage (cuda/cuda_activation.cu is the GPU
 * counterpart):
 *   GELU (Hendrycks & Gimpel 2016), tanh form: mt_gelu_tanh /
 *     mt_gelu_tanh_grad (core/scalar_math.h, shared with cuda/), vectorised
 *     over the loop with mt_fast_expf;
 *   SwiGLU (Shazeer 2020): in [rows, 2f] holds per row the gate half then
 *     the up half; out [rows, f] = silu(gate) * up (mt_silu /
 *     mt_swiglu_grad, core/scalar_math.h).
 * Every element is written by one thread: results do not depend on the
 * thread count. */
#include <math.h>
#include <omp.h>

#include "core/util.h"
#include "cpu_bf16.h"

/* ---- GELU ---- */

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

/* ---- SwiGLU ---- */

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

/* ---- bf16 storage: widen, the fp32 op, round once (cpu_bf16.h) ---- */

void cpu_bf16_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n) {
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){n, n}, p);
  bf_widen(be, p[0], in, n);
  cpu_gelu_fwd(be, p[1], p[0], n);
  bf_narrow(be, out, p[1], n);
}

void cpu_bf16_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){n, n, n}, p);
  bf_widen(be, p[0], in, n);
  bf_widen(be, p[1], dout, n); /* din may alias dout: both read before the write */
  cpu_gelu_bwd(be, p[2], p[0], p[1], n);
  bf_narrow(be, din, p[2], n);
}

void cpu_bf16_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f) {
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){rows * 2 * f, rows * f}, p);
  bf_widen(be, p[0], in, rows * 2 * f);
  cpu_swiglu_fwd(be, p[1], p[0], rows, f);
  bf_narrow(be, out, p[1], rows * f);
}

void cpu_bf16_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in,
                         int64_t rows, int64_t f) {
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){rows * 2 * f, rows * f, rows * 2 * f}, p);
  bf_widen(be, p[1], dout, rows * f);
  bf_widen(be, p[2], in, rows * 2 * f);
  cpu_swiglu_bwd(be, p[0], p[1], p[2], rows, f);
  bf_narrow(be, din, p[0], rows * 2 * f);
}
