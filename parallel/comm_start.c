/* parallel/comm_start.c — the started collectives of comm.h (mt_iallreduce
 * .. mt_ialltoallv): the blocking call's checks and counters at start,
 * then the group's communication thread (comm_async.c), or the blocking
 * call itself where there is none (the fallback of comm.h, "Engines"). */
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* Queue o; `buf` decides its engine as comm.c's engine_for does: a host
 * buffer of a device-engine group takes the MPI engine's calls. */
static mt_request *enqueue(mt_group *g, mt_coll_op *o, const void *buf) {
  if (g->engine != MT_ENGINE_MPI && mt_comm_buf_on_host(g, buf)) o->eng = &mt_comm_mpi_engine;
  return mt_comm_enqueue(g, o);
}

mt_request *mt_iallreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  if (!mt_group_async(g)) {
    mt_allreduce(g, buf, count, t, op);
    return mt_comm_completed(g);
  }
  mt_comm_check_count(g, count, "all-reduce");
  int64_t bytes = count * (int64_t)mt_dtype_size(t);
  mt_coll_op *o = mt_comm_new_op(MT_COLL_ALLREDUCE, NULL, buf, count, t, op, bytes);
  o->bus_bytes = mt_comm_record(g, MT_COLL_ALLREDUCE, count, t);
  return enqueue(g, o, buf);
}

/* Start an all-gather or reduce-scatter of count_per_rank elements per
 * rank (their shared checks, counters and queueing; `what` names it in
 * messages, `engine_buf` decides the engine). */
static mt_request *start_per_rank(mt_group *g, mt_coll_kind kind, const void *send, void *recv,
                                  int64_t count_per_rank, mt_dtype t, mt_redop op,
                                  const char *what, const void *engine_buf) {
  mt_comm_check_count(g, count_per_rank, what);
  int64_t total = count_per_rank * g->size;
  mt_coll_op *o = mt_comm_new_op(kind, send, recv, count_per_rank, t, op,
                                 total * (int64_t)mt_dtype_size(t));
  o->bus_bytes = mt_comm_record(g, kind, total, t);
  return enqueue(g, o, engine_buf);
}

mt_request *mt_iallgather(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                          mt_dtype t) {
  if (!mt_group_async(g)) {
    mt_allgather(g, send, recv, count_per_rank, t);
    return mt_comm_completed(g);
  }
  return start_per_rank(g, MT_COLL_ALLGATHER, send, recv, count_per_rank, t, MT_OP_SUM,
                        "all-gather", recv);
}

mt_request *mt_ireduce_scatter(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                               mt_dtype t, mt_redop op) {
  if (!mt_group_async(g)) {
    mt_reduce_scatter(g, send, recv, count_per_rank, t, op);
    return mt_comm_completed(g);
  }
  return start_per_rank(g, MT_COLL_REDUCE_SCATTER, send, recv, count_per_rank, t, op,
                        "reduce-scatter", send);
}

mt_request *mt_ialltoall(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                         mt_dtype t) {
  if (!mt_group_async(g)) {
    mt_alltoall(g, send, recv, count_per_rank, t);
    return mt_comm_completed(g);
  }
  mt_comm_check_count(g, count_per_rank, "all-to-all");
  int64_t total = count_per_rank * g->size;
  size_t bytes = (size_t)total * mt_dtype_size(t);
  mt_comm_check_disjoint(g, send, bytes, recv, bytes, "all-to-all");
  mt_coll_op *o = mt_comm_new_op(MT_COLL_ALLTOALL, send, recv, count_per_rank, t, MT_OP_SUM,
                         (int64_t)bytes);
  o->bus_bytes = mt_comm_record(g, MT_COLL_ALLTOALL, total, t);
  return enqueue(g, o, send);
}

mt_request *mt_ialltoallv(mt_group *g, const void *send, const int64_t *send_counts,
                          const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                          const int64_t *recv_displs, mt_dtype t) {
  if (!mt_group_async(g)) {
    mt_alltoallv(g, send, send_counts, send_displs, recv, recv_counts, recv_displs, t);
    return mt_comm_completed(g);
  }
  int64_t total = mt_comm_check_alltoallv(g, send, send_counts, send_displs, recv, recv_counts,
                                          recv_displs, t);
  mt_coll_op *o = mt_comm_new_op(MT_COLL_ALLTOALLV, send, recv, 0, t, MT_OP_SUM,
                         total * (int64_t)mt_dtype_size(t));
  size_t n = (size_t)g->size;
  o->v = mt_xmalloc(4 * n * sizeof(int64_t));
  memcpy(o->v, send_counts, n * sizeof(int64_t));
  memcpy(o->v + n, send_displs, n * sizeof(int64_t));
  memcpy(o->v + 2 * n, recv_counts, n * sizeof(int64_t));
  memcpy(o->v + 3 * n, recv_displs, n * sizeof(int64_t));
  o->bus_bytes = mt_comm_record(g, MT_COLL_ALLTOALLV, total, t);
  return enqueue(g, o, send);
}
