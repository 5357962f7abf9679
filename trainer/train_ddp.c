/* trainer/train_ddp.c — glue between the model's parameter list and the
 * bucketed data-parallel all-reduce (parallel/ddp.h), and the choice between
 * it and ZeRO's reduction (see train_internal.h). */
#include <stdlib.h>

#include "core/util.h"
#include "trainer/train_internal.h"

void mt_trainer_ddp_init(mt_trainer *t) {
  const mt_param_list *pl = mt_gpt_params(t->model);
  int64_t n = pl->numel;
  /* runs of dense parameters reduce over dp, runs of experts over edp (the
   * ranks holding the same experts); both sums give the global-batch mean
   * gradient since the loss is pre-normalised */
  mt_ddp_range *r = mt_xcalloc((size_t)pl->n + 1, sizeof *r);
  int n_r = 0;
  int64_t start = 0;
  for (int i = 0; i <= pl->n; i++) {
    int kind = i < pl->n ? pl->p[i].is_expert : -1;
    int prev = i > 0 ? pl->p[i - 1].is_expert : kind;
    if (i > 0 && kind == prev) continue;
    int64_t end = i < pl->n ? pl->p[i].offset : n;
    if (i > 0) r[n_r++] = (mt_ddp_range){start, end, prev ? t->ps->edp : t->dp_group};
    start = end;
  }
  mt_ddp_buffer_build(&t->ddp, r, n_r, t->cfg->parallel.ddp_bucket_size);
  free(r);
}

void mt_trainer_reduce_gradients(mt_trainer *t) {
  if (t->zero) {
    mt_zero_opt_reduce_gradients(t->zero);
    return;
  }
  mt_ddp_allreduce(&t->ddp, mt_gpt_grad_buffer(t->model));
}
