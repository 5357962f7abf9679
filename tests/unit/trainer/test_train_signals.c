/* tests/unit/trainer/test_train_signals.c — trainer/train_signals.h on one process:
 * signal names, the handler only records the signal, the boundary decision
 * (signal, rank, duration), dispositions restored, straggler reduction. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/util.h"
#include "parallel/comm.h"
#include "trainer/train_signals.h"

static mt_dist *g_dist;

static mt_training_config tc_with(int handler, const char *sig, float mins) {
  mt_training_config tc;
  memset(&tc, 0, sizeof tc);
  tc.exit_signal_handler = handler;
  snprintf(tc.exit_signal, sizeof tc.exit_signal, "%s", sig);
  tc.exit_duration_in_mins = mins;
  return tc;
}

static void test_names(void **state) {
  (void)state;
  assert_int_equal(mt_exit_signal_number("SIGTERM"), SIGTERM);
  assert_int_equal(mt_exit_signal_number("SIGUSR2"), SIGUSR2);
  assert_int_equal(mt_exit_signal_number("SIGKILL"), -1);
  assert_string_equal(mt_exit_signal_name(SIGUSR1), "SIGUSR1");
}

static void test_signal_decision(void **state) {
  (void)state;
  mt_group *w = mt_dist_world(g_dist);
  mt_training_config tc = tc_with(1, "SIGUSR2", 0);
  mt_exit_watch x;
  char err[256];
  assert_int_equal(mt_exit_watch_start(&x, &tc, mt_now(), err, sizeof err), 0);
  assert_true(mt_exit_watch_active(&x));
  assert_int_equal(mt_exit_check(&x, w, mt_now()).stop, 0);
  raise(SIGUSR1); /* caught besides exit_signal; the process goes on */
  mt_exit_decision d = mt_exit_check(&x, w, mt_now());
  assert_int_equal(d.stop, 1);
  assert_int_equal(d.signum, SIGUSR1);
  assert_int_equal(d.rank, 0);
  raise(SIGUSR2);
  assert_int_equal(mt_exit_check(&x, w, mt_now()).signum, SIGUSR2);
  mt_exit_watch_stop(&x);
  struct sigaction sa;
  sigaction(SIGUSR2, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL);
}

static void test_duration(void **state) {
  (void)state;
  mt_group *w = mt_dist_world(g_dist);
  mt_training_config tc = tc_with(0, "SIGTERM", 0.5f);
  mt_exit_watch x;
  char err[256];
  assert_int_equal(mt_exit_watch_start(&x, &tc, 1000.0, err, sizeof err), 0);
  assert_true(mt_exit_watch_active(&x));
  assert_int_equal(mt_exit_check(&x, w, 1000.0 + 29.0).stop, 0);
  mt_exit_decision d = mt_exit_check(&x, w, 1000.0 + 31.0);
  assert_int_equal(d.stop, 2);
  assert_true(d.minutes > 0.5 && d.minutes < 0.52);
  /* neither a handler nor a duration: nothing to check */
  tc = tc_with(0, "SIGTERM", 0);
  assert_int_equal(mt_exit_watch_start(&x, &tc, 0, err, sizeof err), 0);
  assert_false(mt_exit_watch_active(&x));
  /* an unknown name is refused naming the key */
  tc = tc_with(1, "SIGFOO", 0);
  assert_int_equal(mt_exit_watch_start(&x, &tc, 0, err, sizeof err), -1);
  assert_non_null(strstr(err, "training.exit_signal"));
}

static void test_straggler(void **state) {
  (void)state;
  mt_straggler s = mt_straggler_reduce(mt_dist_world(g_dist), 12.5);
  assert_true(s.max_ms == 12.5 && s.min_ms == 12.5);
  assert_int_equal(s.max_rank, 0);
  assert_int_equal(s.min_rank, 0);
}

int main(int argc, char **argv) {
  g_dist = mt_dist_init(&argc, &argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_signal_decision),
      cmocka_unit_test(test_duration),
      cmocka_unit_test(test_straggler),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  mt_dist_finalize(g_dist);
  return rc;
}
