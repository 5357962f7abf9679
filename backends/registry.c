/* backends/registry.c — see registry.h. */
#include "backends/registry.h"

#include <stdio.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"

void mt_backends_process_init(const mt_backend_options *opt) {
  if (!strcmp(opt->device, "cpu")) mt_cpu_process_init(opt->num_threads);
}

mt_backend *mt_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  if (!strcmp(opt->device, "cpu")) return mt_cpu_backend_create(opt, err, errlen);
  if (!strcmp(opt->device, "cuda")) return mt_cuda_backend_create(opt, err, errlen);
  snprintf(err, errlen, "unknown device '%s' (expected \"cpu\" or \"cuda\")", opt->device);
  return NULL;
}
