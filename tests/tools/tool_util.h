/* tests/tools/tool_util.h — helpers shared by the test tools and unit tests:
 * CHECK(cond, printf-format, ...) prints the message and exits 1 when cond
 * is false; a one-thread fp32 CPU backend (fatal if none); a model's
 * parameters copied to a new host buffer (the caller frees it). */
#ifndef MT_TESTS_TOOL_UTIL_H
#define MT_TESTS_TOOL_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "backends/registry.h"
#include "core/util.h"
#include "model/gpt.h"

#define CHECK(c, ...)                        \
  do {                                       \
    if (!(c)) {                              \
      fprintf(stderr, __VA_ARGS__);          \
      fprintf(stderr, "\n");                 \
      exit(1);                               \
    }                                        \
  } while (0)

static inline mt_backend *mt_tool_cpu_backend(void) {
  char err[256];
  mt_backend_options o = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("%s", err);
  return be;
}

static inline float *mt_tool_host_params(mt_backend *be, mt_gpt *m) {
  const mt_param_list *pl = mt_gpt_params(m);
  float *h = mt_xmalloc((size_t)pl->numel * sizeof(float));
  be->ops->memcpy_d2h(be, h, mt_gpt_param_buffer(m), (size_t)pl->numel * sizeof(float));
  return h;
}

#endif
