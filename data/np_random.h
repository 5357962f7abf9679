/* data/np_random.h — the part of NumPy's legacy `numpy.random.RandomState`
 * that Megatron-core's dataset code uses: MT19937 seeded from a 32-bit
 * integer (`RandomState(seed)`), and `RandomState.shuffle` of a 1-D array
 * (Fisher–Yates from the last element down, index j drawn by NumPy's
 * `random_interval`: the smallest all-ones mask >= i, rejection sampling on
 * 32-bit draws while i < 2^32, on 64-bit draws (high word first) above).
 * Bit-for-bit NumPy's permutations (tests/unit/data/test_data_np_random.c pins
 * values; tests/integration/test_data_megatron_order.sh checks against
 * Debian's numpy). Matsumoto & Nishimura 1998. */
#ifndef MT_DATA_NP_RANDOM_H
#define MT_DATA_NP_RANDOM_H

#include <stdint.h>

typedef struct {
  uint32_t key[624];
  int pos;
} mt_np_random;

/* RandomState(seed): MT19937 init_genrand. */
void mt_np_random_seed(mt_np_random *r, uint32_t seed);
/* One 32-bit output (MT19937 genrand_int32). */
uint32_t mt_np_random_u32(mt_np_random *r);
/* NumPy's next_uint64 of MT19937: (first draw << 32) | second draw. */
uint64_t mt_np_random_u64(mt_np_random *r);
/* NumPy's random_interval: uniform integer in [0, max]. */
uint64_t mt_np_random_interval(mt_np_random *r, uint64_t max);
/* RandomState.shuffle of a[0, n). */
void mt_np_shuffle_i32(mt_np_random *r, int32_t *a, int64_t n);
void mt_np_shuffle_i64(mt_np_random *r, int64_t *a, int64_t n);

#endif
