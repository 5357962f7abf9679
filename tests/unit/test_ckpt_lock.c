/* tests/unit/test_ckpt_lock.c — checkpoint/lock.h in one process (flock
 * locks belong to open file descriptions, so a second acquire in the same
 * process conflicts like another run would): the holder line, the refusal
 * naming host, pid and start time, leftovers removed only by the holder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "checkpoint/lock.h"

static void test_lock(void **state) {
  (void)state;
  char dir[] = "/tmp/mt_ckpt_lock_XXXXXX", save[128], tmp[256], host[256] = "";
  assert_non_null(mkdtemp(dir));
  snprintf(save, sizeof save, "%s/save", dir);
  gethostname(host, sizeof host - 1);
  char err[1024];
  mt_ckpt_lock *a = NULL, *b = NULL;
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &a, err, sizeof err), 0);
  assert_non_null(a);
  /* a save in progress of the holder: never removed by a refused run */
  snprintf(tmp, sizeof tmp, "%s/iter_0000002.tmp.h.1", save);
  assert_int_equal(mkdir(tmp, 0755), 0);
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &b, err, sizeof err), -1);
  assert_null(b);
  char want[512];
  snprintf(want, sizeof want, "checkpoint.save '%s' is in use by another run (host %s, pid %ld, started 20",
           save, host, (long)getpid());
  if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
  if (!strstr(err, "two runs must not write one checkpoint directory")) fail_msg("%s", err);
  struct stat sb;
  assert_int_equal(stat(tmp, &sb), 0);
  mt_ckpt_lock_release(a);
  /* the lock is free: the next holder removes the leftover */
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &b, err, sizeof err), 0);
  assert_int_not_equal(stat(tmp, &sb), 0);
  mt_ckpt_lock_release(b);
  /* a directory that cannot be created */
  char file[160], bad[200];
  snprintf(file, sizeof file, "%s/file", dir);
  fclose(fopen(file, "w"));
  snprintf(bad, sizeof bad, "%s/sub", file);
  assert_int_equal(mt_ckpt_lock_acquire(bad, NULL, &b, err, sizeof err), -1);
  if (!strstr(err, "cannot create checkpoint.save directory") || !strstr(err, "Not a directory"))
    fail_msg("%s", err);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lock)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
