/* tests/unit/parallel/test_nccl_api.c — NCCL loaded at run time (parallel/nccl_api.h),
 * without a GPU:
 *   - the real libnccl.so.2 loads, every entry is set, ncclGetVersion and
 *     ncclGetUniqueId work through the table (neither needs a GPU);
 *   - a library that cannot be loaded, and one that loads but is not NCCL,
 *     give the whole user-facing message (what was tried, the loader's
 *     reason, the fix) and no table;
 *   - MT_NCCL_CHECK ends the process with "NCCL error: <call> failed:
 *     <NCCL's message>" (a child process: mt_fatal aborts).
 * Built without NCCL: prints SKIP, exit 77. */
#include <stdio.h>

#ifdef MT_HAVE_NCCL
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/probes.h"
#include "core/util.h"
#include "parallel/comm_impl.h" /* mt_nccl_api_close */
#include "parallel/nccl_api.h"

#define FIX                                                                                   \
  "put NCCL's lib folder on LD_LIBRARY_PATH, or set parallel.distributed_backend to \"mpi\" " \
  "(staged through host memory)"

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

static void test_real_library(void **state) {
  (void)state;
  char err[1024] = "";
  mt_nccl_api *a = mt_nccl_api_open(MT_NCCL_LIBRARY, err, sizeof err);
  if (!a) fail_msg("%s", err);
  assert_non_null(a->lib);
  assert_non_null(a->path);
#define CHECK_SET(f) \
  if (!a->f) fail_msg("entry nccl%s is NULL", #f);
  MT_NCCL_FUNCS(CHECK_SET)
#undef CHECK_SET
  /* the version read at load; the header's major.minor (the same NCCL here) */
  int v = 0;
  assert_int_equal(a->GetVersion(&v), ncclSuccess);
  assert_int_equal(v, a->version);
  assert_true(v >= MT_NCCL_MIN_VERSION);
  char d[512];
  mt_nccl_api_describe(a, d, sizeof d);
  printf("loaded %s; header %d.%d\n", d, NCCL_MAJOR, NCCL_MINOR);
  char want[32];
  snprintf(want, sizeof want, "NCCL %d.%d.", v / 10000, v / 100 % 100);
  assert_true(!strncmp(d, want, strlen(want)));
  /* a unique id through the table: no GPU needed */
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  assert_int_equal(a->GetUniqueId(&id), ncclSuccess);
  int nonzero = 0;
  for (size_t i = 0; i < sizeof id.internal; i++) nonzero |= id.internal[i] != 0;
  assert_true(nonzero);
  assert_string_equal(a->GetErrorString(ncclSuccess), "no error");
  mt_nccl_api_close(a);
  mt_nccl_api_close(NULL);
}

static void test_missing_library(void **state) {
  (void)state;
  char err[1024] = "";
  const char *name = "libnccl-megatrain-test-missing.so.2";
  assert_null(mt_nccl_api_open(name, err, sizeof err));
  printf("%s\n", err);
  const char *head = "parallel.distributed_backend \"nccl\": cannot load "
                     "libnccl-megatrain-test-missing.so.2 (";
  assert_true(!strncmp(err, head, strlen(head)));
  assert_non_null(strstr(err, "cannot open shared object file")); /* dlerror's reason */
  assert_true(ends_with(err, "); " FIX));
}

/* A library that loads but is not NCCL: its first missing entry is named. */
static void test_not_nccl(void **state) {
  (void)state;
  char err[1024] = "";
  assert_null(mt_nccl_api_open("libz.so.1", err, sizeof err));
  printf("%s\n", err);
  const char *head = "parallel.distributed_backend \"nccl\": ";
  assert_true(!strncmp(err, head, strlen(head)));
  assert_non_null(strstr(err, "(loaded as libz.so.1) has no ncclGetVersion ("));
  assert_non_null(strstr(err, "the NCCL engine needs NCCL 2.10 or newer"));
  assert_true(ends_with(err, "or set parallel.distributed_backend to \"mpi\" (staged through host "
                             "memory)"));
}

/* A failing call through MT_NCCL_CHECK, in a child: its stderr and status. */
static void test_check_message(void **state) {
  (void)state;
  char err[1024] = "";
  mt_nccl_api *a = mt_nccl_api_open(MT_NCCL_LIBRARY, err, sizeof err);
  if (!a) fail_msg("%s", err);
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    dup2(fd[1], 2);
    close(fd[0]);
    MT_NCCL_CHECK(a, GetUniqueId(NULL)); /* invalid argument */
    _exit(0);
  }
  close(fd[1]);
  char out[2048];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof out - 1 && (k = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
  out[n] = 0;
  close(fd[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  printf("child: %s", out);
  assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* mt_fatal ended it */
  assert_non_null(strstr(out, "NCCL error: ncclGetUniqueId(NULL) failed: "));
  assert_non_null(strstr(out, a->GetErrorString(ncclInvalidArgument)));
  mt_nccl_api_close(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_library),
      cmocka_unit_test(test_missing_library),
      cmocka_unit_test(test_not_nccl),
      cmocka_unit_test(test_check_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void) {
  printf("SKIP: built without NCCL (CUDA=0)\n");
  return 77;
}
#endif
