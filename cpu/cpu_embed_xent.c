/* cpu/cpu_embed_xent.c — (vocab-parallel) token embedding, learned position
 * embedding, and the cross-entropy pieces of Megatron's
 * vocab_parallel_cross_entropy. Gradient scatters are split over columns
 * (each thread owns a column range and visits tokens in order), so repeated
 * tokens never race and results are independent of the thread count. */
#include <math.h>

#include "core/util.h"
#include "cpu_internal.h"

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

void cpu_xent_max(mt_backend *be, float *row_max, const void *logits_, int64_t n, int64_t vl,
                  int64_t valid) {
  (void)be;
  const float *logits = (const float *)logits_;
  MT_ASSERT(valid <= vl);
#pragma omp parallel for schedule(static) if (n * valid >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    const float *row = logits + i * vl;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < valid; j++) mx = row[j] > mx ? row[j] : mx;
    row_max[i] = mx;
  }
}

void cpu_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits_,
                    const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                    int64_t valid, int64_t v_start) {
  (void)be;
  const float *logits = (const float *)logits_;
#pragma omp parallel for schedule(static) if (n * valid >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    const float *row = logits + i * vl;
    const float mx = row_max[i];
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < valid; j++) acc += mt_fast_expf(row[j] - mx);
    sumexp[i] = acc;
    int64_t t = (int64_t)targets[i] - v_start;
    tgt_logit[i] = (t >= 0 && t < valid) ? row[t] : 0.0f;
  }
}

void cpu_xent_loss(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                   const float *tgt_logit, int64_t n) {
  (void)be;
  for (int64_t i = 0; i < n; i++) loss[i] = logf(sumexp[i]) + row_max[i] - tgt_logit[i];
}

void cpu_xent_bwd(mt_backend *be, void *logits_, const float *row_max, const float *sumexp,
                  const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                  float scale) {
  (void)be;
  float *logits = (float *)logits_;
#pragma omp parallel for schedule(static) if (n * vl >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    float *row = logits + i * vl;
    const float mx = row_max[i], f = scale / sumexp[i];
#pragma omp simd
    for (int64_t j = 0; j < valid; j++) row[j] = f * mt_fast_expf(row[j] - mx);
    for (int64_t j = valid; j < vl; j++) row[j] = 0.0f;
    int64_t t = (int64_t)targets[i] - v_start;
    if (t >= 0 && t < valid) row[t] -= scale;
  }
}
