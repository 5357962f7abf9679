/* parallel/comm_mpi.c — the MPI engine: collectives on host buffers over the
 * group's MPI communicator (created by MPI_Comm_split in comm.c). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"


MPI_Op mt_mpi_op(const mt_dist *d, mt_dtype t, mt_redop op) {
  if (t == MT_BF16) return op == MT_OP_SUM ? d->bf16_sum : d->bf16_max;
  return op == MT_OP_SUM ? MPI_SUM : MPI_MAX;
}

static int to_int(int64_t n, const mt_group *g, const char *what) {
  if (n < 0 || n > INT_MAX)
    mt_fatal("group '%s': %s count %lld does not fit an MPI int", g->name, what, (long long)n);
  return (int)n;
}

/* Chunk size (elements) for calls whose count may exceed INT_MAX. */
#define MT_MPI_CHUNK ((int64_t)1 << 30)

static void mpi_init(mt_group *g) { (void)g; }
static void mpi_fini(mt_group *g) { (void)g; }

/* Ring reduce-scatter over chunks (cnt[i], off[i] elements of `in`) with a
 * cached scratch buffer. Step s sends the partial of chunk (r-1-s) to the
 * next rank and adds this rank's own chunk (r-2-s) to the partial received
 * from the previous one; after n-1 steps chunk r holds all n contributions,
 * combined in a fixed ring order (deterministic), and is copied to `out`,
 * which may overlap `in` (written only at the end). OpenMPI 4.1's
 * MPI_Reduce_scatter_block allocates temporaries per call and ran at
 * ~0.1 GB/s above 1 MB on the test VM (fresh pages are slow there);
 * this ring reached 4-8 GB/s on 2 ranks (docs/communication.md). */
static void ring_reduce_scatter(mt_group *g, const char *in, const int *cnt, const int64_t *off,
                                char *out, mt_dtype t, mt_redop op) {
  int n = g->size, r = g->rank, next = (r + 1) % n, prev = (r + n - 1) % n, maxc = 0;
  size_t es = mt_dtype_size(t);
  for (int i = 0; i < n; i++) maxc = cnt[i] > maxc ? cnt[i] : maxc;
  MPI_Datatype dt = mt_mpi_dtype(t);
  MPI_Op mop = mt_mpi_op(g->d, t, op);
  char *scratch = mt_group_scratch(g, 2 * (size_t)maxc * es);
  char *buf[2] = {scratch, scratch + (size_t)maxc * es};
  int sc = (r + n - 1) % n;
  const char *partial = in + (size_t)off[sc] * es;
  for (int s = 0; s < n - 1; s++) {
    int rc = ((r - 2 - s) % n + 2 * n) % n; /* chunk received and reduced now */
    char *rb = buf[s & 1];
    MT_MPI_CHECK(MPI_Sendrecv(partial, cnt[sc], dt, next, 1, rb, cnt[rc], dt, prev, 1, g->comm,
                              MPI_STATUS_IGNORE));
    if (cnt[rc]) MT_MPI_CHECK(MPI_Reduce_local(in + (size_t)off[rc] * es, rb, cnt[rc], dt, mop));
    partial = rb;
    sc = rc;
  }
  if (cnt[r]) memcpy(out, partial, (size_t)cnt[r] * es);
}

/* MPI_Allreduce, chunked below INT_MAX elements. (A ring reduce-scatter +
 * all-gather was measured 1.5-3x slower with 8 ranks on 2 cores, and equal
 * on 2 ranks, so all-reduce stays with OpenMPI's tuned algorithms.) */
static void mpi_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  size_t es = mt_dtype_size(t);
  for (int64_t off = 0; off < count; off += MT_MPI_CHUNK) {
    int64_t n = count - off < MT_MPI_CHUNK ? count - off : MT_MPI_CHUNK;
    MT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * es, (int)n, mt_mpi_dtype(t),
                               mt_mpi_op(g->d, t, op), g->comm));
  }
}

static void mpi_allgather(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  int n = to_int(cpr, g, "all-gather");
  const void *s = send == (const char *)recv + (size_t)g->rank * (size_t)cpr * mt_dtype_size(t)
                      ? MPI_IN_PLACE
                      : send;
  MT_MPI_CHECK(MPI_Allgather(s, n, mt_mpi_dtype(t), recv, n, mt_mpi_dtype(t), g->comm));
}

