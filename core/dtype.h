/* core/dtype.h — element types of tensors and messages: the enum shared by
 * the backend op table (core/backend.h) and the group API (parallel/comm.h),
 * and the size and name of each. Host-only, no state. */
#ifndef MT_CORE_DTYPE_H
#define MT_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* MT_U8: raw bytes (FP8 codes in fp8_param_gather's all-gathers); never an
 * element type of the backend's tensors or of a reduction. */
typedef enum { MT_F32 = 0, MT_BF16 = 1, MT_I32 = 2, MT_I64 = 3, MT_F64 = 4, MT_U8 = 5 } mt_dtype;

/* Size in bytes of one element (0 for a value outside the enum). */
size_t mt_dtype_size(mt_dtype t);
/* Short name for messages: "fp32", "bf16", "int32", "int64", "fp64", "uint8" ("?"
 * outside the enum). */
const char *mt_dtype_name(mt_dtype t);

/* bf16 (raw 16 bits: the top half of an fp32) from fp32, round to nearest
 * even; NaN stays NaN (quiet bit set), infinities stay infinite. Bitwise the
 * conversion of cuda/ (cuda/cuda_dev.cuh f2bf_bits), so cpu/ and cuda/
 * round every bf16 output alike. */
static inline uint16_t mt_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* fp32 from bf16 (exact). */
static inline float mt_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif
