/* parallel/watchdog_impl.h — private to parallel/watchdog*.c: the shared
 * records of the hang watchdog and its state (watchdog.h,
 * docs/communication.md "Hang diagnosis"). */
#ifndef MT_PARALLEL_WATCHDOG_IMPL_H
#define MT_PARALLEL_WATCHDOG_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "comm_impl.h"
#include "watchdog.h"

#define WD_SLOTS 64 /* groups tracked per process (creation order) */
#define WD_GAPS 8   /* times this rank's watchdog thread was not scheduled, kept */
#define WD_NAMED 8  /* ranks a report publishes as the ones it found holding it up */

/* One group slot of a rank's record (shared memory, written by its owner). */
typedef struct {
  _Atomic int64_t ops;        /* operations started on this group */
  _Atomic int64_t started_ns; /* CLOCK_MONOTONIC_COARSE start of the current one */
  _Atomic int64_t bytes;
  _Atomic int64_t iteration;
  _Atomic int64_t gid;        /* the group's identity: a hash of its world ranks (0 = none) */
  _Atomic int32_t pending;    /* 1 while the current one is in flight */
  _Atomic int32_t kind;
  _Atomic int32_t micro_batch;
  _Atomic int32_t peer;       /* world rank of a point-to-point wait's peer, -1 none */
} wd_slot;

/* A rank's record (one per rank, in the node's shared window; copied to its
 * heartbeat file). */
typedef struct {
  _Atomic int64_t iteration;    /* the trainer's phase (mt_dist_set_phase) */
  _Atomic int64_t tick_ns;      /* CLOCK_MONOTONIC_COARSE of the watchdog thread's last
                                 * wake-up (0: no thread): the process is being run */
  _Atomic int64_t tick_real_ns; /* the same in CLOCK_REALTIME (read across nodes) */
  _Atomic int64_t gap_ns;       /* the last time the thread was due but did not run: its */
  _Atomic int64_t gap_end_ns;   /* length and end (CLOCK_MONOTONIC_COARSE); 0 = none */
  _Atomic int32_t period_ms;    /* the thread's wake-up period */
  _Atomic int32_t micro_batch;
  _Atomic int32_t last_slot;    /* slot of the last operation started, -1 none */
  _Atomic int32_t reported;     /* 1 once this rank's own hang report is out (job ending) */
  _Atomic int32_t named[WD_NAMED]; /* the ranks that report named as holding it up, -1 ends */
  char name[WD_SLOTS][32];      /* group names, written once at registration */
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
  /* the watchdog thread's own (private): intervals in which it was due but
   * did not run (the process stopped or not scheduled), a ring */
  int64_t gap_from[WD_GAPS], gap_to[WD_GAPS];
  int n_gaps;
  /* failpoint stop:RANK:ITER (parsed at create): SIGSTOP inside the first
   * collective of iteration ITER on world rank RANK; 0 = off */
  int64_t stop_iter;
};

/* Clocks and names shared by watchdog.c and watchdog_report.c (inline, so
 * that the report depends on nothing of watchdog.c). */
static inline int64_t mt_wd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* ~ms resolution, a few ns */
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t mt_wd_real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline const char *mt_wd_kind_name(int k) {
  static const char *const n[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                  "all-to-allv", "broadcast", "send/recv", "barrier",
                                  "wait for a send", "wait for a receive", "agreement check",
                                  "group creation"};
  return k >= 0 && k < (int)(sizeof n / sizeof n[0]) ? n[k] : "operation";
}

/* The watchdog thread's findings (watchdog_report.c), each one line on
 * stderr. expire: the operation of `slot` passed its deadline (waited_ns in
 * all, unscheduled_ns of them while this rank was not scheduled); ends the
 * job and does not return. note_unscheduled: the thread was due at from_ns
 * and ran gap_ns late; names the operation this rank was in. */
void mt_wd_expire(mt_watchdog *w, int slot, int64_t waited_ns, int64_t unscheduled_ns);
void mt_wd_note_unscheduled(mt_watchdog *w, int64_t from_ns, int64_t gap_ns);

#endif
