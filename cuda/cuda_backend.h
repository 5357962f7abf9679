/* cuda/cuda_backend.h — entry points of the CUDA backend. The backend is
 * created through the registry (backends/registry.h: mt_backend_create),
 * which calls mt_cuda_backend_create; builds with CUDA=0 link a stub
 * (cuda_backend_nocuda.c) that always fails with a message. */
#ifndef MT_CUDA_BACKEND_H
#define MT_CUDA_BACKEND_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create the CUDA backend on GPU (opt->local_rank % device count), storage
 * dtype opt->dtype = MT_F32 or MT_BF16 (fp32 master weights and gradients).
 * Returns NULL with a message in err when the dtype is unsupported, no GPU is
 * usable ("no usable CUDA device: ..."), or the binary was built with
 * CUDA=0. Per process, not collective. */
mt_backend *mt_cuda_backend_create(const mt_backend_options *opt, char *err, size_t errlen);

/* The CUDA op table (MT_HAVE_CUDA builds only), available without a GPU
 * (tests check that every entry is set and none is a cpu/ function). */
const mt_backend_ops *mt_cuda_backend_ops(void);

#ifdef __cplusplus
}
#endif

#endif
