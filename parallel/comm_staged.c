/* parallel/comm_staged.c — the staging engine (MT_ENGINE_STAGED,
 * parallel.distributed_backend "mpi" on a device backend): every call copies
 * its device operands into host staging buffers (be->ops->memcpy_d2h, which
 * on cuda waits for the backend's stream), runs the MPI engine's entry on
 * the host buffers (the same MPI calls and the same deterministic ring
 * order, so results are bitwise those of the MPI engine) and copies the
 * results back (be->ops->memcpy_h2d). It works where NCCL does not: several
 * ranks on one GPU, or no NCCL at all. Cost: two PCIe copies per call.
 *
 * Staging memory is per group and grow-only: pinned (cudaMallocHost) when
 * built with CUDA and the backend has a stream, plain host memory otherwise;
 * freed at group destroy. Tagged p2p requests own a host copy (r->host),
 * taken from a per-group pool of such blocks, until they complete.
 * Buffers the backend calls host memory never reach this file (comm.c's
 * engine_for and comm_p2p.c's p2p_engine send them to the MPI engine),
 * except inside a batch of send/recv, which is checked per operation here.
 * Counters and watchdog marks are comm.c's, as for the MPI engine. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/backend.h"
#include "comm_impl.h"

#ifdef MT_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#endif

/* One host block: pinned or malloc'd. */
typedef struct {
  char *p;
  size_t bytes;
  int pinned;
} host_block;

typedef struct {
  host_block stage;  /* collectives: grow-only */
  host_block *pool;  /* host copies of p2p and started collectives not in use */
  int n_pool, cap_pool;
  int h2d_queued;    /* a pool block went back with its copy to the device
                      * still queued on the stream (started collectives) */
  mt_request **pend; /* started collectives not copied back yet, in start order */
  int n_pend, cap_pend;
} staged_state;

static mt_backend *BE(const mt_group *g) { return g->d->be; }

static host_block block_alloc(const mt_group *g, size_t bytes) {
  host_block b = {NULL, bytes, 0};
  if (!bytes) bytes = 1;
#ifdef MT_HAVE_CUDA
  if (BE(g)->stream) {
    MT_CUDA_CHECK(cudaMallocHost((void **)&b.p, bytes));
    b.pinned = 1;
    return b;
  }
#else
  (void)g;
#endif
  b.p = mt_xmalloc(bytes);
  return b;
}

static void block_free(host_block *b) {
  if (!b->p) return;
#ifdef MT_HAVE_CUDA
  if (b->pinned) {
    cudaFreeHost(b->p);
    b->p = NULL;
    return;
  }
#endif
  free(b->p);
  b->p = NULL;
}

/* The group's staging buffer, at least `bytes` (contents not kept). */
static char *stage(mt_group *g, size_t bytes) {
  staged_state *s = g->engine_state;
  if (bytes > s->stage.bytes || !s->stage.p) {
    block_free(&s->stage);
    s->stage = block_alloc(g, bytes);
  }
  return s->stage.p;
}

/* Device (or, in a batch, host) buffer -> host staging, and back. */
static void to_host(mt_group *g, void *h, const void *src, size_t bytes) {
  if (!bytes) return;
  if (mt_comm_buf_on_host(g, src))
    memcpy(h, src, bytes);
  else
    BE(g)->ops->memcpy_d2h(BE(g), h, src, bytes);
}
/* async: h is a pinned block that stays untouched until the copy ran
 * (started collectives): queued on the backend's stream without a host
 * wait, where there is one. */
static void from_host_k(mt_group *g, void *dst, const void *h, size_t bytes, int async) {
  if (!bytes) return;
  if (mt_comm_buf_on_host(g, dst)) {
    memcpy(dst, h, bytes);
    return;
  }
#ifdef MT_HAVE_CUDA
  if (async && BE(g)->stream) {
    MT_CUDA_CHECK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice,
                                  (cudaStream_t)BE(g)->stream));
    return;
  }
#else
  (void)async;
