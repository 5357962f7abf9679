/* cpu/cpu_elementwise.c — initialisation, dtype conversion, elementwise
 * arithmetic, reductions and the AdamW update. All loops are parallel over
 * disjoint ranges (static schedule) with vectorisable bodies; reductions use
 * a fixed number of chunks summed in order, so every result is bitwise
 * independent of the thread count. */
#include <math.h>

#include "core/util.h"
#include "cpu_internal.h"

void cpu_init_normal(mt_backend *be, void *dst_, int64_t rows, int64_t cols, int64_t ld_global,
                     int64_t row_offset, int64_t col_offset, mt_rng_key_t key, float std) {
  (void)be;
  float *dst = (float *)dst_;
#pragma omp parallel for schedule(static) if (rows * cols >= 4096)
  for (int64_t r = 0; r < rows; r++) {
    uint64_t base = (uint64_t)(row_offset + r) * (uint64_t)ld_global + (uint64_t)col_offset;
    for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = std * mt_rng_normal(key, base + (uint64_t)c);
  }
}

void cpu_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n) {
  (void)be;
  if (t == MT_F32) {
    float *o = (float *)dst;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
    for (int64_t i = 0; i < n; i++) o[i] = value;
  } else if (t == MT_BF16) {
    uint16_t *o = (uint16_t *)dst, v = mt_f32_to_bf16(value);
    for (int64_t i = 0; i < n; i++) o[i] = v;
  } else {
    mt_fatal("cpu fill: unsupported dtype %s", mt_dtype_name(t));
  }
}

void cpu_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
              int64_t n) {
  (void)be;
  if (dst_t == src_t) {
    if (dst != src) memcpy(dst, src, (size_t)n * mt_dtype_size(dst_t));
  } else if (dst_t == MT_BF16 && src_t == MT_F32) {
    uint16_t *o = (uint16_t *)dst;
    const float *s = (const float *)src;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
    for (int64_t i = 0; i < n; i++) o[i] = mt_f32_to_bf16(s[i]);
  } else if (dst_t == MT_F32 && src_t == MT_BF16) {
    float *o = (float *)dst;
    const uint16_t *s = (const uint16_t *)src;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
    for (int64_t i = 0; i < n; i++) o[i] = mt_bf16_to_f32(s[i]);
  } else {
    mt_fatal("cpu cast: unsupported %s -> %s", mt_dtype_name(src_t), mt_dtype_name(dst_t));
  }
}

void cpu_add(mt_backend *be, void *out_, const void *a_, const void *b_, int64_t n) {
  (void)be;
  float *out = (float *)out_;
  const float *a = (const float *)a_, *b = (const float *)b_;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n) {
  (void)be;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void cpu_scale_f32(mt_backend *be, float *x, float alpha, int64_t n) {
  (void)be;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

#define RED_CHUNKS 64

static double reduce_f32(mt_backend *be, const float *x, int64_t n, int squares) {
  double part[RED_CHUNKS];
  int64_t chunk = (n + RED_CHUNKS - 1) / RED_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
  for (int c = 0; c < RED_CHUNKS; c++) {
    int64_t i0 = c * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double acc = 0.0;
    if (squares) {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = i0; i < i1; i++) acc += (double)x[i] * (double)x[i];
    } else {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = i0; i < i1; i++) acc += (double)x[i];
    }
    part[c] = acc;
  }
  double s = 0.0;
  for (int c = 0; c < RED_CHUNKS; c++) s += part[c];
  return s;
}

double cpu_sumsq_f32(mt_backend *be, const float *x, int64_t n) {
  return reduce_f32(be, x, n, 1);
}

double cpu_sum_f32(mt_backend *be, const float *x, int64_t n) {
  return reduce_f32(be, x, n, 0);
}

void cpu_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n) {
  *acc += reduce_f32(be, x, n, 1);
}

/* AdamW in fp32 per element (mt_adamw_update, core/scalar_math.h, shared
 * with cuda/); the bias corrections 1 - beta^step are computed once in
 * double and rounded to float (mt_adamw_coef_make). */
void cpu_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
               const float *grad, void *param_lowp, int64_t n) {
  (void)be;
  MT_ASSERT(hp->step >= 1);
  const mt_adamw_coef c = mt_adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                             hp->weight_decay, hp->grad_scale, hp->step);
  float *pl = (float *)param_lowp;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    float w = mt_adamw_update(c, grad[i], &m[i], &v[i], master[i]);
    master[i] = w;
    if (pl) pl[i] = w;
  }
}
