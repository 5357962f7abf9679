/* parallel/comm_async.c — started (non-blocking) collectives: the handles,
 * the MPI engine's communication thread per group, the exposed-communication
 * accounts and the simulated link's sleeps. See comm.h, "Non-blocking
 * collectives", and docs/communication.md, "Overlap".
 *
 * A group's communication thread pops started collectives from its FIFO one
 * at a time and runs the engine's blocking entry on them — the same MPI
 * calls as the blocking path, so the same bits — between the watchdog's
 * begin/end marks, then sleeps the simulated link's time and marks the
 * operation done. The compute thread never runs an MPI collective of that
 * group while the FIFO is not empty (comm.c's blocking calls drain it
 * first), so a communicator never has two collectives in flight at once;
 * p2p on the same communicator may run beside it (MPI_THREAD_MULTIPLE). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_impl.h"


typedef struct mt_comm_queue {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  mt_coll_op *head, *tail;
  int64_t started, finished; /* under mu */
  int stop;
} mt_comm_queue;

int64_t mt_comm_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void mt_sleep_until_ns(int64_t t_ns) {
  struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

int64_t mt_sim_delay_ns(const mt_group *g, int64_t bus_bytes) {
  if (!g->sim || g->size <= 1) return 0;
  return (int64_t)(g->sim_lat_ns + (double)bus_bytes / g->sim_bpns);
}

void mt_comm_account_add(mt_group *g, int64_t exposed_ns, int64_t comm_ns, int64_t ops) {
  mt_comm_account *a = &g->d->acct[g->acct];
  const memory_order o = memory_order_relaxed;
  if (exposed_ns) atomic_fetch_add_explicit(&a->exposed_ns, exposed_ns, o);
  if (comm_ns) atomic_fetch_add_explicit(&a->comm_ns, comm_ns, o);
  if (ops) atomic_fetch_add_explicit(&a->ops, ops, o);
}

mt_comm_time mt_dist_comm_time(const mt_dist *d, const char *kind) {
  mt_comm_time r = {0, 0, 0};
  const memory_order o = memory_order_relaxed;
  int64_t e = 0, c = 0;
  for (int i = 0; i < d->n_acct; i++) {
    if (kind && strcmp(d->acct[i].name, kind)) continue;
    e += atomic_load_explicit(&d->acct[i].exposed_ns, o);
    c += atomic_load_explicit(&d->acct[i].comm_ns, o);
    r.ops += atomic_load_explicit(&d->acct[i].ops, o);
  }
  r.exposed_s = (double)e * 1e-9;
  r.comm_s = (double)c * 1e-9;
  return r;
}

void mt_dist_reset_comm_time(mt_dist *d) {
  for (int i = 0; i < d->n_acct; i++) {
    atomic_store(&d->acct[i].exposed_ns, 0);
    atomic_store(&d->acct[i].comm_ns, 0);
    atomic_store(&d->acct[i].ops, 0);
  }
}

/* Wait, sleeping, until every member of g has reached this collective: an
 * MPI_Ibarrier tested with growing sleeps (20 us .. 1 ms). A blocking MPI
 * collective waits for late peers by polling, which on a machine with fewer
 * cores than threads takes the core from the compute threads; after the
 * gate the collective finds its peers there. The barrier carries no data:
 * the collective's bits are those of the blocking path. */
static void arrival_gate(mt_group *g) {
  MPI_Request req;
  MT_MPI_CHECK(MPI_Ibarrier(g->comm, &req));
  int done = 0;
  int64_t nap = 20000;
  for (;;) {
    MT_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) break;
    mt_sleep_until_ns(mt_comm_now_ns() + nap);
    if (nap < 1000000) nap *= 2;
  }
}

void mt_comm_op_issue(mt_group *g, const mt_comm_engine_ops *e, mt_coll_op *op) {
  switch (op->kind) {
    case MT_COLL_ALLREDUCE: e->allreduce(g, op->buf, op->count, op->t, op->op); break;
    case MT_COLL_ALLGATHER: e->allgather(g, op->send, op->buf, op->count, op->t); break;
    case MT_COLL_REDUCE_SCATTER:
      e->reduce_scatter(g, op->send, op->buf, op->count, op->t, op->op);
      break;
    case MT_COLL_ALLTOALL: e->alltoall(g, op->send, op->buf, op->count, op->t); break;
    case MT_COLL_ALLTOALLV: {
      int n = g->size;
      e->alltoallv(g, op->send, op->v, op->v + n, op->buf, op->v + 2 * n, op->v + 3 * n, op->t);
      break;
    }
    default: mt_fatal("group '%s': collective kind %d cannot be started", g->name, (int)op->kind);
  }
}

/* Run one started collective with the engine's blocking entry. */
static void run_op(mt_group *g, mt_coll_op *op) {
  mt_wd_op_begin(g, op->kind, op->wd_bytes, -1);
  arrival_gate(g);
  /* executing from here: the wait for the peers to arrive is not the
   * link's time (a blocking call's wait for its peers is in its exposed
   * time, as the compute thread is blocked) */
  int64_t t0 = mt_comm_now_ns();
  mt_comm_op_issue(g, op->eng ? op->eng : g->ops, op);
  if (g->sim) mt_sleep_until_ns(mt_comm_now_ns() + mt_sim_delay_ns(g, op->bus_bytes));
  mt_wd_op_end(g);
  mt_comm_account_add(g, 0, mt_comm_now_ns() - t0, 1);
}

