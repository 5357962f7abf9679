/* parallel/comm_p2p.c — non-blocking tagged point-to-point (see comm.h). */
#include <limits.h>
#include <stdlib.h>

#include "comm_impl.h"

struct mt_request {
  MPI_Request req;
  mt_group *g;
  int peer, is_send;
  int64_t bytes;
};

static mt_request *post(mt_group *g, int peer, int tag, void *buf, int64_t count, mt_dtype t,
                        int is_send) {
  if (g->engine != MT_ENGINE_MPI)
    mt_fatal("group '%s': non-blocking point-to-point is implemented for the MPI engine only",
             g->name);
  if (peer < 0 || peer >= g->size || peer == g->rank)
    mt_fatal("group '%s': p2p peer %d invalid (size %d, rank %d)", g->name, peer, g->size, g->rank);
  if (count < 0 || count > INT_MAX) mt_fatal("group '%s': p2p count %lld", g->name, (long long)count);
  mt_request *r = mt_xmalloc(sizeof *r);
  r->g = g;
  r->peer = peer;
  r->is_send = is_send;
  r->bytes = count * (int64_t)mt_dtype_size(t);
  if (is_send) {
    MT_MPI_CHECK(MPI_Isend(buf, (int)count, mt_mpi_dtype(t), peer, tag, g->comm, &r->req));
    mt_coll_counter *c = &g->ctr[MT_COLL_SENDRECV];
    int64_t bytes = count * (int64_t)mt_dtype_size(t);
    c->calls++;
    c->elements += count;
    c->bytes += bytes;
    c->bus_bytes += bytes;
  } else {
    MT_MPI_CHECK(MPI_Irecv(buf, (int)count, mt_mpi_dtype(t), peer, tag, g->comm, &r->req));
  }
  return r;
}

mt_request *mt_isend(mt_group *g, int peer, int tag, const void *buf, int64_t count, mt_dtype t) {
  return post(g, peer, tag, (void *)buf, count, t, 1);
}

mt_request *mt_irecv(mt_group *g, int peer, int tag, void *buf, int64_t count, mt_dtype t) {
  return post(g, peer, tag, buf, count, t, 0);
}

void mt_wait(mt_request *r) {
  if (!r) return;
  mt_wd_op_begin(r->g, r->is_send ? MT_WD_WAIT_SEND : MT_WD_WAIT_RECV, r->bytes, r->peer);
  MT_MPI_CHECK(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
  mt_wd_op_end(r->g);
  free(r);
}

int mt_test(mt_request *r) {
  int done = 0;
  MT_MPI_CHECK(MPI_Test(&r->req, &done, MPI_STATUS_IGNORE));
  if (done) free(r);
  return done;
}
