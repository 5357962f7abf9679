/* core/dtype.h — element types of tensors and messages: the enum shared by
 * the backend op table (core/backend.h) and the group API (parallel/comm.h),
 * and the size and name of each. Host-only, no state. */
#ifndef MT_CORE_DTYPE_H
#define MT_CORE_DTYPE_H

#include <stddef.h>

typedef enum { MT_F32 = 0, MT_BF16 = 1, MT_I32 = 2, MT_I64 = 3, MT_F64 = 4 } mt_dtype;

/* Size in bytes of one element (0 for a value outside the enum). */
size_t mt_dtype_size(mt_dtype t);
/* Short name for messages: "fp32", "bf16", "int32", "int64", "fp64" ("?"
 * outside the enum). */
const char *mt_dtype_name(mt_dtype t);

#endif
