/* bench/bench_comm.c — bus bandwidth of the group API on the world group
 * (MPI engine, host fp32 buffers), printed in nccl-tests' columns:
 *   size (B), count (elements), type, redop, time (us), algbw, busbw (GB/s).
 * size/count follow comm.h: the per-rank buffer for all-reduce, the total
 * gathered/scattered buffer for all-gather/reduce-scatter and the total send
 * buffer for all-to-all. algbw = size / time; busbw is read from the group's
 * bus_bytes counter (algbw x 2(n-1)/n for all-reduce, x (n-1)/n otherwise),
 * so the bench also exercises the counters. time = slowest rank's mean.
 * Usage: mpirun -np N bench_comm [--minbytes B] [--maxbytes B] [--step F]
 *                                [--iters N] [--warmup N] [--op NAME]
 *                                [--engine mpi|staged]
 * NAME: all_reduce | all_gather | reduce_scatter | all_to_all | all (default).
 * --engine staged: a group of all ranks on the staging engine
 * (parallel/comm_staged.c) over a cpu backend under the test switch
 * MEGATRAIN_TEST_DEVICE_BUFFERS=1: the MPI engine's calls plus the staging
 * copies (host memcpy here; PCIe copies on a GPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/backend.h"
#include "core/util.h"
#include "parallel/comm.h"

typedef struct {
  const char *name;
  mt_coll_kind kind;
} bench_op;

static const bench_op ops[] = {
    {"all_reduce", MT_COLL_ALLREDUCE},
    {"all_gather", MT_COLL_ALLGATHER},
    {"reduce_scatter", MT_COLL_REDUCE_SCATTER},
    {"all_to_all", MT_COLL_ALLTOALL},
};

/* One call of op k moving `count` fp32 elements (the nccl-tests count). */
static void run_op(mt_group *g, mt_coll_kind k, float *a, float *b, int64_t count) {
  int n = mt_group_size(g);
  switch (k) {
    case MT_COLL_ALLREDUCE: mt_allreduce(g, a, count, MT_F32, MT_OP_SUM); break;
    case MT_COLL_ALLGATHER: mt_allgather(g, a, b, count / n, MT_F32); break;
    case MT_COLL_REDUCE_SCATTER: mt_reduce_scatter(g, a, b, count / n, MT_F32, MT_OP_SUM); break;
    case MT_COLL_ALLTOALL: mt_alltoall(g, a, b, count / n, MT_F32); break;
    default: mt_fatal("unsupported op");
  }
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  int64_t minb = 1024, maxb = 16 << 20;
  double step = 4;
  int iters = 0, warmup = 3;
  const char *which = "all", *engine = "mpi";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--minbytes")) minb = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--maxbytes")) maxb = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--step")) step = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--op")) which = argv[i + 1];
    else if (!strcmp(argv[i], "--engine")) engine = argv[i + 1];
    else mt_fatal("unknown option %s", argv[i]);
  }
  mt_group *g = mt_dist_world(d), *staged = NULL;
  mt_backend *be = NULL;
  if (!strcmp(engine, "staged")) {
    char err[256];
    setenv("MEGATRAIN_TEST_DEVICE_BUFFERS", "1", 1);
    mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
    mt_backends_process_init(&bo);
    if (!(be = mt_backend_create(&bo, err, sizeof err))) mt_fatal("%s", err);
    mt_dist_set_backend(d, be);
    int *all = mt_xmalloc(sizeof(int) * (size_t)mt_dist_size(d));
    for (int i = 0; i < mt_dist_size(d); i++) all[i] = i;
    g = staged = mt_group_create(d, all, mt_dist_size(d), "world_staged", MT_ENGINE_STAGED);
    free(all);
  } else if (strcmp(engine, "mpi")) {
    mt_fatal("--engine %s: expected mpi or staged", engine);
  }
  int n = mt_group_size(g), me = mt_group_rank(g);
  if (n < 2) mt_fatal("bench_comm needs at least 2 ranks (mpirun -np N)");
  float *a = mt_xmalloc((size_t)maxb + 64), *b = mt_xmalloc((size_t)maxb + 64);
  for (int64_t i = 0; i < maxb / 4; i++) a[i] = b[i] = (float)(i % 7);
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    if (strcmp(which, "all") && strcmp(which, ops[o].name)) continue;
    if (me == 0) {
      printf("# %s, %d ranks, %s engine, fp32\n", ops[o].name, n,
             staged ? "staging (MPI + host copies)" : "MPI");
      printf("# %12s %12s %6s %6s %10s %8s %8s\n", "size", "count", "type", "redop", "time",
             "algbw", "busbw");
      printf("# %12s %12s %6s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
             "(GB/s)");
    }
    for (double sz = (double)minb; sz <= (double)maxb; sz *= step) {
      int64_t count = (int64_t)sz / 4 / n * n; /* divisible by n */
      if (count < n) continue;
      int it = iters ? iters : (int)(sz < 1e5 ? 200 : sz < 1e6 ? 50 : sz < 1e7 ? 10 : 4);
      for (int w = 0; w < warmup; w++) run_op(g, ops[o].kind, a, b, count);
      mt_barrier(g);
      mt_group_reset_counters(g);
      double t0 = mt_now();
      for (int i = 0; i < it; i++) run_op(g, ops[o].kind, a, b, count);
      double t = (mt_now() - t0) / it;
      const mt_coll_counter c = mt_group_counters(g)[ops[o].kind];
      mt_allreduce(g, &t, 1, MT_F64, MT_OP_MAX);
      double bytes = (double)count * 4;
      double algbw = bytes / t / 1e9, busbw = (double)c.bus_bytes / it / t / 1e9;
      if (me == 0)
        printf("  %12lld %12lld %6s %6s %10.1f %8.3f %8.3f\n", (long long)bytes, (long long)count,
               "float", ops[o].kind == MT_COLL_ALLREDUCE || ops[o].kind == MT_COLL_REDUCE_SCATTER
                            ? "sum" : "none",
               t * 1e6, algbw, busbw);
    }
    if (me == 0) fflush(stdout);
  }
  free(a);
  free(b);
  mt_group_destroy(staged);
  if (be) mt_backend_destroy(be);
  mt_dist_finalize(d);
  return 0;
}
