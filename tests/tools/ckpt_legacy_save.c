/* tests/tools/ckpt_legacy_save.c — writes a checkpoint in megatrain's
 * previous per-layout format (trainer/checkpoint.h: iter_NNNNNNN/mp_rank_*
 * with model_optim_rng.bin, or the ZeRO shard files distrib_optim_dp*.bin),
 * which the trainer no longer writes, so that tests can check that such
 * checkpoints still load and that `megatrain convert --upgrade` rewrites
 * them (tests/integration/test_ckpt_upgrade.sh).
 *
 * Builds the trainer from the config as `megatrain` does, runs
 * training.train_iters iterations with mt_trainer_step (the same steps as
 * the training loop: no evaluation or logging) and saves the result with
 * mt_checkpoint_save into checkpoint.save, writers and ZeRO shard hooks as
 * the trainer set them before the layout-free format. Run under mpirun -np N.
 * Usage: ckpt_legacy_save --config FILE [--set section.key=value]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "config/config.h"
#include "core/util.h"
#include "parallel/comm.h"
#include "trainer/checkpoint.h"
#include "trainer/train_internal.h"

int main(int argc, char **argv) {
  const char *path = NULL;
  const char **sets = calloc((size_t)argc + 1, sizeof(char *));
  int n_sets = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
    else {
      fprintf(stderr, "usage: ckpt_legacy_save --config FILE [--set section.key=value]...\n");
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: ckpt_legacy_save --config FILE [--set section.key=value]...\n");
    return 2;
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  const int rank = mt_dist_rank(dist);
  char err[4096];
  mt_config cfg;
  if (mt_config_load(&cfg, path, sets, n_sets, mt_dist_size(dist), err, sizeof err) != 0) {
    if (rank == 0) fprintf(stderr, "ckpt_legacy_save: %s\n", err);
    return 2;
  }
  free(sets);
  if (!cfg.checkpoint.save[0] || cfg.checkpoint.load[0]) {
    if (rank == 0) fprintf(stderr, "ckpt_legacy_save: needs checkpoint.save and no checkpoint.load\n");
    return 2;
  }
  mt_backends_process_init(
      &(mt_backend_options){.device = cfg.device, .num_threads = cfg.training.num_threads});
  mt_trainer T, *t = &T;
  if (mt_trainer_setup(t, &cfg, dist, err, sizeof err) != 0) {
    fprintf(stderr, "ckpt_legacy_save: [rank %d] %s\n", rank, err);
    mt_abort_job(1);
  }
  for (int64_t it = 1; it <= cfg.training.train_iters; it++) {
    mt_step_result r = mt_trainer_step(t, it);
    t->iteration = it;
    if (r.skipped) t->skipped_iters++, t->nan_iters++;
    if (rank == 0) printf("iteration %lld lm loss %.9e\n", (long long)it, r.lm_loss);
  }
  mt_ckpt_state st = {.iteration = t->iteration,
                      .consumed_samples = t->consumed_samples,
                      .skipped_iters = t->skipped_iters,
                      .nan_iters = t->nan_iters,
                      .seed = cfg.training.seed};
  mt_ckpt_layout L = {0};
  L.tp_rank = t->ps->tp_rank;
  L.pp_rank = t->ps->pp_rank;
  L.pp_size = cfg.parallel.pipeline_model_parallel_size;
  L.writer = t->ps->dp_cp_rank == 0;
  L.world = t->world;
  if (t->zero) {
    L.shard_save = mt_zero_ckpt_save;
    L.shard_load = mt_zero_ckpt_load;
    L.shard_ctx = t->zero;
  }
  mt_ckpt_buffer *bufs = NULL;
  L.n_buffers = mt_trainer_moe_ckpt_buffers(t, &bufs);
  L.buffers = bufs;
  int rc = mt_checkpoint_save(cfg.checkpoint.save, &st, cfg.json, &t->opt, &L, err, sizeof err);
  free(bufs);
  if (rc != 0) {
    fprintf(stderr, "ckpt_legacy_save: [rank %d] %s\n", rank, err);
    mt_abort_job(1);
  }
  if (rank == 0)
    printf("saved legacy checkpoint at iteration %lld to %s\n", (long long)t->iteration,
           cfg.checkpoint.save);
  mt_trainer_teardown(t);
  mt_config_free(&cfg);
  mt_dist_finalize(dist);
  return 0;
}
