/* cpu/cpu_fp8.c — the FP8 quantization ops of the CPU backend: per-block
 * amax, quantize and dequantize (specs: core/backend.h mt_fp8_desc; the
 * format and scale rules: core/fp8.h). One function per op serves both the
 * fp32 and the bf16 table: T elements are read and written through be->dtype.
 * Results are exact and independent of the thread count: every element is
 * converted on its own and a block's amax is a maximum (order-free). */
#include "core/fp8.h"
#include "core/util.h"
#include "cpu_internal.h"

static inline float ld_t(const void *x, int bf, int64_t i) {
  return bf ? mt_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* Scale-block geometry of d: block height/width and scale columns. */
typedef struct {
  int64_t bh, bw, nbc;
} fp8_geom;

static fp8_geom geom_of(const mt_fp8_desc *d) {
  fp8_geom g;
  mt_fp8_block_dims(d, &g.bh, &g.bw);
  g.nbc = (d->cols + g.bw - 1) / g.bw;
  return g;
}

void cpu_fp8_amax(mt_backend *be, const mt_fp8_desc *d, float *amax, const void *x) {
  const fp8_geom g = geom_of(d);
  const int64_t nbr = (d->rows + g.bh - 1) / g.bh, rows = d->rows, cols = d->cols;
  const int bf = be->dtype == MT_BF16;
  const int par = rows * cols >= cpu_par_min(be) && nbr > 1;
  /* one block row per iteration: blocks never straddle iterations (the
   * whole-tensor block runs on one thread) */
#pragma omp parallel for schedule(static) if (par)
  for (int64_t br = 0; br < nbr; br++) {
    float *out = amax + br * g.nbc;
    for (int64_t bc = 0; bc < g.nbc; bc++) out[bc] = 0.0f;
    const int64_t r1 = (br + 1) * g.bh < rows ? (br + 1) * g.bh : rows;
    for (int64_t r = br * g.bh; r < r1; r++)
      for (int64_t c = 0; c < cols; c++) {
        const float v = fabsf(ld_t(x, bf, r * cols + c));
        float *o = out + c / g.bw;
        *o = fmaxf(*o, v); /* NaN skipped */
      }
  }
}

/* The scale of block b by the blocking's rule, from its amax. */
static inline float block_scale(const mt_fp8_desc *d, float amax, float fmax, float *scale_inv) {
  if (d->blocking == MT_FP8_MX32 || d->blocking == MT_FP8_MX32_COL) {
    const uint8_t e = mt_fp8_e8m0_from_f32(amax * (1.0f / fmax));
    *scale_inv = mt_fp8_e8m0_to_f32(e);
    return mt_fp8_e8m0_rcp(e);
  }
  const float s = mt_fp8_scale_current(amax, fmax, d->pow2, d->eps);
  *scale_inv = 1.0f / s;
  return s;
}

void cpu_fp8_quantize(mt_backend *be, const mt_fp8_desc *d, uint8_t *q, float *scale_inv,
                      const void *x, const float *amax, const float *scale) {
  MT_ASSERT(!scale || d->blocking == MT_FP8_TENSOR);
  const fp8_geom g = geom_of(d);
  const int64_t rows = d->rows, cols = d->cols, ns = mt_fp8_n_scales(d);
  const mt_fp8_format fmt = (mt_fp8_format)d->fmt;
  const float fmax = mt_fp8_max(fmt);
  const int bf = be->dtype == MT_BF16;
  /* the multipliers first (one per block), then every element */
  float *mul = cpu_workspace(be, (size_t)(ns > 0 ? ns : 1) * sizeof(float));
  for (int64_t b = 0; b < ns; b++) {
    if (scale) {
      mul[b] = *scale;
      scale_inv[b] = 1.0f / *scale;
    } else {
      mul[b] = block_scale(d, amax[b], fmax, &scale_inv[b]);
    }
  }
#pragma omp parallel for schedule(static) if (rows * cols >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *mrow = mul + (r / g.bh) * g.nbc;
    for (int64_t c = 0; c < cols; c++)
      q[r * cols + c] = mt_fp8_encode(ld_t(x, bf, r * cols + c) * mrow[c / g.bw], fmt);
  }
}

void cpu_fp8_dequantize(mt_backend *be, const mt_fp8_desc *d, void *y, const uint8_t *q,
                        const float *scale_inv) {
  const fp8_geom g = geom_of(d);
  const int64_t rows = d->rows, cols = d->cols;
  const mt_fp8_format fmt = (mt_fp8_format)d->fmt;
  float lut[256];
  for (int c = 0; c < 256; c++) lut[c] = mt_fp8_decode((uint8_t)c, fmt);
  const int bf = be->dtype == MT_BF16;
#pragma omp parallel for schedule(static) if (rows * cols >= cpu_par_min(be))
  for (int64_t r = 0; r < rows; r++) {
    const float *srow = scale_inv + (r / g.bh) * g.nbc;
    for (int64_t c = 0; c < cols; c++) {
      const float v = lut[q[r * cols + c]] * srow[c / g.bw];
      if (d->out_f32) ((float *)y)[r * cols + c] = v;
      else if (bf) ((uint16_t *)y)[r * cols + c] = mt_f32_to_bf16(v);
      else ((float *)y)[r * cols + c] = v;
    }
  }
}
