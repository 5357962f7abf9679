/* parallel/comm.c — group creation (MPI_Comm_split over the world), argument
 * checks, engine dispatch and the nccl-tests byte counters. See comm.h. */
#include <stdlib.h>
#include <string.h>

#include "../core/backend.h"
#include "comm_impl.h"

const char *mt_comm_engine_name(mt_comm_engine e) {
  switch (e) {
    case MT_ENGINE_MPI: return "mpi";
    case MT_ENGINE_NCCL: return "nccl";
    case MT_ENGINE_STAGED: return "staged";
  }
  return "?";
}

const char *mt_comm_engine_describe(mt_comm_engine e) {
  return e == MT_ENGINE_STAGED ? "mpi (staged through host)" : mt_comm_engine_name(e);
}

mt_comm_engine mt_comm_engine_choose(const mt_backend *be, const char *distributed_backend) {
  /* a GPU backend has a stream; the cpu test switch calls every pointer,
   * even the backend struct, device memory */
  int device = be && (be->stream || (be->is_device_ptr && be->is_device_ptr(be, be)));
  if (!device) return MT_ENGINE_MPI;
  return distributed_backend && !strcmp(distributed_backend, "nccl") ? MT_ENGINE_NCCL
                                                                      : MT_ENGINE_STAGED;
}

/* The index of kind `name` in d->acct (added at its first group; kinds
 * past the table share the last entry, named "other"). */
static int account_of(mt_dist *d, const char *name) {
  for (int i = 0; i < d->n_acct; i++)
    if (!strcmp(d->acct[i].name, name)) return i;
  if (d->n_acct == MT_COMM_KINDS) {
    snprintf(d->acct[MT_COMM_KINDS - 1].name, sizeof d->acct[0].name, "other");
    return MT_COMM_KINDS - 1;
  }
  snprintf(d->acct[d->n_acct].name, sizeof d->acct[0].name, "%s", name);
  return d->n_acct++;
}

mt_group *mt_group_create(mt_dist *d, const int *ranks, int n, const char *name,
                          mt_comm_engine engine) {
  int member = ranks != NULL && n > 0;
  int color = MPI_UNDEFINED, key = 0;
  if (member) {
    color = ranks[0]; /* the smallest rank names the group */
    int found = 0;
    for (int i = 0; i < n; i++) {
      if (ranks[i] < 0 || ranks[i] >= d->size || (i > 0 && ranks[i] <= ranks[i - 1]))
        mt_fatal("group '%s': rank list must be increasing world ranks < %d", name, d->size);
      if (ranks[i] == d->rank) key = i, found = 1;
    }
    if (!found) mt_fatal("group '%s': calling rank %d is not in its rank list", name, d->rank);
  }
  mt_sim_link_mark(d, name ? name : "?");
  MPI_Comm comm;
  if (d->world) mt_wd_op_begin(d->world, MT_WD_CREATE, 0, -1);
  MT_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm));
  if (d->world) mt_wd_op_end(d->world);
  if (!member) {
    if (d->wd) mt_wd_register(d->wd, NULL); /* slot numbers stay aligned across ranks */
    return NULL;
  }

  /* Every member must have passed the same list. */
  int size;
  MT_MPI_CHECK(MPI_Comm_size(comm, &size));
  int *got = mt_xmalloc(sizeof(int) * (size_t)size);
  MT_MPI_CHECK(MPI_Allgather(&d->rank, 1, MPI_INT, got, 1, MPI_INT, comm));
  int same = size == n;
  for (int i = 0; same && i < n; i++) same = got[i] == ranks[i];
  free(got);
  if (!same) mt_fatal("group '%s': members passed different rank lists", name);

  mt_group *g = mt_xcalloc(1, sizeof(mt_group));
  g->d = d;
  snprintf(g->name, sizeof g->name, "%s", name ? name : "?");
  g->engine = engine;
  if (engine == MT_ENGINE_STAGED && !d->be)
    mt_fatal("group '%s': the staging engine needs the backend (mt_dist_set_backend first)", name);
  g->ops = engine == MT_ENGINE_NCCL     ? &mt_comm_nccl_engine
           : engine == MT_ENGINE_STAGED ? &mt_comm_staged_engine
                                        : &mt_comm_mpi_engine;
  g->size = n;
  g->rank = key;
  g->world_ranks = mt_xmalloc(sizeof(int) * (size_t)n);
  memcpy(g->world_ranks, ranks, sizeof(int) * (size_t)n);
  g->comm = comm;
  g->wd_slot = d->wd ? mt_wd_register(d->wd, g) : -1;
  g->acct = account_of(d, g->name);
  g->sim = mt_sim_link_of(d, g->name, &g->sim_bpns, &g->sim_lat_ns);
  g->ops->init(g);
  return g;
}

