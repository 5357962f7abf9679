/* parallel/comm_p2p.c — non-blocking tagged point-to-point (see comm.h):
 * argument checks, the send counters and dispatch to the group's engine
 * (engine_for-style: a host buffer on a device-engine group goes through
 * MPI). The MPI engine's post/complete are here too. */
#include <limits.h>
#include <stdlib.h>

#include "comm_impl.h"

/* The engine for a message on `buf` (host buffers of a device-memory
 * engine go through plain MPI, as for collectives). */
static const mt_comm_engine_ops *p2p_engine(const mt_group *g, const void *buf) {
  if (mt_comm_buf_on_host(g, buf)) return &mt_comm_mpi_engine;
  return g->ops;
}

static mt_request *post(mt_group *g, int peer, int tag, void *buf, int64_t count, mt_dtype t,
                        int is_send) {
  if (peer < 0 || peer >= g->size || peer == g->rank)
    mt_fatal("group '%s': p2p peer %d invalid (size %d, rank %d)", g->name, peer, g->size, g->rank);
  if (count < 0 || count > INT_MAX) mt_fatal("group '%s': p2p count %lld", g->name, (long long)count);
  const mt_comm_engine_ops *eng = p2p_engine(g, buf);
  if (!eng->post)
    mt_fatal("group '%s': this communication engine has no non-blocking point-to-point", g->name);
  mt_request *r = mt_xcalloc(1, sizeof *r);
  r->g = g;
  r->eng = eng;
  r->peer = peer;
  r->tag = tag;
  r->is_send = is_send;
  r->buf = buf;
  r->count = count;
  r->dtype = t;
  r->bytes = count * (int64_t)mt_dtype_size(t);
  r->post_ns = mt_comm_now_ns();
  /* simulated link: the message arrives latency + bytes / bandwidth later */
  if (!is_send && g->sim) r->ready_ns = r->post_ns + mt_sim_delay_ns(g, r->bytes);
  eng->post(g, r);
  if (is_send) {
    mt_coll_counter *c = &g->ctr[MT_COLL_SENDRECV];
    c->calls++;
    c->elements += count;
    c->bytes += r->bytes;
    c->bus_bytes += r->bytes;
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
  if (r->op) { /* a started collective (comm_async.c) */
    mt_comm_op_wait(r);
    return;
  }
  mt_group *g = r->g;
  int64_t t0 = mt_comm_now_ns();
  mt_wd_op_begin(g, r->is_send ? MT_WD_WAIT_SEND : MT_WD_WAIT_RECV, r->bytes, r->peer);
  r->eng->complete(r, 1);
  if (r->ready_ns) mt_sleep_until_ns(r->ready_ns);
  mt_wd_op_end(g);
  if (g->size > 1) {
    int64_t now = mt_comm_now_ns();
    mt_comm_account_add(g, now - t0, r->is_send ? 0 : now - r->post_ns, !r->is_send);
  }
  free(r);
}

int mt_test(mt_request *r) {
  if (r->op) return mt_comm_op_test(r);
  if (r->ready_ns && mt_comm_now_ns() < r->ready_ns) return 0; /* not yet "arrived" */
  int done = r->eng->complete(r, 0);
  if (done) {
    if (!r->is_send && r->g->size > 1)
      mt_comm_account_add(r->g, 0, mt_comm_now_ns() - r->post_ns, 1);
    free(r);
  }
  return done;
}

/* ---- the MPI engine's tagged p2p (host buffers) ---- */

void mt_comm_mpi_post(mt_group *g, mt_request *r) {
  if (r->is_send)
    MT_MPI_CHECK(MPI_Isend(r->buf, (int)r->count, mt_mpi_dtype(r->dtype), r->peer, r->tag, g->comm,
                           &r->req));
  else
    MT_MPI_CHECK(MPI_Irecv(r->buf, (int)r->count, mt_mpi_dtype(r->dtype), r->peer, r->tag, g->comm,
                           &r->req));
}

int mt_comm_mpi_complete(mt_request *r, int block) {
  int done = 1;
  if (block)
    MT_MPI_CHECK(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
  else
    MT_MPI_CHECK(MPI_Test(&r->req, &done, MPI_STATUS_IGNORE));
  return done;
}
