/* parallel/comm_nccl.c — the NCCL engine: collectives on device buffers,
 * every call on the backend's stream (mt_nccl_stream). A group's
 * communicator is created at its first NCCL call (every member makes that
 * call, so the unique id is broadcast over the group's MPI communicator
 * inside it); a group of one rank never creates one: its calls are device
 * copies on the stream (env MEGATRAIN_NCCL_SIZE1=1 makes it create a real
 * 1-rank communicator: the single-GPU check of this engine).
 * All-to-all(v) is grouped ncclSend/ncclRecv on the
 * group's communicator; tagged p2p (pipeline and context parallelism) runs
 * on per-direction channels (comm_nccl_p2p.c). NCCL itself is loaded at
 * run time by the run's first NCCL group that will call it (nccl_api.h; no
 * binary links it), and every NCCL call goes through that table. Compiled for real when
 * MT_HAVE_NCCL is defined; otherwise every entry is fatal. See
 * docs/communication.md, "The NCCL engine". */
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

#ifdef MT_HAVE_NCCL
#include "../core/backend.h"
#include "comm_nccl_impl.h"
#include "cuda/cuda_device.h"


static mt_nccl_state *ST(const mt_group *g) { return (mt_nccl_state *)g->engine_state; }
static const mt_nccl_api *N(const mt_group *g) { return ST(g)->api; }
/* The stream a call is issued on: the compute stream, or the group's
 * communication stream while a started collective is issued. */
static cudaStream_t S(const mt_group *g) {
  return ST(g)->issue ? ST(g)->issue : mt_nccl_stream(g);
}

/* The group's communicator, created at the first call that needs it.
 * Called by every member in the same call (collective), before any
 * ncclGroupStart (a ncclCommInitRank inside a group call would join it). */
static ncclComm_t C(mt_group *g) {
  mt_nccl_state *s = ST(g);
  if (!s->comm) {
    ncclUniqueId id;
    if (g->rank == 0) MT_NCCL_CHECK(N(g), GetUniqueId(&id));
    MT_MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, g->comm));
    MT_NCCL_CHECK(N(g), CommInitRank(&s->comm, g->size, id, g->rank));
  }
  return s->comm;
}

/* Without a communicator (a size-1 group): 1, and the call is done as
 * copies on the stream. */
static int local_only(const mt_group *g) { return !ST(g)->want_comm; }

/* dst[count] = src[count] on the group's stream (nothing when in place). */
static void dcopy(mt_group *g, void *dst, const void *src, int64_t count, mt_dtype t) {
  if (count <= 0 || dst == src) return;
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)count * mt_dtype_size(t), cudaMemcpyDefault,
                                S(g)));
}

static ncclRedOp_t nccl_op(mt_redop op) { return op == MT_OP_SUM ? ncclSum : ncclMax; }

/* NCCL's table of the run (nccl_api.h), loaded by its first NCCL group
 * that will call NCCL; fatal when libnccl.so.2 cannot be loaded (the
 * message names the fix). */
static const mt_nccl_api *nccl_api(mt_dist *d) {
  if (!d->nccl) {
    char err[1024];
    d->nccl = mt_nccl_api_open(MT_NCCL_LIBRARY, err, sizeof err);
    if (!d->nccl) mt_fatal("%s", err);
  }
  return d->nccl;
}

/* Loads NCCL when g will call it (want_comm: the run's first such group
 * loads it) and binds the GPU (fatal without one, or with more ranks on the
 * node than visible GPUs): reported when the group is created, not at its
 * first call; creates no communicator. A size-1 group never calls NCCL, so
 * a one-GPU run on this engine does not need the library. */
static void nccl_init(mt_group *g) {
  mt_dist *d = g->d;
  const char *one = getenv("MEGATRAIN_NCCL_SIZE1");
  int want_comm = g->size > 1 || (one && !strcmp(one, "1"));
  const mt_nccl_api *api = want_comm ? nccl_api(d) : NULL;
  if (d->cuda_device < 0) {
    char why[256];
    d->cuda_device = mt_cuda_select_device(d->local_rank, why, sizeof why);
    if (d->cuda_device < 0)
      mt_fatal("group '%s': NCCL engine needs a CUDA device, but %s", g->name, why);
  }
  int ndev = 0;
  MT_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (d->local_size > ndev) /* at set-up, not at the first collective */
    mt_fatal("group '%s': %d ranks on this node but %d visible GPU(s): the NCCL engine needs "
             "one GPU per rank (NCCL refuses duplicate GPUs); set parallel.distributed_backend "
             "\"mpi\" to share a GPU between ranks, or start at most %d ranks per node",
             g->name, d->local_size, ndev, ndev);
  mt_nccl_state *s = mt_xcalloc(1, sizeof(mt_nccl_state));
  s->api = api;
  s->want_comm = want_comm;
  g->engine_state = s;
}

static void nccl_fini(mt_group *g) {
  mt_nccl_state *s = ST(g);
  if (!s) return;
  mt_nccl_p2p_destroy(g);
  mt_nccl_async_destroy(g);
  if (s->comm) s->api->CommDestroy(s->comm);
  free(s);
  g->engine_state = NULL;
}

static void nccl_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  if (local_only(g)) return; /* in place: the sum of one rank */
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g), AllReduce(buf, buf, (size_t)count, mt_nccl_dtype(t), nccl_op(op), c, S(g)));
}

