/* trainer/train_checkpoint.c — glue between the trainer and the checkpoint
 * format (trainer/checkpoint.h): this rank's place in the layout, the ZeRO
 * shard hooks, and the training state saved and restored with it (see
 * train_internal.h). */
#include <stdio.h>
#include <stdlib.h>

#include "trainer/checkpoint.h"
#include "trainer/train_internal.h"

static mt_ckpt_layout ckpt_layout(const mt_trainer *t) {
  mt_ckpt_layout L = {0};
  L.tp_rank = t->ps->tp_rank;
  L.pp_rank = t->ps->pp_rank;
  L.pp_size = t->cfg->parallel.pipeline_model_parallel_size;
  L.writer = t->ps->dp_cp_rank == 0; /* one writer per model-parallel rank, not per CP rank */
  L.world = t->world;
  if (t->zero) {
    L.shard_save = mt_zero_ckpt_save;
    L.shard_load = mt_zero_ckpt_load;
    L.shard_ctx = t->zero;
  }
  return L;
}

int mt_trainer_load_checkpoint(mt_trainer *t, char *err, size_t errlen) {
  const mt_config *cfg = t->cfg;
  if (cfg->checkpoint.load[0]) {
    mt_ckpt_state st = {0};
    mt_ckpt_layout L = ckpt_layout(t);
    mt_ckpt_buffer *bufs = NULL;
    L.n_buffers = mt_trainer_moe_ckpt_buffers(t, &bufs);
    L.buffers = bufs;
    int rc = mt_checkpoint_load(cfg->checkpoint.load, &st, &t->opt, &L, err, errlen);
    free(bufs);
    if (rc != 0) return -1;
    mt_trainer_moe_bias_after_load(t);
    if (t->zero) mt_zero_opt_sync_params(t->zero);
    if (st.seed != cfg->training.seed) {
      snprintf(err, errlen,
               "checkpoint in '%s' was trained with training.seed %llu but the config says %llu",
               cfg->checkpoint.load, (unsigned long long)st.seed,
               (unsigned long long)cfg->training.seed);
      return -1;
    }
    t->iteration = st.iteration;
    t->consumed_samples = st.consumed_samples;
    t->skipped_iters = st.skipped_iters;
    t->nan_iters = st.nan_iters;
  }
  if (!cfg->checkpoint.load[0] && cfg->checkpoint.save[0] && t->rank == 0) {
    int64_t old = mt_checkpoint_latest(cfg->checkpoint.save);
    if (old > 0)
      fprintf(stderr,
              "megatrain: warning: checkpoint.save '%s' already holds iteration %lld and "
              "checkpoint.load is not set: this run starts from scratch and its checkpoints "
              "will replace 'latest' (set checkpoint.load to resume)\n",
              cfg->checkpoint.save, (long long)old);
  }
  return 0;
}

int mt_trainer_save(mt_trainer *t, char *err, size_t errlen) {
  mt_ckpt_state st = {.iteration = t->iteration,
                      .consumed_samples = t->consumed_samples,
                      .skipped_iters = t->skipped_iters,
                      .nan_iters = t->nan_iters,
                      .seed = t->cfg->training.seed};
  mt_ckpt_layout L = ckpt_layout(t);
  mt_ckpt_buffer *bufs = NULL;
  L.n_buffers = mt_trainer_moe_ckpt_buffers(t, &bufs);
  L.buffers = bufs;
  int rc = mt_checkpoint_save(t->cfg->checkpoint.save, &st, t->cfg->json, &t->opt, &L, err, errlen);
  free(bufs);
  return rc;
}
