/* tests/unit/model/test_moe_capacity.c — routing properties of model/moe_router.h:
 * kept = min(routed, capacity) per expert for k = 1, 2, 4 and both drop
 * policies; which slots an over-full expert keeps (highest gate / earliest
 * token); adding a constant to a token's logits changes no decision or gate;
 * dropless keeps exactly tokens·k slots; the hand-worked case of the issue
 * (tokens per expert [3, 3, 1, 1], load-balancing loss 1.12712, z-loss
 * 6.09994); aux loss 1 at perfect balance; router backward vs finite
 * differences of the auxiliary losses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/check.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/moe_router.h"

static float *rand_logits(int64_t n, int E, uint64_t seed, float scale) {
  float *l = malloc(sizeof(float) * (size_t)(n * E));
  mt_rng_key_t key = mt_rng_key(seed, "logits", 0, 0);
  for (int64_t i = 0; i < n * E; i++) l[i] = scale * mt_rng_normal(key, (uint64_t)i);
  return l;
}

static void test_hand_case(void **st) {
  (void)st;
  const float lg[16] = {2, 1, 0, -1, .5f, .3f, .1f, 0, -1, 0, 1, 2, .1f, 3, 0, -.2f};
  mt_moe_route_opts o = {.E = 4, .k = 2, .capacity_factor = 0};
  mt_moe_routing r;
  mt_moe_routing_init(&r, 4, 4, 2);
  mt_moe_route(&o, lg, NULL, NULL, 4, &r);
  const int64_t want[4] = {3, 3, 1, 1};
  for (int e = 0; e < 4; e++) EXPECT_EQ(r.routed[e], want[e], "expert %d", e);
  assert_true(fabs(r.lb_loss - 1.12712) < 1e-5);
  assert_true(fabs(r.z_loss - 6.09994) < 1e-5);
  assert_int_equal(r.dropped, 0);
  /* capacity factor 1: C = ceil(4*2/4) = 2, experts 0 and 1 drop one slot each */
  o.capacity_factor = 1.0f;
  mt_moe_route(&o, lg, NULL, NULL, 4, &r);
  assert_int_equal(r.capacity, 2);
  assert_int_equal(r.dropped, 2);
  /* position policy: expert 0 keeps tokens 0, 1 (drops token 3); probs: drops the lowest gate */
  o.drop_position = 1;
  mt_moe_route(&o, lg, NULL, NULL, 4, &r);
  assert_int_equal(r.kept[3 * 2 + 1], 0); /* token 3's second choice is expert 0 */
  mt_moe_routing_free(&r);
}

static void check_capacity(int k, int policy, float cf) {
  const int E = 8;
  const int64_t n = 96;
  float *lg = rand_logits(n, E, 11 + k, 2.0f);
  mt_moe_route_opts o = {.E = E, .k = k, .capacity_factor = cf, .drop_position = policy};
  mt_moe_routing r;
  mt_moe_routing_init(&r, n, E, k);
  mt_moe_route(&o, lg, NULL, NULL, n, &r);
  int64_t cap = (int64_t)ceil((double)n * k / E * cf - 1e-9);
  assert_int_equal(r.capacity, cap);
  int64_t kept_total = 0, routed_total = 0;
  for (int e = 0; e < E; e++) {
    int64_t want = r.routed[e] < cap ? r.routed[e] : cap;
    EXPECT_EQ(r.kept_count[e], want, "expert %d of %d (n %lld, k %d, capacity %lld)", e, E, (long long)n, k,
              (long long)cap);
    kept_total += r.kept_count[e];
    routed_total += r.routed[e];
    /* kept slots of an over-full expert dominate its dropped ones */
    for (int64_t a = 0; a < n * k; a++)
      for (int64_t b = 0; b < n * k; b++) {
        if (r.expert[a] != e || r.expert[b] != e || !r.kept[a] || r.kept[b]) continue;
        if (policy)
          EXPECT(a / k < b / k, "expert %d: kept slot %lld, dropped slot %lld", e, (long long)a, (long long)b);
        else
          EXPECT(r.gate[a] > r.gate[b] || (r.gate[a] == r.gate[b] && a / k < b / k),
                 "expert %d: kept slot %lld (gate %.9g), dropped slot %lld (gate %.9g)", e, (long long)a,
                 (double)r.gate[a], (long long)b, (double)r.gate[b]);
      }
  }
  assert_int_equal(routed_total, n * k);
  assert_int_equal(kept_total + r.dropped, n * k);
  /* a constant added to a token's logits changes nothing */
  mt_moe_routing r2;
  mt_moe_routing_init(&r2, n, E, k);
  for (int64_t t = 0; t < n; t++)
    for (int e = 0; e < E; e++) lg[t * E + e] += (float)(t % 5) * 0.5f; /* exact in fp32 */
  mt_moe_route(&o, lg, NULL, NULL, n, &r2);
  assert_memory_equal(r.expert, r2.expert, sizeof(int) * (size_t)(n * k));
  assert_memory_equal(r.kept, r2.kept, (size_t)(n * k));
  for (int64_t i = 0; i < n * k; i++)
    EXPECT(fabsf(r.gate[i] - r2.gate[i]) < 1e-6f, "slot %lld: gate %.9g vs %.9g", (long long)i, (double)r.gate[i],
           (double)r2.gate[i]);
  assert_true(fabs(r.lb_loss - r2.lb_loss) < 1e-9);
  mt_moe_routing_free(&r);
  mt_moe_routing_free(&r2);
  free(lg);
}

