/* trainer/train_watchdog.c — see train_watchdog.h. */
#include "trainer/train_watchdog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mt_trainer_watchdog_start(const mt_config *cfg, mt_dist *dist) {
  mt_dist_set_timeout(dist, cfg->parallel.distributed_timeout_minutes);
}

/* 1 when MEGATRAIN_FAILPOINT holds a token freeze:RANK:ITER that matches. */
static int freeze_here(int rank, int64_t iteration) {
  const char *fp = getenv("MEGATRAIN_FAILPOINT");
  if (!fp) return 0;
  for (const char *p = fp; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char tok[128];
    if (n < sizeof tok) {
      memcpy(tok, p, n);
      tok[n] = '\0';
      int r;
      long long it;
      char extra;
      if (sscanf(tok, "freeze:%d:%lld%c", &r, &it, &extra) == 2 && r == rank && it == iteration)
        return 1;
    }
    p += n;
    if (*p == ',') p++;
  }
  return 0;
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