#endif
  BE(g)->ops->memcpy_h2d(BE(g), dst, h, bytes);
}
static void from_host(mt_group *g, void *dst, const void *h, size_t bytes) {
  from_host_k(g, dst, h, bytes, 0);
}
/* Device copy for groups of one rank (no host round trip). */
static void dev_copy(mt_group *g, void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) BE(g)->ops->memcpy_d2d(BE(g), dst, src, bytes);
}

/* Copy the blocks (cnt[i] elements at displ[i]) of host h back to dst,
 * merging blocks that follow each other; gaps of dst are left untouched. */
static void blocks_from_host(mt_group *g, char *dst, const char *h, const int64_t *cnt,
                             const int64_t *displ, size_t es, int async) {
  int n = g->size;
  for (int i = 0; i < n;) {
    if (!cnt[i]) {
      i++;
      continue;
    }
    int64_t lo = displ[i], hi = displ[i] + cnt[i];
    int j = i + 1;
    while (j < n && (cnt[j] == 0 || displ[j] == hi)) hi += cnt[j++];
    from_host_k(g, dst + (size_t)lo * es, h + (size_t)lo * es, (size_t)(hi - lo) * es, async);
    i = j;
  }
}

/* [lo, hi) element extent of blocks (cnt, displ); 0, 0 when all empty. */
static void extent(int n, const int64_t *cnt, const int64_t *displ, int64_t *lo, int64_t *hi) {
  int64_t a = -1, b = 0;
  for (int i = 0; i < n; i++) {
    if (!cnt[i]) continue;
    if (a < 0 || displ[i] < a) a = displ[i];
    if (displ[i] + cnt[i] > b) b = displ[i] + cnt[i];
  }
  *lo = a < 0 ? 0 : a;
  *hi = a < 0 ? 0 : b;
}

static void staged_init(mt_group *g) {
  if (!g->d->be || !g->d->be->ops)
    mt_fatal("group '%s': the staging engine needs the backend (mt_dist_set_backend)", g->name);
  g->engine_state = mt_xcalloc(1, sizeof(staged_state));
}

static void staged_fini(mt_group *g) {
  staged_state *s = g->engine_state;
  if (!s) return;
  block_free(&s->stage);
  for (int i = 0; i < s->n_pool; i++) block_free(&s->pool[i]);
  free(s->pool);
  free(s->pend);
  free(s);
  g->engine_state = NULL;
}

static void staged_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  if (g->size == 1) return;
  size_t bytes = (size_t)count * mt_dtype_size(t);
  char *h = stage(g, bytes);
  to_host(g, h, buf, bytes);
  mt_comm_mpi_engine.allreduce(g, h, count, t, op);
  from_host(g, buf, h, bytes);
}

/* The own block is staged in place, so the MPI call is the in-place
 * all-gather whether or not the caller's is. */
static void staged_allgather(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  size_t blk = (size_t)cpr * mt_dtype_size(t), total = blk * (size_t)g->size;
  char *own = (char *)recv + (size_t)g->rank * blk;
  if (g->size == 1) {
    dev_copy(g, recv, send, blk);
    return;
  }
  char *h = stage(g, total);
  to_host(g, h + (size_t)g->rank * blk, send, blk);
  mt_comm_mpi_engine.allgather(g, h + (size_t)g->rank * blk, h, cpr, t);
  if (send == own) { /* the own block is already there */
    from_host(g, recv, h, (size_t)g->rank * blk);
    from_host(g, own + blk, h + (size_t)(g->rank + 1) * blk, total - (size_t)(g->rank + 1) * blk);
  } else {
    from_host(g, recv, h, total);
  }
}

static void staged_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t cpr,
                                  mt_dtype t, mt_redop op) {
  size_t blk = (size_t)cpr * mt_dtype_size(t), total = blk * (size_t)g->size;
  if (g->size == 1) {
    dev_copy(g, recv, send, blk);
    return;
  }
  char *h = stage(g, total + blk);
  to_host(g, h, send, total);
  mt_comm_mpi_engine.reduce_scatter(g, h, h + total, cpr, t, op);
  from_host(g, recv, h + total, blk); /* recv may lie inside send: written last */
}

