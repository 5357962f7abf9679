/* tests/tools/comm_async_dev_check.c — the started collectives of
 * parallel/comm.h on device buffers: the NCCL engine (communication stream
 * and events) and the staging engine (host copies, the MPI engine's calls
 * on the communication thread), on 2 or 4 ranks
 * (tests/integration/test_comm_async_dev.sh):
 *  - every started collective (all-reduce, all-gather in and out of place,
 *    reduce-scatter, all-to-all, all-to-allv), all outstanding at once and
 *    waited in reverse order, gives bitwise the blocking call's result and
 *    adds exactly its byte counters; values whose fp32 sums depend on the
 *    order of addition;
 *  - stream order: each input is written by the compute stream right before
 *    the start (a device copy, so the collective must see it), each send
 *    buffer is overwritten and each result read by the compute stream right
 *    after the wait (under the CUDA emulation a missing event between the
 *    streams is a race report);
 *  - rules 1 and 2 of comm.h: a chain of started collectives each reading
 *    what the previous one wrote, then a blocking one after them on the
 *    same group before any wait;
 *  - mt_test polled until it returns 1, then the result read.
 * Any mismatch is fatal; rank 0 prints "comm_async_dev_check OK".
 * Usage: comm_async_dev_check --engine nccl|mpi [--device cuda|cpu]
 *   --device cuda (default): the cuda backend; "nccl" is the NCCL engine,
 *     "mpi" the staging engine (parallel.distributed_backend's values);
 *   --device cpu --engine mpi: the staging engine on the cpu backend under
 *     MEGATRAIN_TEST_DEVICE_BUFFERS=1 (every buffer staged; no CUDA). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "core/backend.h"
#include "core/util.h"
#include "parallel/comm.h"

typedef struct {
  mt_group *g;
  mt_backend *be;
  int n, r, wrank;
} ctx;

/* Values whose fp32 sums depend on the order of addition. */
static float val(int rank, int64_t i, int salt) {
  return (float)(1.0 / (1.0 + rank * 3 + (double)i * 0.37 + salt)) * (i % 3 ? 1.0f : -1e3f);
}

static void *dalloc(const ctx *c, size_t bytes) {
  return c->be->ops->alloc(c->be, bytes ? bytes : 16, MT_MEM_COMM);
}

/* A device buffer of n floats and its source: the values go to src by an
 * upload, then into the buffer by a device copy on the compute stream —
 * the compute stream's last write before the collective. */
typedef struct {
  float *d, *src;
  int64_t n;
} dbuf;

static dbuf dnew(const ctx *c, int64_t n, int salt) {
  dbuf b = {dalloc(c, sizeof(float) * (size_t)n), dalloc(c, sizeof(float) * (size_t)n), n};
  float *h = mt_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) h[i] = salt < 0 ? 0.0f : val(c->wrank, i, salt);
  if (n) c->be->ops->memcpy_h2d(c->be, b.src, h, sizeof(float) * (size_t)n);
  free(h);
  return b;
}

static void dfill(const ctx *c, dbuf *b) { /* compute stream: src -> d */
  if (b->n) c->be->ops->memcpy_d2d(c->be, b->d, b->src, sizeof(float) * (size_t)b->n);
}

static float *dread(const ctx *c, const dbuf *b) { /* compute stream: d -> host */
  float *h = mt_xmalloc(sizeof(float) * (size_t)(b->n ? b->n : 1));
  if (b->n) c->be->ops->memcpy_d2h(c->be, h, b->d, sizeof(float) * (size_t)b->n);
  return h;
}

static void dfree(const ctx *c, dbuf *b) {
  c->be->ops->free(c->be, b->d);
  c->be->ops->free(c->be, b->src);
}

static void same(const ctx *c, const float *a, const float *b, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (memcmp(a + i, b + i, 4))
      mt_fatal("group of %d, rank %d: %s: started and blocking results differ at element %lld: "
               "%a vs %a", c->n, c->r, what, (long long)i, (double)a[i], (double)b[i]);
}

enum { AR, AG, AGIP, RS, A2A, A2AV, NK };
static const char *kname[NK] = {"all-reduce", "all-gather", "all-gather in place",
                                "reduce-scatter", "all-to-all", "all-to-allv"};

/* One set of operands: in[k] (send or in place), out[k] (receive). */
typedef struct {
  dbuf in[NK], out[NK];
} set;

static void set_new(const ctx *c, set *s, int64_t cpr, const int64_t *sc, const int64_t *rc) {
  const int64_t tot = cpr * c->n;
  int64_t st = 0, rt = 0;
  for (int j = 0; j < c->n; j++) st += sc[j], rt += rc[j];
  const int64_t in_n[NK] = {tot, cpr, tot, tot, tot, st}, out_n[NK] = {0, tot, 0, cpr, tot, rt};
  for (int k = 0; k < NK; k++) {
    s->in[k] = dnew(c, in_n[k], k + 1);
    s->out[k] = dnew(c, out_n[k], -1);
  }
}

