/* tests/tools/comm_check.c — multi-rank check of the group API.
 * Run under mpirun/srun: builds the topology for the given sizes, creates
 * every group kind, and on each group runs every collective in every dtype
 * against a serial reference (each rank can compute every rank's input),
 * including uneven all-to-allv splits, zero-length messages, sum and max,
 * in-place variants, batched send/recv, tagged isend/irecv around the ring
 * (after mt_group_enable_p2p) and uneven all-gatherv/reduce-scatterv, then
 * checks the byte counters exactly. Exits 0 and rank 0 prints
 * "comm_check OK ..." on success; any mismatch is fatal (aborts the job).
 * Usage: comm_check [--tp N] [--pp N] [--ep N] [--etp N] [--cp N]
 *                   [--engine mpi|nccl] [--staged 1]
 * --staged 1: the layout's groups use the staging engine (MT_ENGINE_STAGED)
 * on a cpu backend created under MEGATRAIN_TEST_DEVICE_BUFFERS=1, so every
 * buffer is staged through host copies (parallel/comm_staged.c).
 * --engine nccl (a CUDA build, one GPU per rank): the groups use the NCCL
 * engine on device buffers of the cuda backend (every input copied to the
 * device, every result back); with MEGATRAIN_NCCL_SIZE1=1 a single rank runs
 * every collective through a real 1-rank NCCL communicator, without it
 * through the engine's size-1 copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/probes.h"
#include "backends/registry.h"
#include "core/backend.h"
#include "core/util.h"
#include "parallel/comm.h"
#include "parallel/parallel_state.h"

static const mt_dtype dtypes[] = {MT_F32, MT_BF16, MT_I32, MT_I64, MT_F64};
#define N_DT ((int)(sizeof dtypes / sizeof dtypes[0]))

/* Small integers: exact in every dtype, sums of <= 32 of them too. */
static double val(int wrank, int64_t i, int salt) {
  return (double)((wrank * 7 + i * 3 + salt * 5) % 11) - 5.0;
}

static void put(void *p, mt_dtype t, int64_t i, double v) {
  switch (t) {
    case MT_F32: ((float *)p)[i] = (float)v; break;
    case MT_BF16: { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); ((uint16_t *)p)[i] = (uint16_t)(u >> 16); } break;
    case MT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case MT_F64: ((double *)p)[i] = v; break;
    case MT_U8: ((int8_t *)p)[i] = (int8_t)v; break; /* raw bytes: copies only */
  }
}

static double get(const void *p, mt_dtype t, int64_t i) {
  switch (t) {
    case MT_F32: return ((const float *)p)[i];
    case MT_BF16: { uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16; float f; memcpy(&f, &u, 4); return f; }
    case MT_I32: return ((const int32_t *)p)[i];
    case MT_I64: return (double)((const int64_t *)p)[i];
    case MT_F64: return ((const double *)p)[i];
    case MT_U8: return ((const int8_t *)p)[i];
  }
  return 0;
}

typedef struct {
  mt_group *g;
  int n, r;
  mt_backend *be; /* device buffers of this backend (NCCL groups), or NULL: host */
  mt_coll_counter want[MT_COLL_N];
} ctx;

/* The buffer a call gets: host[bytes] itself (host engine) or a device copy
 * of it. */
static void *dev(const ctx *c, const void *host, size_t bytes) {
  if (!c->be) return (void *)host;
  void *d = c->be->ops->alloc(c->be, bytes ? bytes : 16, MT_MEM_COMM);
  if (bytes) c->be->ops->memcpy_h2d(c->be, d, host, bytes);
  return d;
}

/* Copy a device copy back into host[bytes] (bytes 0: only free it). */
static void back(const ctx *c, void *host, void *d, size_t bytes) {
  if (!c->be) return;
  if (bytes) c->be->ops->memcpy_d2h(c->be, host, d, bytes);
  c->be->ops->free(c->be, d);
}

