/* tests/unit/checkpoint/dckpt_fixture.h — what the checkpoint/dist_checkpoint.h
 * unit tests share: a fresh directory per test, views of a [rows, cols]
 * tensor (box + flat range) holding a known value function, and save /
 * open / load-and-check helpers that fail the test with the library's
 * message. */
#ifndef MT_TEST_DCKPT_FIXTURE_H
#define MT_TEST_DCKPT_FIXTURE_H

#include <dirent.h>
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

#include "backends/registry.h"
#include "core/fileio.h"
#include "tests/unit/check.h"
#include "checkpoint/dist_checkpoint.h"
#include "checkpoint/dist_checkpoint_internal.h"

static char g_dir[256];

static inline void fresh_dir(const char *tag) {
  snprintf(g_dir, sizeof g_dir, "/tmp/mt_dckpt_test_%d_%s", (int)getpid(), tag);
  mt_dckpt_rm_rf(g_dir);
  mt_mkdirs(g_dir);
}

/* A view of tensor name [rows, cols]: box (r0, c0, nr, nc), elements [lo, hi). */
static inline mt_dckpt_view view(const char *name, int64_t rows, int64_t cols, int64_t r0, int64_t c0,
                          int64_t nr, int64_t nc, int64_t lo, int64_t hi, mt_dtype dt,
                          void *data, int write) {
  mt_dckpt_view v;
  memset(&v, 0, sizeof v);
  snprintf(v.name, sizeof v.name, "%s", name);
  v.rows = rows;
  v.cols = cols;
  v.r0 = r0;
  v.c0 = c0;
  v.nr = nr;
  v.nc = nc;
  v.lo = lo;
  v.hi = hi < 0 ? nr * nc : hi;
  v.dtype = dt;
  v.data = data;
  v.write = write;
  return v;
}

static inline float val(int64_t r, int64_t c) { return (float)(r * 1000 + c) + 0.25f; }

/* Box of a global value function, as fp32 memory starting at element lo. */
static inline float *box_data(int64_t r0, int64_t c0, int64_t nr, int64_t nc, int64_t lo, int64_t hi) {
  (void)nr;
  float *d = malloc((size_t)(hi - lo + 1) * sizeof *d);
  for (int64_t k = lo; k < hi; k++) d[k - lo] = val(r0 + k / nc, c0 + k % nc);
  return d;
}

static inline mt_dckpt_meta meta_at(int64_t it) {
  mt_dckpt_meta m = {.iteration = it, .consumed_samples = 40 * it, .step = it, .skipped_iters = 1,
                     .nan_iters = 2, .seed = 1234, .vocab_size = 7, .has_optimizer = 1};
  return m;
}

static inline void save_ok(int64_t it, mt_backend *be, mt_dckpt_view *v, int n) {
  char err[512];
  mt_dckpt_meta m = meta_at(it);
  if (mt_dckpt_save(g_dir, &m, "{\"model\": {\"hidden_size\": 8}}", be, v, n, NULL, err,
                    sizeof err))
    fail_msg("save: %s", err);
}

static inline mt_dckpt *open_ok(void) {
  char err[512];
  mt_dckpt *c = NULL;
  int rc = mt_dckpt_open(g_dir, -1, &c, err, sizeof err);
  if (rc) fail_msg("open returned %d: %s", rc, err);
  return c;
}

/* Load a view of [rows, cols] (fp32, box/range given) and check every element. */
static inline void expect_view(mt_dckpt *c, mt_backend *be, const char *name, int64_t rows,
                        int64_t cols, int64_t r0, int64_t c0, int64_t nr, int64_t nc, int64_t lo,
                        int64_t hi) {
  if (hi < 0) hi = nr * nc;
  float *d = calloc((size_t)(hi - lo + 1), sizeof *d);
  mt_dckpt_view v = view(name, rows, cols, r0, c0, nr, nc, lo, hi, MT_F32, d, 0);
  char err[512];
  if (mt_dckpt_load(c, be, &v, 1, err, sizeof err)) fail_msg("load: %s", err);
  for (int64_t k = lo; k < hi; k++)
    EXPECT(d[k - lo] == val(r0 + k / nc, c0 + k % nc), "%s box %lld,%lld %lldx%lld element %lld",
           name, (long long)r0, (long long)c0, (long long)nr, (long long)nc, (long long)k);
  free(d);
}

#endif
