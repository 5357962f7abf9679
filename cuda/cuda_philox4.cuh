/* cuda/cuda_philox4.cuh — dropout masks four values per Philox call: the
 * work split of the hidden dropout (cuda_elementwise.cu: drop_args,
 * drop_item) and of the unfused reference softmax kernels
 * (tests/tools/cuda_ref/attn_softmax.cu: row_uniform4). Each
 * call of mt_rng_uniform4 (core/rng.h) gives the four uniforms of one
 * Philox block, bitwise mt_rng_uniform of its four counters, so the masks
 * equal cpu/'s. Only core/rng.h is needed, so tests/tools/flash_emu.cpp
 * compiles these for the host and checks every element is visited once
 * with its own counter's value. */
#ifndef MT_CUDA_PHILOX4_CUH
#define MT_CUDA_PHILOX4_CUH

#include <stdint.h>

#include "core/rng.h"

/* Calls f(k, u) for every k in [0, n) of a row whose element k has counter
 * base + k, u = mt_rng_uniform(key, base + k) bitwise: the warp's lanes take
 * the row's Philox blocks in turn (lane j: blocks j, j + 32, ...), one
 * Philox call per block. Blocks whose first k is >= n_rand (above the
 * causal diagonal) skip Philox and pass u = 0. Each k is visited by exactly
 * one lane. */
template <typename F>
__device__ __forceinline__ void row_uniform4(mt_rng_key_t key, uint64_t base, int64_t n,
                                             int64_t n_rand, int lane, F f) {
  const int64_t k0 = -(int64_t)(base & 3); /* k of the first block's word 0 */
  const uint64_t blk0 = base >> 2;
  for (int64_t j = lane; k0 + 4 * j < n; j += 32) {
    const int64_t kb = k0 + 4 * j;
    float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (kb < n_rand) mt_rng_uniform4(key, blk0 + (uint64_t)j, u);
#pragma unroll
    for (int t = 0; t < 4; t++) {
      const int64_t k = kb + t;
      if (k >= 0 && k < n) f(k, u[t]);
    }
  }
}

struct drop_args {
  float p, inv;
  mt_rng_key_t key;
  int64_t s, b, h, s_offset, s_full, h_offset, h_full;
};

/* Work items of the masked kernels: row r = si * b + bi of [s, b, h] has
 * counters rowbase + j (j < h), rowbase = (ids[bi] * s_full + s_offset + si)
 * * h_full + h_offset; item (r, g) covers the Philox block g of the row
 * (columns j = k0 + 4g .. k0 + 4g + 3, k0 = -(rowbase & 3)), so one Philox
 * call gives its four mask values (mt_rng_uniform4, the counter -> word
 * mapping of mt_rng_uniform). drop_groups() blocks per row cover any k0. */
__device__ __forceinline__ int64_t drop_groups(const drop_args &a) { return (a.h + 3) / 4 + 1; }

/* Calls f(i, keep) for the (up to four) elements of item `it`. */
template <typename F>
__device__ __forceinline__ void drop_item(const drop_args &a, const int64_t *ids, int64_t it,
                                          F f) {
  const int64_t ng = drop_groups(a), r = it / ng, g = it - r * ng;
  const int64_t si = r / a.b, bi = r - si * a.b;
  const uint64_t rowbase =
      ((uint64_t)ids[bi] * (uint64_t)a.s_full + (uint64_t)(a.s_offset + si)) * (uint64_t)a.h_full +
      (uint64_t)a.h_offset;
  const int64_t jb = -(int64_t)(rowbase & 3) + 4 * g;
  if (jb >= a.h || jb + 3 < 0) return;
  float u[4];
  mt_rng_uniform4(a.key, (rowbase >> 2) + (uint64_t)g, u);
#pragma unroll
  for (int t = 0; t < 4; t++) {
    const int64_t j = jb + t;
    if (j >= 0 && j < a.h) f(r * a.h + j, u[t] >= a.p);
  }
}

#endif
