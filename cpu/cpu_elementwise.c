/* cpu/cpu_elementwise.c — the elementwise ops of the CPU backend:
 * initialisation (init_normal), fill, dtype conversion, add / axpy / scale,
 * and the hidden-state dropout (fused with the residual add) and its
 * backward, plus the block-wise Philox uniform generator the dropouts share
 * (hidden and attention); fp32 and bf16 storage (cuda/cuda_elementwise.cu is
 * the GPU counterpart). All loops are parallel over disjoint ranges (static
 * schedule) with vectorisable bodies, so every result is bitwise independent
 * of the thread count. Dropout masks are pure functions of (key, global
 * coordinate) (core/rng.h), so the backward regenerates exactly the forward
 * mask; bf16 storage takes the fp32 op's mask (same op, same descriptor). */
#include <math.h>

#include "core/util.h"
#include "cpu_bf16.h"

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

/* ---- hidden-state dropout ---- */

#define RNG_BLOCKS 16 /* Philox blocks (4 uniforms each) per batch */

/* Uniforms of Philox block blk (counter {blk_lo, blk_hi, 1, 0}): elements
 * 4·blk .. 4·blk+3 of mt_rng_uniform's stream (core/rng.h, checked bitwise
 * by the unit tests); inlined so the loop over blocks vectorises. */
static inline void philox_uniform4(uint64_t blk, mt_rng_key_t key, float *o) {
  uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 1u, 0u}, w[4];
  mt_philox4x32(ctr, key, w);
  for (int i = 0; i < 4; i++) o[i] = mt_u32_to_unit(w[i]);
}

void cpu_rng_uniform_range(mt_rng_key_t key, uint64_t start, int64_t n, float *out) {
  if (n <= 0) return;
  const uint64_t end = start + (uint64_t)n;
  const uint64_t b0 = start >> 2, b1 = (end + 3) >> 2;
  for (uint64_t blk = b0; blk < b1; blk += RNG_BLOCKS) {
    float tmp[4 * RNG_BLOCKS];
#pragma omp simd
    for (int j = 0; j < RNG_BLOCKS; j++) philox_uniform4(blk + (uint64_t)j, key, tmp + 4 * j);
    uint64_t lo = blk * 4 > start ? blk * 4 : start;
    uint64_t hi = (blk + RNG_BLOCKS) * 4 < end ? (blk + RNG_BLOCKS) * 4 : end;
    for (uint64_t i = lo; i < hi; i++) out[i - start] = tmp[i - blk * 4];
  }
}

#define DROP_CHUNK 512

/* Counter of element (si, bi, 0) of the local shard. */
static uint64_t drop_row_counter(const mt_dropout_desc *d, int64_t si, int64_t bi) {
  return ((uint64_t)d->sample_ids[bi] * (uint64_t)d->s_full + (uint64_t)(d->s_offset + si)) *
             (uint64_t)d->h_full +
         (uint64_t)d->h_offset;
}

/* out = (res +) mask * x / (1 - p) over the [s, b, h] shard of d, res NULL
 * for the plain (backward) form; the mask of each row chunk is regenerated
 * from its global counters. */
static void dropout_rows(mt_backend *be, const mt_dropout_desc *d, float *out, const float *x,
                         const float *res) {
  const int64_t rows = (int64_t)d->s * d->b, h = d->h;
  const float p = d->p, inv = 1.0f / (1.0f - d->p);
#pragma omp parallel for schedule(static) if (rows * h >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    uint64_t base = drop_row_counter(d, r / d->b, r % d->b);
    float u[DROP_CHUNK];
    for (int64_t j0 = 0; j0 < h; j0 += DROP_CHUNK) {
      int64_t nj = h - j0 < DROP_CHUNK ? h - j0 : DROP_CHUNK;
      cpu_rng_uniform_range(d->key, base + (uint64_t)j0, nj, u);
      const float *xr = x + r * h + j0;
      float *orow = out + r * h + j0;
      if (res) {
        const float *rr = res + r * h + j0;
#pragma omp simd
        for (int64_t j = 0; j < nj; j++) orow[j] = rr[j] + (u[j] >= p ? xr[j] * inv : 0.0f);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < nj; j++) orow[j] = u[j] >= p ? xr[j] * inv : 0.0f;
      }
    }
  }
}

void cpu_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out_, const void *x_,
                         const void *residual_) {
  float *out = (float *)out_;
  const float *x = (const float *)x_, *res = (const float *)residual_;
  const int64_t n = (int64_t)d->s * d->b * d->h;
  if (d->p <= 0.0f) {
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
    for (int64_t i = 0; i < n; i++) out[i] = res[i] + x[i];
    return;
  }
  dropout_rows(be, d, out, x, res);
}

void cpu_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx_, const void *dout_) {
  float *dx = (float *)dx_;
  const float *dout = (const float *)dout_;
  if (d->p <= 0.0f) {
    if (dx != dout) memcpy(dx, dout, (size_t)d->s * d->b * d->h * sizeof(float));
    return;
  }
  dropout_rows(be, d, dx, dout, NULL);
}

/* ---- bf16 storage ---- */

/* The fp32 values rounded: a bf16 run starts from the fp32 run's weights. */
void cpu_bf16_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols,
                          int64_t ld_global, int64_t row_offset, int64_t col_offset,
                          mt_rng_key_t key, float std) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){rows * cols}, p);
  cpu_init_normal(be, p[0], rows, cols, ld_global, row_offset, col_offset, key, std);
  bf_narrow(be, dst, p[0], rows * cols);
}

void cpu_bf16_add(mt_backend *be, void *out_, const void *a_, const void *b_, int64_t n) {
  uint16_t *out = (uint16_t *)out_;
  const uint16_t *a = (const uint16_t *)a_, *b = (const uint16_t *)b_;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++)
    out[i] = mt_f32_to_bf16(mt_bf16_to_f32(a[i]) + mt_bf16_to_f32(b[i]));
}

/* the mask is fp32's: same op, same descriptor */
void cpu_bf16_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                              const void *residual) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  float *p[3];
  bf_bufs(be, 3, (const int64_t[]){n, n, n}, p);
  bf_widen(be, p[0], x, n);
  bf_widen(be, p[1], residual, n); /* out may alias residual */
  cpu_dropout_add_fwd(be, d, p[2], p[0], p[1]);
  bf_narrow(be, out, p[2], n);
}

void cpu_bf16_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n}, p);
  bf_widen(be, p[0], dout, n);
  cpu_dropout_bwd(be, d, p[0], p[0]); /* dx may alias dout (spec) */
  bf_narrow(be, dx, p[0], n);
}
