/* cpu/cpu_embedding.c — the embeddings of the CPU backend: the
 * (vocab-parallel) token embedding and the learned position embedding,
 * forward and backward, in fp32 and bf16 storage (cuda/cuda_embedding.cu is
 * the GPU counterpart). Gradient scatters are split over columns (each
 * thread owns a column range and visits tokens in order), so repeated tokens
 * never race and results are independent of the thread count. bf16: the
 * forward row copies move the bf16 bits unchanged; the rest widens, runs the
 * fp32 op and rounds once (cpu_bf16.h). */
#include <math.h>

#include "core/util.h"
#include "cpu_bf16.h"

void cpu_embedding_fwd(mt_backend *be, void *out_, const int32_t *tokens, int64_t n,
                       const void *w_, int64_t v_start, int64_t v_end, int64_t h) {
  (void)be;
  float *out = (float *)out_;
  const float *w = (const float *)w_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n; t++) {
    int64_t id = tokens[t];
    if (id >= v_start && id < v_end)
      memcpy(out + t * h, w + (id - v_start) * h, (size_t)h * sizeof(float));
    else
      memset(out + t * h, 0, (size_t)h * sizeof(float));
  }
}

#define EMB_COLS 128
void cpu_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                       const void *dout_, int64_t v_start, int64_t v_end, int64_t h) {
  (void)be;
  const float *dout = (const float *)dout_;
  int64_t nblk = (h + EMB_COLS - 1) / EMB_COLS;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t blk = 0; blk < nblk; blk++) {
    int64_t j0 = blk * EMB_COLS, nj = h - j0 < EMB_COLS ? h - j0 : EMB_COLS;
    for (int64_t t = 0; t < n; t++) {
      int64_t id = tokens[t];
      if (id < v_start || id >= v_end) continue;
      float *dst = dw + (id - v_start) * h + j0;
      const float *src = dout + t * h + j0;
#pragma omp simd
      for (int64_t j = 0; j < nj; j++) dst[j] += src[j];
    }
  }
}

void cpu_pos_embedding_fwd(mt_backend *be, void *x_, const void *wpe_, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset) {
  (void)be;
  float *x = (float *)x_;
  const float *wpe = (const float *)wpe_;
#pragma omp parallel for schedule(static) if (s * b * h >= cpu_par_min(be))
  for (int64_t r = 0; r < s * b; r++) {
    float *row = x + r * h;
    const float *p = wpe + (s_offset + r / b) * h;
#pragma omp simd
    for (int64_t j = 0; j < h; j++) row[j] += p[j];
  }
}

void cpu_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout_, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset) {
  (void)be;
  const float *dout = (const float *)dout_;
#pragma omp parallel for schedule(static) if (s * b * h >= cpu_par_min(be))
  for (int64_t si = 0; si < s; si++) {
    float *dst = dwpe + (s_offset + si) * h;
    for (int64_t bi = 0; bi < b; bi++) {
      const float *src = dout + (si * b + bi) * h;
#pragma omp simd
      for (int64_t j = 0; j < h; j++) dst[j] += src[j];
    }
  }
}

/* ---- bf16 storage ---- */

/* A row copy: the bf16 bits move unchanged. */
void cpu_bf16_embedding_fwd(mt_backend *be, void *out_, const int32_t *tokens, int64_t n,
                            const void *w_, int64_t v_start, int64_t v_end, int64_t h) {
  uint16_t *out = (uint16_t *)out_;
  const uint16_t *w = (const uint16_t *)w_;
#pragma omp parallel for schedule(static) if (n * h >= cpu_par_min(be))
  for (int64_t t = 0; t < n; t++) {
    int64_t id = tokens[t];
    if (id >= v_start && id < v_end)
      memcpy(out + t * h, w + (id - v_start) * h, (size_t)h * 2);
    else
      memset(out + t * h, 0, (size_t)h * 2);
  }
}

void cpu_bf16_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                            const void *dout, int64_t v_start, int64_t v_end, int64_t h) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){n * h}, p);
  bf_widen(be, p[0], dout, n * h);
  cpu_embedding_bwd(be, dw, tokens, n, p[0], v_start, v_end, h);
}

void cpu_bf16_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s,
                                int64_t b, int64_t h, int64_t s_offset) {
  const int64_t n = s * b * h;
  float *p[2];
  bf_bufs(be, 2, (const int64_t[]){n, s * h}, p);
  bf_widen(be, p[0], x, n);
  bf_widen(be, p[1], (const uint16_t *)wpe + s_offset * h, s * h); /* the rows used */
  cpu_pos_embedding_fwd(be, p[0], p[1], s, b, h, 0);
  bf_narrow(be, x, p[0], n);
}

void cpu_bf16_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s,
                                int64_t b, int64_t h, int64_t s_offset) {
  float *p[1];
  bf_bufs(be, 1, (const int64_t[]){s * b * h}, p);
  bf_widen(be, p[0], dout, s * b * h);
  cpu_pos_embedding_bwd(be, dwpe, p[0], s, b, h, s_offset);
}
