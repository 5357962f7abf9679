/* tests/tools/comm_async_check.c — multi-rank check of the started
 * collectives (parallel/comm.h, "Non-blocking collectives") and of their
 * ordering rules, on 2 or 4 ranks (tests/integration/test_comm_async.sh):
 *  - handle API: every started collective (all-reduce, all-gather,
 *    reduce-scatter, all-to-all, all-to-allv) gives bitwise the blocking
 *    call's result and adds exactly the blocking call's byte counters;
 *  - rule 1 (FIFO per group): a chain of started collectives where each
 *    reads what the previous one wrote;
 *  - rule 2: a blocking call after started ones on the same buffer sees
 *    their results;
 *  - rule 3: a started collective on the pair group "dp" stays outstanding
 *    while blocking calls run on the world, then completes;
 *  - rule 4: waiting on the last handle first leaves earlier ones complete
 *    (mt_test returns 1 at once);
 *  - the accounts: per kind and total agree, and with
 *    --sim-lat-ms X (MEGATRAIN_SIM_LINK giving "dp" a latency of X ms) a
 *    blocking dp all-reduce is exposed for >= X ms and a started one
 *    executes for >= X ms (lower bounds only: sleeping never takes less);
 *    with the communication thread a started one returns from its start
 *    in < X/2 ms and, waited after X·2 ms of "compute", is exposed for
 *    < X/2 ms (the overlap itself; without the thread the start takes
 *    >= X ms).
 * Any mismatch is fatal (ends the job); rank 0 prints "comm_async_check OK".
 * Usage: comm_async_check [--sim-lat-ms X] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "parallel/comm.h"

/* Values whose fp32 sums depend on the order of addition. */
static float val(int rank, int64_t i, int salt) {
  return (float)(1.0 / (1.0 + rank * 3 + (double)i * 0.37 + salt)) * (i % 3 ? 1.0f : -1e3f);
}

static void fill(float *x, int64_t n, int rank, int salt) {
  for (int64_t i = 0; i < n; i++) x[i] = val(rank, i, salt);
}

static void same(const void *a, const void *b, size_t bytes, const char *what) {
  for (size_t i = 0; i < bytes / 4; i++)
    if (memcmp((const float *)a + i, (const float *)b + i, 4))
      mt_fatal("%s: started and blocking results differ at element %zu: %a vs %a", what, i,
               (double)((const float *)a)[i], (double)((const float *)b)[i]);
}

static void same_counters(mt_group *g, mt_coll_counter *before, const char *what) {
  const mt_coll_counter *c = mt_group_counters(g);
  for (int k = 0; k < MT_COLL_N; k++)
    if (c[k].calls != 2 * before[k].calls || c[k].bytes != 2 * before[k].bytes ||
        c[k].bus_bytes != 2 * before[k].bus_bytes || c[k].elements != 2 * before[k].elements)
      mt_fatal("%s: started calls counted differently from blocking ones (kind %d)", what, k);
}

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1e3), (long)(((int64_t)(ms * 1e6)) % 1000000000)};
  nanosleep(&ts, NULL);
}

