/* parallel/comm_nccl.c — the NCCL engine: collectives on device buffers.
 * One NCCL communicator per group, bootstrapped by broadcasting a unique id
 * over the group's MPI communicator; batched point-to-point and all-to-all(v)
 * are grouped ncclSend/ncclRecv calls. Compiled for real when MT_HAVE_NCCL
 * is defined; otherwise every entry is fatal. */
#include <stdlib.h>

#include "comm_impl.h"

#ifdef MT_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"

typedef struct {
  ncclComm_t comm;
} nccl_state;

static ncclComm_t C(const mt_group *g) { return ((nccl_state *)g->engine_state)->comm; }
static cudaStream_t S(const mt_group *g) { return (cudaStream_t)g->cuda_stream; }

static ncclDataType_t nccl_dtype(mt_dtype t) {
  switch (t) {
    case MT_F32: return ncclFloat32;
    case MT_BF16: return ncclBfloat16;
    case MT_I32: return ncclInt32;
    case MT_I64: return ncclInt64;
    case MT_F64: return ncclFloat64;
  }
  mt_fatal("unknown dtype %d", (int)t);
}

static ncclRedOp_t nccl_op(mt_redop op) { return op == MT_OP_SUM ? ncclSum : ncclMax; }

static void nccl_init(mt_group *g) {
  mt_dist *d = g->d;
  if (d->cuda_device < 0) {
    char why[256];
    d->cuda_device = mt_cuda_select_device(d->local_rank, why, sizeof why);
    if (d->cuda_device < 0)
      mt_fatal("group '%s': NCCL engine needs a CUDA device, but %s", g->name, why);
  }
  ncclUniqueId id;
  if (g->rank == 0) MT_NCCL_CHECK(ncclGetUniqueId(&id));
  MT_MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, g->comm));
  nccl_state *s = mt_xcalloc(1, sizeof(nccl_state));
  MT_NCCL_CHECK(ncclCommInitRank(&s->comm, g->size, id, g->rank));
  g->engine_state = s;
}

static void nccl_fini(mt_group *g) {
  nccl_state *s = g->engine_state;
  if (!s) return;
  ncclCommDestroy(s->comm);
  free(s);
  g->engine_state = NULL;
}

static void nccl_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  MT_NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)count, nccl_dtype(t), nccl_op(op), C(g), S(g)));
}

static void nccl_allgather(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  MT_NCCL_CHECK(ncclAllGather(send, recv, (size_t)cpr, nccl_dtype(t), C(g), S(g)));
}

static void nccl_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t cpr,
                                mt_dtype t, mt_redop op) {
  MT_NCCL_CHECK(
      ncclReduceScatter(send, recv, (size_t)cpr, nccl_dtype(t), nccl_op(op), C(g), S(g)));
}

static void nccl_alltoallv(mt_group *g, const void *send, const int64_t *sc, const int64_t *sd,
                           void *recv, const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  MT_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < g->size; p++) {
    if (sc[p] > 0)
      MT_NCCL_CHECK(ncclSend((const char *)send + (size_t)sd[p] * es, (size_t)sc[p],
                             nccl_dtype(t), p, C(g), S(g)));
    if (rc[p] > 0)
      MT_NCCL_CHECK(ncclRecv((char *)recv + (size_t)rd[p] * es, (size_t)rc[p], nccl_dtype(t), p,
                             C(g), S(g)));
  }
  MT_NCCL_CHECK(ncclGroupEnd());
}

static void nccl_alltoall(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  int n = g->size;
  int64_t *v = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)n);
  for (int p = 0; p < n; p++) v[p] = cpr, v[n + p] = p * cpr;
  nccl_alltoallv(g, send, v, v + n, recv, v, v + n, t);
  free(v);
}

static void nccl_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root) {
  MT_NCCL_CHECK(ncclBroadcast(buf, buf, (size_t)count, nccl_dtype(t), root, C(g), S(g)));
}

static void nccl_batch_send_recv(mt_group *g, const mt_p2p_op *ops, int n_ops) {
  MT_NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n_ops; i++) {
    const mt_p2p_op *o = &ops[i];
    if (o->is_send)
      MT_NCCL_CHECK(ncclSend(o->buf, (size_t)o->count, nccl_dtype(o->dtype), o->peer, C(g), S(g)));
    else
      MT_NCCL_CHECK(ncclRecv(o->buf, (size_t)o->count, nccl_dtype(o->dtype), o->peer, C(g), S(g)));
  }
  MT_NCCL_CHECK(ncclGroupEnd());
}

/* Variable all-gather: rank i broadcasts its block into every rank's recv. */
static void nccl_allgatherv(mt_group *g, const void *send, int64_t sc, void *recv,
                            const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  (void)sc;
  MT_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < g->size; p++) {
    char *dst = (char *)recv + (size_t)rd[p] * es; /* the root's send is read, not dst */
    if (rc[p] > 0)
      MT_NCCL_CHECK(ncclBroadcast(p == g->rank ? send : dst, dst, (size_t)rc[p], nccl_dtype(t), p,
                                  C(g), S(g)));
  }
  MT_NCCL_CHECK(ncclGroupEnd());
}

/* Variable reduce-scatter: block i of every rank reduced onto rank i. */
static void nccl_reduce_scatterv(mt_group *g, const void *send, const int64_t *cnt, void *recv,
                                 mt_dtype t, mt_redop op) {
  size_t es = mt_dtype_size(t);
  int64_t off = 0;
  MT_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < g->size; p++) {
    if (cnt[p] > 0)
      MT_NCCL_CHECK(ncclReduce((const char *)send + (size_t)off * es, recv, (size_t)cnt[p],
                               nccl_dtype(t), nccl_op(op), p, C(g), S(g)));
    off += cnt[p];
  }
  MT_NCCL_CHECK(ncclGroupEnd());
}

/* Device work queued so far completes, then the ranks meet over MPI. */
static void nccl_barrier(mt_group *g) {
  MT_CUDA_CHECK(cudaStreamSynchronize(S(g)));
  MT_MPI_CHECK(MPI_Barrier(g->comm));
}

/* Watchdog expiry (its thread): abort the communicator so that kernels
 * waiting on the hung peers return; the job ends right after. */
static void nccl_abort(mt_group *g) {
  nccl_state *s = g->engine_state;
  if (s) ncclCommAbort(s->comm);
}

const mt_comm_engine_ops mt_comm_nccl_engine = {
    nccl_init,     nccl_fini,      nccl_allreduce, nccl_allgather,       nccl_reduce_scatter,
    nccl_alltoall, nccl_alltoallv, nccl_broadcast, nccl_batch_send_recv, nccl_barrier,
    nccl_allgatherv, nccl_reduce_scatterv, nccl_abort, NULL, NULL,
};

int mt_comm_is_host_ptr(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky-free error of an unknown pointer */
    return 1;
  }
  return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

#else /* !MT_HAVE_NCCL */

static void no_nccl(mt_group *g) {
  mt_fatal("group '%s': the NCCL engine is not available (built without NCCL/CUDA)", g->name);
}

const mt_comm_engine_ops mt_comm_nccl_engine = {
    no_nccl, no_nccl, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

int mt_comm_is_host_ptr(const void *p) {
  (void)p;
  return 1;
}

#endif
