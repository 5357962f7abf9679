/* core/util.c — see util.h. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Written once at start-up (before threads), read-only afterwards. */
static int g_log_rank = -1;
static mt_abort_fn g_abort = NULL;

void mt_set_log_rank(int rank) { g_log_rank = rank; }
void mt_set_abort_hook(mt_abort_fn fn) { g_abort = fn; }

void mt_fatal_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  /* Result lines already printed must survive the abort (stdout is fully
   * buffered under `| tee`): flush both before writing the message. */
  fflush(stdout);
  fflush(stderr);
  va_start(ap, fmt);
  if (g_log_rank >= 0) fprintf(stderr, "[rank %d] ", g_log_rank);
  fprintf(stderr, "%s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stdout);
  fflush(stderr);
  if (g_abort) g_abort(1);
  abort();
}

void mt_abort_job(int code) {
  fflush(stdout);
  fflush(stderr);
  if (g_abort) g_abort(code);
  exit(code);
}

void *mt_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) mt_fatal("out of host memory (%zu bytes)", n);
  return p;
}

void *mt_xcalloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p) mt_fatal("out of host memory (%zu x %zu bytes)", n, sz);
  return p;
}

void *mt_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) mt_fatal("out of host memory (%zu bytes)", n);
  return q;
}

char *mt_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mt_xmalloc(n);
  memcpy(p, s, n);
  return p;
}

double mt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double mt_float_decimal(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  return strtod(buf, NULL);
}

int mt_rotary_dim(int kv_channels, float rotary_percent) {
  if (rotary_percent >= 1.0f) return kv_channels;
  return (int)((double)kv_channels * mt_float_decimal(rotary_percent));
}
