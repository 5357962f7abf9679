/* tests/support/probe_optimizer.c — the ZeRO memory formulas summed over a
 * rank's parts, and the expert part of the gradient norm (tests/support/
 * probes.h). */
#include <string.h>

#include "core/dtype.h"
#include "tests/support/probes.h"

void mt_zero_opt_part_expected_bytes(const mt_zero_opt *z, int k, size_t out[MT_MEM_NCAT]) {
  memset(out, 0, sizeof(size_t) * MT_MEM_NCAT);
  const mt_zero_part *P = &z->part[k];
  const mt_param_list *pl = z->params;
  /* the full buffers of stages 1/2 count the whole flat buffer: its
   * alignment gaps go to the dense part */
  size_t full = 0;
  if (k == 0) {
    full = (size_t)pl->numel;
    for (int i = 0; i < pl->n; i++)
      if (pl->p[i].is_expert) full -= (size_t)pl->p[i].numel;
  } else {
    for (int i = 0; i < pl->n; i++)
      if (pl->p[i].is_expert) full += (size_t)pl->p[i].numel;
  }
  size_t sn = (size_t)P->L.shard_numel, es = mt_dtype_size(z->be->dtype);
  out[MT_MEM_PARAM] = (z->o.stage == 3 ? sn : full) * es;
  out[MT_MEM_GRAD] = (z->o.stage == 1 ? full : sn) * sizeof(float);
  out[MT_MEM_OPTIM] = sn * sizeof(float) * (P->master ? 3 : 2);
}

void mt_zero_opt_expected_bytes(const mt_zero_opt *z, size_t out[MT_MEM_NCAT]) {
  memset(out, 0, sizeof(size_t) * MT_MEM_NCAT);
  for (int k = 0; k < z->n_part; k++) {
    size_t b[MT_MEM_NCAT];
    mt_zero_opt_part_expected_bytes(z, k, b);
    for (int c = 0; c < MT_MEM_NCAT; c++) out[c] += b[c];
  }
}

double mt_grad_sumsq_experts(const mt_adamw *opt) {
  mt_backend *be = opt->be;
  const mt_param_list *pl = opt->params;
  be->ops->memset0(be, opt->norm_acc, sizeof(double));
  for (int i = 0; i < pl->n; i++)
    if (pl->p[i].is_expert)
      be->ops->sumsq_acc_f32(be, opt->norm_acc, opt->grad_buf + pl->p[i].offset, pl->p[i].numel);
  return mt_grad_sumsq_acc_read(be, opt->norm_acc);
}
