/* tests/unit/parallel/test_grad_sync.c — parallel/grad_sync.c: when each
 * gradient bucket starts during the backward pass (overlap_grad_reduce),
 * without communication (the start callback records the order and returns
 * no handle).
 *
 * Layout: 4 units (0 embedding, 1 and 2 layers, 3 head), parameters
 *   p0 [0, 10) unit 0, p1 [10, 20) unit 1, p2 [20, 30) unit 2,
 *   p3 [30, 40) unit 3, p4 [40, 45) unit -1 (final only at finish)
 * and buckets b0 [0, 15), b1 [15, 30), b2 [30, 40), b3 [40, 45):
 *  - with 2 micro-batches, nothing starts in the first; in the second the
 *    backward order 3, 2, 1, 0 starts b2 (unit 3 done), b1 (units 1, 2 done
 *    after unit 1), then b0 (unit 0); b3 only at finish; unit_final runs once
 *    per unit, before the unit's buckets start;
 *  - a unit whose backward never ran becomes final at finish (increasing
 *    order), and its buckets start there;
 *  - done runs for every bucket, in start order, after all starts;
 *  - a second step starts from scratch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/grad_sync.h"

typedef struct {
  char log[128];
  int n;
} rec;

static void put(rec *r, char c, int i) {
  r->log[r->n++] = c;
  r->log[r->n++] = (char)('0' + i);
  r->log[r->n] = 0;
}

static mt_request *on_start(void *ctx, int b) {
  put(ctx, 's', b);
  return NULL;
}
static void on_done(void *ctx, int b) { put(ctx, 'd', b); }
static void on_final(void *ctx, int u) { put(ctx, 'u', u); }

static void build(mt_grad_sync *S, rec *r) {
  static const int64_t blo[] = {0, 15, 30, 40}, bhi[] = {15, 30, 40, 45};
  static const int64_t plo[] = {0, 10, 20, 30, 40}, phi[] = {10, 20, 30, 40, 45};
  static const int pu[] = {0, 1, 2, 3, -1};
  mt_grad_sync_ops ops = {.ctx = r, .start = on_start, .done = on_done, .unit_final = on_final};
  mt_grad_sync_build(S, 4, blo, bhi, 5, plo, phi, pu, 4, &ops);
}

static void test_backward_order(void **state) {
  (void)state;
  rec r = {{0}, 0};
  mt_grad_sync S;
  build(&S, &r);
  for (int step = 0; step < 2; step++) {
    r.n = 0;
    r.log[0] = 0;
    mt_grad_sync_begin(&S, 2);
    for (int mb = 0; mb < 2; mb++)
      for (int u = 3; u >= 0; u--) {
        mt_grad_sync_unit_done(&S, u);
        if (mb == 0) assert_int_equal(r.n, 0); /* nothing final before the last micro-batch */
      }
    assert_string_equal(r.log, "u3s2u2u1s1u0s0");
    mt_grad_sync_finish(&S);
    assert_string_equal(r.log, "u3s2u2u1s1u0s0s3d2d1d0d3");
  }
  mt_grad_sync_free(&S);
}

static void test_missing_unit(void **state) {
  (void)state;
  rec r = {{0}, 0};
  mt_grad_sync S;
  build(&S, &r);
  mt_grad_sync_begin(&S, 1);
  mt_grad_sync_unit_done(&S, 3);
  mt_grad_sync_unit_done(&S, 1); /* unit 2 never runs: b1 waits */
  mt_grad_sync_unit_done(&S, 0);
  assert_string_equal(r.log, "u3s2u1u0s0");
  mt_grad_sync_finish(&S);
  assert_string_equal(r.log, "u3s2u1u0s0u2s1s3d2d0d1d3");
  mt_grad_sync_unit_done(&S, 3); /* outside a step: ignored */
  assert_string_equal(r.log, "u3s2u1u0s0u2s1s3d2d0d1d3");
  mt_grad_sync_free(&S);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward_order),
      cmocka_unit_test(test_missing_unit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
