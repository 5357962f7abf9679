/* data/np_random.c — NumPy RandomState's MT19937 and legacy shuffle (see
 * np_random.h). */
#include "data/np_random.h"

enum { N = 624, M = 397 };

void mt_np_random_seed(mt_np_random *r, uint32_t seed) {
  for (int i = 0; i < N; i++) {
    r->key[i] = seed;
    seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
  }
  r->pos = N;
}

static void generate(mt_np_random *r) {
  const uint32_t upper = 0x80000000u, lower = 0x7fffffffu, matrix_a = 0x9908b0dfu;
  int i;
  uint32_t y;
  for (i = 0; i < N - M; i++) {
    y = (r->key[i] & upper) | (r->key[i + 1] & lower);
    r->key[i] = r->key[i + M] ^ (y >> 1) ^ ((y & 1u) ? matrix_a : 0u);
  }
  for (; i < N - 1; i++) {
    y = (r->key[i] & upper) | (r->key[i + 1] & lower);
    r->key[i] = r->key[i + (M - N)] ^ (y >> 1) ^ ((y & 1u) ? matrix_a : 0u);
  }
  y = (r->key[N - 1] & upper) | (r->key[0] & lower);
  r->key[N - 1] = r->key[M - 1] ^ (y >> 1) ^ ((y & 1u) ? matrix_a : 0u);
  r->pos = 0;
}

uint32_t mt_np_random_u32(mt_np_random *r) {
  if (r->pos == N) generate(r);
  uint32_t y = r->key[r->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t mt_np_random_u64(mt_np_random *r) {
  uint64_t hi = mt_np_random_u32(r);
  return hi << 32 | mt_np_random_u32(r);
}

uint64_t mt_np_random_interval(mt_np_random *r, uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max, v;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  if (max <= 0xffffffffu) {
    while ((v = (mt_np_random_u32(r) & mask)) > max) {
    }
  } else {
    while ((v = (mt_np_random_u64(r) & mask)) > max) {
    }
  }
  return v;
}

void mt_np_shuffle_i32(mt_np_random *r, int32_t *a, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t j = mt_np_random_interval(r, (uint64_t)i);
    int32_t t = a[j];
    a[j] = a[i];
    a[i] = t;
  }
}

void mt_np_shuffle_i64(mt_np_random *r, int64_t *a, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t j = mt_np_random_interval(r, (uint64_t)i);
    int64_t t = a[j];
    a[j] = a[i];
    a[i] = t;
  }
}