static void set_free(const ctx *c, set *s) {
  for (int k = 0; k < NK; k++) dfree(c, &s->in[k]), dfree(c, &s->out[k]);
}

/* The result of kind k as host floats (owned) and its length. */
static float *result(const ctx *c, set *s, int k, int64_t *n) {
  const dbuf *b = k == AR || k == AGIP ? &s->in[k] : &s->out[k];
  *n = b->n;
  return dread(c, b);
}

/* Handle API: blocking calls on one set, started calls on another. */
static void check_handles(const ctx *c) {
  const int n = c->n, r = c->r;
  const int64_t cpr = 1000;
  int64_t *sc = mt_xcalloc((size_t)n, sizeof(int64_t)), *sd = mt_xcalloc((size_t)n, sizeof(int64_t));
  int64_t *rc = mt_xcalloc((size_t)n, sizeof(int64_t)), *rd = mt_xcalloc((size_t)n, sizeof(int64_t));
  for (int j = 0, so = 0, ro = 0; j < n; j++) { /* rank i sends 40 (i + j + 1) elements to j */
    sc[j] = rc[j] = 40 * (r + j + 1);
    sd[j] = so, rd[j] = ro;
    so += (int)sc[j], ro += (int)rc[j];
  }
  set b, s;
  set_new(c, &b, cpr, sc, rc);
  set_new(c, &s, cpr, sc, rc);
  mt_group_reset_counters(c->g);
  for (int k = 0; k < NK; k++) dfill(c, &b.in[k]);
  mt_allreduce(c->g, b.in[AR].d, b.in[AR].n, MT_F32, MT_OP_SUM);
  mt_allgather(c->g, b.in[AG].d, b.out[AG].d, cpr, MT_F32);
  mt_allgather(c->g, b.in[AGIP].d + r * cpr, b.in[AGIP].d, cpr, MT_F32);
  mt_reduce_scatter(c->g, b.in[RS].d, b.out[RS].d, cpr, MT_F32, MT_OP_SUM);
  mt_alltoall(c->g, b.in[A2A].d, b.out[A2A].d, cpr, MT_F32);
  mt_alltoallv(c->g, b.in[A2AV].d, sc, sd, b.out[A2AV].d, rc, rd, MT_F32);
  mt_coll_counter before[MT_COLL_N];
  memcpy(before, mt_group_counters(c->g), sizeof before);

  mt_request *h[NK];
  for (int k = 0; k < NK; k++) dfill(c, &s.in[k]); /* each written just before its start */
  h[AR] = mt_iallreduce(c->g, s.in[AR].d, s.in[AR].n, MT_F32, MT_OP_SUM);
  h[AG] = mt_iallgather(c->g, s.in[AG].d, s.out[AG].d, cpr, MT_F32);
  h[AGIP] = mt_iallgather(c->g, s.in[AGIP].d + r * cpr, s.in[AGIP].d, cpr, MT_F32);
  h[RS] = mt_ireduce_scatter(c->g, s.in[RS].d, s.out[RS].d, cpr, MT_F32, MT_OP_SUM);
  h[A2A] = mt_ialltoall(c->g, s.in[A2A].d, s.out[A2A].d, cpr, MT_F32);
  h[A2AV] = mt_ialltoallv(c->g, s.in[A2AV].d, sc, sd, s.out[A2AV].d, rc, rd, MT_F32);
  for (int k = NK - 1; k >= 0; k--) {
    mt_wait(h[k]);
    /* the compute stream reuses the send buffer at once (not the in-place
     * ones: they hold the result) */
    if (k != AR && k != AGIP) dfill(c, &s.in[k]);
  }
  for (int k = 0; k < NK; k++) {
    int64_t m1, m2;
    float *want = result(c, &b, k, &m1), *got = result(c, &s, k, &m2);
    same(c, got, want, m1 < m2 ? m1 : m2, kname[k]);
    free(want), free(got);
  }
  const mt_coll_counter *now = mt_group_counters(c->g);
  for (int k = 0; k < MT_COLL_N; k++)
    if (now[k].calls != 2 * before[k].calls || now[k].bytes != 2 * before[k].bytes ||
        now[k].bus_bytes != 2 * before[k].bus_bytes || now[k].elements != 2 * before[k].elements)
      mt_fatal("started calls counted differently from blocking ones (kind %d)", k);
  set_free(c, &b), set_free(c, &s);
  free(sc), free(sd), free(rc), free(rd);
}

/* Rules 1 and 2: a dependent chain of started calls, then a blocking one,
 * against the same calls blocking; then mt_test polled. */
