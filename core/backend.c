/* core/backend.c — allocator bookkeeping and backend destruction (the
 * factory is backends/registry.c). */
#include "backend.h"

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

void mt_backend_destroy(mt_backend *be) {
  if (be) be->destroy(be);
}
