/* tests/tools/cuda_ref/attn_softmax.cu — the causal softmax kernels of the
 * unfused reference attention (attn_unfused.c; test code, not in the
 * library): forward with attention-probability dropout, the dropout
 * re-application for backward, and the softmax backward. One warp per score
 * row (pair = bi * np + n, query q); fp32 math on T storage.
 *
 * Dropout of element (bi, n, q, k) draws mt_rng_uniform(key, counter) with
 *   counter = ((sample_ids[bi] * n_heads_total + head_offset + n) * s + q) * s + k
 * exactly as the CPU attention (the fused cpu/cpu_flash_attn.c and the unfused
 * reference tests/tools/attn_unfused.h), so masks are bitwise equal. With
 * dropout a lane handles groups of four consecutive counters (one Philox
 * block: mt_rng_uniform4, one Philox call per four mask values). */
#include "cuda/cuda_dev.cuh"
#include "cuda/cuda_philox4.cuh"
#include "tests/tools/cuda_ref/attn_unfused.h"

#define ROWS_PER_BLOCK 4

struct attn_args {
  int64_t s, np, n_heads_total, head_offset;
  float p, inv_keep, scale;
  mt_rng_key_t key;
};

static attn_args attn_args_of(const mt_attn_desc *d) {
  attn_args a;
  a.s = d->s;
  a.np = d->np;
  a.n_heads_total = d->n_heads_total;
  a.head_offset = d->head_offset;
  a.p = d->dropout_p;
  a.inv_keep = 1.0f / (1.0f - d->dropout_p);
  a.scale = d->scale;
  a.key = d->key;
  return a;
}

/* Counter of element (row, 0) where row = pair * s + q. */
__device__ __forceinline__ uint64_t attn_row_counter(const attn_args &a, const int64_t *ids,
                                                     int64_t row) {
  const int64_t pair = row / a.s, q = row - pair * a.s;
  const int64_t bi = pair / a.np, n = pair - bi * a.np;
  const uint64_t head =
      (uint64_t)ids[bi] * (uint64_t)a.n_heads_total + (uint64_t)(a.head_offset + n);
  return (head * (uint64_t)a.s + (uint64_t)q) * (uint64_t)a.s;
}

template <typename T>
__global__ void k_softmax_fwd(attn_args a, const int64_t *ids, T *probs, T *pd, int64_t nrows) {
  const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= nrows) return;
  const int64_t s = a.s, q = row % s;
  T *p = probs + row * s;
  float mx = -INFINITY;
  for (int64_t k = lane; k <= q; k += 32) mx = fmaxf(mx, to_f(p[k]));
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t k = lane; k <= q; k += 32) sum += expf(to_f(p[k]) - mx);
  const float inv = 1.0f / warp_sum(sum);
  if (!pd) {
    for (int64_t k = lane; k < s; k += 32) p[k] = from_f<T>(k <= q ? expf(to_f(p[k]) - mx) * inv : 0.0f);
    return;
  }
  T *o = pd + row * s;
  row_uniform4(a.key, attn_row_counter(a, ids, row), s, q + 1, lane, [&](int64_t k, float u) {
    const T vt = from_f<T>(k <= q ? expf(to_f(p[k]) - mx) * inv : 0.0f);
    p[k] = vt;
    const bool keep = k <= q && u >= a.p;
    o[k] = from_f<T>(keep ? a.inv_keep * to_f(vt) : 0.0f);
  });
}

extern "C" void cudak_attn_softmax_fwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                                       const int64_t *ids_dev, void *probs, void *pd) {
  const int64_t nrows = (int64_t)d->b * d->np * d->s;
  if (nrows <= 0) return;
  attn_args a = attn_args_of(d);
  const unsigned g = grid_x_checked((nrows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "attention softmax");
  MT_DISPATCH(t, (MT_LAUNCH(k_softmax_fwd<T>, g, 32 * ROWS_PER_BLOCK, 0, st)(a, ids_dev, (T *)probs,
                                                                             (T *)pd, nrows)));
  MT_CUDA_LAUNCHED();
}

template <typename T>
__global__ void k_dropout_probs(attn_args a, const int64_t *ids, const T *probs, T *pd,
                                int64_t nrows) {
  const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= nrows) return;
  const int64_t s = a.s, q = row % s;
  const T *p = probs + row * s;
  T *o = pd + row * s;
  row_uniform4(a.key, attn_row_counter(a, ids, row), s, q + 1, lane, [&](int64_t k, float u) {
    const bool keep = k <= q && u >= a.p;
    o[k] = from_f<T>(keep ? a.inv_keep * to_f(p[k]) : 0.0f);
  });
}

extern "C" void cudak_attn_dropout_probs(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                                         const int64_t *ids_dev, const void *probs, void *pd) {
  const int64_t nrows = (int64_t)d->b * d->np * d->s;
  if (nrows <= 0) return;
  attn_args a = attn_args_of(d);
  const unsigned g = grid_x_checked((nrows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "attention softmax");
  MT_DISPATCH(t, (MT_LAUNCH(k_dropout_probs<T>, g, 32 * ROWS_PER_BLOCK, 0, st)(
                     a, ids_dev, (const T *)probs, (T *)pd, nrows)));
  MT_CUDA_LAUNCHED();
}

/* ds = scale * P * (dP' - sum_k dP' P), dP' = dP * keep / (1-p) (ids != NULL)
 * or dP; causal (0 above the diagonal). */
template <typename T>
__global__ void k_softmax_bwd(attn_args a, const int64_t *ids, const T *probs, const float *dp,
                              T *ds, int64_t nrows) {
  const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= nrows) return;
  const int64_t s = a.s, q = row % s;
  const T *p = probs + row * s;
  const float *g = dp + row * s;
  T *o = ds + row * s;
  float dot = 0.0f;
  if (!ids) {
    for (int64_t k = lane; k <= q; k += 32) dot += g[k] * to_f(p[k]);
    dot = warp_sum(dot);
    for (int64_t k = lane; k < s; k += 32)
      o[k] = from_f<T>(k <= q ? a.scale * to_f(p[k]) * (g[k] - dot) : 0.0f);
    return;
  }
  /* dropout: the mask is drawn twice (dot, then ds), four values per call */
  const uint64_t base = attn_row_counter(a, ids, row);
  row_uniform4(a.key, base, q + 1, q + 1, lane, [&](int64_t k, float u) {
    dot += (u >= a.p ? g[k] * a.inv_keep : 0.0f) * to_f(p[k]);
  });
  dot = warp_sum(dot);
  row_uniform4(a.key, base, s, q + 1, lane, [&](int64_t k, float u) {
    float v = 0.0f;
    if (k <= q) v = a.scale * to_f(p[k]) * ((u >= a.p ? g[k] * a.inv_keep : 0.0f) - dot);
    o[k] = from_f<T>(v);
  });
}

extern "C" void cudak_attn_softmax_bwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                                       const int64_t *ids_dev, const void *probs, const float *dp,
                                       void *ds) {
  const int64_t nrows = (int64_t)d->b * d->np * d->s;
  if (nrows <= 0) return;
  attn_args a = attn_args_of(d);
  const int64_t *ids = d->dropout_p > 0.0f ? ids_dev : NULL;
  const unsigned g = grid_x_checked((nrows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "attention softmax");
  MT_DISPATCH(t, (MT_LAUNCH(k_softmax_bwd<T>, g, 32 * ROWS_PER_BLOCK, 0, st)(
                     a, ids, (const T *)probs, dp, (T *)ds, nrows)));
  MT_CUDA_LAUNCHED();
}
