/* trainer/zero_trainer.c — glue between the trainer and the ZeRO optimizer
 * (see train_internal.h): construction from the config, full-parameter
 * copies for the replica check, and per-step communication totals. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "optimizer/fp8_param_gather.h"
#include "trainer/train_internal.h"

mt_zero_opt *mt_trainer_zero_create(mt_trainer *t) {
  const mt_config *c = t->cfg;
  mt_zero_options o = {.stage = c->parallel.zero_stage,
                       .prefetch = c->parallel.zero_prefetch_layers,
                       .bucket_size = c->parallel.ddp_bucket_size,
                       .beta1 = c->training.adam_beta1,
                       .beta2 = c->training.adam_beta2,
                       .eps = c->training.adam_eps,
                       .weight_decay = c->training.weight_decay};
  mt_zero_opt *z = mt_xcalloc(1, sizeof *z);
  /* dense parameters shard over dp x cp; expert parameters (MoE) over the
   * expert-data-parallel group, their norm over etp x ep and the pipeline */
  const int moe = c->model.num_experts > 0;
  mt_zero_groups g = {.dp = t->dp_group,
                      .mp = t->ps->mp,
                      .tp_rank = t->ps->tp_rank,
                      .edp = moe ? t->ps->edp : NULL,
                      .etp_ep = moe ? t->ps->etp_ep : NULL,
                      .pp = moe ? t->ps->pp : NULL,
                      .etp_rank = t->ps->etp_rank,
                      .etp = t->topo.etp,
                      .ep = t->topo.ep,
                      .ep_rank = t->ps->ep_rank};
  mt_zero_opt_init(z, t->be, t->model, &g, &o);
  /* FP8 weights gathered as e4m3 codes (docs/fp8.md "FP8 parameter gather") */
  if (c->training.fp8_param_gather) mt_fp8pg_create(z, t->ps->tp);
  return z;
}

void mt_trainer_zero_destroy(mt_zero_opt *z) {
  if (!z) return;
  if (z->dense_gather) mt_fp8pg_destroy(z->dense_ctx);
  mt_zero_opt_free(z);
  free(z);
}

void mt_trainer_zero_full_params_host(mt_trainer *t, void *host) {
  mt_trainer_params_wait(t);
  mt_backend *be = t->be;
  size_t bytes = (size_t)mt_gpt_params(t->model)->numel * mt_dtype_size(be->dtype);
  void *dev = be->ops->alloc(be, bytes, MT_MEM_COMM);
  mt_zero_opt_full_params(t->zero, dev);
  be->ops->memcpy_d2h(be, host, dev, bytes);
  be->ops->free(be, dev);
}

void mt_trainer_comm_totals(const mt_trainer *t, int64_t *bytes, int64_t *bus_bytes) {
  int64_t b = 0, bb = 0;
  mt_group *seen[MT_GK_N + 1];
  int n_seen = 0;
  for (int k = 0; k <= MT_GK_N; k++) {
    mt_group *g = k < MT_GK_N ? t->ps->by_kind[k] : t->ps->world_group;
    int dup = !g;
    for (int j = 0; j < n_seen && !dup; j++) dup = seen[j] == g;
    if (dup) continue;
    seen[n_seen++] = g;
    const mt_coll_counter *c = mt_group_counters(g);
    for (int op = 0; op < MT_COLL_N; op++) {
      b += c[op].bytes;
      bb += c[op].bus_bytes;
    }
  }
  *bytes = b;
  *bus_bytes = bb;
}