static void check_order(const ctx *c) {
  const int64_t cpr = 4096, tot = cpr * c->n;
  float *want[3], *got[3];
  for (int pass = 0; pass < 2; pass++) {
    dbuf x = dnew(c, cpr, 7), y = dnew(c, tot, -1), z = dnew(c, cpr, -1);
    dfill(c, &x);
    if (pass == 0) {
      mt_allreduce(c->g, x.d, cpr, MT_F32, MT_OP_SUM);
      mt_allgather(c->g, x.d, y.d, cpr, MT_F32);
      mt_allreduce(c->g, y.d, tot, MT_F32, MT_OP_SUM);
      mt_reduce_scatter(c->g, y.d, z.d, cpr, MT_F32, MT_OP_SUM);
      mt_allreduce(c->g, z.d, cpr, MT_F32, MT_OP_MAX);
    } else {
      mt_request *h1 = mt_iallreduce(c->g, x.d, cpr, MT_F32, MT_OP_SUM);
      mt_request *h2 = mt_iallgather(c->g, x.d, y.d, cpr, MT_F32);
      mt_request *h3 = mt_iallreduce(c->g, y.d, tot, MT_F32, MT_OP_SUM);
      mt_request *h4 = mt_ireduce_scatter(c->g, y.d, z.d, cpr, MT_F32, MT_OP_SUM);
      mt_allreduce(c->g, z.d, cpr, MT_F32, MT_OP_MAX); /* rule 2: after the four */
      mt_wait(h4), mt_wait(h2), mt_wait(h1), mt_wait(h3);
    }
    float **o = pass ? got : want;
    o[0] = dread(c, &x), o[1] = dread(c, &y), o[2] = dread(c, &z);
    dfree(c, &x), dfree(c, &y), dfree(c, &z);
  }
  same(c, got[0], want[0], cpr, "rule 1: all-reduce");
  same(c, got[1], want[1], tot, "rule 1: all-gather + all-reduce");
  same(c, got[2], want[2], cpr, "rules 1-2: reduce-scatter + blocking all-reduce");
  for (int i = 0; i < 3; i++) free(want[i]), free(got[i]);

  dbuf x = dnew(c, cpr, 9), w = dnew(c, cpr, 9);
  dfill(c, &w);
  mt_allreduce(c->g, w.d, cpr, MT_F32, MT_OP_SUM);
  dfill(c, &x);
  mt_request *h = mt_iallreduce(c->g, x.d, cpr, MT_F32, MT_OP_SUM);
  while (!mt_test(h)) {
  }
  float *v = dread(c, &x), *vw = dread(c, &w);
  same(c, v, vw, cpr, "all-reduce completed by mt_test");
  free(v), free(vw);
  dfree(c, &w);
  dfree(c, &x);
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  const char *engine = NULL, *device = "cuda";
  for (int i = 1; i + 1 < argc; i += 2)
    if (!strcmp(argv[i], "--engine")) engine = argv[i + 1];
    else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
    else mt_fatal("unknown option %s", argv[i]);
  if (!engine || (strcmp(engine, "nccl") && strcmp(engine, "mpi")) ||
      (strcmp(device, "cuda") && strcmp(device, "cpu")) ||
      (!strcmp(device, "cpu") && strcmp(engine, "mpi")))
    mt_fatal("usage: comm_async_dev_check --engine nccl|mpi [--device cuda|cpu] (cpu: mpi only)");
  char err[512];
  mt_backend_options o = {.device = device, .num_threads = 1,
                          .local_rank = mt_dist_local_rank(d), .dtype = MT_F32};
  if (!strcmp(device, "cpu")) { /* every buffer a "device" buffer: the staging engine */
    setenv("MEGATRAIN_TEST_DEVICE_BUFFERS", "1", 1);
    mt_backends_process_init(&o);
  }
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) mt_fatal("comm_async_dev_check: %s", err);
  mt_dist_set_backend(d, be);
  mt_comm_engine e = mt_comm_engine_choose(be, engine);
  const int size = mt_dist_size(d), rank = mt_dist_rank(d);
  int *all = mt_xmalloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < size; i++) all[i] = i;
  mt_group *g = mt_group_create(d, all, size, "dp", e);
  ctx c = {g, be, size, mt_group_rank(g), rank};
  check_handles(&c);
  check_order(&c);
  if (rank == 0)
    printf("comm_async_dev_check OK (%d ranks, engine %s, device %s, started collectives %s)\n",
           size, mt_comm_engine_describe(e), device,
           mt_group_async(g) ? "in the background" : "run at start");
  mt_group_destroy(g);
  free(all);
  mt_dist_set_backend(d, NULL);
  mt_backend_destroy(be);
  mt_dist_finalize(d);
  return 0;
}
