/* tests/unit/cpu_test_common.h — helpers for unit tests that drive the cpu
 * backend directly (test_ops.c, test_backend_props.c): backend construction
 * and deterministic random fills. Per-op numerics live in the op-case table
 * (op_cases.h). Header-only (each test binary is one translation unit). */
#ifndef MT_TESTS_CPU_TEST_COMMON_H
#define MT_TESTS_CPU_TEST_COMMON_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backends/registry.h"
#include "core/rng.h"

/* Backend with every elementwise op on the OpenMP path
 * (MEGATRAIN_CPU_PAR_MIN=1), so small test shapes exercise the parallel code;
 * the process-wide set-up runs first, as main.c does. */
static inline mt_backend *tc_backend(void) {
  setenv("MEGATRAIN_CPU_PAR_MIN", "1", 1);
  mt_backend_options o = {.device = "cpu", .num_threads = 0, .dtype = MT_F32};
  char err[256];
  mt_backends_process_init(&o);
  mt_backend *be = mt_backend_create(&o, err, sizeof err);
  if (!be) fail_msg("backend create: %s", err);
  return be;
}

/* xorshift64* uniform in [lo, hi) */
static uint64_t tc_state = 0x9E3779B97F4A7C15ull;
static inline double tc_rand(double lo, double hi) {
  tc_state ^= tc_state >> 12;
  tc_state ^= tc_state << 25;
  tc_state ^= tc_state >> 27;
  uint64_t r = tc_state * 0x2545F4914F6CDD1Dull;
  return lo + (hi - lo) * (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

static inline float *tc_randf(mt_backend *be, int64_t n, double lo, double hi) {
  float *p = be->ops->alloc(be, (size_t)n * sizeof(float), MT_MEM_ACT);
  for (int64_t i = 0; i < n; i++) p[i] = (float)tc_rand(lo, hi);
  return p;
}

static inline float *tc_allocf(mt_backend *be, int64_t n) {
  return be->ops->alloc(be, (size_t)(n ? n : 1) * sizeof(float), MT_MEM_ACT);
}

#endif
