/* core/dtype.c — see dtype.h. */
#include "dtype.h"

size_t mt_dtype_size(mt_dtype t) {
  switch (t) {
    case MT_F32: return 4;
    case MT_BF16: return 2;
    case MT_I32: return 4;
    case MT_I64: return 8;
    case MT_F64: return 8;
    case MT_U8: return 1;
  }
  return 0;
}

const char *mt_dtype_name(mt_dtype t) {
  switch (t) {
    case MT_F32: return "fp32";
    case MT_BF16: return "bf16";
    case MT_I32: return "int32";
    case MT_I64: return "int64";
    case MT_F64: return "fp64";
    case MT_U8: return "uint8";
  }
  return "?";
}