static void staged_alltoall(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  size_t total = (size_t)cpr * (size_t)g->size * mt_dtype_size(t);
  if (g->size == 1) {
    dev_copy(g, recv, send, total);
    return;
  }
  char *h = stage(g, 2 * total);
  to_host(g, h, send, total);
  mt_comm_mpi_engine.alltoall(g, h, h + total, cpr, t);
  from_host(g, recv, h + total, total);
}

/* Send blocks staged at their displacements (the extent [slo, shi) is
 * copied, so the MPI call sees the caller's displacements); received blocks
 * copied back one merged run at a time. */
static void staged_alltoallv(mt_group *g, const void *send, const int64_t *sc, const int64_t *sd,
                             void *recv, const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  int64_t slo, shi, rlo, rhi;
  extent(g->size, sc, sd, &slo, &shi);
  extent(g->size, rc, rd, &rlo, &rhi);
  char *h = stage(g, (size_t)(shi + rhi) * es);
  char *hs = h, *hr = h + (size_t)shi * es;
  to_host(g, hs + (size_t)slo * es, (const char *)send + (size_t)slo * es,
          (size_t)(shi - slo) * es);
  mt_comm_mpi_engine.alltoallv(g, hs, sc, sd, hr, rc, rd, t);
  blocks_from_host(g, recv, hr, rc, rd, es, 0);
}

static void staged_allgatherv(mt_group *g, const void *send, int64_t sc, void *recv,
                              const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  int64_t rlo, rhi;
  extent(g->size, rc, rd, &rlo, &rhi);
  char *h = stage(g, (size_t)(rhi + sc) * es);
  char *hr = h, *hs = h + (size_t)rhi * es;
  to_host(g, hs, send, (size_t)sc * es);
  mt_comm_mpi_engine.allgatherv(g, hs, sc, hr, rc, rd, t);
  blocks_from_host(g, recv, hr, rc, rd, es, 0);
}

static void staged_reduce_scatterv(mt_group *g, const void *send, const int64_t *cnt, void *recv,
                                   mt_dtype t, mt_redop op) {
  size_t es = mt_dtype_size(t);
  int64_t total = 0;
  for (int i = 0; i < g->size; i++) total += cnt[i];
  char *h = stage(g, (size_t)(total + cnt[g->rank]) * es);
  to_host(g, h, send, (size_t)total * es);
  mt_comm_mpi_engine.reduce_scatterv(g, h, cnt, h + (size_t)total * es, t, op);
  from_host(g, recv, h + (size_t)total * es, (size_t)cnt[g->rank] * es);
}

static void staged_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root) {
  if (g->size == 1) return;
  size_t bytes = (size_t)count * mt_dtype_size(t);
  char *h = stage(g, bytes);
  if (g->rank == root) to_host(g, h, buf, bytes);
  mt_comm_mpi_engine.broadcast(g, h, count, t, root);
  if (g->rank != root) from_host(g, buf, h, bytes);
}

static void staged_barrier(mt_group *g) { mt_comm_mpi_engine.barrier(g); }

/* ---- tagged p2p: the request owns a host block from the group's pool ---- */

static host_block pool_take(mt_group *g, size_t bytes) {
  staged_state *s = g->engine_state;
  if (s->h2d_queued) { /* its queued copy reads it: let the stream pass it */
    BE(g)->ops->synchronize(BE(g));
    s->h2d_queued = 0;
  }
  int best = -1;
  for (int i = 0; i < s->n_pool; i++) /* the smallest block that fits */
    if (s->pool[i].bytes >= bytes && (best < 0 || s->pool[i].bytes < s->pool[best].bytes))
      best = i;
  if (best < 0) return block_alloc(g, bytes);
  host_block b = s->pool[best];
  s->pool[best] = s->pool[--s->n_pool];
  return b;
}

static void pool_give(mt_group *g, host_block b) {
  staged_state *s = g->engine_state;
  if (s->n_pool == s->cap_pool) {
    s->cap_pool = s->cap_pool ? 2 * s->cap_pool : 8;
    s->pool = realloc(s->pool, sizeof(host_block) * (size_t)s->cap_pool);
    if (!s->pool) mt_fatal("out of memory (staging pool of group '%s')", g->name);
  }
  s->pool[s->n_pool++] = b;
}