/* Handle API on g: each started collective against the blocking one. */
static void check_handles(mt_group *g, int wrank) {
  const int n = mt_group_size(g), r = mt_group_rank(g);
  const int64_t cpr = 1000, tot = cpr * n;
  float *a = mt_xmalloc(sizeof(float) * (size_t)tot), *b = mt_xmalloc(sizeof(float) * (size_t)tot);
  float *ra = mt_xmalloc(sizeof(float) * (size_t)tot), *rb = mt_xmalloc(sizeof(float) * (size_t)tot);
  mt_group_reset_counters(g);
  /* blocking */
  fill(a, tot, wrank, 1);
  mt_allreduce(g, a, tot, MT_F32, MT_OP_SUM);
  fill(ra, tot, wrank, 2);
  mt_allgather(g, ra + r * cpr, ra, cpr, MT_F32);
  fill(rb, tot, wrank, 3);
  float *rs = mt_xmalloc(sizeof(float) * (size_t)cpr);
  mt_reduce_scatter(g, rb, rs, cpr, MT_F32, MT_OP_SUM);
  float *s2 = mt_xmalloc(sizeof(float) * (size_t)tot), *a2a = mt_xmalloc(sizeof(float) * (size_t)tot);
  fill(s2, tot, wrank, 4);
  mt_alltoall(g, s2, a2a, cpr, MT_F32);
  int64_t *sc = mt_xcalloc((size_t)n, sizeof(int64_t)), *sd = mt_xcalloc((size_t)n, sizeof(int64_t));
  int64_t *rc = mt_xcalloc((size_t)n, sizeof(int64_t)), *rd = mt_xcalloc((size_t)n, sizeof(int64_t));
  for (int j = 0, so = 0, ro = 0; j < n; j++) { /* rank i sends i + j + 1 elements to rank j */
    sc[j] = r + j + 1;
    rc[j] = j + r + 1;
    sd[j] = so;
    rd[j] = ro;
    so += r + j + 1;
    ro += j + r + 1;
  }
  float *v = mt_xcalloc((size_t)tot, sizeof(float));
  mt_alltoallv(g, s2, sc, sd, v, rc, rd, MT_F32);
  mt_coll_counter before[MT_COLL_N];
  memcpy(before, mt_group_counters(g), sizeof before);

  /* started, all outstanding at once, waited in reverse order */
  float *a_ = mt_xmalloc(sizeof(float) * (size_t)tot), *ra_ = mt_xmalloc(sizeof(float) * (size_t)tot);
  float *rb_ = mt_xmalloc(sizeof(float) * (size_t)tot), *rs_ = mt_xmalloc(sizeof(float) * (size_t)cpr);
  float *a2a_ = mt_xmalloc(sizeof(float) * (size_t)tot), *v_ = mt_xcalloc((size_t)tot, sizeof(float));
  fill(a_, tot, wrank, 1);
  fill(ra_, tot, wrank, 2);
  fill(rb_, tot, wrank, 3);
  mt_request *h[5];
  h[0] = mt_iallreduce(g, a_, tot, MT_F32, MT_OP_SUM);
  h[1] = mt_iallgather(g, ra_ + r * cpr, ra_, cpr, MT_F32);
  h[2] = mt_ireduce_scatter(g, rb_, rs_, cpr, MT_F32, MT_OP_SUM);
  h[3] = mt_ialltoall(g, s2, a2a_, cpr, MT_F32);
  int64_t *sc2 = mt_xmalloc(sizeof(int64_t) * (size_t)n);
  memcpy(sc2, sc, sizeof(int64_t) * (size_t)n);
  h[4] = mt_ialltoallv(g, s2, sc2, sd, v_, rc, rd, MT_F32);
  for (int j = 0; j < n; j++) sc2[j] = -1; /* copied at start: changing them is harmless */
  mt_wait(h[4]);
  for (int i = 3; i >= 0; i--) /* rule 4: earlier ones of the group are complete */
    if (!mt_test(h[i])) mt_fatal("handle %d incomplete after waiting for a later one", i);
  same(a, a_, sizeof(float) * (size_t)tot, "all-reduce");
  same(ra, ra_, sizeof(float) * (size_t)tot, "all-gather");
  same(rs, rs_, sizeof(float) * (size_t)cpr, "reduce-scatter");
  same(a2a, a2a_, sizeof(float) * (size_t)tot, "all-to-all");
  for (int j = 0, k = 0; j < n; j++) /* v against its definition */
    for (int64_t e = 0; e < rc[j]; e++, k++) {
      int64_t their_sd = 0; /* rank j's displacement towards this rank */
      for (int q = 0; q < r; q++) their_sd += j + q + 1;
      float want = val(mt_group_rank(g) == r ? wrank - r + j : 0, their_sd + e, 4);
      if (memcmp(&want, &v[rd[j] + e], 4))
        mt_fatal("all-to-allv (blocking) from group rank %d element %lld: %a, expected %a", j,
                 (long long)e, (double)v[rd[j] + e], (double)want);
    }
  same(v, v_, sizeof(float) * (size_t)tot, "all-to-allv");
  same_counters(g, before, "counters");
  void *bufs[] = {a, b, ra, rb, rs, s2, a2a, sc, sd, rc, rd, v, a_, ra_, rb_, rs_, a2a_, v_, sc2};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* Rules 1 and 2: a dependent chain of started calls, then a blocking one. */
static void check_order(mt_group *g, int wrank) {
  const int n = mt_group_size(g), r = mt_group_rank(g);
  const int64_t cpr = 4096, tot = cpr * n;
  float *x = mt_xmalloc(sizeof(float) * (size_t)tot), *y = mt_xmalloc(sizeof(float) * (size_t)tot);
  float *z = mt_xmalloc(sizeof(float) * (size_t)cpr);
  float *ex = mt_xmalloc(sizeof(float) * (size_t)tot), *ey = mt_xmalloc(sizeof(float) * (size_t)tot);
  float *ez = mt_xmalloc(sizeof(float) * (size_t)cpr);
  /* expected, blocking */
  fill(ex, cpr, wrank, 7);
  mt_allreduce(g, ex, cpr, MT_F32, MT_OP_SUM);
  mt_allgather(g, ex, ey, cpr, MT_F32);
  mt_allreduce(g, ey, tot, MT_F32, MT_OP_SUM);
  mt_reduce_scatter(g, ey, ez, cpr, MT_F32, MT_OP_SUM);
  mt_allreduce(g, ez, cpr, MT_F32, MT_OP_MAX);
  /* started: each reads what the one before wrote (rule 1) */
  fill(x, cpr, wrank, 7);
  mt_request *h1 = mt_iallreduce(g, x, cpr, MT_F32, MT_OP_SUM);
  mt_request *h2 = mt_iallgather(g, x, y, cpr, MT_F32);
  mt_request *h3 = mt_iallreduce(g, y, tot, MT_F32, MT_OP_SUM);
  mt_request *h4 = mt_ireduce_scatter(g, y, z, cpr, MT_F32, MT_OP_SUM);
  /* rule 2: the blocking call runs after the four */
  mt_allreduce(g, z, cpr, MT_F32, MT_OP_MAX);
  for (mt_request **h = (mt_request *[]){h1, h2, h3, h4}, **e = h + 4; h < e; h++)
    if (!mt_test(*h)) mt_fatal("a started collective is incomplete after a blocking one");
  same(ex, x, sizeof(float) * (size_t)cpr, "rule 1: all-reduce");
  same(ey, y, sizeof(float) * (size_t)tot, "rule 1: all-gather + all-reduce");
  same(ez, z, sizeof(float) * (size_t)cpr, "rules 1-2: reduce-scatter + blocking all-reduce");
  (void)r;
  free(x), free(y), free(z), free(ex), free(ey), free(ez);
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  double lat_ms = 0;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--sim-lat-ms") && i + 1 < argc) lat_ms = atof(argv[++i]);
    else mt_fatal("usage: comm_async_check [--sim-lat-ms X]");
  const int rank = mt_dist_rank(d), size = mt_dist_size(d);
  if (size % 2) mt_fatal("comm_async_check needs an even number of ranks");
  mt_group *world = mt_dist_world(d);
  int pair[2] = {rank & ~1, (rank & ~1) + 1};
  mt_group *dp = mt_group_create(d, pair, 2, "dp", MT_ENGINE_MPI);

  check_handles(world, rank);
  check_handles(dp, rank);
  check_order(world, rank);
  check_order(dp, rank);

  /* rule 3: a dp collective outstanding across world collectives */
  float x[64], w = (float)rank;
  for (int i = 0; i < 64; i++) x[i] = val(rank, i, 9);
  mt_request *h = mt_iallreduce(dp, x, 64, MT_F32, MT_OP_SUM);
  mt_allreduce(world, &w, 1, MT_F32, MT_OP_SUM);
  mt_barrier(world);
  mt_wait(h);
  for (int i = 0; i < 64; i++)
    if (x[i] != val(pair[0], i, 9) + val(pair[1], i, 9)) mt_fatal("rule 3: wrong dp sum");
  if (w != (float)(size * (size - 1) / 2)) mt_fatal("rule 3: wrong world sum");

  /* accounts */
  mt_comm_time tw = mt_dist_comm_time(d, "world"), tdp = mt_dist_comm_time(d, "dp"),
               tall = mt_dist_comm_time(d, NULL), tnone = mt_dist_comm_time(d, "no-such-kind");
  if (tall.ops != tw.ops + tdp.ops || tall.exposed_s < tw.exposed_s || tnone.ops || tdp.ops == 0)
    mt_fatal("accounts: total %lld ops, world %lld, dp %lld, unknown kind %lld",
             (long long)tall.ops, (long long)tw.ops, (long long)tdp.ops, (long long)tnone.ops);
  if (lat_ms > 0) {
    mt_dist_reset_comm_time(d);
    if (mt_dist_comm_time(d, NULL).ops) mt_fatal("accounts not reset");
    mt_allreduce(dp, x, 1, MT_F32, MT_OP_SUM);
    mt_comm_time b = mt_dist_comm_time(d, "dp");
    if (b.exposed_s < lat_ms * 1e-3 || b.comm_s < lat_ms * 1e-3 || b.ops != 1)
      mt_fatal("blocking dp all-reduce under a %.0f ms link: exposed %.4f s, comm %.4f s", lat_ms,
               b.exposed_s, b.comm_s);
    mt_dist_reset_comm_time(d);
    struct timespec a0, a1;
    clock_gettime(CLOCK_MONOTONIC, &a0);
    h = mt_iallreduce(dp, x, 1, MT_F32, MT_OP_SUM);
    clock_gettime(CLOCK_MONOTONIC, &a1);
    const double start_ms = (a1.tv_sec - a0.tv_sec) * 1e3 + (a1.tv_nsec - a0.tv_nsec) * 1e-6;
    sleep_ms(2 * lat_ms); /* "compute" */
    mt_wait(h);
    mt_comm_time s = mt_dist_comm_time(d, "dp");
    if (s.comm_s < lat_ms * 1e-3 || s.ops != 1)
      mt_fatal("started dp all-reduce under a %.0f ms link: comm %.4f s", lat_ms, s.comm_s);
    /* the overlap itself: with the communication thread the start returns
     * at once and the link's time passes behind the "compute" (margins of
     * half the latency against a loaded machine); without it the start
     * carries the whole link */
    if (mt_group_async(dp) && (start_ms > 0.5 * lat_ms || s.exposed_s > 0.5 * lat_ms * 1e-3))
      mt_fatal("started dp all-reduce under a %.0f ms link did not overlap: the start took "
               "%.1f ms, the wait after %.0f ms of compute %.1f ms",
               lat_ms, start_ms, 2 * lat_ms, s.exposed_s * 1e3);
    if (!mt_group_async(dp) && start_ms < lat_ms)
      mt_fatal("without the communication thread the start took %.1f ms (< the %.0f ms link)",
               start_ms, lat_ms);
    if (rank == 0)
      printf("simulated link %.0f ms: blocking all-reduce exposed %.1f ms; started one behind "
             "%.0f ms of compute: executing %.1f ms, exposed %.1f ms (async %d)\n",
             lat_ms, b.exposed_s * 1e3, 2 * lat_ms, s.comm_s * 1e3, s.exposed_s * 1e3,
             mt_group_async(dp));
  }
  mt_group_destroy(dp);
  if (rank == 0) printf("comm_async_check OK (%d ranks, async %d)\n", size, mt_group_async(world));
  mt_dist_finalize(d);
  return 0;
}
