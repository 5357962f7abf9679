/* core/timers.h — named wall-clock timers with a log level, and their
 * report across ranks (Megatron's megatron/core/timers.py).
 *
 * A timer set is built from a table of {name, level}; a timer whose level is
 * above the set's log level (Megatron's timing_log_level) is a no-op, so
 * level 0 adds no clock reads. Start/stop accumulate elapsed wall time until
 * mt_timers_reset. The report takes every rank's elapsed seconds (gathered
 * by the caller: core does not communicate) and prints them as Megatron's
 * Timers.log does for timing_log_option max / minmax / all: per timer
 * the min and max over the ranks that ran it (elapsed > 0), in ms divided
 * by a normalizer (iterations of the log interval). No locks: one thread
 * owns a set. */
#ifndef MT_CORE_TIMERS_H
#define MT_CORE_TIMERS_H

#include <stdio.h>

#define MT_TIMERS_MAX 32

typedef struct {
  const char *name; /* Megatron's timer name, e.g. "forward-backward" */
  int level;        /* 1: once per iteration, 2: many times per iteration */
} mt_timer_def;

typedef struct {
  int log_level; /* timers with level > log_level do nothing */
  int n;
  const mt_timer_def *def;
  double elapsed[MT_TIMERS_MAX]; /* seconds since the last reset */
  double started[MT_TIMERS_MAX]; /* mt_now() at start, < 0 when stopped */
} mt_timers;

/* Set up n (<= MT_TIMERS_MAX) timers from defs (kept by pointer: static
 * storage) at log level log_level (0-2). */
void mt_timers_init(mt_timers *ts, const mt_timer_def *defs, int n, int log_level);
/* 1 when timer id records (its level <= the log level). */
int mt_timer_on(const mt_timers *ts, int id);
/* Start / stop timer id (no-op when off; ts may be NULL). Starting a
 * running timer or stopping a stopped one is a programming error. */
void mt_timer_start(mt_timers *ts, int id);
void mt_timer_stop(mt_timers *ts, int id);
/* Zero every timer's elapsed time (running timers restart now). */
void mt_timers_reset(mt_timers *ts);

/* Print Megatron's report of the timers that are on to f:
 *   option "max":    "max time across ranks (ms):" then per timer
 *                    "    <name ...>: <max>"
 *   option "minmax": "(min, max) time across ranks (ms):" then
 *                    "    <name ...>: (<min>, <max>)"
 *   option "all":    "times across ranks (ms):" then per timer "  <name>:"
 *                    and "     rank  r: <t>" for every rank that ran it
 * from all[r * ts->n + id] (seconds of rank r, world ranks), times divided by
 * normalizer; names padded with dots to 48 columns. Timers no rank ran are
 * left out; nothing is printed when none ran. Returns the lines printed. */
int mt_timers_print(FILE *f, const mt_timers *ts, const double *all, int world,
                    const char *option, double normalizer);
/* The max over ranks of timer id, seconds / normalizer (0 when none ran):
 * the value Megatron writes to TensorBoard as "<name>-time". */
double mt_timers_max(const mt_timers *ts, const double *all, int world, int id, double normalizer);

#endif
