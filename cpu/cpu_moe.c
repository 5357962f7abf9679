/* cpu/cpu_moe.c — token permutation ops of the mixture-of-experts layer
 * (core/backend.h: moe_gather_rows, moe_combine_fwd, moe_combine_bwd), fp32
 * and bf16 storage (the same loops on bf16 rows: gathers move the bits,
 * sums run in fp32 and round once); cuda/cuda_moe.cu is the GPU
 * counterpart. Every output row is written by one thread with a fixed
 * summation order, so results do not depend on the thread count. The grouped
 * GEMM of the experts is cpu_gemm_grouped.c. */
#include "core/util.h"
#include "cpu_bf16.h"

static void check_f32(mt_backend *be, const char *op) {
  if (be->dtype != MT_F32) mt_fatal("cpu %s: only fp32 storage is supported", op);
}

void cpu_moe_gather_rows(mt_backend *be, void *dst_, const void *src_, const int32_t *idx,
                         int64_t n, int64_t h) {
  check_f32(be, "moe_gather_rows");
  float *dst = (float *)dst_;
  const float *src = (const float *)src_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * h, src + (int64_t)idx[i] * h, (size_t)h * 4);
}

void cpu_moe_combine_fwd(mt_backend *be, void *y_, const void *src_, const int32_t *slot,
                         const float *w, int64_t n_tok, int k, int64_t h) {
  check_f32(be, "moe_combine_fwd");
  float *y = (float *)y_;
  const float *src = (const float *)src_;
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    float *yt = y + t * h;
    for (int64_t c = 0; c < h; c++) yt[c] = 0.0f;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) continue;
      const float a = w ? w[t * k + j] : 1.0f, *s = src + (int64_t)r * h;
      for (int64_t c = 0; c < h; c++) yt[c] += a * s[c];
    }
  }
}

void cpu_moe_combine_bwd(mt_backend *be, void *dsrc_, float *dw, const void *dy_, const void *src_,
                         const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h) {
  check_f32(be, "moe_combine_bwd");
  float *dsrc = (float *)dsrc_;
  const float *dy = (const float *)dy_, *src = (const float *)src_;
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    const float *g = dy + t * h;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) {
        dw[t * k + j] = 0.0f;
        continue;
      }
      const float a = w[t * k + j], *s = src + (int64_t)r * h;
      float *d = dsrc + (int64_t)r * h;
      double dot = 0.0;
      for (int64_t c = 0; c < h; c++) {
        d[c] = a * g[c];
        dot += (double)g[c] * s[c];
      }
      dw[t * k + j] = (float)dot;
    }
  }
}

/* ---- bf16 storage: the same loops on bf16 rows ---- */

void cpu_bf16_moe_gather_rows(mt_backend *be, void *dst_, const void *src_, const int32_t *idx,
                              int64_t n, int64_t h) {
  uint16_t *dst = (uint16_t *)dst_;
  const uint16_t *src = (const uint16_t *)src_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * h, src + (int64_t)idx[i] * h, (size_t)h * 2);
}

void cpu_bf16_moe_combine_fwd(mt_backend *be, void *y, const void *src_, const int32_t *slot,
                              const float *w, int64_t n_tok, int k, int64_t h) {
  const uint16_t *src = (const uint16_t *)src_;
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n_tok * h}, p);
  float *acc = p[0];
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    float *yt = acc + t * h;
    for (int64_t c = 0; c < h; c++) yt[c] = 0.0f;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) continue;
      const float a = w ? w[t * k + j] : 1.0f;
      const uint16_t *s = src + (int64_t)r * h;
      for (int64_t c = 0; c < h; c++) yt[c] += a * mt_bf16_to_f32(s[c]);
    }
  }
  bf_narrow(be, y, acc, n_tok * h);
}

void cpu_bf16_moe_combine_bwd(mt_backend *be, void *dsrc_, float *dw, const void *dy_,
                              const void *src_, const int32_t *slot, const float *w,
                              int64_t n_tok, int k, int64_t h) {
  uint16_t *dsrc = (uint16_t *)dsrc_;
  const uint16_t *dy = (const uint16_t *)dy_, *src = (const uint16_t *)src_;
#pragma omp parallel for schedule(static) if (n_tok * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n_tok; t++) {
    const uint16_t *g = dy + t * h;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) {
        dw[t * k + j] = 0.0f;
        continue;
      }
      const float a = w[t * k + j];
      const uint16_t *s = src + (int64_t)r * h;
      uint16_t *d = dsrc + (int64_t)r * h;
      double dot = 0.0;
      for (int64_t c = 0; c < h; c++) {
        const float gc = mt_bf16_to_f32(g[c]);
        d[c] = mt_f32_to_bf16(a * gc);
        dot += (double)gc * mt_bf16_to_f32(s[c]);
      }
      dw[t * k + j] = (float)dot;
    }
  }
}
