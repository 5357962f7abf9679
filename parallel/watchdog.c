/* parallel/watchdog.c — per-operation deadlines and the hang report (see
 * watchdog.h and docs/communication.md "Hang diagnosis"). */
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

#include "comm_impl.h"
#include "watchdog.h"

#define WD_SLOTS 64 /* groups tracked per process (creation order) */

/* One group slot of a rank's record (shared memory, written by its owner). */
typedef struct {
  _Atomic int64_t ops;        /* operations started on this group */
  _Atomic int64_t started_ns; /* CLOCK_MONOTONIC_COARSE start of the current one */
  _Atomic int64_t bytes;
  _Atomic int64_t iteration;
  _Atomic int32_t pending;    /* 1 while the current one is in flight */
  _Atomic int32_t kind;
  _Atomic int32_t micro_batch;
  _Atomic int32_t peer;
} wd_slot;

/* A rank's record (one per rank, in the node's shared window). */
typedef struct {
  _Atomic int64_t iteration;   /* the trainer's phase (mt_dist_set_phase) */
  _Atomic int32_t micro_batch;
  _Atomic int32_t last_slot;   /* slot of the last operation started, -1 none */
  char name[WD_SLOTS][32];     /* group names, written once at registration */
  wd_slot slot[WD_SLOTS];
} wd_record;

/* What this process knows of a slot (private memory). */
typedef struct {
  int used, n;
  int *world_ranks;
  mt_group *g;                 /* NULL after destroy */
  char label[160];             /* "tp group [0, 1]" */
} wd_local;

