/* tests/unit/planner/test_plan_overlap.c — planner/plan_overlap.c's bucket
 * model by hand: reductions launched as the backward frees each bucket and
 * run one at a time; gathers launched at the step's end and waited on at
 * first use; without overlap everything is exposed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "planner/plan_internal.h"

#define NEAR(a, b) assert_true((a) > (b) - 1e-12 && (a) < (b) + 1e-12)

static void test_reduce(void **state) {
  (void)state;
  /* 3 positions of 1 s backward each; one bucket per position, 1 s each:
   * ready at 1, 2, 3 s (head first), ends at 2, 3, 4 -> 1 s after the
   * backward's 3 s */
  const mt_plan_bucket b[3] = {{100, 0, 0, 0}, {100, 0, 1, 1}, {100, 0, 2, 2}};
  const double cost[3] = {1, 1, 1}, bwd[3] = {1, 1, 1};
  double tot = 0;
  NEAR(mt_plan_overlap_reduce(b, cost, 3, bwd, 3, 1, &tot), 1.0);
  NEAR(tot, 3.0);
  NEAR(mt_plan_overlap_reduce(b, cost, 3, bwd, 3, 0, &tot), 3.0);
  /* short reductions hide except the last one's */
  const double small[3] = {0.25, 0.25, 0.25};
  NEAR(mt_plan_overlap_reduce(b, small, 3, bwd, 3, 1, &tot), 0.25);
  /* one bucket spanning positions 0..2 is ready only at the end */
  const mt_plan_bucket one[1] = {{300, 0, 0, 2}};
  const double c1[1] = {2};
  NEAR(mt_plan_overlap_reduce(one, c1, 1, bwd, 3, 1, &tot), 2.0);
  /* slow links queue: 3 s each from 1 s -> ends at 10, exposed 7 */
  const double slow[3] = {3, 3, 3};
  NEAR(mt_plan_overlap_reduce(b, slow, 3, bwd, 3, 1, &tot), 7.0);
}

static void test_gather(void **state) {
  (void)state;
  /* gathers back to back from the step's end (1, 2, 3 s); the forward of
   * position p waits for its bucket: starts at 1, 2, 3 -> ends at 4, 1 s late */
  const mt_plan_bucket b[3] = {{100, 0, 0, 0}, {100, 0, 1, 1}, {100, 0, 2, 2}};
  const double cost[3] = {1, 1, 1}, fwd[3] = {1, 1, 1};
  double tot = 0;
  NEAR(mt_plan_overlap_gather(b, cost, 3, fwd, 3, 1, &tot), 1.0);
  NEAR(tot, 3.0);
  NEAR(mt_plan_overlap_gather(b, cost, 3, fwd, 3, 0, &tot), 3.0);
  /* long forwards hide all but the first bucket */
  const double fwd4[3] = {4, 4, 4};
  NEAR(mt_plan_overlap_gather(b, cost, 3, fwd4, 3, 1, &tot), 1.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reduce), cmocka_unit_test(test_gather)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
