/* bench/bench_comm_async.c — started collectives hidden behind compute
 * (parallel/comm.h, "Non-blocking collectives"), under the simulated link.
 * For each collective (all-reduce, all-gather, reduce-scatter, all-to-all,
 * all-to-allv) on the world group: `iters` rounds of one collective of
 * `count` fp32 elements plus `compute_ms` of "compute" (a sleep, as a GPU
 * kernel would leave the CPU idle; a busy loop on this 2-core machine
 * would compete with the ranks' communication threads), once blocking
 * (collective, then compute) and once started (start, compute, wait).
 * Prints per collective the time per round and the exposed communication
 * per round (mt_dist_comm_time) of each way.
 *
 * usage: MEGATRAIN_SIM_LINK=1,200 mpirun -np 2 bench_comm_async
 *          [--count N] [--compute-ms X] [--iters N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "parallel/comm.h"

static const char *const names[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                    "all-to-allv"};

static mt_request *start(mt_group *g, int k, float *a, float *b, int64_t cpr, int64_t *v) {
  const int n = mt_group_size(g), r = mt_group_rank(g);
  switch (k) {
    case 0: return mt_iallreduce(g, a, cpr * n, MT_F32, MT_OP_SUM);
    case 1: return mt_iallgather(g, a + r * cpr, a, cpr, MT_F32);
    case 2: return mt_ireduce_scatter(g, a, b, cpr, MT_F32, MT_OP_SUM);
    case 3: return mt_ialltoall(g, a, b, cpr, MT_F32);
    default: return mt_ialltoallv(g, a, v, v + n, b, v, v + n, MT_F32);
  }
}

static void blocking(mt_group *g, int k, float *a, float *b, int64_t cpr, int64_t *v) {
  const int n = mt_group_size(g), r = mt_group_rank(g);
  switch (k) {
    case 0: mt_allreduce(g, a, cpr * n, MT_F32, MT_OP_SUM); break;
    case 1: mt_allgather(g, a + r * cpr, a, cpr, MT_F32); break;
    case 2: mt_reduce_scatter(g, a, b, cpr, MT_F32, MT_OP_SUM); break;
    case 3: mt_alltoall(g, a, b, cpr, MT_F32); break;
    default: mt_alltoallv(g, a, v, v + n, b, v, v + n, MT_F32); break;
  }
}

static void compute(double ms) {
  struct timespec ts = {(time_t)(ms / 1e3), (long)((int64_t)(ms * 1e6) % 1000000000)};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  int64_t count = 1 << 20;
  double compute_ms = 20;
  int iters = 10;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--compute-ms") && i + 1 < argc) compute_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else mt_fatal("usage: bench_comm_async [--count N] [--compute-ms X] [--iters N]");
  }
  mt_group *g = mt_dist_world(d);
  const int n = mt_group_size(g);
  const int64_t cpr = count / n > 0 ? count / n : 1;
  float *a = mt_xcalloc((size_t)(cpr * n), sizeof(float));
  float *b = mt_xcalloc((size_t)(cpr * n), sizeof(float));
  int64_t *v = mt_xcalloc(2 * (size_t)n, sizeof(int64_t));
  for (int i = 0; i < n; i++) v[i] = cpr, v[n + i] = (int64_t)i * cpr;
  if (mt_dist_rank(d) == 0)
    printf("bench_comm_async: %d ranks, %lld fp32 elements, %.1f ms compute per round, %d rounds, "
           "communication thread %s, MEGATRAIN_SIM_LINK=%s\n", n, (long long)(cpr * n),
           compute_ms, iters, mt_group_async(g) ? "on" : "off (started = blocking)",
           getenv("MEGATRAIN_SIM_LINK") ? getenv("MEGATRAIN_SIM_LINK") : "(none)");
  for (int k = 0; k < 5; k++) {
    double round_ms[2], exposed_ms[2], comm_ms[2];
    for (int way = 0; way < 2; way++) {
      blocking(g, k, a, b, cpr, v); /* warm-up */
      mt_barrier(g);
      mt_dist_reset_comm_time(d);
      double t0 = mt_now();
      for (int it = 0; it < iters; it++) {
        if (way == 0) {
          blocking(g, k, a, b, cpr, v);
          compute(compute_ms);
        } else {
          mt_request *h = start(g, k, a, b, cpr, v);
          compute(compute_ms);
          mt_wait(h);
        }
      }
      double dt = mt_now() - t0;
      mt_comm_time ct = mt_dist_comm_time(d, NULL);
      round_ms[way] = dt * 1e3 / iters;
      exposed_ms[way] = ct.exposed_s * 1e3 / iters;
      comm_ms[way] = ct.comm_s * 1e3 / iters;
    }
    if (mt_dist_rank(d) == 0)
      printf("%-15s blocking: %7.2f ms/round (exposed %6.2f of %6.2f ms)   started: %7.2f "
             "ms/round (exposed %6.2f of %6.2f ms)\n", names[k], round_ms[0], exposed_ms[0],
             comm_ms[0], round_ms[1], exposed_ms[1], comm_ms[1]);
  }
  free(a);
  free(b);
  free(v);
  mt_dist_finalize(d);
  return 0;
}