void mt_group_destroy(mt_group *g) {
  if (!g) return;
  mt_comm_queue_destroy(g); /* completes what was started */
  if (g->d->wd) mt_wd_unregister(g->d->wd, g->wd_slot);
  g->ops->fini(g);
  MPI_Comm_free(&g->comm);
  free(g->scratch);
  free(g->world_ranks);
  free(g);
}

void *mt_group_scratch(mt_group *g, size_t bytes) {
  if (bytes > g->scratch_bytes) {
    free(g->scratch);
    g->scratch = mt_xmalloc(bytes);
    g->scratch_bytes = bytes;
  }
  return g->scratch;
}

int mt_group_size(const mt_group *g) { return g->size; }
int mt_group_rank(const mt_group *g) { return g->rank; }

const mt_coll_counter *mt_group_counters(const mt_group *g) { return g->ctr; }
void mt_group_reset_counters(mt_group *g) { memset(g->ctr, 0, sizeof g->ctr); }

/* Record one call moving `elems` elements (nccl-tests' definitions). */
int64_t mt_comm_record(mt_group *g, mt_coll_kind k, int64_t elems, mt_dtype t) {
  if (g->size <= 1) return 0;
  int64_t n = g->size, bytes = elems * (int64_t)mt_dtype_size(t), bus;
  switch (k) {
    case MT_COLL_ALLREDUCE: bus = bytes * 2 * (n - 1) / n; break;
    case MT_COLL_ALLGATHER:
    case MT_COLL_REDUCE_SCATTER:
    case MT_COLL_ALLTOALL:
    case MT_COLL_ALLTOALLV: bus = bytes * (n - 1) / n; break;
    default: bus = bytes; break;
  }
  mt_coll_counter *c = &g->ctr[k];
  c->calls++;
  c->elements += elems;
  c->bytes += bytes;
  c->bus_bytes += bus;
  return bus;
}

int mt_comm_buf_on_host(const mt_group *g, const void *p) {
  if (g->engine == MT_ENGINE_MPI) return 0;
  const mt_backend *be = g->d->be;
  if (be && be->is_device_ptr) return !be->is_device_ptr(be, p);
  if (g->engine == MT_ENGINE_NCCL) return mt_comm_is_host_ptr(p);
  return 0;
}

/* The engine for a call on `buf`: host buffers of an NCCL or STAGED group go
 * through MPI (those engines take device memory only). */
static const mt_comm_engine_ops *engine_for(const mt_group *g, const void *buf) {
  return mt_comm_buf_on_host(g, buf) ? &mt_comm_mpi_engine : g->ops;
}

void mt_comm_check_count(const mt_group *g, int64_t count, const char *what) {
  if (count < 0) mt_fatal("group '%s': %s with negative count %lld", g->name, what, (long long)count);
}

void mt_comm_check_disjoint(const mt_group *g, const void *a, size_t na, const void *b, size_t nb,
                            const char *what) {
  const char *a0 = a, *b0 = b;
  if (na && nb && a0 < b0 + nb && b0 < a0 + na)
    mt_fatal("group '%s': %s send and recv buffers overlap", g->name, what);
}

/* Around every blocking call of a group of >= 2 ranks: wait for the
 * group's started collectives (comm.h rule 2), then, after the engine's
 * call, sleep the simulated link's time, close the watchdog mark and add
 * the call to the exposed and executing time of g's kind. */
typedef struct {
  int64_t entry_ns, exec_ns;
} blk_clock;

static blk_clock blk_begin(mt_group *g) {
  blk_clock c = {0, 0};
  if (g->size <= 1) return c;
  c.entry_ns = mt_comm_now_ns();
  mt_comm_drain(g);
  c.exec_ns = g->q ? mt_comm_now_ns() : c.entry_ns;
  return c;
}

