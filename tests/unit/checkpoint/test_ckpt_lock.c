/* tests/unit/checkpoint/test_ckpt_lock.c — checkpoint/lock.h in one process (flock
 * locks belong to open file descriptions, so a second acquire in the same
 * process conflicts like another run would): the holder line, the refusal
 * naming host, pid and start time, leftovers removed only by the holder; a
 * lock file deleted or replaced under the holder (a second run is still
 * refused, the holder takes the file again, or stops owning the directory
 * when another process holds the new file), a directory replaced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
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

static void expect(const char *err, const char *want) {
  if (!strstr(err, want)) fail_msg("message '%s' lacks '%s'", err, want);
}

static void test_deleted_lock(void **state) {
  (void)state;
  char dir[] = "/tmp/mt_ckpt_lock_XXXXXX", save[128], lock[160], want[512], err[1024];
  char host[256] = "";
  assert_non_null(mkdtemp(dir));
  gethostname(host, sizeof host - 1);
  snprintf(save, sizeof save, "%s/save", dir);
  snprintf(lock, sizeof lock, "%s/.megatrain.lock", save);
  mt_ckpt_lock *a = NULL, *b = NULL;
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &a, err, sizeof err), 0);
  /* deleted: the directory lock still refuses; /proc/locks names the holder */
  assert_int_equal(unlink(lock), 0);
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &b, err, sizeof err), -1);
  assert_null(b);
  snprintf(want, sizeof want, "checkpoint.save '%s' is in use by another run (pid %ld on this host, "
           "from /proc/locks: the lock file '%s' does not name it", save, (long)getpid(), lock);
  expect(err, want);
  struct stat sb;
  assert_int_not_equal(stat(lock, &sb), 0); /* the refused run created nothing */
  /* recreated empty by someone else: still refused */
  fclose(fopen(lock, "w"));
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &b, err, sizeof err), -1);
  expect(err, want);
  /* the holder takes the replaced file again and writes its line back */
  assert_int_equal(mt_ckpt_lock_verify(a, err, sizeof err), 0);
  assert_int_equal(mt_ckpt_lock_acquire(save, NULL, &b, err, sizeof err), -1);
  snprintf(want, sizeof want, "is in use by another run (host %s, pid %ld, started 20", host,
           (long)getpid());
  expect(err, want);
  assert_int_equal(mt_ckpt_lock_verify(a, err, sizeof err), 0); /* unchanged: still ours */
  /* deleted and taken by another process (a file system that locks
   * directories per host only, another host): the holder no longer owns it */
  assert_int_equal(unlink(lock), 0);
  int fd = open(lock, O_RDWR | O_CREAT, 0644);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
  const char *other = "host node9 pid 77 started 2026-01-01T00:00:00Z job 5\n";
  assert_int_equal(write(fd, other, strlen(other)), (ssize_t)strlen(other));
  assert_int_equal(mt_ckpt_lock_verify(a, err, sizeof err), -1);
  expect(err, "the lock file");
  expect(err, "was replaced, and another run holds the new one (host node9, pid 77, started "
              "2026-01-01T00:00:00Z, Slurm job 5); this run no longer owns the directory");
  close(fd);
  /* the directory itself replaced */
  char moved[160];
  snprintf(moved, sizeof moved, "%s/moved", dir);
  assert_int_equal(rename(save, moved), 0);
  assert_int_equal(mkdir(save, 0755), 0);
  assert_int_equal(mt_ckpt_lock_verify(a, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint.save '%s' is no longer the directory this run locked at "
           "start-up (it was removed, renamed or replaced by another); this run no longer owns",
           save);
  expect(err, want);
  assert_int_equal(rmdir(save), 0);
  assert_int_equal(mt_ckpt_lock_verify(a, err, sizeof err), -1);
  expect(err, "No such file or directory");
  mt_ckpt_lock_release(a);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lock),
                                     cmocka_unit_test(test_deleted_lock)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