static void staged_post(mt_group *g, mt_request *r) {
  host_block *b = mt_xmalloc(sizeof *b);
  *b = pool_take(g, (size_t)r->bytes);
  r->host = b;
  if (r->is_send) to_host(g, b->p, r->buf, (size_t)r->bytes);
  void *user = r->buf;
  r->buf = b->p; /* the MPI engine's post reads r->buf */
  mt_comm_mpi_post(g, r);
  r->buf = user;
}

static int staged_complete(mt_request *r, int block) {
  if (!mt_comm_mpi_complete(r, block)) return 0;
  host_block *b = r->host;
  if (!r->is_send) from_host(r->g, r->buf, b->p, (size_t)r->bytes);
  pool_give(r->g, *b);
  free(b);
  r->host = NULL;
  return 1;
}

/* ---- started collectives: the device operands copied to a host block of
 * the pool at start (memcpy_d2h: after the work queued on the stream, so
 * the copy holds what the compute stream produced; the one host wait), the
 * MPI engine's entry on the group's communication thread (the same call on
 * the same host layout as the blocking path above: the same bits), the
 * results copied back at the wait (queued on the stream, no host wait,
 * from the pinned block, which goes back to the pool). ---- */

typedef struct {
  host_block b;
  char *hs, *hr;         /* send and receive regions of b */
  size_t rb;             /* receive region bytes */
  void *recv;            /* the caller's receive (or in-place) buffer */
  const void *send;      /* the caller's send buffer */
  int copied;            /* results already copied back (flush) */
} staged_req;

/* Copy r's results back (queued on the stream) once the thread ran it. */
static void copy_back(mt_group *g, mt_request *r) {
  staged_req *q = r->engine_state;
  if (q->copied) return;
  mt_comm_op_wait_done(r);
  mt_coll_op *op = r->op;
  const size_t es = mt_dtype_size(op->t), n = (size_t)g->size;
  const size_t blk = (size_t)op->count * es, own = (size_t)g->rank * blk;
  char *recv = q->recv;
  if (op->kind == MT_COLL_ALLTOALLV) {
    blocks_from_host(g, recv, q->hr, op->v + 2 * n, op->v + 3 * n, es, 1);
  } else if (op->kind == MT_COLL_ALLGATHER && q->send == recv + own) {
    from_host_k(g, recv, q->hr, own, 1); /* the own block is already there */
    from_host_k(g, recv + own + blk, q->hr + own + blk, q->rb - own - blk, 1);
  } else {
    from_host_k(g, recv, q->hr, q->rb, 1);
  }
  q->copied = 1;
}

/* Rules 1 and 2 of comm.h on device buffers: results reach the device at
 * the wait, so before a started collective reads or writes [lo, hi) of
 * device memory, the pending ones whose results land there are copied back
 * first, in start order (all of them for lo = 0, hi = SIZE_MAX: drain).
 * Disjoint buffers (a DDP bucket each) wait for nothing. */
static void flush(mt_group *g, uintptr_t lo, uintptr_t hi) {
  staged_state *s = g->engine_state;
  int last = -1;
  for (int i = 0; i < s->n_pend; i++) {
    staged_req *q = s->pend[i]->engine_state;
    uintptr_t a = (uintptr_t)q->recv, b = a + q->rb;
    if (q->rb && a < hi && lo < b) last = i;
  }
  for (int i = 0; i <= last; i++) copy_back(g, s->pend[i]);
}

static void staged_drain(mt_group *g) {
  if (g->engine_state) flush(g, 0, UINTPTR_MAX);
}