static void expect(const ctx *c, const char *what, mt_dtype t, int64_t i, double got, double want) {
  if (got != want)
    mt_fatal("group '%s' (size %d, rank %d): %s %s: element %lld = %g, want %g",
             mt_group_name(c->g), c->n, c->r, what, mt_dtype_name(t), (long long)i, got, want);
}

static void want_count(ctx *c, mt_coll_kind k, int64_t elems, mt_dtype t) {
  if (c->n <= 1) return;
  int64_t b = elems * (int64_t)mt_dtype_size(t), n = c->n;
  c->want[k].calls++;
  c->want[k].elements += elems;
  c->want[k].bytes += b;
  c->want[k].bus_bytes += k == MT_COLL_ALLREDUCE ? b * 2 * (n - 1) / n
                          : (k == MT_COLL_BROADCAST || k == MT_COLL_SENDRECV) ? b
                                                                              : b * (n - 1) / n;
}

static int W(const ctx *c, int j) { return mt_group_world_rank(c->g, j); }

static void check_allreduce(ctx *c, mt_dtype t, int64_t count, mt_redop op) {
  void *buf = mt_xmalloc((size_t)count * mt_dtype_size(t));
  for (int64_t i = 0; i < count; i++) put(buf, t, i, val(W(c, c->r), i, 1));
  size_t nb = (size_t)count * mt_dtype_size(t);
  void *d = dev(c, buf, nb);
  mt_allreduce(c->g, d, count, t, op);
  back(c, buf, d, nb);
  want_count(c, MT_COLL_ALLREDUCE, count, t);
  for (int64_t i = 0; i < count; i++) {
    double w = op == MT_OP_SUM ? 0 : -1e9;
    for (int j = 0; j < c->n; j++) {
      double v = val(W(c, j), i, 1);
      w = op == MT_OP_SUM ? w + v : (v > w ? v : w);
    }
    expect(c, op == MT_OP_SUM ? "all-reduce sum" : "all-reduce max", t, i, get(buf, t, i), w);
  }
  free(buf);
}

static void check_allgather(ctx *c, mt_dtype t, int64_t cpr, int in_place) {
  size_t es = mt_dtype_size(t);
  char *recv = mt_xmalloc((size_t)(cpr * c->n) * es);
  char *send = in_place ? recv + (size_t)(c->r * cpr) * es : mt_xmalloc((size_t)cpr * es);
  for (int64_t i = 0; i < cpr; i++) put(send, t, i, val(W(c, c->r), i, 2));
  size_t rb = (size_t)(cpr * c->n) * es;
  char *drecv = dev(c, recv, rb);
  char *dsend = in_place ? drecv + (size_t)(c->r * cpr) * es : dev(c, send, (size_t)cpr * es);
  mt_allgather(c->g, dsend, drecv, cpr, t);
  if (!in_place) back(c, send, dsend, 0);
  back(c, recv, drecv, rb);
  want_count(c, MT_COLL_ALLGATHER, cpr * c->n, t);
  for (int j = 0; j < c->n; j++)
    for (int64_t i = 0; i < cpr; i++)
      expect(c, "all-gather", t, j * cpr + i, get(recv, t, j * cpr + i), val(W(c, j), i, 2));
  if (!in_place) free(send);
  free(recv);
}

static void check_reduce_scatter(ctx *c, mt_dtype t, int64_t cpr, mt_redop op, int in_place) {
  size_t es = mt_dtype_size(t);
  char *send = mt_xmalloc((size_t)(cpr * c->n) * es);
  char *recv = in_place ? send + (size_t)(c->r * cpr) * es : mt_xmalloc((size_t)cpr * es);
  for (int64_t i = 0; i < cpr * c->n; i++) put(send, t, i, val(W(c, c->r), i, 3));
  size_t sb = (size_t)(cpr * c->n) * es;
  char *dsend = dev(c, send, sb);
  char *drecv = in_place ? dsend + (size_t)(c->r * cpr) * es : dev(c, recv, (size_t)cpr * es);
  mt_reduce_scatter(c->g, dsend, drecv, cpr, t, op);
  if (!in_place) back(c, recv, drecv, (size_t)cpr * es);
  back(c, send, dsend, sb);
  want_count(c, MT_COLL_REDUCE_SCATTER, cpr * c->n, t);
  for (int64_t i = 0; i < cpr; i++) {
    double w = op == MT_OP_SUM ? 0 : -1e9;
    for (int j = 0; j < c->n; j++) {
      double v = val(W(c, j), c->r * cpr + i, 3);
      w = op == MT_OP_SUM ? w + v : (v > w ? v : w);
    }
    expect(c, "reduce-scatter", t, i, get(recv, t, i), w);
  }
  if (!in_place) free(recv);
  free(send);
}

