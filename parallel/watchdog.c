/* parallel/watchdog.c — per-operation deadlines: the shared records, the
 * watchdog thread and the stop failpoint (see watchdog.h and
 * docs/communication.md "Hang diagnosis"); the reports are in
 * watchdog_report.c. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "../core/failpoint.h"
#include "../core/hash.h"
#include "watchdog_impl.h"

mt_watchdog *mt_wd_create(mt_dist *d) {
  mt_watchdog *w = mt_xcalloc(1, sizeof *w);
  w->d = d;
  w->peer = mt_xcalloc((size_t)d->size, sizeof(wd_record *));
  MT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL,
                                   &w->node));
  int nsize;
  MT_MPI_CHECK(MPI_Comm_size(w->node, &nsize));
  int *wr = mt_xmalloc(sizeof(int) * (size_t)nsize);
  MT_MPI_CHECK(MPI_Allgather(&d->rank, 1, MPI_INT, wr, 1, MPI_INT, w->node));
  void *base = NULL;
  const char *shm = getenv("MEGATRAIN_WATCHDOG_SHM"); /* "0": test of the files */
  int rc = shm && !strcmp(shm, "0")
               ? MPI_ERR_OTHER
               : MPI_Win_allocate_shared((MPI_Aint)sizeof(wd_record), 1, MPI_INFO_NULL, w->node,
                                         &base, &w->win);
  int ok = rc == MPI_SUCCESS, all_ok = 0;
  MT_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, w->node));
  if (all_ok) {
    w->have_win = 1;
    for (int i = 0; i < nsize; i++) {
      MPI_Aint sz;
      int du;
      void *p = NULL;
      if (MPI_Win_shared_query(w->win, i, &sz, &du, &p) == MPI_SUCCESS && p &&
          sz >= (MPI_Aint)sizeof(wd_record))
        w->peer[wr[i]] = p;
    }
    w->own = base;
  } else {
    if (ok) MPI_Win_free(&w->win);
    w->own = NULL;
  }
  if (!w->own) w->own = mt_xcalloc(1, sizeof(wd_record)); /* peers unknown */
  memset(w->own, 0, sizeof(wd_record));
  atomic_store_explicit(&w->own->last_slot, -1, memory_order_relaxed);
  w->peer[d->rank] = w->own;
  free(wr);
  w->hb_fd = -1;
  int64_t fa[MT_FAILPOINT_MAX_ARGS];
  if (mt_failpoint_get("stop", fa) == 2 && fa[0] == d->rank && fa[1] > 0) w->stop_iter = fa[1];
  const char *dir = getenv("MEGATRAIN_HEARTBEAT_DIR");
  if (dir && *dir) {
    long long id[2] = {(long long)getpid(), (long long)time(NULL)}; /* rank 0's: the run id */
    MT_MPI_CHECK(MPI_Bcast(id, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    snprintf(w->hb_prefix, sizeof w->hb_prefix, "%s/megatrain-%lld-%lld-rank", dir, id[0], id[1]);
    char path[600];
    snprintf(path, sizeof path, "%s%d", w->hb_prefix, d->rank);
    w->hb_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->hb_fd < 0)
      mt_fatal("MEGATRAIN_HEARTBEAT_DIR: cannot create the heartbeat file %s: %s", path,
               strerror(errno));
    if (pwrite(w->hb_fd, w->own, sizeof *w->own, 0) != (ssize_t)sizeof *w->own)
      mt_fatal("MEGATRAIN_HEARTBEAT_DIR: cannot write the heartbeat file %s: %s", path,
               strerror(errno));
  }
  MT_MPI_CHECK(MPI_Barrier(w->node)); /* every record initialised before use */
  return w;
}

void mt_wd_destroy(mt_watchdog *w) {
  if (!w) return;
  if (w->thread_running) {
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
  }
  for (int i = 0; i < WD_SLOTS; i++) free(w->local[i].world_ranks);
  if (w->hb_fd >= 0) {
    char path[600];
    snprintf(path, sizeof path, "%s%d", w->hb_prefix, w->d->rank);
    close(w->hb_fd);
    unlink(path);
  }
  if (w->have_win) MPI_Win_free(&w->win);
  else free(w->own);
  MPI_Comm_free(&w->node);
  free(w->peer);
  free(w);
}

