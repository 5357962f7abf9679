/* cuda/cuda_backend.h — public extras of the CUDA backend (only in builds
 * with MT_HAVE_CUDA). The backend itself is created through
 * mt_backend_create / mt_cuda_backend_create (core/backend.h). */
#ifndef MT_CUDA_BACKEND_H
#define MT_CUDA_BACKEND_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA op table, available without a GPU (tests check that every entry
 * is set and none is a cpu/ function). */
const mt_backend_ops *mt_cuda_backend_ops(void);

#ifdef __cplusplus
}
#endif

#endif
