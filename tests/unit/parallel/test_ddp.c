/* tests/unit/parallel/test_ddp.c — parallel/ddp.c: the bucket layout of the
 * data-parallel gradient reduction and its sums.
 *
 * One rank (the runner): the layout — ranges cut into bucket_size buckets
 * from each range's start (the last one shorter), range order then offset
 * order, empty ranges and ranges over a NULL or one-rank group skipped,
 * bucket_size <= 0 giving one bucket per range — on stand-in groups that
 * only carry a size (no communication); and mt_ddp_allreduce over the real
 * one-rank world: no bucket, the buffer untouched, no all-reduce counted.
 *
 * Several ranks (tests/integration/test_ddp_sum.sh: mpirun -np 3): the
 * same binary also sums a flat buffer with a dense range over the world and
 * an "expert" range over the group of ranks {0, 2} (rank 1 holds its own
 * copy, summed over a one-rank group: untouched), with bucket sizes 1, 5,
 * 7 and 0 (whole ranges), and checks every element, bitwise, against the sum
 * of the values every rank put there (small integers: exact in fp32), and
 * the all-reduce counters: one call per bucket, 4 bytes per element. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/util.h"
#include "parallel/comm.h"
#include "parallel/comm_impl.h"
#include "parallel/ddp.h"

static mt_dist *g_dist;

/* A group that only answers mt_group_size (the layout reads nothing else). */
static mt_group stand_in(int size) {
  mt_group g;
  memset(&g, 0, sizeof g);
  g.size = size;
  snprintf(g.name, sizeof g.name, "stand-in-%d", size);
  return g;
}

static void expect_bucket(const mt_ddp_buffer *B, int i, int64_t off, int64_t len,
                          const mt_group *g) {
  assert_true(i < B->n_bkt);
  assert_int_equal(B->bkt[i].offset, off);
  assert_int_equal(B->bkt[i].len, len);
  assert_ptr_equal(B->bkt[i].group, g);
}

static void test_layout(void **state) {
  (void)state;
  mt_group dp = stand_in(4), edp = stand_in(2), one = stand_in(1);
  /* dense [0, 23) over dp, an empty range, expert [23, 30) over edp, a
   * range over a one-rank group and one over no group, dense [40, 43) */
  const mt_ddp_range r[] = {{0, 23, &dp}, {23, 23, &dp}, {23, 30, &edp},
                            {30, 35, &one}, {35, 40, NULL}, {40, 43, &dp}};
  mt_ddp_buffer B;
  mt_ddp_buffer_build(&B, r, 6, 10);
  assert_int_equal(B.bucket_size, 10);
  assert_int_equal(B.n_bkt, 5);
  expect_bucket(&B, 0, 0, 10, &dp);
  expect_bucket(&B, 1, 10, 10, &dp);
  expect_bucket(&B, 2, 20, 3, &dp);
  expect_bucket(&B, 3, 23, 7, &edp);
  expect_bucket(&B, 4, 40, 3, &dp);
  mt_ddp_buffer_free(&B);
  assert_null(B.bkt);
  assert_int_equal(B.n_bkt, 0);

  /* bucket_size <= 0: one bucket per (non-empty, multi-rank) range */
  for (int64_t bs = -1; bs <= 0; bs++) {
    mt_ddp_buffer_build(&B, r, 6, bs);
    assert_int_equal(B.n_bkt, 3);
    expect_bucket(&B, 0, 0, 23, &dp);
    expect_bucket(&B, 1, 23, 7, &edp);
    expect_bucket(&B, 2, 40, 3, &dp);
    mt_ddp_buffer_free(&B);
  }

  /* a bucket as large as the range, and one larger: one bucket each */
  const mt_ddp_range r1[] = {{5, 12, &dp}};
  mt_ddp_buffer_build(&B, r1, 1, 7);
  assert_int_equal(B.n_bkt, 1);
  expect_bucket(&B, 0, 5, 7, &dp);
  mt_ddp_buffer_free(&B);
  mt_ddp_buffer_build(&B, r1, 1, 1000);
  assert_int_equal(B.n_bkt, 1);
  expect_bucket(&B, 0, 5, 7, &dp);
  mt_ddp_buffer_free(&B);

  /* the buckets of every range tile it exactly, for every bucket size */
  for (int64_t bs = 1; bs <= 24; bs++) {
    mt_ddp_buffer_build(&B, r, 6, bs);
    int64_t covered[43] = {0};
    for (int i = 0; i < B.n_bkt; i++) {
      assert_true(B.bkt[i].len >= 1 && B.bkt[i].len <= bs);
      for (int64_t k = B.bkt[i].offset; k < B.bkt[i].offset + B.bkt[i].len; k++) covered[k]++;
      if (i > 0 && B.bkt[i].group == B.bkt[i - 1].group)
        assert_true(B.bkt[i].offset >= B.bkt[i - 1].offset + B.bkt[i - 1].len);
    }
    for (int64_t k = 0; k < 43; k++)
      assert_int_equal(covered[k], (k < 30 || k >= 40) ? 1 : 0);
    mt_ddp_buffer_free(&B);
  }
}