static void check_alltoall(ctx *c, mt_dtype t, int64_t cpr) {
  size_t es = mt_dtype_size(t);
  char *send = mt_xmalloc((size_t)(cpr * c->n) * es), *recv = mt_xmalloc((size_t)(cpr * c->n) * es);
  for (int64_t i = 0; i < cpr * c->n; i++) put(send, t, i, val(W(c, c->r), i, 4));
  size_t nb = (size_t)(cpr * c->n) * es;
  void *dsend = dev(c, send, nb), *drecv = dev(c, recv, nb);
  mt_alltoall(c->g, dsend, drecv, cpr, t);
  back(c, send, dsend, 0);
  back(c, recv, drecv, nb);
  want_count(c, MT_COLL_ALLTOALL, cpr * c->n, t);
  for (int j = 0; j < c->n; j++)
    for (int64_t i = 0; i < cpr; i++)
      expect(c, "all-to-all", t, j * cpr + i, get(recv, t, j * cpr + i),
             val(W(c, j), c->r * cpr + i, 4));
  free(send);
  free(recv);
}

/* Uneven splits with zeros: rank a sends cnt(a, b) elements to rank b;
 * displacements leave gaps that must stay untouched. */
static int64_t cnt(int a, int b, int salt) { return (a * 3 + b * 5 + salt) % 4 * (salt + 1); }

static void check_alltoallv(ctx *c, mt_dtype t, int salt) {
  int n = c->n;
  int64_t *v = mt_xcalloc((size_t)(4 * n), sizeof(int64_t));
  int64_t *sc = v, *sd = v + n, *rc = v + 2 * n, *rd = v + 3 * n, stot = 0, rtot = 0, sent = 0;
  for (int b = 0; b < n; b++) {
    sc[b] = cnt(c->r, b, salt), sd[b] = stot, stot += sc[b] + 1, sent += sc[b];
    rc[b] = cnt(b, c->r, salt), rd[b] = rtot, rtot += rc[b] + 2;
  }
  void *send = mt_xmalloc((size_t)stot * mt_dtype_size(t)), *recv = mt_xmalloc((size_t)rtot * mt_dtype_size(t));
  for (int b = 0; b < n; b++)
    for (int64_t i = 0; i < sc[b]; i++) put(send, t, sd[b] + i, val(W(c, c->r), b * 100 + i, salt));
  for (int64_t i = 0; i < rtot; i++) put(recv, t, i, 99);
  size_t sb = (size_t)stot * mt_dtype_size(t), rb = (size_t)rtot * mt_dtype_size(t);
  void *dsend = dev(c, send, sb), *drecv = dev(c, recv, rb);
  mt_alltoallv(c->g, dsend, sc, sd, drecv, rc, rd, t);
  back(c, send, dsend, 0);
  back(c, recv, drecv, rb);
  want_count(c, MT_COLL_ALLTOALLV, sent, t);
  for (int b = 0; b < n; b++) {
    for (int64_t i = 0; i < rc[b]; i++)
      expect(c, "all-to-allv", t, rd[b] + i, get(recv, t, rd[b] + i), val(W(c, b), c->r * 100 + i, salt));
    for (int64_t i = rc[b]; i < rc[b] + 2; i++)
      expect(c, "all-to-allv gap", t, rd[b] + i, get(recv, t, rd[b] + i), 99);
  }
  free(send);
  free(recv);
  free(v);
}

