/* cpu/cpu_bf16.h — private helpers of the CPU backend's bf16 storage ops
 * (cpu_bf16_<op>, next to the fp32 op in each family's file; the table is
 * cpu_backend.c's cpu_bf16_ops).
 *
 * Design: an op of the bf16 table widens its T (bf16) operands into fp32
 * copies in the backend's bf16 scratch (cpu_bf16_scratch: one grow-only
 * buffer, counted under MT_MEM_WORKSPACE and in be->mem.op_scratch), runs the
 * fp32 op of the same name on them (fp32 compute, fp32 accumulation), and
 * narrows each T output back ONCE with round-to-nearest-even
 * (mt_f32_to_bf16, bitwise cuda/'s conversion). Outputs that an op
 * accumulates into or updates in place are widened first, so the sum is
 * formed in fp32 and rounded once, as cuda/ does; elements an op leaves
 * untouched go bf16 -> fp32 -> bf16 unchanged. fp32 operands (gradients,
 * statistics, optimizer state) are passed through. Masks (dropout) come from
 * the same fp32 op with the same descriptor, so they equal fp32's. */
#ifndef MT_CPU_BF16_H
#define MT_CPU_BF16_H

#include <stdint.h>

#include "cpu_internal.h"

#define BF_MAXBUF 12

/* Carve k fp32 buffers of n[i] elements (n[i] may be 0: p[i] = NULL) out of
 * the bf16 scratch, each 64-byte aligned. Valid until the next call. */
static inline void bf_bufs(mt_backend *be, int k, const int64_t *n, float **p) {
  size_t off[BF_MAXBUF], tot = 0;
  for (int i = 0; i < k; i++) {
    off[i] = tot;
    tot += (size_t)((n[i] + 15) / 16 * 16) * sizeof(float);
  }
  char *base = cpu_bf16_scratch(be, tot ? tot : 64);
  for (int i = 0; i < k; i++) p[i] = n[i] > 0 ? (float *)(base + off[i]) : NULL;
}

/* dst[0..n) (fp32) = src (bf16), exact. src NULL: nothing. */
static inline void bf_widen(mt_backend *be, float *dst, const void *src_, int64_t n) {
  if (!src_ || n <= 0) return;
  const uint16_t *src = (const uint16_t *)src_;
#pragma omp parallel for simd schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) dst[i] = mt_bf16_to_f32(src[i]);
}

/* dst[0..n) (bf16) = src (fp32) rounded to nearest even. */
static inline void bf_narrow(mt_backend *be, void *dst_, const float *src, int64_t n) {
  if (!dst_ || n <= 0) return;
  uint16_t *dst = (uint16_t *)dst_;
#pragma omp parallel for schedule(static) if (n >= cpu_par_min(be))
  for (int64_t i = 0; i < n; i++) dst[i] = mt_f32_to_bf16(src[i]);
}

/* Elements of the qkv layout [rows, ng, np/ng + 2, hn] (ng 0 = np). */
static inline int64_t bf_qkv_elems(int64_t rows, int np, int ng, int hn) {
  const int g = ng > 0 ? ng : np;
  return rows * (int64_t)g * (np / g + 2) * hn;
}

#endif