static void nccl_allgather(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  if (local_only(g)) {
    dcopy(g, recv, send, cpr, t);
    return;
  }
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g), AllGather(send, recv, (size_t)cpr, mt_nccl_dtype(t), c, S(g)));
}

static void nccl_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t cpr,
                                mt_dtype t, mt_redop op) {
  if (local_only(g)) {
    dcopy(g, recv, send, cpr, t);
    return;
  }
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g),
                ReduceScatter(send, recv, (size_t)cpr, mt_nccl_dtype(t), nccl_op(op), c, S(g)));
}

static void nccl_alltoallv(mt_group *g, const void *send, const int64_t *sc, const int64_t *sd,
                           void *recv, const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  if (local_only(g)) {
    if (sc[0] != rc[0])
      mt_fatal("group '%s': all-to-allv sends %lld elements to itself but receives %lld",
               g->name, (long long)sc[0], (long long)rc[0]);
    dcopy(g, (char *)recv + (size_t)rd[0] * es, (const char *)send + (size_t)sd[0] * es, sc[0],
          t);
    return;
  }
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g), GroupStart());
  for (int p = 0; p < g->size; p++) {
    if (sc[p] > 0)
      MT_NCCL_CHECK(N(g), Send((const char *)send + (size_t)sd[p] * es, (size_t)sc[p],
                               mt_nccl_dtype(t), p, c, S(g)));
    if (rc[p] > 0)
      MT_NCCL_CHECK(N(g), Recv((char *)recv + (size_t)rd[p] * es, (size_t)rc[p], mt_nccl_dtype(t),
                               p, c, S(g)));
  }
  MT_NCCL_CHECK(N(g), GroupEnd());
}

static void nccl_alltoall(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  int n = g->size;
  int64_t *v = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)n);
  for (int p = 0; p < n; p++) v[p] = cpr, v[n + p] = p * cpr;
  nccl_alltoallv(g, send, v, v + n, recv, v, v + n, t);
  free(v);
}

static void nccl_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root) {
  if (local_only(g)) return; /* the root's own buffer */
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g), Broadcast(buf, buf, (size_t)count, mt_nccl_dtype(t), root, c, S(g)));
}

/* Variable all-gather: rank i broadcasts its block into every rank's recv. */
static void nccl_allgatherv(mt_group *g, const void *send, int64_t sc, void *recv,
                            const int64_t *rc, const int64_t *rd, mt_dtype t) {
  size_t es = mt_dtype_size(t);
  if (local_only(g)) {
    dcopy(g, (char *)recv + (size_t)rd[0] * es, send, sc, t);
    return;
  }
  ncclComm_t c = C(g);
  MT_NCCL_CHECK(N(g), GroupStart());
  for (int p = 0; p < g->size; p++) {
    char *dst = (char *)recv + (size_t)rd[p] * es; /* the root's send is read, not dst */
    if (rc[p] > 0)
      MT_NCCL_CHECK(N(g), Broadcast(p == g->rank ? send : dst, dst, (size_t)rc[p],
                                    mt_nccl_dtype(t), p, c, S(g)));
  }
  MT_NCCL_CHECK(N(g), GroupEnd());
}

/* Variable reduce-scatter: block i of every rank reduced onto rank i. */
static void nccl_reduce_scatterv(mt_group *g, const void *send, const int64_t *cnt, void *recv,
                                 mt_dtype t, mt_redop op) {
  size_t es = mt_dtype_size(t);
  if (local_only(g)) {
    dcopy(g, recv, send, cnt[0], t);
    return;
  }
  ncclComm_t c = C(g);
  int64_t off = 0;
  MT_NCCL_CHECK(N(g), GroupStart());
  for (int p = 0; p < g->size; p++) {
    if (cnt[p] > 0)
      MT_NCCL_CHECK(N(g), Reduce((const char *)send + (size_t)off * es, recv, (size_t)cnt[p],
                                 mt_nccl_dtype(t), nccl_op(op), p, c, S(g)));
    off += cnt[p];
  }
  MT_NCCL_CHECK(N(g), GroupEnd());
}

/* Device work queued so far completes, then the ranks meet over MPI. */
static void nccl_barrier(mt_group *g) {
  MT_CUDA_CHECK(cudaStreamSynchronize(S(g)));
  MT_MPI_CHECK(MPI_Barrier(g->comm));
}

/* Watchdog expiry (its thread): abort the group's communicator and its p2p
 * channels so that kernels waiting on the hung peers return; the job ends
 * right after. */
static void nccl_abort(mt_group *g) {
  mt_nccl_state *s = ST(g);
  if (!s) return;
  if (s->comm) s->api->CommAbort(s->comm);
  mt_nccl_p2p_abort(g);
}

const mt_comm_engine_ops mt_comm_nccl_engine = {
    nccl_init,     nccl_fini,      nccl_allreduce, nccl_allgather,       nccl_reduce_scatter,
    nccl_alltoall, nccl_alltoallv, nccl_broadcast, nccl_barrier,
    nccl_allgatherv, nccl_reduce_scatterv, nccl_abort, mt_nccl_post, mt_nccl_complete,
    mt_nccl_start, mt_nccl_finish, mt_nccl_drain,
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

const mt_comm_engine_ops mt_comm_nccl_engine = {.init = no_nccl, .fini = no_nccl};

int mt_comm_is_host_ptr(const void *p) {
  (void)p;
  return 1;
}

#endif
