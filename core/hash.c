/* core/hash.c — word-at-a-time hash (declared in core/hash.h). */
#include "hash.h"

#include <string.h>

uint64_t mt_hash_bytes(const void *p, size_t n, uint64_t h) {
  const uint8_t *s = p;
  h ^= 0xCBF29CE484222325ull ^ (n * 0x9E3779B97F4A7C15ull);
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * MT_FNV1A64_PRIME;
    h ^= h >> 29;
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * MT_FNV1A64_PRIME;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}