static void check_broadcast(ctx *c, mt_dtype t, int64_t count) {
  void *buf = mt_xmalloc((size_t)count * mt_dtype_size(t));
  for (int root = 0; root < c->n; root++) {
    for (int64_t i = 0; i < count; i++) put(buf, t, i, val(W(c, c->r), i, 5));
    size_t nb = (size_t)count * mt_dtype_size(t);
    void *d = dev(c, buf, nb);
    mt_broadcast(c->g, d, count, t, root);
    back(c, buf, d, nb);
    want_count(c, MT_COLL_BROADCAST, count, t);
    for (int64_t i = 0; i < count; i++) expect(c, "broadcast", t, i, get(buf, t, i), val(W(c, root), i, 5));
  }
  free(buf);
}

/* Tagged non-blocking ring on host buffers (MPI and staging engines, which
 * match by tag): two tags, received in the opposite order of sending, one
 * completed by mt_test polling. */
static void check_tagged_any_order(ctx *c, mt_dtype t) {
  if (c->n < 2) return;
  int next = (c->r + 1) % c->n, prev = (c->r + c->n - 1) % c->n;
  const int64_t n1 = 13, n2 = 300;
  size_t es = mt_dtype_size(t);
  char *s1 = mt_xmalloc(n1 * es), *s2 = mt_xmalloc(n2 * es), *r1 = mt_xmalloc(n1 * es), *r2 = mt_xmalloc(n2 * es);
  for (int64_t i = 0; i < n1; i++) put(s1, t, i, val(W(c, c->r), i, 8));
  for (int64_t i = 0; i < n2; i++) put(s2, t, i, val(W(c, c->r), i, 9));
  mt_request *q2 = mt_irecv(c->g, prev, 2, r2, n2, t);
  mt_request *q1 = mt_irecv(c->g, prev, 1, r1, n1, t);
  mt_request *a = mt_isend(c->g, next, 1, s1, n1, t);
  mt_request *b = mt_isend(c->g, next, 2, s2, n2, t);
  mt_wait(q1);
  while (!mt_test(q2)) {
  }
  mt_wait(a);
  mt_wait(b);
  c->want[MT_COLL_SENDRECV].calls += 2;
  c->want[MT_COLL_SENDRECV].elements += n1 + n2;
  c->want[MT_COLL_SENDRECV].bytes += (n1 + n2) * (int64_t)es;
  c->want[MT_COLL_SENDRECV].bus_bytes += (n1 + n2) * (int64_t)es;
  for (int64_t i = 0; i < n1; i++) expect(c, "tagged recv 1", t, i, get(r1, t, i), val(W(c, prev), i, 8));
  for (int64_t i = 0; i < n2; i++) expect(c, "tagged recv 2", t, i, get(r2, t, i), val(W(c, prev), i, 9));
  free(s1), free(s2), free(r1), free(r2);
}

/* Uneven all-gatherv (gaps between blocks stay untouched) and
 * reduce-scatterv. */
