/* core/timers.c — see timers.h. */
#include "core/timers.h"

#include <string.h>

#include "core/util.h"

void mt_timers_init(mt_timers *ts, const mt_timer_def *defs, int n, int log_level) {
  MT_ASSERT(n >= 0 && n <= MT_TIMERS_MAX);
  memset(ts, 0, sizeof *ts);
  ts->def = defs;
  ts->n = n;
  ts->log_level = log_level;
  for (int i = 0; i < n; i++) ts->started[i] = -1.0;
}

int mt_timer_on(const mt_timers *ts, int id) {
  return ts && id >= 0 && id < ts->n && ts->def[id].level <= ts->log_level;
}

void mt_timer_start(mt_timers *ts, int id) {
  if (!mt_timer_on(ts, id)) return;
  MT_ASSERT(ts->started[id] < 0);
  ts->started[id] = mt_now();
}

void mt_timer_stop(mt_timers *ts, int id) {
  if (!mt_timer_on(ts, id)) return;
  MT_ASSERT(ts->started[id] >= 0);
  ts->elapsed[id] += mt_now() - ts->started[id];
  ts->started[id] = -1.0;
}

void mt_timers_reset(mt_timers *ts) {
  const double now = mt_now();
  for (int i = 0; i < ts->n; i++) {
    ts->elapsed[i] = 0.0;
    if (ts->started[i] >= 0) ts->started[i] = now;
  }
}

/* Min and max of timer id over the ranks with elapsed > 0; 0 when none. */
static int min_max(const mt_timers *ts, const double *all, int world, int id, double *mn,
                   double *mx) {
  int found = 0;
  for (int r = 0; r < world; r++) {
    double v = all[(size_t)r * ts->n + id];
    if (v <= 0) continue;
    if (!found || v < *mn) *mn = v;
    if (!found || v > *mx) *mx = v;
    found = 1;
  }
  return found;
}

double mt_timers_max(const mt_timers *ts, const double *all, int world, int id,
                     double normalizer) {
  double mn = 0, mx = 0;
  return min_max(ts, all, world, id, &mn, &mx) ? mx / normalizer : 0.0;
}

int mt_timers_print(FILE *f, const mt_timers *ts, const double *all, int world,
                    const char *option, double normalizer) {
  const int each = !strcmp(option, "all"), max_only = !strcmp(option, "max");
  const double ms = 1e3 / normalizer;
  int lines = 0;
  for (int id = 0; id < ts->n; id++) {
    double mn = 0, mx = 0;
    if (!mt_timer_on(ts, id) || !min_max(ts, all, world, id, &mn, &mx)) continue;
    if (!lines++)
      fputs(each ? "times across ranks (ms):" : max_only ? "max time across ranks (ms):"
                                                         : "(min, max) time across ranks (ms):",
            f);
    if (each) {
      fprintf(f, "\n  %s:", ts->def[id].name);
      for (int r = 0; r < world; r++) {
        double v = all[(size_t)r * ts->n + id];
        if (v > 0) fprintf(f, "\n     rank %2d: %.2f", r, v * ms);
      }
      continue;
    }
    char pad[64];
    int k = snprintf(pad, sizeof pad, "%s ", ts->def[id].name);
    while (k < 48 && k < (int)sizeof pad - 1) pad[k++] = '.';
    pad[k] = '\0';
    if (max_only) fprintf(f, "\n    %s: %.2f", pad, mx * ms);
    else fprintf(f, "\n    %s: (%.2f, %.2f)", pad, mn * ms, mx * ms);
  }
  if (lines) {
    fputc('\n', f);
    fflush(f);
  }
  return lines;
}
