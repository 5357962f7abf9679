/* core/hash.h — the project's 64-bit hashes, in one place.
 *
 *  - FNV-1a 64 (Fowler–Noll–Vo, byte at a time): replica checks, the config
 *    agreement hash, RNG key derivation from a name. Chain calls by passing
 *    the previous value; start from MT_FNV1A64_INIT.
 *  - mt_hash_bytes: a faster word-at-a-time FNV-style hash with a final mix
 *    (data/ hash tables and index-cache names); not FNV-1a, values differ.
 * Pure functions; no state. */
#ifndef MT_CORE_HASH_H
#define MT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define MT_FNV1A64_INIT 0xCBF29CE484222325ull /* offset basis */
#define MT_FNV1A64_PRIME 0x100000001B3ull

/* FNV-1a 64 of n bytes at p, continuing from h. */
static inline uint64_t mt_fnv1a64(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  for (size_t k = 0; k < n; k++) h = (h ^ s[k]) * MT_FNV1A64_PRIME;
  return h;
}

/* FNV-1a 64 of the NUL-terminated string s (NULL hashes as ""), continuing from h. */
static inline uint64_t mt_fnv1a64_str(uint64_t h, const char *s) {
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
    h = (h ^ *p) * MT_FNV1A64_PRIME;
  return h;
}

/* Word-at-a-time 64-bit hash of n bytes with final avalanche; `h` chains
 * calls (start with 0). */
uint64_t mt_hash_bytes(const void *p, size_t n, uint64_t h);

#endif
