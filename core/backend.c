/* core/backend.c — backend factory and allocator bookkeeping. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

const char *mt_mem_cat_name(mt_mem_cat c) {
  static const char *names[MT_MEM_NCAT] = {"parameters", "gradients", "optimizer_state",
                                           "activations", "communication", "workspace"};
  return (c >= 0 && c < MT_MEM_NCAT) ? names[c] : "?";
}

void mt_mem_account(mt_mem_stats *st, mt_mem_cat cat, int64_t bytes) {
  st->live[cat] = (size_t)((int64_t)st->live[cat] + bytes);
  st->live_total = (size_t)((int64_t)st->live_total + bytes);
  if (st->live[cat] > st->peak[cat]) st->peak[cat] = st->live[cat];
  if (st->live_total > st->peak_total) st->peak_total = st->live_total;
  if (bytes > 0) st->n_allocs++;
  else if (bytes < 0) st->n_frees++;
}

void mt_mem_reset_peak(mt_mem_stats *st) {
  for (int c = 0; c < MT_MEM_NCAT; c++) st->peak[c] = st->live[c];
  st->peak_total = st->live_total;
}

mt_backend *mt_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  if (!strcmp(opt->device, "cpu")) return mt_cpu_backend_create(opt, err, errlen);
  if (!strcmp(opt->device, "cuda")) return mt_cuda_backend_create(opt, err, errlen);
  snprintf(err, errlen, "unknown device '%s' (expected \"cpu\" or \"cuda\")", opt->device);
  return NULL;
}

void mt_backend_destroy(mt_backend *be) {
  if (be) be->destroy(be);
}