int mt_wd_register(mt_watchdog *w, mt_group *g) {
  int s = w->next_slot++;
  if (!g || s >= WD_SLOTS) return -1;
  wd_local *l = &w->local[s];
  l->used = 1;
  l->g = g;
  l->n = g->size;
  l->world_ranks = mt_xmalloc(sizeof(int) * (size_t)g->size);
  memcpy(l->world_ranks, g->world_ranks, sizeof(int) * (size_t)g->size);
  size_t p = (size_t)snprintf(l->label, sizeof l->label, "%s group [", g->name);
  for (int i = 0; i < g->size && p < sizeof l->label; i++) {
    if (i == 12 && g->size > 13) {
      p += (size_t)snprintf(l->label + p, sizeof l->label - p, ", ... (%d ranks)", g->size);
      break;
    }
    p += (size_t)snprintf(l->label + p, sizeof l->label - p, i ? ", %d" : "%d", g->world_ranks[i]);
  }
  if (p < sizeof l->label) snprintf(l->label + p, sizeof l->label - p, "]");
  snprintf(w->own->name[s], sizeof w->own->name[s], "%s", g->name);
  /* the group's identity for the other ranks' reports: FNV-1a of its ranks */
  const uint64_t h = mt_fnv1a64(MT_FNV1A64_INIT, g->world_ranks, sizeof(int) * (size_t)g->size);
  atomic_store_explicit(&w->own->slot[s].gid, (int64_t)(h | 1), memory_order_relaxed);
  return s;
}

void mt_wd_unregister(mt_watchdog *w, int slot) {
  if (w && slot >= 0 && slot < WD_SLOTS) w->local[slot].g = NULL;
}

void mt_wd_begin(mt_watchdog *w, int slot, int kind, int64_t bytes, int peer) {
  if (slot < 0) return;
  wd_record *r = w->own;
  wd_slot *s = &r->slot[slot];
  const memory_order o = memory_order_relaxed;
  atomic_store_explicit(&s->kind, kind, o);
  atomic_store_explicit(&s->bytes, bytes, o);
  atomic_store_explicit(&s->peer, peer >= 0 && peer < w->local[slot].n
                                      ? w->local[slot].world_ranks[peer] : -1, o);
  atomic_store_explicit(&s->iteration, atomic_load_explicit(&r->iteration, o), o);
  atomic_store_explicit(&s->micro_batch, atomic_load_explicit(&r->micro_batch, o), o);
  atomic_store_explicit(&s->started_ns, mt_wd_now_ns(), o);
  atomic_store_explicit(&s->ops, atomic_load_explicit(&s->ops, o) + 1, o);
  atomic_store_explicit(&r->last_slot, slot, o);
  atomic_store_explicit(&s->pending, 1, memory_order_release);
  if (w->stop_iter > 0 && kind < MT_COLL_N &&
      atomic_load_explicit(&r->iteration, o) == w->stop_iter) {
    /* failpoint stop:RANK:ITER: the whole process stops inside the
     * operation, as under SIGSTOP or a debugger, until SIGCONT */
    w->stop_iter = 0;
    fprintf(stderr, "[rank %d] megatrain: failpoint stop: rank %d stops (SIGSTOP) in %s on %s "
                    "(iteration %lld, op #%lld)\n", w->d->rank, w->d->rank, mt_wd_kind_name(kind),
            w->local[slot].label, (long long)atomic_load_explicit(&s->iteration, o),
            (long long)atomic_load_explicit(&s->ops, o));
    fflush(stderr);
    raise(SIGSTOP);
  }
}

void mt_wd_end(mt_watchdog *w, int slot) {
  if (slot < 0) return;
  atomic_store_explicit(&w->own->slot[slot].pending, 0, memory_order_release);
}

void mt_wd_set_phase(mt_watchdog *w, int64_t iteration, int micro_batch) {
  atomic_store_explicit(&w->own->iteration, iteration, memory_order_relaxed);
  atomic_store_explicit(&w->own->micro_batch, micro_batch, memory_order_relaxed);
}

void mt_wd_set_micro_batch(mt_watchdog *w, int micro_batch) {
  atomic_store_explicit(&w->own->micro_batch, micro_batch, memory_order_relaxed);
}

/* Time in [from, to] that this rank's watchdog thread was due but did not
 * run (its recorded gaps). */