static void *comm_thread(void *arg) {
  mt_group *g = arg;
  mt_comm_queue *q = g->q;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->work, &q->mu);
    if (!q->head) break; /* stop with an empty FIFO */
    mt_coll_op *op = q->head;
    pthread_mutex_unlock(&q->mu);
    run_op(g, op);
    pthread_mutex_lock(&q->mu);
    q->head = op->next;
    if (!q->head) q->tail = NULL;
    atomic_store_explicit(&op->done, 1, memory_order_release);
    q->finished++;
    pthread_cond_broadcast(&q->done);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

/* MPI and STAGED: the communication thread (STAGED runs the MPI engine's
 * calls on host copies there); NCCL: the communication stream, thread or
 * not. */
int mt_group_async(const mt_group *g) {
  if (g->size <= 1) return 0;
  if (g->engine == MT_ENGINE_NCCL) return g->ops->start != NULL;
  return g->d->thread_multiple;
}

static mt_comm_queue *queue_of(mt_group *g) {
  if (g->q) return g->q;
  mt_comm_queue *q = mt_xcalloc(1, sizeof *q);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->work, NULL);
  pthread_cond_init(&q->done, NULL);
  g->q = q;
  if (pthread_create(&q->thread, NULL, comm_thread, g))
    mt_fatal("group '%s': cannot start its communication thread", g->name);
  return q;
}

void mt_comm_drain(mt_group *g) {
  mt_comm_queue *q = g->q;
  if (q) {
    pthread_mutex_lock(&q->mu);
    while (q->finished != q->started) pthread_cond_wait(&q->done, &q->mu);
    pthread_mutex_unlock(&q->mu);
  }
  if (g->ops->drain) g->ops->drain(g);
}

void mt_comm_queue_destroy(mt_group *g) {
  mt_comm_queue *q = g->q;
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stop = 1;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->work);
  pthread_cond_destroy(&q->done);
  free(q);
  g->q = NULL;
}

mt_request *mt_comm_enqueue(mt_group *g, mt_coll_op *op) {
  mt_request *r = mt_xcalloc(1, sizeof *r);
  r->g = g;
  r->op = op;
  r->post_ns = mt_comm_now_ns();
  if (op->eng == &mt_comm_mpi_engine && g->engine != MT_ENGINE_MPI) {
    /* host buffers of a device engine (comm_start.c): the MPI engine's
     * calls, on the communication thread when there is one, else now */
    if (!g->d->thread_multiple) {
      mt_comm_drain(g);
      run_op(g, op);
      atomic_store(&op->done, 1);
      return r;
    }
  } else if (g->ops->start) {
    g->ops->start(g, r);
    return r;
  }
  mt_comm_queue_push(g, op);
  return r;
}

void mt_comm_queue_push(mt_group *g, mt_coll_op *op) {
  mt_comm_queue *q = queue_of(g);
  pthread_mutex_lock(&q->mu);
  if (q->tail) q->tail->next = op;
  else q->head = op;
  q->tail = op;
  q->started++;
  pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->mu);
}

mt_request *mt_comm_completed(mt_group *g) {
  mt_request *r = mt_xcalloc(1, sizeof *r);
  mt_coll_op *op = mt_xcalloc(1, sizeof *op);
  atomic_store(&op->done, 1);
  r->g = g;
  r->op = op;
  return r;
}

mt_coll_op *mt_comm_new_op(mt_coll_kind k, const void *send, void *buf, int64_t count,
                           mt_dtype t, mt_redop rop, int64_t wd_bytes) {
  mt_coll_op *op = mt_xcalloc(1, sizeof *op);
  op->kind = k;
  op->send = send;
  op->buf = buf;
  op->count = count;
  op->t = t;
  op->op = rop;
  op->wd_bytes = wd_bytes;
  return op;
}

static void free_op(mt_coll_op *op) {
  free(op->v);
  free(op);
}

void mt_comm_op_wait_done(mt_request *r) {
  mt_coll_op *op = r->op;
  if (!atomic_load_explicit(&op->done, memory_order_acquire)) {
    mt_comm_queue *q = r->g->q;
    int64_t t0 = mt_comm_now_ns();
    pthread_mutex_lock(&q->mu);
    while (!atomic_load_explicit(&op->done, memory_order_acquire))
      pthread_cond_wait(&q->done, &q->mu);
    pthread_mutex_unlock(&q->mu);
    mt_comm_account_add(r->g, mt_comm_now_ns() - t0, 0, 0);
  }
}

void mt_comm_op_wait(mt_request *r) {
  mt_coll_op *op = r->op;
  mt_comm_op_wait_done(r);
  if (r->engine_state) r->g->ops->finish(r, 1); /* the device side (NCCL, STAGED) */
  free_op(op);
  free(r);
}

int mt_comm_op_test(mt_request *r) {
  if (!atomic_load_explicit(&r->op->done, memory_order_acquire)) return 0;
  if (r->engine_state && !r->g->ops->finish(r, 0)) return 0;
  free_op(r->op);
  free(r);
  return 1;
}