static void staged_start(mt_group *g, mt_request *r) {
  mt_coll_op *op = r->op;
  const size_t es = mt_dtype_size(op->t), n = (size_t)g->size;
  const size_t blk = (size_t)op->count * es, own = (size_t)g->rank * blk;
  size_t sb = 0, rb = 0;
  int64_t slo = 0, shi = 0, rlo, rhi;
  switch (op->kind) {
    case MT_COLL_ALLREDUCE: rb = blk; break;
    case MT_COLL_ALLGATHER: rb = blk * n; break;
    case MT_COLL_REDUCE_SCATTER: sb = blk * n, rb = blk; break;
    case MT_COLL_ALLTOALL: sb = rb = blk * n; break;
    case MT_COLL_ALLTOALLV:
      extent(g->size, op->v, op->v + n, &slo, &shi);
      extent(g->size, op->v + 2 * n, op->v + 3 * n, &rlo, &rhi);
      sb = (size_t)shi * es, rb = (size_t)rhi * es;
      break;
    default: mt_fatal("group '%s': collective kind %d cannot be started", g->name, (int)op->kind);
  }
  { /* what this one reads and writes on the device */
    uintptr_t rl = (uintptr_t)op->buf, rh = rl + rb, sl = rl, sh = rh;
    if (op->kind == MT_COLL_ALLGATHER) sl = (uintptr_t)op->send, sh = sl + blk;
    else if (op->kind != MT_COLL_ALLREDUCE) sl = (uintptr_t)op->send, sh = sl + sb;
    flush(g, sl < rl ? sl : rl, sh > rh ? sh : rh);
  }
  staged_req *q = mt_xcalloc(1, sizeof *q);
  q->b = pool_take(g, sb + rb);
  q->hs = q->b.p, q->hr = q->b.p + sb, q->rb = rb;
  q->recv = op->buf, q->send = op->send;
  size_t copied = 0;
  switch (op->kind) {
    case MT_COLL_ALLREDUCE: to_host(g, q->hr, op->buf, copied = rb); break;
    case MT_COLL_ALLGATHER: /* the own block in place, as staged_allgather */
      to_host(g, q->hr + own, op->send, copied = blk);
      op->send = q->hr + own;
      break;
    case MT_COLL_ALLTOALLV:
      copied = (size_t)(shi - slo) * es;
      to_host(g, q->hs + (size_t)slo * es, (const char *)op->send + (size_t)slo * es, copied);
      op->send = q->hs;
      break;
    default: to_host(g, q->hs, op->send, copied = sb); op->send = q->hs; break;
  }
  /* nothing copied: the wait for the stream a block from the pool needs
   * before MPI writes into it comes from here instead */
  if (!copied && rb) BE(g)->ops->synchronize(BE(g));
  op->buf = q->hr;
  op->eng = &mt_comm_mpi_engine;
  r->engine_state = q;
  staged_state *s = g->engine_state;
  if (s->n_pend == s->cap_pend) {
    s->cap_pend = s->cap_pend ? 2 * s->cap_pend : 16;
    s->pend = mt_xrealloc(s->pend, sizeof(mt_request *) * (size_t)s->cap_pend);
  }
  s->pend[s->n_pend++] = r;
  mt_comm_queue_push(g, op);
}

static int staged_finish(mt_request *r, int block) {
  (void)block; /* the host part is done (r->op->done); the copies are queued */
  mt_group *g = r->g;
  staged_state *s = g->engine_state;
  staged_req *q = r->engine_state;
  copy_back(g, r);
  for (int i = 0; i < s->n_pend; i++) /* off the pending list, order kept */
    if (s->pend[i] == r) {
      memmove(s->pend + i, s->pend + i + 1, sizeof(mt_request *) * (size_t)(s->n_pend - i - 1));
      s->n_pend--;
      break;
    }
  pool_give(g, q->b);
  s->h2d_queued = 1;
  free(q);
  r->engine_state = NULL;
  return 1;
}

const mt_comm_engine_ops mt_comm_staged_engine = {
    staged_init,          staged_fini,           staged_allreduce, staged_allgather,
    staged_reduce_scatter, staged_alltoall,      staged_alltoallv, staged_broadcast,
    staged_barrier,      staged_allgatherv, staged_reduce_scatterv,
    NULL,                 staged_post,           staged_complete,
    staged_start,         staged_finish,         staged_drain,
};