static void blk_end(mt_group *g, blk_clock c, int64_t bus_bytes) {
  if (g->size <= 1) return;
  if (g->sim) mt_sleep_until_ns(mt_comm_now_ns() + mt_sim_delay_ns(g, bus_bytes));
  mt_wd_op_end(g);
  int64_t now = mt_comm_now_ns();
  mt_comm_account_add(g, now - c.entry_ns, now - c.exec_ns, 1);
}

void mt_allreduce(mt_group *g, void *buf, int64_t count, mt_dtype t, mt_redop op) {
  mt_comm_check_count(g, count, "all-reduce");
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_ALLREDUCE, count * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, buf)->allreduce(g, buf, count, t, op);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_ALLREDUCE, count, t));
}

void mt_allgather(mt_group *g, const void *send, void *recv, int64_t count_per_rank, mt_dtype t) {
  mt_comm_check_count(g, count_per_rank, "all-gather");
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_ALLGATHER, count_per_rank * g->size * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, recv)->allgather(g, send, recv, count_per_rank, t);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_ALLGATHER, count_per_rank * g->size, t));
}

void mt_reduce_scatter(mt_group *g, const void *send, void *recv, int64_t count_per_rank,
                       mt_dtype t, mt_redop op) {
  mt_comm_check_count(g, count_per_rank, "reduce-scatter");
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_REDUCE_SCATTER,
                 count_per_rank * g->size * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, send)->reduce_scatter(g, send, recv, count_per_rank, t, op);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_REDUCE_SCATTER, count_per_rank * g->size, t));
}

/* Record one variable-count call: `total` elements in the whole buffer,
 * `own` of them this rank's (bus_bytes = the bytes that cross into or out of
 * this rank: (total - own) · S). */
static int64_t record_v(mt_group *g, mt_coll_kind k, int64_t total, int64_t own, mt_dtype t) {
  if (g->size <= 1) return 0;
  int64_t es = (int64_t)mt_dtype_size(t);
  mt_coll_counter *c = &g->ctr[k];
  c->calls++;
  c->elements += total;
  c->bytes += total * es;
  c->bus_bytes += (total - own) * es;
  return (total - own) * es;
}

/* Total of counts[n] after checking them; *end = the last element + 1 of the
 * blocks at displs (prefix sums when displs is NULL). */
static int64_t check_counts(const mt_group *g, const int64_t *counts, const int64_t *displs,
                            int64_t *end, const char *what) {
  int64_t total = 0, e = 0;
  for (int i = 0; i < g->size; i++) {
    mt_comm_check_count(g, counts[i], what);
    int64_t d = displs ? displs[i] : total;
    if (d < 0) mt_fatal("group '%s': %s with a negative displacement", g->name, what);
    if (counts[i] && d + counts[i] > e) e = d + counts[i];
    total += counts[i];
  }
  *end = e;
  return total;
}

void mt_allgatherv(mt_group *g, const void *send, int64_t send_count, void *recv,
                   const int64_t *recv_counts, const int64_t *recv_displs, mt_dtype t) {
  int64_t end;
  int64_t total = check_counts(g, recv_counts, recv_displs, &end, "all-gatherv");
  if (send_count != recv_counts[g->rank])
    mt_fatal("group '%s': all-gatherv sends %lld elements but recv_counts[%d] is %lld", g->name,
             (long long)send_count, g->rank, (long long)recv_counts[g->rank]);
  size_t es = mt_dtype_size(t);
  mt_comm_check_disjoint(g, send, (size_t)send_count * es, recv, (size_t)end * es, "all-gatherv");
  if (g->size == 1 && engine_for(g, recv) == &mt_comm_mpi_engine) { /* device: the engine's copy */
    if (send_count)
      memcpy((char *)recv + (size_t)recv_displs[0] * es, send, (size_t)send_count * es);
    return;
  }
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_ALLGATHER, total * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, recv)->allgatherv(g, send, send_count, recv, recv_counts, recv_displs, t);
  blk_end(g, bc, record_v(g, MT_COLL_ALLGATHER, total, send_count, t));
}

