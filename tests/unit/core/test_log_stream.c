/* tests/unit/core/test_log_stream.c — core/log_stream.h: with stdout a full pipe
 * (one page, nobody reading), after mt_log_streams_nonblock a write returns
 * at once and is dropped and counted (lines and bytes); descriptor 1 is then
 * a new open file description, so another descriptor of the same pipe (as a
 * shell sharing a terminal holds) stays blocking; uninstall puts the
 * original streams back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/log_stream.h"

static void test_drop_and_count(void **state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_true(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 4096);
  fflush(stdout);
  const int saved_out = dup(1);
  assert_true(saved_out >= 0);
  assert_int_equal(dup2(p[1], 1), 1);
  const int shared = dup(1); /* shares the pipe's original description */
  FILE *orig = stdout;
  assert_int_equal(mt_log_streams_install(), 0);
  assert_ptr_not_equal(stdout, orig);
  /* fill the pipe without blocking the test: through a non-blocking twin */
  int fill = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK);
  assert_true(fill >= 0);
  char page[4096];
  memset(page, 'x', sizeof page);
  while (write(fill, page, sizeof page) > 0) {
  }
  close(fill);
  assert_false(fcntl(1, F_GETFL) & O_NONBLOCK);
  mt_log_streams_nonblock();
  assert_true(fcntl(1, F_GETFL) & O_NONBLOCK);
  assert_false(fcntl(shared, F_GETFL) & O_NONBLOCK); /* the shared description untouched */
  const mt_log_drops before = mt_log_streams_dropped();
  printf("line one\nline two\nline three\n"); /* 29 bytes, 3 lines */
  fflush(stdout);
  const mt_log_drops after = mt_log_streams_dropped();
  assert_int_equal(after.lines - before.lines, 3);
  assert_int_equal(after.bytes - before.bytes, 29);
  mt_log_streams_uninstall();
  assert_ptr_equal(stdout, orig);
  assert_int_equal(dup2(saved_out, 1), 1);
  close(saved_out);
  close(shared);
  close(p[0]);
  close(p[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_drop_and_count)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