static void check_vcoll(ctx *c, mt_dtype t) {
  int n = c->n;
  size_t es = mt_dtype_size(t);
  int64_t *rc = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)n), *rd = rc + n, tot = 0, end = 0;
  for (int j = 0; j < n; j++) rc[j] = (j * 5 + 3) % 4, rd[j] = end, end += rc[j] + 1, tot += rc[j];
  char *send = mt_xmalloc((size_t)(rc[c->r] + 1) * es), *recv = mt_xmalloc((size_t)end * es);
  for (int64_t i = 0; i < rc[c->r]; i++) put(send, t, i, val(W(c, c->r), i, 10));
  for (int64_t i = 0; i < end; i++) put(recv, t, i, 99);
  mt_allgatherv(c->g, send, rc[c->r], recv, rc, rd, t);
  for (int j = 0; j < n; j++) {
    for (int64_t i = 0; i < rc[j]; i++)
      expect(c, "all-gatherv", t, rd[j] + i, get(recv, t, rd[j] + i), val(W(c, j), i, 10));
    expect(c, "all-gatherv gap", t, rd[j] + rc[j], get(recv, t, rd[j] + rc[j]), 99);
  }
  if (n > 1) {
    c->want[MT_COLL_ALLGATHER].calls++;
    c->want[MT_COLL_ALLGATHER].elements += tot;
    c->want[MT_COLL_ALLGATHER].bytes += tot * (int64_t)es;
    c->want[MT_COLL_ALLGATHER].bus_bytes += (tot - rc[c->r]) * (int64_t)es;
  }
  char *big = mt_xmalloc((size_t)(tot + 1) * es);
  for (int64_t i = 0; i < tot; i++) put(big, t, i, val(W(c, c->r), i, 11));
  mt_reduce_scatterv(c->g, big, rc, send, t, MT_OP_SUM);
  int64_t off = 0;
  for (int j = 0; j < c->r; j++) off += rc[j];
  for (int64_t i = 0; i < rc[c->r]; i++) {
    double w = 0;
    for (int j = 0; j < n; j++) w += val(W(c, j), off + i, 11);
    expect(c, "reduce-scatterv", t, i, get(send, t, i), w);
  }
  if (n > 1) {
    c->want[MT_COLL_REDUCE_SCATTER].calls++;
    c->want[MT_COLL_REDUCE_SCATTER].elements += tot;
    c->want[MT_COLL_REDUCE_SCATTER].bytes += tot * (int64_t)es;
    c->want[MT_COLL_REDUCE_SCATTER].bus_bytes += (tot - rc[c->r]) * (int64_t)es;
  }
  free(big), free(send), free(recv), free(rc);
}

/* Tagged isend/irecv around the ring (groups of 2+ ranks): three messages
 * to next (tags 0, 1, 2: both tag parities, two on one NCCL channel), then
 * one to prev (tag 3); the receives are posted in the senders' order
 * (from prev: tags 0, 1, 2; from next: tag 3), as comm.h asks of NCCL. */
static void check_tagged(ctx *c, mt_dtype t) {
  if (c->n < 2) return;
  mt_group_enable_p2p(c->g); /* collective; a no-op after the first call */
  int next = (c->r + 1) % c->n, prev = (c->r + c->n - 1) % c->n;
  const int64_t len[4] = {9, 4, 0, 6};
  size_t es = mt_dtype_size(t);
  char *hs[4], *hr[4], *ds[4], *dr[4];
  mt_request *rq[8];
  int nrq = 0;
  for (int k = 0; k < 4; k++) {
    hs[k] = mt_xmalloc((size_t)len[k] * es + 1), hr[k] = mt_xmalloc((size_t)len[k] * es + 1);
    for (int64_t i = 0; i < len[k]; i++) put(hs[k], t, i, val(W(c, c->r), i, 8 + k));
    ds[k] = dev(c, hs[k], (size_t)len[k] * es), dr[k] = dev(c, hr[k], (size_t)len[k] * es);
  }
  for (int k = 0; k < 4; k++) rq[nrq++] = mt_irecv(c->g, k < 3 ? prev : next, k, dr[k], len[k], t);
  for (int k = 0; k < 4; k++) {
    rq[nrq++] = mt_isend(c->g, k < 3 ? next : prev, k, ds[k], len[k], t);
    c->want[MT_COLL_SENDRECV].calls++;
    c->want[MT_COLL_SENDRECV].elements += len[k];
    c->want[MT_COLL_SENDRECV].bytes += len[k] * (int64_t)es;
    c->want[MT_COLL_SENDRECV].bus_bytes += len[k] * (int64_t)es;
  }
  for (int k = nrq - 1; k >= 0; k--) mt_wait(rq[k]); /* any order */
  for (int k = 0; k < 4; k++) {
    back(c, hs[k], ds[k], 0), back(c, hr[k], dr[k], (size_t)len[k] * es);
    int from = k < 3 ? prev : next;
    /* a message to prev (k = 3) was sent by next with its own values */
    for (int64_t i = 0; i < len[k]; i++)
      expect(c, "tagged recv", t, i, get(hr[k], t, i), val(W(c, from), i, 8 + k));
    free(hs[k]), free(hr[k]);
  }
}

