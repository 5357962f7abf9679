/* cuda/cuda_backend_nocuda.c — built with CUDA=0: the cuda device reports
 * that this binary has no CUDA backend. */
#include <stdio.h>

#include "cuda/cuda_backend.h"

mt_backend *mt_cuda_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  (void)opt;
  snprintf(err, errlen, "this megatrain was built with CUDA=0; rebuild with the CUDA toolkit for \"device\": \"cuda\"");
  return NULL;
}
