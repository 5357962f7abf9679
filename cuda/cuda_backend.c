/* cuda/cuda_backend.c — placeholder until the CUDA backend lands (issue 9):
 * device selection is checked so users get a clear message. */
#include <stdio.h>

#include <cuda_runtime.h>

#include "core/backend.h"

mt_backend *mt_cuda_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    snprintf(err, errlen, "no usable CUDA device: cudaGetDeviceCount failed with %s (%s)",
             cudaGetErrorName(e), cudaGetErrorString(e));
    return NULL;
  }
  (void)opt;
  snprintf(err, errlen, "the CUDA backend's ops are not implemented in this build yet (%d device(s) found)", n);
  return NULL;
}