static void check_group(mt_group *g, mt_backend *be) {
  ctx c = {.g = g, .n = mt_group_size(g), .r = mt_group_rank(g),
           .be = mt_group_engine(g) == MT_ENGINE_NCCL ? be : NULL};
  mt_group_reset_counters(g);
  for (int k = 0; k < N_DT; k++) {
    mt_dtype t = dtypes[k];
    const int64_t counts[] = {0, 1, 7, 1000};
    for (int j = 0; j < 4; j++) {
      check_allreduce(&c, t, counts[j], MT_OP_SUM);
      check_allreduce(&c, t, counts[j], MT_OP_MAX);
      check_allgather(&c, t, counts[j], 0);
      check_allgather(&c, t, counts[j], 1);
      check_reduce_scatter(&c, t, counts[j], MT_OP_SUM, 0);
      check_reduce_scatter(&c, t, counts[j], MT_OP_SUM, 1);
      check_reduce_scatter(&c, t, counts[j], MT_OP_MAX, 0);
      check_alltoall(&c, t, counts[j]);
      check_broadcast(&c, t, counts[j]);
    }
    if (t != MT_I32 && t != MT_I64) { /* large: the ring path (>= 64 KiB) */
      check_allreduce(&c, t, 40001, MT_OP_SUM);
      check_allreduce(&c, t, 33333, MT_OP_MAX);
      check_reduce_scatter(&c, t, 9001, MT_OP_SUM, 1);
    }
    check_alltoallv(&c, t, 0);
    check_alltoallv(&c, t, 2);
    if (t == MT_F32 || t == MT_BF16) check_tagged(&c, t);
    if (!c.be) { /* host buffers: the any-order tagged ring and the v-collectives */
      check_tagged_any_order(&c, t);
      check_vcoll(&c, t);
    }
  }
  mt_barrier(g);
  if (c.n > 1) c.want[MT_COLL_BARRIER].calls++;
  const mt_coll_counter *got = mt_group_counters(g);
  for (int k = 0; k < MT_COLL_N; k++)
    if (memcmp(&got[k], &c.want[k], sizeof got[k]) != 0)
      mt_fatal("group '%s': counter %s: calls %lld elements %lld bytes %lld bus %lld, want %lld %lld %lld %lld",
               mt_group_name(g), mt_coll_name((mt_coll_kind)k), (long long)got[k].calls,
               (long long)got[k].elements, (long long)got[k].bytes, (long long)got[k].bus_bytes,
               (long long)c.want[k].calls, (long long)c.want[k].elements, (long long)c.want[k].bytes,
               (long long)c.want[k].bus_bytes);
}