static void test_capacity(void **st) {
  (void)st;
  for (int k = 1; k <= 4; k *= 2)
    for (int policy = 0; policy < 2; policy++) {
      check_capacity(k, policy, 1.0f);
      check_capacity(k, policy, 0.5f);
      check_capacity(k, policy, 1.25f);
    }
}

static void test_dropless(void **st) {
  (void)st;
  for (int k = 1; k <= 4; k *= 2) {
    float *lg = rand_logits(50, 8, 3, 4.0f);
    mt_moe_route_opts o = {.E = 8, .k = k, .capacity_factor = 0};
    mt_moe_routing r;
    mt_moe_routing_init(&r, 50, 8, k);
    mt_moe_route(&o, lg, NULL, NULL, 50, &r);
    int64_t kept = 0;
    for (int e = 0; e < 8; e++) kept += r.kept_count[e];
    assert_int_equal(kept, 50 * k);
    assert_int_equal(r.capacity, -1);
    mt_moe_routing_free(&r);
    free(lg);
  }
}

static void test_balanced_and_backward(void **st) {
  (void)st;
  /* all logits equal, k = E: perfect balance, LB = 1 */
  float eq[4 * 4] = {0};
  mt_moe_route_opts o = {.E = 4, .k = 4};
  mt_moe_routing r;
  mt_moe_routing_init(&r, 4, 4, 4);
  mt_moe_route(&o, eq, NULL, NULL, 4, &r);
  assert_true(fabs(r.lb_loss - 1.0) < 1e-12);
  mt_moe_routing_free(&r);
  /* backward of lb and z vs central differences (routing fixed) */
  const int E = 6, k = 2;
  const int64_t n = 10;
  float *lg = rand_logits(n, E, 5, 1.0f);
  mt_moe_route_opts o2 = {.E = E, .k = k};
  mt_moe_routing_init(&r, n, E, k);
  mt_moe_route(&o2, lg, NULL, NULL, n, &r);
  float *dl = calloc((size_t)(n * E), sizeof(float)), *dg = calloc((size_t)(n * k), sizeof(float));
  mt_moe_route_backward(&o2, &r, 0, n, dg, 0.7, 0.3, dl);
  for (int64_t i = 0; i < n * E; i += 7) {
    const float h = 1e-2f, v = lg[i];
    lg[i] = v + h;
    mt_moe_route(&o2, lg, NULL, NULL, n, &r);
    double fp = 0.7 * r.lb_loss + 0.3 * r.z_loss;
    lg[i] = v - h;
    mt_moe_route(&o2, lg, NULL, NULL, n, &r);
    double fm = 0.7 * r.lb_loss + 0.3 * r.z_loss;
    lg[i] = v;
    assert_true(fabs((fp - fm) / (2 * h) - dl[i]) < 1e-3);
  }
  mt_moe_routing_free(&r);
  free(lg);
  free(dl);
  free(dg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_case),
      cmocka_unit_test(test_capacity),
      cmocka_unit_test(test_dropless),
      cmocka_unit_test(test_balanced_and_backward),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
