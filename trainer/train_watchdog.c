/* trainer/train_watchdog.c — see train_watchdog.h. */
#include "trainer/train_watchdog.h"

#include "core/failpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mt_trainer_watchdog_start(const mt_config *cfg, mt_dist *dist) {
  mt_dist_set_timeout(dist, cfg->parallel.distributed_timeout_minutes);
}

/* MEGATRAIN_FAILPOINT=freeze:RANK:ITER (core/failpoint.h) names this rank
 * and iteration. */
static int freeze_here(int rank, int64_t iteration) {
  int64_t a[MT_FAILPOINT_MAX_ARGS];
  return mt_failpoint_get("freeze", a) == 2 && a[0] == rank && a[1] == iteration;
}

void mt_trainer_iteration_begin(mt_dist *dist, int64_t iteration) {
  mt_dist_set_phase(dist, iteration, -1);
  int rank = mt_dist_rank(dist);
  if (!freeze_here(rank, iteration)) return;
  fprintf(stderr, "[rank %d] megatrain: failpoint freeze: rank %d stops at the start of "
                  "iteration %lld\n", rank, rank, (long long)iteration);
  fflush(stderr);
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
  }
}