struct mt_watchdog {
  mt_dist *d;
  MPI_Comm node;
  MPI_Win win;
  int have_win;
  wd_record *own;
  wd_record **peer;            /* [world size], NULL when on another node */
  int next_slot;
  wd_local local[WD_SLOTS];
  _Atomic int64_t timeout_ns;  /* 0 = off */
  _Atomic int stop;
  int thread_running;
  /* heartbeat files (MEGATRAIN_HEARTBEAT_DIR): this rank's record copied by
   * the watchdog thread every period, read for ranks outside the window */
  char hb_prefix[512];         /* "DIR/megatrain-<run id>-rank", "" = off */
  int hb_fd;
  pthread_t thread;
  wd_record peer_copy;         /* a heartbeat file read by the report (its thread) */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* ~ms resolution, a few ns */
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *kind_name(int k) {
  static const char *const n[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                  "all-to-allv", "broadcast", "send/recv", "barrier",
                                  "wait for a send", "wait for a receive", "agreement check",
                                  "group creation"};
  return k >= 0 && k < (int)(sizeof n / sizeof n[0]) ? n[k] : "operation";
}

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
  atomic_store_explicit(&s->peer, peer, o);
  atomic_store_explicit(&s->iteration, atomic_load_explicit(&r->iteration, o), o);
  atomic_store_explicit(&s->micro_batch, atomic_load_explicit(&r->micro_batch, o), o);
  atomic_store_explicit(&s->started_ns, now_ns(), o);
  atomic_store_explicit(&s->ops, atomic_load_explicit(&s->ops, o) + 1, o);
  atomic_store_explicit(&r->last_slot, slot, o);
  atomic_store_explicit(&s->pending, 1, memory_order_release);
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

/* The record of world rank wr: the shared window on this node, else its
 * heartbeat file read into w->peer_copy, else NULL (unknown). */
static const wd_record *peer_record(mt_watchdog *w, int wr) {
  wd_record *tmp = &w->peer_copy;
  if (w->peer[wr]) return w->peer[wr];
  if (!w->hb_prefix[0]) return NULL;
  char path[600];
  snprintf(path, sizeof path, "%s%d", w->hb_prefix, wr);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  ssize_t n = pread(fd, tmp, sizeof *tmp, 0);
  close(fd);
  return n == (ssize_t)sizeof *tmp ? tmp : NULL;
}

/* "last seen in all-gather on dp group at iteration 3, op #57" for world
 * rank wr, or why it cannot be told. */
static void describe_peer(mt_watchdog *w, int wr, char *buf, size_t n) {
  const wd_record *r = peer_record(w, wr);
  if (!r) {
    snprintf(buf, n, "state unknown: on another node%s",
             w->hb_prefix[0] ? ", no heartbeat file" : " (set MEGATRAIN_HEARTBEAT_DIR)");
    return;
  }
  int ls = atomic_load_explicit(&r->last_slot, memory_order_relaxed);
  if (ls < 0 || ls >= WD_SLOTS) {
    snprintf(buf, n, "no operation started yet");
    return;
  }
  const wd_slot *s = &r->slot[ls];
  int pending = atomic_load_explicit(&s->pending, memory_order_acquire);
  snprintf(buf, n, "%s %s on %s group at iteration %lld, op #%lld",
           pending ? "waiting in" : "last seen in",
           kind_name(atomic_load_explicit(&s->kind, memory_order_relaxed)), r->name[ls],
           (long long)atomic_load_explicit(&s->iteration, memory_order_relaxed),
           (long long)atomic_load_explicit(&s->ops, memory_order_relaxed));
}

/* Print the report for the expired operation of `slot`, then end the job. */
static void expire(mt_watchdog *w, int slot, double waited_min) {
  const wd_slot *s = &w->own->slot[slot];
  const wd_local *l = &w->local[slot];
  int kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
  int64_t my_ops = atomic_load_explicit(&s->ops, memory_order_relaxed);
  char msg[4096], who[256];
  size_t p = (size_t)snprintf(
      msg, sizeof msg,
      "[rank %d] megatrain: error: rank %d: %s on %s (%lld bytes, iteration %lld, micro-batch %d, "
      "op #%lld) has not completed after %.2f minutes (parallel.distributed_timeout_minutes = "
      "%.2f); ",
      w->d->rank, w->d->rank, kind_name(kind), l->label,
      (long long)atomic_load_explicit(&s->bytes, memory_order_relaxed),
      (long long)atomic_load_explicit(&s->iteration, memory_order_relaxed),
      (int)atomic_load_explicit(&s->micro_batch, memory_order_relaxed), (long long)my_ops,
      waited_min, (double)atomic_load(&w->timeout_ns) / 6e10);
  if (kind == MT_WD_WAIT_SEND || kind == MT_WD_WAIT_RECV) {
    int peer = atomic_load_explicit(&s->peer, memory_order_relaxed);
    int wr = peer >= 0 && peer < l->n ? l->world_ranks[peer] : -1;
    if (wr >= 0) {
      describe_peer(w, wr, who, sizeof who);
      p += (size_t)snprintf(msg + p, sizeof msg - p, "its peer is rank %d (%s)", wr, who);
    }
  } else {
    int behind = 0, unknown = 0;
    for (int i = 0; i < l->n && p < sizeof msg; i++) {
      int wr = l->world_ranks[i];
      const wd_record *r = peer_record(w, wr);
      if (wr == w->d->rank) continue;
      if (!r) {
        unknown++; /* no record to read: named below, never as "not reached" */
        continue;
      }
      if (atomic_load_explicit(&r->slot[slot].ops, memory_order_relaxed) >= my_ops) continue;
      describe_peer(w, wr, who, sizeof who);
      p += (size_t)snprintf(msg + p, sizeof msg - p, "%s%d (%s)",
                            behind++ ? ", " : "ranks that have not reached it: ", wr, who);
    }
    if (unknown && p < sizeof msg) {
      p += (size_t)snprintf(msg + p, sizeof msg - p, "%sstate unknown of rank",
                            behind ? "; " : "");
      for (int i = 0, k = 0; i < l->n && p < sizeof msg; i++) {
        int wr = l->world_ranks[i];
        if (wr == w->d->rank || peer_record(w, wr)) continue;
        p += (size_t)snprintf(msg + p, sizeof msg - p, "%s %d", k++ ? "," : "", wr);
      }
      if (p < sizeof msg)
        p += (size_t)snprintf(msg + p, sizeof msg - p,
                              " (not on this node's shared window and no heartbeat file: set "
                              "MEGATRAIN_HEARTBEAT_DIR to a directory every node shares)");
    } else if (!behind && p < sizeof msg) {
      snprintf(msg + p, sizeof msg - p,
               "every rank of the group has started op #%lld on it, yet it has not completed",
               (long long)my_ops);
    }
  }
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  /* NCCL groups first (their kernels may hold the GPU), then the job. */
  for (int i = 0; i < WD_SLOTS; i++)
    if (w->local[i].used && w->local[i].g && w->local[i].g->ops->abort)
      w->local[i].g->ops->abort(w->local[i].g);
  /* MPI_Abort from this thread while the main thread blocks in MPI: Open MPI
   * 4.1 ends the job (tests/integration/test_hang.sh); _exit if it returns. */
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

static void *watch(void *arg) {
  mt_watchdog *w = arg;
  while (!atomic_load(&w->stop)) {
    int64_t to = atomic_load(&w->timeout_ns);
    int64_t period = to / 5 < 1000000000 ? to / 5 : 1000000000;
    if (period < 20000000) period = 20000000;
    struct timespec ts = {(time_t)(period / 1000000000), (long)(period % 1000000000)};
    nanosleep(&ts, NULL);
    if (w->hb_fd >= 0 && pwrite(w->hb_fd, w->own, sizeof *w->own, 0) < 0) {
      /* a heartbeat that cannot be written only weakens a later report */
    }
    if (to <= 0) continue;
    int64_t t = now_ns();
    for (int i = 0; i < WD_SLOTS && i < w->next_slot; i++) {
      const wd_slot *s = &w->own->slot[i];
      if (!w->local[i].used || !atomic_load_explicit(&s->pending, memory_order_acquire)) continue;
      int64_t dt = t - atomic_load_explicit(&s->started_ns, memory_order_relaxed);
      if (dt > to && atomic_load_explicit(&s->pending, memory_order_acquire))
        expire(w, i, (double)dt / 6e10);
    }
  }
  return NULL;
}

void mt_wd_set_timeout(mt_watchdog *w, double minutes) {
  atomic_store(&w->timeout_ns, minutes > 0 ? (int64_t)(minutes * 6e10) : 0);
  if (minutes > 0 && !w->thread_running) {
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
