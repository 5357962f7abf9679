/* cpu/cpu_cross_entropy.c — the pieces of Megatron's
 * vocab_parallel_cross_entropy on the CPU backend (row max, sum of exps and
 * target logit, loss, in-place gradient), in fp32 and bf16 storage
 * (cuda/cuda_cross_entropy.cu is the GPU counterpart). One thread per row:
 * results are independent of the thread count. bf16: the logits are widened
 * a block of rows at a time (the scratch stays bounded at any vocabulary),
 * the fp32 op runs on them, the gradient is rounded once (cpu_bf16.h). */
#include <math.h>

#include "core/util.h"
#include "cpu_bf16.h"

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
                   const float *tgt_logit, int64_t n, const float *loss_mask) {
  (void)be;
  for (int64_t i = 0; i < n; i++) {
    const float w = loss_mask ? loss_mask[i] : 1.0f;
    loss[i] = w == 0.0f ? 0.0f : w * (logf(sumexp[i]) + row_max[i] - tgt_logit[i]);
  }
}

void cpu_xent_bwd(mt_backend *be, void *logits_, const float *row_max, const float *sumexp,
                  const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                  float scale, const float *loss_mask) {
  (void)be;
  float *logits = (float *)logits_;
#pragma omp parallel for schedule(static) if (n * vl >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) {
    float *row = logits + i * vl;
    const float sc = loss_mask ? scale * loss_mask[i] : scale;
    if (sc == 0.0f) { /* a masked row (loss_mask 0) */
      memset(row, 0, (size_t)vl * sizeof(float));
      continue;
    }
    const float mx = row_max[i], f = sc / sumexp[i];
#pragma omp simd
    for (int64_t j = 0; j < valid; j++) row[j] = f * mt_fast_expf(row[j] - mx);
    for (int64_t j = valid; j < vl; j++) row[j] = 0.0f;
    int64_t t = (int64_t)targets[i] - v_start;
    if (t >= 0 && t < valid) row[t] -= sc;
  }
}

/* ---- bf16 storage: rows are independent, so the logits are widened a
 * block of rows at a time (the scratch stays ~16 MiB at any vocabulary) ---- */

static int64_t bf16_xent_rows(int64_t n, int64_t vl) {
  int64_t r = vl > 0 ? ((int64_t)1 << 22) / vl : n;
  return r < 1 ? 1 : r > n ? n : r;
}

void cpu_bf16_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n,
                       int64_t vl, int64_t valid) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], (const uint16_t *)logits + r0 * vl, nr * vl);
    cpu_xent_max(be, row_max + r0, p[0], nr, vl, valid);
  }
}

void cpu_bf16_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                         const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                         int64_t valid, int64_t v_start) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], (const uint16_t *)logits + r0 * vl, nr * vl);
    cpu_xent_stats(be, sumexp + r0, tgt_logit + r0, p[0], row_max + r0, targets + r0, nr, vl,
                   valid, v_start);
  }
}

void cpu_bf16_xent_bwd(mt_backend *be, void *logits, const float *row_max,
                       const float *sumexp, const int32_t *targets, int64_t n, int64_t vl,
                       int64_t valid, int64_t v_start, float scale, const float *loss_mask) {
  const int64_t R = bf16_xent_rows(n, vl);
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int64_t nr = n - r0 < R ? n - r0 : R;
    uint16_t *lg = (uint16_t *)logits + r0 * vl;
    float *p[1];
    bf_bufs(be, 1, (const int64_t[]){nr * vl}, p);
    bf_widen(be, p[0], lg, nr * vl);
    cpu_xent_bwd(be, p[0], row_max + r0, sumexp + r0, targets + r0, nr, vl, valid, v_start,
                 scale, loss_mask ? loss_mask + r0 : NULL);
    bf_narrow(be, lg, p[0], nr * vl);
  }
}