static int64_t unscheduled_in(const mt_watchdog *w, int64_t from, int64_t to) {
  int64_t sum = 0;
  for (int i = 0; i < w->n_gaps && i < WD_GAPS; i++) {
    int64_t a = w->gap_from[i] > from ? w->gap_from[i] : from;
    int64_t b = w->gap_to[i] < to ? w->gap_to[i] : to;
    if (b > a) sum += b - a;
  }
  return sum;
}

/* The watchdog thread's period for a timeout of to ns: a fifth of it, in
 * [20 ms, 1 s]. */
static int64_t wd_period_ns(int64_t to) {
  const int64_t p = to / 5 < 1000000000 ? to / 5 : 1000000000;
  return p < 20000000 ? 20000000 : p;
}

static void *watch(void *arg) {
  mt_watchdog *w = arg;
  const memory_order rx = memory_order_relaxed;
  while (!atomic_load(&w->stop)) {
    int64_t to = atomic_load(&w->timeout_ns);
    const int64_t period = wd_period_ns(to);
    atomic_store_explicit(&w->own->period_ms, (int32_t)(period / 1000000), rx);
    struct timespec ts = {(time_t)(period / 1000000000), (long)(period % 1000000000)};
    const int64_t before = mt_wd_now_ns();
    nanosleep(&ts, NULL);
    const int64_t t = mt_wd_now_ns();
    /* woken more than a second late: the process was stopped (SIGSTOP, a
     * debugger) or not run by the host; that time is not the others' fault.
     * Published before the tick, so that a reader sees a stale tick or the gap */
    const int64_t late = t - before - period;
    if (late > 1000000000) {
      const int g = w->n_gaps++ % WD_GAPS;
      w->gap_from[g] = before + period;
      w->gap_to[g] = t;
      atomic_store_explicit(&w->own->gap_ns, late, rx);
      atomic_store_explicit(&w->own->gap_end_ns, t, memory_order_release);
      /* said at once (the operation it was in may complete right after the
       * wake-up) when it is a fair part of the deadline: half of it, at
       * most 30 s */
      const int64_t note = to / 2 < 30000000000 ? to / 2 : 30000000000;
      if (to > 0 && late >= note) mt_wd_note_unscheduled(w, before + period, late);
    }
    atomic_store_explicit(&w->own->tick_ns, t, memory_order_release);
    atomic_store_explicit(&w->own->tick_real_ns, mt_wd_real_ns(), rx);
    if (w->hb_fd >= 0 && pwrite(w->hb_fd, w->own, sizeof *w->own, 0) < 0) {
      /* a heartbeat that cannot be written only weakens a later report */
    }
    if (to <= 0) continue;
    for (int i = 0; i < WD_SLOTS && i < w->next_slot; i++) {
      const wd_slot *s = &w->own->slot[i];
      if (!w->local[i].used || !atomic_load_explicit(&s->pending, memory_order_acquire)) continue;
      const int64_t started = atomic_load_explicit(&s->started_ns, rx);
      const int64_t dt = t - started;
      if (dt <= to || !atomic_load_explicit(&s->pending, memory_order_acquire)) continue;
      /* the deadline counts the time this rank ran */
      const int64_t off = unscheduled_in(w, started, t);
      if (dt - off > to) mt_wd_expire(w, i, dt, off);
    }
  }
  return NULL;
}

void mt_wd_set_timeout(mt_watchdog *w, double minutes) {
  atomic_store(&w->timeout_ns, minutes > 0 ? (int64_t)(minutes * 6e10) : 0);
  if (minutes > 0 && !w->thread_running) {
    /* a first tick and period now: a rank stopped before its watchdog
     * thread first runs (one period) reads as stopped, not as never seen */
    const int64_t to = atomic_load(&w->timeout_ns);
    const int64_t period = wd_period_ns(to);
    atomic_store_explicit(&w->own->period_ms, (int32_t)(period / 1000000), memory_order_relaxed);
    atomic_store_explicit(&w->own->tick_real_ns, mt_wd_real_ns(), memory_order_relaxed);
    atomic_store_explicit(&w->own->tick_ns, mt_wd_now_ns(), memory_order_release);
    /* the thread inherits a mask blocking every signal, so the trainer's
     * handlers (SIGTERM, SIGUSR1, ...) always run on the main thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, watch, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) mt_fatal("cannot start the communication watchdog thread");
    w->thread_running = 1;
  }
}
