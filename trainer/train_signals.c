/* trainer/train_signals.c — see train_signals.h. */
#include "trainer/train_signals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/failpoint.h"
#include "core/log_stream.h"
#include "core/util.h"

/* The one piece of global mutable state: the signal number the handler saw
 * last on this process (0 = none). Written only by on_signal and cleared by
 * mt_exit_watch_start; read at iteration boundaries. */
static volatile sig_atomic_t g_signal_received = 0;

/* Record the signal and make log output non-blocking from now on: a write
 * to a pipe or pty nobody reads (mpirun tearing the job down) must not keep
 * this rank from the save (core/log_stream.h). */
static void on_signal(int signum) {
  g_signal_received = signum;
  mt_log_streams_nonblock();
}

static const struct {
  const char *name;
  int num;
} k_signals[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT}, {"SIGUSR1", SIGUSR1},
                 {"SIGUSR2", SIGUSR2}};

int mt_exit_signal_number(const char *name) {
  for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++)
    if (!strcmp(name, k_signals[i].name)) return k_signals[i].num;
  return -1;
}

const char *mt_exit_signal_name(int signum) {
  for (size_t i = 0; i < sizeof k_signals / sizeof k_signals[0]; i++)
    if (k_signals[i].num == signum) return k_signals[i].name;
  return "an unknown signal";
}

int mt_exit_watch_start(mt_exit_watch *w, const mt_training_config *tc, double t_start,
                        char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  w->t_start = t_start;
  w->exit_duration_in_mins = tc->exit_duration_in_mins;
  g_signal_received = 0;
  if (!tc->exit_signal_handler) return 0;
  int sig = mt_exit_signal_number(tc->exit_signal);
  if (sig < 0) {
    snprintf(err, errlen,
             "training.exit_signal: unknown signal '%s' (expected SIGTERM, SIGINT, SIGUSR1 or "
             "SIGUSR2)",
             tc->exit_signal);
    return -1;
  }
  w->signums[0] = sig;
  w->signums[1] = sig == SIGUSR1 ? 0 : SIGUSR1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++) {
    if (!w->signums[i]) continue;
    if (sigaction(w->signums[i], &sa, &w->old[i]) != 0) {
      snprintf(err, errlen, "cannot install the handler of %s (training.exit_signal_handler): %s",
               mt_exit_signal_name(w->signums[i]), strerror(errno));
      for (int j = 0; j < i; j++)
        if (w->signums[j]) sigaction(w->signums[j], &w->old[j], NULL);
      w->signums[0] = w->signums[1] = 0;
      return -1;
    }
  }
  w->enabled = 1;
  /* counting streams, so that the handler's switch to non-blocking output
   * can drop and count what would block (without them stdio drops alone) */
  if (mt_log_streams_install() != 0)
    fprintf(stderr, "megatrain: warning: cannot set up the log streams: output dropped after a "
                    "preemption signal will not be counted\n");
  return 0;
}

void mt_exit_watch_stop(mt_exit_watch *w) {
  if (!w->enabled) return;
  for (int i = 0; i < 2; i++)
    if (w->signums[i]) sigaction(w->signums[i], &w->old[i], NULL);
  w->enabled = 0;
  mt_log_streams_uninstall();
}

int mt_exit_watch_active(const mt_exit_watch *w) {
  return w->enabled || w->exit_duration_in_mins > 0;
}

mt_exit_decision mt_exit_check(const mt_exit_watch *w, mt_group *world, double now) {
  mt_exit_decision d = {0};
  const int n = mt_group_size(world), me = mt_group_rank(world);
  const int sig = w->enabled ? (int)g_signal_received : 0;
  /* v[0]: (n - rank) * 64 + signum for a signalled rank, else 0: the maximum
   * names the lowest signalled rank and its signal (exact in a double for
   * any world size); v[1]: minutes since start-up */
  double v[2] = {sig > 0 && sig < 64 ? (double)(n - me) * 64.0 + sig : 0.0,
                 (now - w->t_start) / 60.0};
  mt_allreduce(world, v, 2, MT_F64, MT_OP_MAX);
  d.minutes = v[1];
  if (v[0] > 0) {
    const long long code = (long long)v[0];
    d.stop = 1;
    d.signum = (int)(code % 64);
    d.rank = n - (int)(code / 64);
  } else if (w->exit_duration_in_mins > 0 && d.minutes >= w->exit_duration_in_mins) {
    d.stop = 2;
  }
  return d;
}

void mt_exit_failpoint_in_save(const mt_exit_watch *w, int rank, int64_t iteration) {
  if (rank == 0 && w->enabled && mt_failpoint_at("signal_in_save", iteration)) raise(w->signums[0]);
}

mt_straggler mt_straggler_reduce(mt_group *world, double my_ms) {
  const int n = mt_group_size(world);
  double *all = mt_xmalloc((size_t)n * sizeof(double));
  mt_straggler s;
  mt_allgather(world, &my_ms, all, 1, MT_F64);
  s.max_ms = s.min_ms = all[0];
  s.max_rank = s.min_rank = 0;
  for (int r = 1; r < n; r++) {
    if (all[r] > s.max_ms) s.max_ms = all[r], s.max_rank = r;
    if (all[r] < s.min_ms) s.min_ms = all[r], s.min_rank = r;
  }
  free(all);
  return s;
}

double mt_straggler_failpoint(int rank) {
  int64_t a[MT_FAILPOINT_MAX_ARGS];
  if (mt_failpoint_get("straggler", a) != 2 || a[0] != rank || a[1] <= 0) return 0.0;
  struct timespec ts = {(time_t)(a[1] / 1000), (long)(a[1] % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return (double)a[1] / 1e3;
}

int mt_trainer_exit_boundary(mt_trainer *t, const mt_exit_watch *w, int saved, char *err,
                             size_t errlen) {
  const mt_config *c = t->cfg;
  mt_exit_decision d = mt_exit_check(w, t->world, mt_now());
  if (!d.stop) return 0;
  /* a signal on any rank: no rank waits on its output until it exits */
  if (d.stop == 1) mt_log_streams_nonblock();
  if (c->checkpoint.save[0] && !saved) {
    if (mt_trainer_save(t, err, errlen) != 0) return -1;
    saved = 1;
  }
  const mt_log_drops dr = mt_log_streams_dropped();
  if (dr.bytes > 0) {
    fprintf(stderr,
            "[rank %d] megatrain: warning: %lld line(s) (%lld bytes) of this rank's log output were "
            "dropped after the signal: its stdout or stderr was not being read\n",
            t->rank, (long long)dr.lines, (long long)dr.bytes);
    fflush(stderr);
  }
  if (!t->is_logger) return 1;
  char why[192];
  if (d.stop == 1)
    snprintf(why, sizeof why, "received %s on rank %d", mt_exit_signal_name(d.signum), d.rank);
  else
    snprintf(why, sizeof why, "%.3g minutes since start-up >= training.exit_duration_in_mins = %g",
             d.minutes, (double)w->exit_duration_in_mins);
  if (saved && c->checkpoint.async_save)
    printf("> exiting after iteration %lld: %s; checkpoint being saved to '%s' (asynchronous; "
           "finished before the process exits)\n",
           (long long)t->iteration, why, c->checkpoint.save);
  else if (saved)
    printf("> exiting after iteration %lld: %s; checkpoint saved to '%s'\n",
           (long long)t->iteration, why, c->checkpoint.save);
  else
    printf("> exiting after iteration %lld: %s; nothing saved (checkpoint.save is not set)\n",
           (long long)t->iteration, why);
  fflush(stdout);
  return 1;
}
