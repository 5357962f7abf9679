/* tests/tools/comm_fail.c — failure propagation checks for the runtime.
 * Usage (under mpirun/srun):
 *   comm_fail fatal R   rank R calls mt_fatal after 0.5 s while the others
 *                       wait in an all-reduce on the world group
 *   comm_fail kill R    rank R kills itself with SIGKILL at the same point
 *   comm_fail nccl      every rank asks for an NCCL group (fatal without GPU)
 *   comm_fail agree     ranks pass different values to mt_dist_check_agree
 *                       and exit 3 with the message (rank 0 prints it)
 * In every mode the job must end with a non-zero status, never hang. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "parallel/comm.h"

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const char *mode = argc > 1 ? argv[1] : "fatal";
  int victim = argc > 2 ? atoi(argv[2]) : 1;
  int rank = mt_dist_rank(d);
  if (!strcmp(mode, "nccl")) {
    int *all = mt_xmalloc(sizeof(int) * (size_t)mt_dist_size(d));
    for (int i = 0; i < mt_dist_size(d); i++) all[i] = i;
    mt_group *g = mt_group_create(d, all, mt_dist_size(d), "world_nccl", MT_ENGINE_NCCL);
    mt_group_destroy(g);
    free(all);
    printf("rank %d: NCCL group created\n", rank);
  } else if (!strcmp(mode, "agree")) {
    char err[256];
    if (mt_dist_check_agree(d, (uint64_t)(rank % 2), "config hash", err, sizeof err) != 0) {
      if (rank == 0) fprintf(stderr, "error: %s\n", err);
      mt_dist_finalize(d);
      return 3;
    }
  } else {
    float x = 1;
    if (rank == victim) {
      struct timespec ts = {0, 500000000};
      nanosleep(&ts, NULL);
      if (!strcmp(mode, "kill")) raise(SIGKILL);
      mt_fatal("rank %d fails on purpose (comm_fail test)", rank);
    }
    mt_allreduce(mt_dist_world(d), &x, 1, MT_F32, MT_OP_SUM);
    printf("rank %d: all-reduce returned %g (unexpected)\n", rank, x);
  }
  mt_dist_finalize(d);
  return 0;
}
