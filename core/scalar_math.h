/* core/scalar_math.h — per-element math that cpu/ and cuda/ share, one
 * definition each (MT_HD, core/hd.h): the AdamW element update, tanh-GELU
 * forward and backward, SiLU/SwiGLU, the in-order sum of chunked column
 * partials (bias and norm weight gradients), and the vectorisable exp of the
 * cpu/ kernels.
 *
 * The expressions are written once and compiled by both backends; the only
 * per-target choice is the elementary function underneath:
 *   exp:  host (cpu/) mt_fast_expf below, device (cuda/ kernels) expf;
 *   sqrt: host __builtin_sqrtf (no errno, vectorisable), device sqrtf
 *         (both correctly rounded).
 * The build compiles C with -std=c11, so no FMA contraction on the host:
 * cpu/ results are bitwise reproducible across compilers' vectorisation.
 * All arithmetic is fp32. */
#ifndef MT_CORE_SCALAR_MATH_H
#define MT_CORE_SCALAR_MATH_H

#include <math.h>
#include <stdint.h>

#include "hd.h"

/* exp(x) in float: Cody-Waite range reduction x = n ln2 + r, degree-6
 * polynomial for e^r, scaling by 2^n through the exponent bits. Max relative
 * error ~2 ulp on [-87, 88]; inputs are clamped to that range (so exp of a
 * very negative number returns ~1e-38 instead of 0). Written branch-free so
 * gcc vectorises loops calling it. */
MT_HD float mt_fast_expf(float x) {
  x = x < 88.0f ? x : 88.0f;
  x = x > -87.0f ? x : -87.0f;
  /* round to nearest integer by the 1.5*2^23 trick (|value| < 2^22) */
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;    /* ln2 high part */
  r = r + n * 2.12194440e-4f;         /* ln2 low part  */
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  union {
    int32_t i;
    float f;
  } sc;
  sc.i = ((int32_t)n + 127) << 23;
  return p * sc.f;
}

#ifdef __CUDA_ARCH__
#define MT_SCALAR_EXPF(x) expf(x)
#define MT_SCALAR_SQRTF(x) sqrtf(x)
#else
#define MT_SCALAR_EXPF(x) mt_fast_expf(x)
#define MT_SCALAR_SQRTF(x) __builtin_sqrtf(x)
#endif

/* ---- GELU, tanh approximation (Hendrycks & Gimpel 2016) ----
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
 * evaluated as x * sigmoid(2u) = x / (1 + exp(-2u)) (no cancellation for
 * x << 0). */
#define MT_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define MT_GELU_K1 0.044715f

/* gelu(x). */
MT_HD float mt_gelu_tanh(float x) {
  float u = MT_GELU_K0 * (x + MT_GELU_K1 * x * x * x);
  return x / (1.0f + MT_SCALAR_EXPF(-2.0f * u));
}

/* dout * gelu'(x), with s = sigmoid(2u):
 * gelu'(x) = s + 2 x s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
MT_HD float mt_gelu_tanh_grad(float x, float dout) {
  float x2 = x * x;
  float u = MT_GELU_K0 * (x + MT_GELU_K1 * x2 * x);
  float s = 1.0f / (1.0f + MT_SCALAR_EXPF(-2.0f * u));
  float du = MT_GELU_K0 * (1.0f + 3.0f * MT_GELU_K1 * x2);
  return dout * (s + 2.0f * x * s * (1.0f - s) * du);
}

/* ---- SiLU / SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer") ----
 *   silu(x) = x sigmoid(x) = x / (1 + exp(-x)),
 *   silu'(x) = sig + x sig (1 - sig),  sig = 1 / (1 + exp(-x)).
 * SwiGLU element: out = silu(gate) * up. */

/* silu(x). */
MT_HD float mt_silu(float x) { return x / (1.0f + MT_SCALAR_EXPF(-x)); }

/* The SwiGLU backward of one element: from dout and the saved (gate, up),
 * *dgate = dout * up * silu'(gate), *dup = dout * silu(gate). */
MT_HD void mt_swiglu_grad(float gate, float up, float dout, float *dgate, float *dup) {
  float sg = 1.0f / (1.0f + MT_SCALAR_EXPF(-gate));
  float si = gate * sg;
  *dgate = dout * up * (sg + si * (1.0f - sg));
  *dup = dout * si;
}

/* ---- chunked column sums: bias gradient (cuda/), the weight/bias gradients
 * of LayerNorm, RMSNorm and qk-norm (both backends) ----
 * The rows are cut into chunks of MT_COL_CHUNK consecutive rows; each chunk's
 * partial column sums are formed over its rows in row order (by the family's
 * own kernel or loop, fused with whatever else it computes per row), then
 * the chunks are summed in chunk order per column (mt_col_chunks_reduce):
 * bitwise independent of the thread count and of the GPU model. Both
 * backends use the same chunk size, so cpu/ and cuda/ sum in the same order
 * (up to their per-element arithmetic). */
#define MT_COL_CHUNK 32

/* part holds nchunk chunks of k blocks of `cols` floats (block t: the
 * partials of output t); column j: out[t][j] += sum_c part[(c k + t) cols + j],
 * summed in chunk order from 0 in fp32; out[t] NULL skips block t. */
MT_HD void mt_col_chunks_reduce(float *const *out, int k, const float *part, int64_t nchunk,
                                int64_t cols, int64_t j) {
  for (int t = 0; t < k; t++) {
    if (!out[t]) continue;
    float acc = 0.0f;
    for (int64_t c = 0; c < nchunk; c++) acc += part[(c * k + t) * cols + j];
    out[t][j] += acc;
  }
}

/* ---- AdamW (Loshchilov & Hutter), Megatron's bias correction ----
 * The constants of one optimizer step: hyper-parameters as given and the
 * bias corrections bc = 1 - beta^step. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  float grad_scale; /* clipping coefficient (1 = none) */
  float bc1, bc2;   /* 1 - beta1^step, 1 - beta2^step */
} mt_adamw_coef;

/* Host: the step constants for the 1-based step `step` (>= 1); the bias
 * corrections are computed in double and rounded to float once. */
static inline mt_adamw_coef mt_adamw_coef_make(float lr, float beta1, float beta2, float eps,
                                               float weight_decay, float grad_scale,
                                               int64_t step) {
  mt_adamw_coef c;
  c.lr = lr;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  c.weight_decay = weight_decay;
  c.grad_scale = grad_scale;
  c.bc1 = (float)(1.0 - pow((double)beta1, (double)step));
  c.bc2 = (float)(1.0 - pow((double)beta2, (double)step));
  return c;
}

/* One element: g = grad * grad_scale; *m = b1 *m + (1-b1) g;
 * *v = b2 *v + (1-b2) g^2 (both updated in place); returns the new master
 * weight w - lr * (mhat / (sqrt(vhat) + eps) + weight_decay * w) with
 * mhat = m / bc1, vhat = v / bc2. */
MT_HD float mt_adamw_update(mt_adamw_coef c, float grad, float *m, float *v, float w) {
  float g = grad * c.grad_scale;
  float mi = c.beta1 * *m + (1.0f - c.beta1) * g;
  float vi = c.beta2 * *v + (1.0f - c.beta2) * g * g;
  *m = mi;
  *v = vi;
  float mhat = mi / c.bc1, vhat = vi / c.bc2;
  w -= c.lr * (mhat / (MT_SCALAR_SQRTF(vhat) + c.eps) + c.weight_decay * w);
  return w;
}

#endif