int main(int argc, char **argv) {
  mt_dist *d = mt_dist_init(&argc, &argv);
  mt_topology_sizes sz = {1, 1, 1, 0, 1};
  int staged = 0;
  mt_comm_engine engine = MT_ENGINE_MPI;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--engine")) {
      if (!strcmp(argv[i + 1], "nccl")) engine = MT_ENGINE_NCCL;
      else if (strcmp(argv[i + 1], "mpi")) mt_fatal("--engine %s: expected mpi or nccl", argv[i + 1]);
      continue;
    }
    if (!strcmp(argv[i], "--tp")) sz.tensor_model_parallel_size = v;
    else if (!strcmp(argv[i], "--pp")) sz.pipeline_model_parallel_size = v;
    else if (!strcmp(argv[i], "--ep")) sz.expert_model_parallel_size = v;
    else if (!strcmp(argv[i], "--etp")) sz.expert_tensor_parallel_size = v;
    else if (!strcmp(argv[i], "--cp")) sz.context_parallel_size = v;
    else if (!strcmp(argv[i], "--staged")) staged = v;
    else mt_fatal("unknown option %s", argv[i]);
  }
  mt_topology t;
  char err[512];
  if (mt_topology_build(&t, mt_dist_size(d), &sz, err, sizeof err) != 0) mt_fatal("%s", err);
  mt_backend *be = NULL;
  if (staged) { /* every buffer a "device" buffer: the staging engine's test switch */
    setenv("MEGATRAIN_TEST_DEVICE_BUFFERS", "1", 1);
    mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
    mt_backends_process_init(&bo);
    if (!(be = mt_backend_create(&bo, err, sizeof err))) mt_fatal("%s", err);
    mt_dist_set_backend(d, be);
  }
  if (engine == MT_ENGINE_NCCL) { /* device buffers of the cuda backend, its stream */
    mt_backend_options o = {.device = "cuda", .num_threads = 1,
                            .local_rank = mt_dist_local_rank(d), .dtype = MT_F32};
    be = mt_backend_create(&o, err, sizeof err);
    if (!be) mt_fatal("comm_check --engine nccl: %s", err);
    mt_dist_set_backend(d, be);
  }
  if (staged && engine == MT_ENGINE_NCCL) mt_fatal("--staged 1 and --engine nccl exclude each other");
  if (staged) {
    engine = mt_comm_engine_choose(be, "mpi");
    MT_ASSERT(engine == MT_ENGINE_STAGED);
  }
  mt_parallel_state *ps = mt_parallel_state_create(d, &t, engine);
  /* Membership: each handle holds exactly the topology's group. */
  for (int k = 0; k < MT_GK_N; k++) {
    int n;
    const int *ranks = mt_topology_group_of(&t, (mt_group_kind)k, ps->rank, &n);
    mt_group *g = ps->by_kind[k];
    MT_ASSERT((g == NULL) == (ranks == NULL));
    if (!g) continue;
    MT_ASSERT(mt_group_size(g) == n);
    for (int i = 0; i < n; i++) MT_ASSERT(mt_group_world_rank(g, i) == ranks[i]);
    MT_ASSERT(ranks[mt_group_rank(g)] == ps->rank);
  }
  for (int k = 0; k < MT_GK_N; k++)
    if (ps->by_kind[k] && !mt_parallel_state_is_alias(ps, (mt_group_kind)k))
      check_group(ps->by_kind[k], be);
  /* dp_cp is its own communicator exactly when cp > 1 (else dp's handle) */
  MT_ASSERT((ps->dp_cp == ps->dp) == (t.cp == 1));
  MT_ASSERT(ps->dp_cp_rank == mt_group_rank(ps->dp_cp) && ps->cp_rank == mt_group_rank(ps->cp));
  check_group(ps->world_group, be);
  check_group(mt_dist_world(d), be);

  /* Agreement check. */
  MT_ASSERT(mt_dist_check_agree(d, 0x1234, "config hash", err, sizeof err) == 0);
  int last = mt_dist_size(d) - 1;
  int rc = mt_dist_check_agree(d, ps->rank == last ? 0x99 : 0x1234, "config hash", err, sizeof err);
  if (last > 0) {
    char want[64];
    snprintf(want, sizeof want, "ranks %d have other values", last);
    if (rc != -1 || !strstr(err, want) || !strstr(err, "config hash differs"))
      mt_fatal("check_agree: rc %d, message '%s'", rc, err);
  } else {
    MT_ASSERT(rc == 0);
  }
  if (ps->rank == 0)
    printf("comm_check OK world=%d tp=%d cp=%d pp=%d dp=%d ep=%d etp=%d edp=%d engine=%s (%s)\n",
           t.world, t.tp, t.cp, t.pp, t.dp, t.ep, t.etp, t.edp, mt_comm_engine_name(engine),
           last > 0 ? err : "single rank");
  mt_parallel_state_destroy(ps);
  mt_dist_set_backend(d, NULL);
  if (be) mt_backend_destroy(be);
  mt_topology_free(&t);
  mt_dist_finalize(d);
  return 0;
}
