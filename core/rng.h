/* core/rng.h — layout-independent, counter-based randomness (Philox-4x32-10).
 *
 * Every random number is a pure function of (key, counter), never of which
 * rank computes it (docs/rng.md):
 *   - initial weights: key = mt_rng_key(seed, "<param name>", 0, 0),
 *     element (r, c) of the UNSHARDED [rows, cols] tensor uses
 *     counter i = r * cols + c, and mt_rng_normal(key, i) (Box-Muller on
 *     Philox outputs 0 and 1 of counter {i_lo, i_hi, 0, 0});
 *   - dropout: key = mt_rng_key(seed, "<site>", layer, 0), element with global
 *     coordinate index i uses mt_rng_uniform(key, i): Philox counter
 *     {(i>>2)_lo, (i>>2)_hi, 1, 0}, output word i & 3, mapped to [0, 1).
 * Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11).
 *
 * Header-only so both backends (and CUDA device code, via MT_HD) run the
 * identical function and masks match bit for bit.
 */
#ifndef MT_CORE_RNG_H
#define MT_CORE_RNG_H

#include <math.h>
#include <stdint.h>

#include "hd.h"

typedef struct {
  uint32_t k[2];
} mt_rng_key_t;

/* Philox-4x32 with 10 rounds: counter ctr[4], key k[2] -> out[4]. */
MT_HD void mt_philox4x32(const uint32_t ctr_in[4], mt_rng_key_t key, uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key.k[0], k1 = key.k[1];
#if !defined(__CUDACC__)
#pragma GCC unroll 10 /* fully unrolled so callers can vectorise across counters */
#endif
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* uint32 -> float in [0, 1) with 24 random bits. */
MT_HD float mt_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* Uniform [0,1) for global element index i (dropout). */
MT_HD float mt_rng_uniform(mt_rng_key_t key, uint64_t i) {
  uint64_t blk = i >> 2;
  uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 1u, 0u};
  uint32_t out[4];
  mt_philox4x32(ctr, key, out);
  return mt_u32_to_unit(out[i & 3]);
}

/* The four uniforms of Philox block `blk` in one Philox call:
 * u[t] = mt_rng_uniform(key, 4 * blk + t) bitwise, t = 0..3 (the same
 * counter -> word mapping); for kernels that draw consecutive counters. */
MT_HD void mt_rng_uniform4(mt_rng_key_t key, uint64_t blk, float u[4]) {
  uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 1u, 0u};
  uint32_t out[4];
  mt_philox4x32(ctr, key, out);
  for (int t = 0; t < 4; t++) u[t] = mt_u32_to_unit(out[t]);
}

/* Standard normal for global element index i (initialisation), computed in
 * double so the value does not depend on the backend's float math. */
MT_HD float mt_rng_normal(mt_rng_key_t key, uint64_t i) {
  uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0u, 0u};
  uint32_t out[4];
  mt_philox4x32(ctr, key, out);
  /* u1 in (0, 1], u2 in [0, 1) with 32 bits each */
  double u1 = ((double)out[0] + 1.0) * (1.0 / 4294967296.0);
  double u2 = (double)out[1] * (1.0 / 4294967296.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Key from (seed, name, a, b): FNV-1a over the name mixed with splitmix64.
 * Host-only. `name` identifies the tensor or dropout site (e.g.
 * "decoder.layers.3.mlp.linear_fc1.weight", "hidden_dropout.attn"). */
mt_rng_key_t mt_rng_key(uint64_t seed, const char *name, uint64_t a, uint64_t b);

#endif
