/* bench/bench_zero.c — ZeRO stages 0-3 side by side: training tokens/s,
 * per-rank model-state memory (allocator: parameters, gradients, optimizer
 * state; max over ranks), the parameter peak (stage 3: shard + working layers), and the bus bytes
 * each rank's collectives move per step. Run under mpirun (dp = ranks).
 *
 * usage: mpirun -np 4 bench_zero --config FILE [--set k=v]... [--steps N]
 * (bench/bench_zero.sh runs it at dp=4 on the test model.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "config/config.h"
#include "trainer/train_internal.h"

static void run_stage(mt_dist *dist, const char *path, const char **sets, int n_sets, int stage,
                      int steps) {
  char err[4096], st_set[64];
  snprintf(st_set, sizeof st_set, "parallel.zero_stage=%d", stage);
  sets[n_sets] = st_set;
  mt_config cfg;
  if (mt_config_load(&cfg, path, sets, n_sets + 1, mt_dist_size(dist), err, sizeof err) != 0)
    mt_fatal("bench_zero: %s", err);
  mt_trainer T;
  if (mt_trainer_setup(&T, &cfg, dist, err, sizeof err) != 0) mt_fatal("bench_zero: %s", err);
  mt_trainer_step(&T, 1); /* warm-up */
  mt_mem_reset_peak(&T.be->mem);
  mt_barrier(T.world);
  double t0 = mt_now();
  int64_t comm = 0;
  for (int i = 0; i < steps; i++) {
    mt_trainer_step(&T, 2 + i); /* counters restart at every step */
    int64_t bytes, bus;
    mt_trainer_comm_totals(&T, &bytes, &bus);
    comm += bus;
  }
  mt_barrier(T.world);
  double dt = mt_now() - t0;
  const mt_mem_stats *ms = &T.be->mem;
  double v[5] = {(double)ms->live[MT_MEM_PARAM], (double)ms->live[MT_MEM_GRAD],
                 (double)ms->live[MT_MEM_OPTIM], (double)ms->peak[MT_MEM_PARAM],
                 (double)comm / steps};
  mt_allreduce(T.world, v, 5, MT_F64, MT_OP_MAX);
  if (mt_dist_rank(dist) == 0) {
    double tok = (double)cfg.training.global_batch_size * cfg.model.seq_length * steps / dt;
    const double MiB = 1048576.0;
    printf("| %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", stage, T.dp, tok,
           v[0] / MiB, v[1] / MiB, v[2] / MiB, (v[0] + v[1] + v[2]) / MiB, v[3] / MiB,
           v[4] / MiB);
    fflush(stdout);
  }
  mt_trainer_teardown(&T);
  mt_config_free(&cfg);
}

int main(int argc, char **argv) {
  const char *path = NULL;
  const char **sets = calloc((size_t)argc + 2, sizeof(char *));
  int n_sets = 0, steps = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--set") && i + 1 < argc) sets[n_sets++] = argv[++i];
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
  }
  if (!path || steps < 1) {
    fprintf(stderr, "usage: bench_zero --config FILE [--set k=v]... [--steps N]\n");
    return 2;
  }
  mt_dist *dist = mt_dist_init(&argc, &argv);
  if (mt_dist_rank(dist) == 0)
    printf("| zero_stage | dp | tokens/s | params MiB | grads MiB | optim MiB | model state MiB "
           "| params peak MiB | comm bus MiB/step/rank |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int stage = 0; stage <= 3; stage++) run_stage(dist, path, sets, n_sets, stage, steps);
  mt_dist_finalize(dist);
  free(sets);
  return 0;
}
