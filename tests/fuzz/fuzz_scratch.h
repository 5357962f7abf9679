/* tests/fuzz/fuzz_scratch.h — where a fuzz target writes its files: under
 * $FUZZ_SCRATCH when set (tests/fuzz/run_fuzz.sh sets it to a folder of the
 * build tree: the same path in every run, so that no byte of it, pid or
 * otherwise, reaches libFuzzer's comparison dictionary and the --ci runs
 * print the same), else under /dev/shm (or $TMPDIR) with the pid. */
#ifndef MT_FUZZ_SCRATCH_H
#define MT_FUZZ_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void fuzz_scratch(char *out, size_t n, const char *name, const char *suffix) {
  const char *fixed = getenv("FUZZ_SCRATCH");
  if (fixed && fixed[0]) {
    snprintf(out, n, "%s/%s%s", fixed, name, suffix);
    return;
  }
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                     : getenv("TMPDIR")             ? getenv("TMPDIR")
                                                    : "/tmp";
  snprintf(out, n, "%s/%s.%d%s", base, name, (int)getpid(), suffix);
}

#endif
