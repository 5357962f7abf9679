/* trainer/train_signals.h — leaving a run cleanly when the cluster asks:
 * preemption signals (Megatron's --exit-signal-handler / --exit-signal),
 * the wall-clock budget (--exit-duration-in-mins), and the straggler report
 * (--log-straggler).
 *
 * Signals: with training.exit_signal_handler the process catches
 * training.exit_signal and SIGUSR1 (Slurm's `--signal=USR1@T` warning). The
 * handler only records the signal number in a volatile sig_atomic_t; the
 * training loop asks mt_exit_check at every iteration boundary, where every
 * rank contributes its flag to one all-reduce (MAX) over the world, so a
 * signal delivered to a single rank stops all of them after the same
 * iteration. A signal that arrives during a save only sets the flag: the save
 * finishes, and the boundary check right after it ends the run.
 *
 * Duration: the same reduction carries each rank's minutes since start-up
 * (MAX over ranks, as Megatron's all-reduce of `train_time > limit`), so every
 * rank takes the same decision although each reads its own clock.
 */
#ifndef MT_TRAINER_TRAIN_SIGNALS_H
#define MT_TRAINER_TRAIN_SIGNALS_H

#include <signal.h>
#include <stddef.h>

#include "config/config.h"
#include "parallel/comm.h"
#include "trainer/train_internal.h"

/* Installed handlers and the previous dispositions to restore. */
typedef struct {
  int enabled;                 /* handlers installed */
  int signums[2];              /* exit_signal, SIGUSR1 (0 = unused slot) */
  struct sigaction old[2];
  double t_start;              /* mt_now() at start-up */
  float exit_duration_in_mins; /* 0 = off */
} mt_exit_watch;

/* Why the run stops at this boundary (the same on every rank). */
typedef struct {
  int stop;        /* 0: continue; 1: signal; 2: exit_duration_in_mins */
  int signum;      /* stop == 1: the signal of the lowest rank that got one */
  int rank;        /* stop == 1: that rank (world rank) */
  double minutes;  /* largest minutes since start-up over the ranks */
} mt_exit_decision;

/* Parse a signal name of training.exit_signal ("SIGTERM", "SIGINT",
 * "SIGUSR1", "SIGUSR2"); returns the number or -1. */
int mt_exit_signal_number(const char *name);

/* Name of a signal number as in training.exit_signal ("SIGTERM", ...);
 * "an unknown signal" for other numbers. */
const char *mt_exit_signal_name(int signum);

/* Record t_start and, when tc->exit_signal_handler, install the handlers
 * for tc->exit_signal and SIGUSR1 (SA_RESTART; nothing else is done in the
 * handler). Clears any flag left from before. Returns 0, or -1 with err =
 * "training.exit_signal: unknown signal '...'" / the sigaction error. */
int mt_exit_watch_start(mt_exit_watch *w, const mt_training_config *tc, double t_start,
                        char *err, size_t errlen);

/* Restore the previous dispositions (no-op when none were installed). */
void mt_exit_watch_stop(mt_exit_watch *w);

/* Whether this rank needs to call mt_exit_check at all (a handler is
 * installed or a duration is set); the same on every rank. */
int mt_exit_watch_active(const mt_exit_watch *w);

/* The agreement at an iteration boundary: one all-reduce (MAX) of two
 * doubles over `world` (every rank must call it, at the same iterations).
 * Signals beat the duration limit when both fire. Does not clear the flag
 * (the run is ending). */
mt_exit_decision mt_exit_check(const mt_exit_watch *w, mt_group *world, double now);


/* Straggler report (Megatron's log_straggler): each rank's mean time per
 * iteration over the log interval (`my_ms`) is all-gathered over `world`
 * (one double per rank; every rank must call it at the same iterations);
 * returns the slowest and fastest with their world ranks (ties: lowest rank). */
typedef struct {
  double max_ms, min_ms;
  int max_rank, min_rank;
} mt_straggler;
mt_straggler mt_straggler_reduce(mt_group *world, double my_ms);

/* Fault injection for the straggler test: with MEGATRAIN_FAILPOINT holding
 * straggler:RANK:MS, world rank `rank` == RANK sleeps MS milliseconds (once
 * per training step, inside the time the report measures). Returns the
 * seconds slept (0 on every other rank). */
double mt_straggler_failpoint(int rank);

/* Fault injection for the test of a signal during a save: with
 * MEGATRAIN_FAILPOINT holding signal_in_save:N, world rank 0 raises its own
 * exit signal right before the save of iteration N starts (the handler
 * records it, the save proceeds with the flag set). No-op otherwise. */
void mt_exit_failpoint_in_save(const mt_exit_watch *w, int rank, int64_t iteration);

/* The boundary check of the training loop (trainer/train.c), after the
 * iteration's regular save: mt_exit_check over t->world; when the ranks agree
 * to stop, save (when checkpoint.save is set and `saved` is 0: this
 * iteration's checkpoint is not written yet) and print on the logging rank
 *   > exiting after iteration N: received SIGTERM on rank R; checkpoint saved to 'DIR'
 * (or "...: 0.501 minutes since start-up >= training.exit_duration_in_mins = 0.5",
 * "nothing saved (checkpoint.save is not set)"). Collective over the world
 * (and the save's groups). Returns 0 to continue, 1 to stop (exit status 0),
 * -1 with err when the save failed. */
int mt_trainer_exit_boundary(mt_trainer *t, const mt_exit_watch *w, int saved, char *err,
                             size_t errlen);

#endif
