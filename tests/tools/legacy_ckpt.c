/* tests/tools/legacy_ckpt.c — a checkpoint of megatrain's previous
 * per-layout format (checkpoint/legacy_format.h: mp_rank_TT[_PPP]/
 * model_optim_rng.bin, with ZeRO distrib_optim_dpNNN.bin shards) written at
 * test time, so that the tests keep proving that such checkpoints still load
 * (the trainer only saves the layout-free format now). Builds the trainer
 * from the config, loads checkpoint.load (a layout-free checkpoint) into
 * it, and writes the same state with the previous format's writer into
 * checkpoint.save. Run under mpirun -np N with the layout to write.
 * Usage: legacy_ckpt --config FILE [--set section.key=value]...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "parallel/comm.h"
#include "checkpoint/legacy_reader.h"
#include "checkpoint/legacy_records.h"
#include "checkpoint/legacy_zero.h"
#include "tests/support/legacy_writer.h"
#include "trainer/train_internal.h"

int main(int argc, char **argv) {
  const char *path = NULL;
  const char **sets = calloc((size_t)argc + 1, sizeof(char *));
  int n_sets = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
  }
  if (!path) {
    fprintf(stderr, "usage: legacy_ckpt --config FILE [--set k=v]...\n");
    return 2;
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  const int rank = mt_dist_rank(dist);
  char err[4096];
  mt_config cfg;
  int rc = 1;
  if (mt_config_load(&cfg, path, sets, n_sets, mt_dist_size(dist), err, sizeof err) != 0) {
    if (rank == 0) fprintf(stderr, "legacy_ckpt: %s\n", err);
    mt_dist_finalize(dist);
    free(sets);
    return 2;
  }
  mt_trainer T, *t = &T;
  if (mt_trainer_setup(t, &cfg, dist, err, sizeof err) != 0) {
    fprintf(stderr, "legacy_ckpt: [rank %d] %s\n", rank, err);
  } else {
    mt_ckpt_state st = {.iteration = t->iteration,
                        .consumed_samples = t->consumed_samples,
                        .skipped_iters = t->skipped_iters,
                        .nan_iters = t->nan_iters,
                        .seed = cfg.training.seed};
    mt_ckpt_layout L = {.tp_rank = t->ps->tp_rank,
                        .pp_rank = t->ps->pp_rank,
                        .pp_size = cfg.parallel.pipeline_model_parallel_size,
                        .writer = t->ps->dp_cp_rank == 0,
                        .world = t->world};
    if (t->zero) {
      L.shard_save = mt_zero_ckpt_save;
      L.shard_ctx = t->zero;
    }
    mt_ckpt_buffer *bufs = NULL;
    L.n_buffers = mt_trainer_moe_ckpt_buffers(t, &bufs);
    L.buffers = bufs;
    if (mt_checkpoint_save(cfg.checkpoint.save, &st, cfg.json, &t->opt, &L, err, sizeof err) != 0)
      fprintf(stderr, "legacy_ckpt: [rank %d] %s\n", rank, err);
    else
      rc = 0;
    free(bufs);
    if (rc == 0 && rank == 0)
      printf("legacy_ckpt: wrote iteration %lld to %s in the per-layout format\n",
             (long long)st.iteration, cfg.checkpoint.save);
  }
  mt_trainer_teardown(t);
  mt_config_free(&cfg);
  mt_dist_finalize(dist);
  free(sets);
  return rc;
}
