/* core/rng.c — key derivation for the counter-based RNG (see rng.h). */
#include "rng.h"

#include "hash.h"

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

mt_rng_key_t mt_rng_key(uint64_t seed, const char *name, uint64_t a, uint64_t b) {
  uint64_t h = mt_fnv1a64_str(MT_FNV1A64_INIT, name);
  uint64_t x = splitmix64(seed ^ splitmix64(h ^ splitmix64(a ^ splitmix64(b))));
  mt_rng_key_t k = {{(uint32_t)x, (uint32_t)(x >> 32)}};
  return k;
}