/* The real world group of this run: one rank (the runner) or several. */
static void test_allreduce(void **state) {
  (void)state;
  mt_group *w = mt_dist_world(g_dist);
  const int n = mt_group_size(w), me = mt_group_rank(w);
  enum { N = 29, DENSE = 17 };
  mt_group *ex = NULL; /* ranks {0, 2} when there are 3+; every other rank alone */
  if (n >= 3) {
    const int pair[] = {0, 2}, solo[] = {me};
    ex = (me == 0 || me == 2) ? mt_group_create(g_dist, pair, 2, "ddp-pair", MT_ENGINE_MPI)
                              : mt_group_create(g_dist, solo, 1, "ddp-solo", MT_ENGINE_MPI);
  }
  const mt_ddp_range r[] = {{0, DENSE, w}, {DENSE, N, ex ? ex : w}};
  const int64_t sizes[] = {1, 5, 7, 0};
  for (int s = 0; s < 4; s++) {
    mt_ddp_buffer B;
    mt_ddp_buffer_build(&B, r, 2, sizes[s]);
    float g[N];
    for (int k = 0; k < N; k++) g[k] = (float)((me + 1) * 100 + k);
    mt_group_reset_counters(w);
    mt_ddp_allreduce(&B, g);
    int64_t calls = 0, bytes = 0;
    for (int i = 0; i < B.n_bkt; i++)
      if (B.bkt[i].group == w) calls++, bytes += 4 * B.bkt[i].len;
    const mt_coll_counter *c = mt_group_counters(w);
    assert_int_equal(c[MT_COLL_ALLREDUCE].calls, n > 1 ? calls : 0);
    assert_int_equal(c[MT_COLL_ALLREDUCE].bytes, n > 1 ? bytes : 0);
    for (int k = 0; k < N; k++) {
      float want;
      if (n == 1 || (k >= DENSE && ex && mt_group_size(ex) == 1)) {
        want = (float)((me + 1) * 100 + k); /* no bucket: untouched */
      } else if (k < DENSE || !ex) {
        want = 0.0f; /* sum over all ranks */
        for (int q = 0; q < n; q++) want += (float)((q + 1) * 100 + k);
      } else {
        want = (float)(100 + k) + (float)(300 + k); /* ranks 0 and 2 */
      }
      assert_memory_equal(&g[k], &want, sizeof want);
    }
    if (n == 1) assert_int_equal(B.n_bkt, 0);
    mt_ddp_buffer_free(&B);
  }
  mt_group_destroy(ex);
}

int main(int argc, char **argv) {
  g_dist = mt_dist_init(&argc, &argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_allreduce),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  mt_dist_finalize(g_dist);
  return rc;
}
