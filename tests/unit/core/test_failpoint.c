/* tests/unit/core/test_failpoint.c — core/failpoint.h: MEGATRAIN_FAILPOINT token
 * lists NAME[:ARG[:ARG]] separated by commas; malformed tokens match nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "core/failpoint.h"

static void test_parse(void **state) {
  (void)state;
  int64_t a[MT_FAILPOINT_MAX_ARGS] = {0};
  assert_int_equal(mt_failpoint_parse(NULL, "x", a), -1);
  assert_int_equal(mt_failpoint_parse("", "x", a), -1);
  assert_int_equal(mt_failpoint_parse("checkpoint_write:20", "checkpoint_write", a), 1);
  assert_int_equal(a[0], 20);
  assert_int_equal(mt_failpoint_parse("checkpoint_write:20,freeze:2:3", "freeze", a), 2);
  assert_int_equal(a[0], 2);
  assert_int_equal(a[1], 3);
  assert_int_equal(mt_failpoint_parse("freeze:2:3,checkpoint_enospc:-4", "checkpoint_enospc", a),
                   1);
  assert_int_equal(a[0], -4);
  /* a prefix of another name does not match */
  assert_int_equal(mt_failpoint_parse("checkpoint_write_x:1", "checkpoint_write", a), -1);
  assert_int_equal(mt_failpoint_parse("checkpoint:1", "checkpoint_write", a), -1);
  /* bare name, malformed arguments */
  assert_int_equal(mt_failpoint_parse("a,stall", "stall", a), 0);
  assert_int_equal(mt_failpoint_parse("stall:x", "stall", a), -1);
  assert_int_equal(mt_failpoint_parse("stall:1x", "stall", a), -1);
  assert_int_equal(mt_failpoint_parse("stall:1:2:3:4:5", "stall", a), -1);
  assert_int_equal(mt_failpoint_parse("stall:,b", "stall", a), -1);
  /* the first well-formed token wins */
  assert_int_equal(mt_failpoint_parse("s:bad,s:7", "s", a), 1);
  assert_int_equal(a[0], 7);
}

static void test_env(void **state) {
  (void)state;
  setenv("MEGATRAIN_FAILPOINT", "freeze:2:3,checkpoint_write:20", 1);
  assert_int_equal(mt_failpoint_at("checkpoint_write", 20), 1);
  assert_int_equal(mt_failpoint_at("checkpoint_write", 10), 0);
  assert_int_equal(mt_failpoint_at("freeze", 2), 1);
  assert_int_equal(mt_failpoint_at("checkpoint_enospc", 20), 0);
  unsetenv("MEGATRAIN_FAILPOINT");
  assert_int_equal(mt_failpoint_at("checkpoint_write", 20), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
