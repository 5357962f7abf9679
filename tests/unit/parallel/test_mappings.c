/* tests/unit/parallel/test_mappings.c — parallel/mappings.h on one rank: with no TP
 * group (NULL) and with a TP group of size 1, every region's forward and
 * backward (copy_to_tp, reduce_from_tp, scatter_to_sp, gather_from_sp,
 * reduce_scatter_to_sp) is the identity on the in-place buffer and issues no
 * collective (group counters stay 0). The multi-rank semantics (2 and 4
 * ranks, every region forward and backward) are tests/tools/tp_check.c,
 * run by tests/integration/test_tp_units.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tests/support/probes.h"
#include "parallel/mappings.h"

static mt_dist *g_dist;

/* Apply every region function, forward and backward, in place on x[n]. */
static void all_regions(mt_group *tp, float *x, int64_t n) {
  mt_copy_to_tp_region_bwd(tp, x, n, MT_F32);
  mt_reduce_from_tp_region_fwd(tp, x, n, MT_F32);
  mt_gather_from_sp_region_fwd(tp, x, x, n, MT_F32);
  mt_gather_from_sp_region_bwd(tp, x, x, n, MT_F32);
  mt_reduce_scatter_to_sp_region_fwd(tp, x, x, n, MT_F32);
  mt_reduce_scatter_to_sp_region_bwd(tp, x, x, n, MT_F32);
  mt_scatter_to_sp_region_bwd(tp, x, x, n, MT_F32);
}

static void check_identity(mt_group *tp, const char *what) {
  enum { N = 37 };
  float x[N], x0[N];
  for (int i = 0; i < N; i++) x[i] = x0[i] = 0.25f * (float)i - 3.0f;
  all_regions(tp, x, N);
  for (int i = 0; i < N; i++)
    if (memcmp(&x[i], &x0[i], sizeof(float)))
      fail_msg("%s: element %d of %d changed: %.9g -> %.9g", what, i, N, (double)x0[i], (double)x[i]);
}

static void test_no_group(void **state) {
  (void)state;
  check_identity(NULL, "tp NULL");
}

static void test_group_of_one(void **state) {
  (void)state;
  assert_int_equal(mt_dist_size(g_dist), 1);
  int ranks[1] = {0};
  mt_group *tp = mt_group_create(g_dist, ranks, 1, "tp", MT_ENGINE_MPI);
  assert_non_null(tp);
  assert_int_equal(mt_group_size(tp), 1);
  mt_group_reset_counters(tp);
  check_identity(tp, "tp of size 1");
  const mt_coll_counter *c = mt_group_counters(tp);
  for (int k = 0; k < MT_COLL_N; k++)
    if (c[k].calls != 0)
      fail_msg("tp of size 1 issued %lld %s call(s)", (long long)c[k].calls, mt_coll_name((mt_coll_kind)k));
  mt_group_destroy(tp);
}

int main(int argc, char **argv) {
  g_dist = mt_dist_init(&argc, &argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_group),
      cmocka_unit_test(test_group_of_one),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  mt_dist_finalize(g_dist);
  return rc;
}