static void mpi_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t cpr,
                               mt_dtype t, mt_redop op) {
  int n = g->size, c = to_int(cpr, g, "reduce-scatter");
  to_int(cpr * n, g, "reduce-scatter total");
  if (n == 1 || cpr == 0) {
    if (cpr) memmove(recv, send, (size_t)cpr * mt_dtype_size(t));
    return;
  }
  int *cnt = mt_xmalloc(sizeof(int) * (size_t)n);
  int64_t *off = mt_xmalloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) cnt[i] = c, off[i] = (int64_t)i * cpr;
  ring_reduce_scatter(g, send, cnt, off, recv, t, op);
  free(cnt);
  free(off);
}

static void mpi_allgatherv(mt_group *g, const void *send, int64_t sc, void *recv,
                           const int64_t *rc, const int64_t *rd, mt_dtype t) {
  int n = g->size;
  int *v = mt_xmalloc(sizeof(int) * 2 * (size_t)n);
  for (int i = 0; i < n; i++) {
    v[i] = to_int(rc[i], g, "all-gatherv recv");
    v[n + i] = to_int(rd[i], g, "all-gatherv recv displacement");
  }
  MT_MPI_CHECK(MPI_Allgatherv(send, to_int(sc, g, "all-gatherv send"), mt_mpi_dtype(t), recv, v,
                              v + n, mt_mpi_dtype(t), g->comm));
  free(v);
}

/* The ring of mpi_reduce_scatter over blocks of counts cnt (deterministic
 * order; MPI_Reduce_scatter's order is the library's). */
static void mpi_reduce_scatterv(mt_group *g, const void *send, const int64_t *cnt, void *recv,
                                mt_dtype t, mt_redop op) {
  int n = g->size;
  int *c = mt_xmalloc(sizeof(int) * (size_t)n);
  int64_t *off = mt_xmalloc(sizeof(int64_t) * (size_t)n);
  int64_t o = 0;
  for (int i = 0; i < n; i++) {
    c[i] = to_int(cnt[i], g, "reduce-scatterv");
    off[i] = o;
    o += cnt[i];
  }
  ring_reduce_scatter(g, send, c, off, recv, t, op);
  free(c);
  free(off);
}

static void mpi_alltoall(mt_group *g, const void *send, void *recv, int64_t cpr, mt_dtype t) {
  int n = to_int(cpr, g, "all-to-all");
  to_int(cpr * g->size, g, "all-to-all total");
  MT_MPI_CHECK(MPI_Alltoall(send, n, mt_mpi_dtype(t), recv, n, mt_mpi_dtype(t), g->comm));
}

static void mpi_alltoallv(mt_group *g, const void *send, const int64_t *sc, const int64_t *sd,
                          void *recv, const int64_t *rc, const int64_t *rd, mt_dtype t) {
  int n = g->size;
  int *v = mt_xmalloc(sizeof(int) * 4 * (size_t)n);
  for (int i = 0; i < n; i++) {
    v[i] = to_int(sc[i], g, "all-to-allv send");
    v[n + i] = to_int(sd[i], g, "all-to-allv send displacement");
    v[2 * n + i] = to_int(rc[i], g, "all-to-allv recv");
    v[3 * n + i] = to_int(rd[i], g, "all-to-allv recv displacement");
  }
  MT_MPI_CHECK(MPI_Alltoallv(send, v, v + n, mt_mpi_dtype(t), recv, v + 2 * n, v + 3 * n,
                             mt_mpi_dtype(t), g->comm));
  free(v);
}

static void mpi_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root) {
  size_t es = mt_dtype_size(t);
  for (int64_t off = 0; off < count; off += MT_MPI_CHUNK) {
    int64_t n = count - off < MT_MPI_CHUNK ? count - off : MT_MPI_CHUNK;
    MT_MPI_CHECK(MPI_Bcast((char *)buf + off * es, (int)n, mt_mpi_dtype(t), root, g->comm));
  }
}

static void mpi_barrier(mt_group *g) { MT_MPI_CHECK(MPI_Barrier(g->comm)); }

const mt_comm_engine_ops mt_comm_mpi_engine = {
    mpi_init,      mpi_fini,      mpi_allreduce,       mpi_allgather, mpi_reduce_scatter,
    mpi_alltoall,  mpi_alltoallv, mpi_broadcast,       mpi_barrier,
    mpi_allgatherv, mpi_reduce_scatterv, NULL, mt_comm_mpi_post, mt_comm_mpi_complete,
    NULL,          NULL,          NULL, /* started collectives: the communication thread */
};
