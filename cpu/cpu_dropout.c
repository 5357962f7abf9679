/* cpu/cpu_dropout.c — hidden-state dropout (fused with the residual add) and
 * its backward, plus the block-wise Philox uniform generator shared with
 * attention dropout. Masks are pure functions of (key, global coordinate)
 * (core/rng.h), so the backward regenerates exactly the forward mask. */
#include "core/util.h"
#include "cpu_internal.h"

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
