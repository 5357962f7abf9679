/* core/backend.c — allocator bookkeeping, grouped-GEMM and FP8 block helpers
 * shared by the backends, and backend destruction (the factory is backends/registry.c). */
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

mt_gemm_desc mt_gemm_grouped_member(const mt_gemm_grouped_desc *d, int g) {
  mt_gemm_desc e = {.trans_a = d->trans_a, .trans_b = d->trans_b, .m = d->m[g], .n = d->n[g],
                    .k = d->k[g], .alpha = d->alpha, .beta = d->beta, .a = d->a[g],
                    .lda = d->lda, .b = d->b[g], .ldb = d->ldb, .c = d->c[g], .ldc = d->ldc,
                    .a_type = d->a_type, .b_type = d->b_type, .c_type = d->c_type,
                    .bias = d->bias ? d->bias[g] : NULL, .batch = 1};
  return e;
}

int mt_gemm_grouped_stages(const mt_gemm_grouped_desc *d, int *stage) {
  int nstage = 0;
  for (int g = 0; g < d->groups; g++) {
    stage[g] = 0;
    for (int j = 0; j < g; j++) stage[g] += d->c[j] == d->c[g];
    if (stage[g] + 1 > nstage) nstage = stage[g] + 1;
  }
  return nstage;
}

void mt_fp8_block_dims(const mt_fp8_desc *d, int64_t *bh, int64_t *bw) {
  switch (d->blocking) {
  case MT_FP8_BLOCK_1X128: *bh = 1, *bw = 128; return;
  case MT_FP8_BLOCK_128X128: *bh = 128, *bw = 128; return;
  case MT_FP8_MX32: *bh = 1, *bw = 32; return;
  case MT_FP8_BLOCK_128X1: *bh = 128, *bw = 1; return;
  case MT_FP8_MX32_COL: *bh = 32, *bw = 1; return;
  default: *bh = d->rows > 0 ? d->rows : 1, *bw = d->cols > 0 ? d->cols : 1; return;
  }
}

int64_t mt_fp8_n_scales(const mt_fp8_desc *d) {
  int64_t bh, bw;
  mt_fp8_block_dims(d, &bh, &bw);
  return ((d->rows + bh - 1) / bh) * ((d->cols + bw - 1) / bw);
}

void mt_backend_destroy(mt_backend *be) {
  if (be) be->destroy(be);
}
