/* tests/unit/core/test_timers.c — core/timers.h: levels switch timers off,
 * start/stop accumulate, the report across ranks has Megatron's three
 * formats (timing_log_option max / minmax / all) and leaves out timers no
 * rank ran; core/tb_writer.h's CRC-32C against the standard check value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/tb_writer.h"
#include "core/timers.h"

static const mt_timer_def defs[3] = {{"forward-backward", 1}, {"optimizer", 1},
                                     {"forward-compute", 2}};

static void test_levels(void **state) {
  (void)state;
  mt_timers ts;
  mt_timers_init(&ts, defs, 3, 1);
  assert_true(mt_timer_on(&ts, 0));
  assert_false(mt_timer_on(&ts, 2));
  assert_false(mt_timer_on(NULL, 0));
  mt_timer_start(&ts, 0);
  mt_timer_stop(&ts, 0);
  mt_timer_start(&ts, 2); /* off: no effect */
  mt_timer_stop(&ts, 2);
  assert_true(ts.elapsed[0] >= 0);
  assert_true(ts.elapsed[2] == 0);
  mt_timers_init(&ts, defs, 3, 0);
  assert_false(mt_timer_on(&ts, 0));
}

static char *report(const mt_timers *ts, const double *all, int world, const char *opt) {
  static char buf[4096];
  memset(buf, 0, sizeof buf);
  FILE *f = fmemopen(buf, sizeof buf, "w");
  mt_timers_print(f, ts, all, world, opt, 2.0);
  fclose(f);
  return buf;
}

static void test_report(void **state) {
  (void)state;
  mt_timers ts;
  mt_timers_init(&ts, defs, 3, 2);
  /* [rank][timer] seconds over 2 iterations; optimizer ran on rank 1 only,
   * forward-compute nowhere */
  const double all[6] = {0.010, 0.0, 0.0, 0.030, 0.004, 0.0};
  assert_string_equal(report(&ts, all, 2, "minmax"),
                      "(min, max) time across ranks (ms):\n"
                      "    forward-backward ...............................: (5.00, 15.00)\n"
                      "    optimizer ......................................: (2.00, 2.00)\n");
  assert_string_equal(report(&ts, all, 2, "max"),
                      "max time across ranks (ms):\n"
                      "    forward-backward ...............................: 15.00\n"
                      "    optimizer ......................................: 2.00\n");
  assert_string_equal(report(&ts, all, 2, "all"),
                      "times across ranks (ms):\n"
                      "  forward-backward:\n     rank  0: 5.00\n     rank  1: 15.00\n"
                      "  optimizer:\n     rank  1: 2.00\n");
  assert_true(mt_timers_max(&ts, all, 2, 0, 2.0) == 0.015);
  const double none[6] = {0};
  assert_string_equal(report(&ts, none, 2, "minmax"), "");
}

static void test_crc32c(void **state) {
  (void)state;
  assert_int_equal(mt_crc32c(0, "123456789", 9), 0xe3069283u);
  /* continuing over pieces equals one pass */
  assert_int_equal(mt_crc32c(mt_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
  assert_int_equal(mt_crc32c(0, "", 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_levels), cmocka_unit_test(test_report),
                                     cmocka_unit_test(test_crc32c)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