void mt_reduce_scatterv(mt_group *g, const void *send, const int64_t *counts, void *recv,
                        mt_dtype t, mt_redop op) {
  int64_t end;
  int64_t total = check_counts(g, counts, NULL, &end, "reduce-scatterv");
  size_t es = mt_dtype_size(t);
  mt_comm_check_disjoint(g, send, (size_t)total * es, recv, (size_t)counts[g->rank] * es,
                 "reduce-scatterv");
  if (g->size == 1 && engine_for(g, send) == &mt_comm_mpi_engine) { /* device: the engine's copy */
    if (counts[0]) memcpy(recv, send, (size_t)counts[0] * es);
    return;
  }
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_REDUCE_SCATTER, total * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, send)->reduce_scatterv(g, send, counts, recv, t, op);
  blk_end(g, bc, record_v(g, MT_COLL_REDUCE_SCATTER, total, counts[g->rank], t));
}

void mt_alltoall(mt_group *g, const void *send, void *recv, int64_t count_per_rank, mt_dtype t) {
  mt_comm_check_count(g, count_per_rank, "all-to-all");
  size_t bytes = (size_t)(count_per_rank * g->size) * mt_dtype_size(t);
  mt_comm_check_disjoint(g, send, bytes, recv, bytes, "all-to-all");
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_ALLTOALL, count_per_rank * g->size * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, send)->alltoall(g, send, recv, count_per_rank, t);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_ALLTOALL, count_per_rank * g->size, t));
}

int64_t mt_comm_check_alltoallv(const mt_group *g, const void *send, const int64_t *send_counts,
                                const int64_t *send_displs, const void *recv,
                                const int64_t *recv_counts, const int64_t *recv_displs,
                                mt_dtype t) {
  int64_t total = 0, s_end = 0, r_end = 0;
  for (int i = 0; i < g->size; i++) {
    mt_comm_check_count(g, send_counts[i], "all-to-allv send");
    mt_comm_check_count(g, recv_counts[i], "all-to-allv recv");
    if (send_displs[i] < 0 || recv_displs[i] < 0)
      mt_fatal("group '%s': all-to-allv with a negative displacement", g->name);
    total += send_counts[i];
    if (send_counts[i] && send_displs[i] + send_counts[i] > s_end)
      s_end = send_displs[i] + send_counts[i];
    if (recv_counts[i] && recv_displs[i] + recv_counts[i] > r_end)
      r_end = recv_displs[i] + recv_counts[i];
  }
  size_t es = mt_dtype_size(t);
  mt_comm_check_disjoint(g, send, (size_t)s_end * es, recv, (size_t)r_end * es, "all-to-allv");
  return total;
}

void mt_alltoallv(mt_group *g, const void *send, const int64_t *send_counts,
                  const int64_t *send_displs, void *recv, const int64_t *recv_counts,
                  const int64_t *recv_displs, mt_dtype t) {
  int64_t total = mt_comm_check_alltoallv(g, send, send_counts, send_displs, recv, recv_counts,
                                          recv_displs, t);
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_ALLTOALLV, total * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, send)->alltoallv(g, send, send_counts, send_displs, recv, recv_counts,
                                 recv_displs, t);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_ALLTOALLV, total, t));
}

void mt_broadcast(mt_group *g, void *buf, int64_t count, mt_dtype t, int root) {
  mt_comm_check_count(g, count, "broadcast");
  if (root < 0 || root >= g->size)
    mt_fatal("group '%s': broadcast root %d out of range [0, %d)", g->name, root, g->size);
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_BROADCAST, count * (int64_t)mt_dtype_size(t), -1);
  engine_for(g, buf)->broadcast(g, buf, count, t, root);
  blk_end(g, bc, mt_comm_record(g, MT_COLL_BROADCAST, count, t));
}

void mt_barrier(mt_group *g) {
  blk_clock bc = blk_begin(g);
  mt_wd_op_begin(g, MT_COLL_BARRIER, 0, -1);
  g->ops->barrier(g);
  if (g->size > 1) g->ctr[MT_COLL_BARRIER].calls++;
  blk_end(g, bc, 0);
}

void mt_dist_set_timeout(mt_dist *d, double minutes) {
  if (d->wd) mt_wd_set_timeout(d->wd, minutes);
}

void mt_dist_set_phase(mt_dist *d, int64_t iteration, int micro_batch) {
  if (d->wd) mt_wd_set_phase(d->wd, iteration, micro_batch);
}

void mt_group_set_micro_batch(mt_group *g, int micro_batch) {
  if (g && g->d->wd) mt_wd_set_micro_batch(g->d->wd, micro_batch);
}
