/* tests/unit/tools/test_sampling.c — next-token choice (tools/sampling.h):
 * greedy = argmax (lowest id on ties, NaN never chosen); top_k 1 and a tiny
 * top_p are greedy too; the draw is a pure function of (seed, step); top-k
 * and top-p never choose outside their set (the k largest; the smallest
 * prefix of most probable tokens reaching p); with temperature T over all
 * tokens the frequencies over 20000 steps follow softmax(logits / T)
 * (every |freq - p| < 0.015). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "tools/sampling.h"

enum { V = 8 };
static const float L[V] = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f, -3.0f, 1.0f};

static int32_t pick(mt_sample_opts o, const float *l, int64_t step) {
  mt_sampler *s = mt_sampler_create(&o, V);
  int32_t t = mt_sample_next(s, l, step);
  mt_sampler_free(s);
  return t;
}

static void test_greedy(void **st) {
  (void)st;
  mt_sample_opts g = {0.0f, 0, 1.0f, 1};
  assert_int_equal(pick(g, L, 0), 1); /* 2.0 at ids 1 and 4: the lower id */
  float n[V] = {NAN, 0.0f, 1.0f, NAN, -INFINITY, 0.5f, 0.0f, 0.0f};
  assert_int_equal(pick(g, n, 0), 2);
  mt_sample_opts k1 = {1.0f, 1, 1.0f, 5}, p0 = {1.0f, 0, 1e-6f, 5};
  for (int step = 0; step < 50; step++) {
    EXPECT_EQ(pick(k1, L, step), 1, "top_k 1 step %d", step);
    EXPECT_EQ(pick(p0, L, step), 1, "top_p 1e-6 step %d", step);
  }
}

static void test_seed(void **st) {
  (void)st;
  mt_sample_opts a = {1.0f, 0, 1.0f, 7}, b = {1.0f, 0, 1.0f, 8};
  int same = 0;
  for (int step = 0; step < 64; step++) {
    EXPECT_EQ(pick(a, L, step), pick(a, L, step), "step %d", step);
    same += pick(a, L, step) == pick(b, L, step);
  }
  assert_true(same < 64);
}

static void test_sets(void **st) {
  (void)st;
  /* top-k 3: ids 1, 4 (2.0) and 3 (1.5) */
  mt_sample_opts k3 = {1.0f, 3, 1.0f, 3};
  /* top-p: probabilities of L sorted: 1, 4 (0.295 each), 3 (0.179), 7 (0.109) ...
   * p = 0.6 needs 1, 4, 3 (0.590 < 0.6 <= 0.769) */
  mt_sample_opts p6 = {1.0f, 0, 0.6f, 3};
  int seen_k[V] = {0}, seen_p[V] = {0};
  for (int step = 0; step < 2000; step++) {
    seen_k[pick(k3, L, step)]++;
    seen_p[pick(p6, L, step)]++;
  }
  for (int v = 0; v < V; v++) {
    int in = v == 1 || v == 4 || v == 3;
    EXPECT(in ? seen_k[v] > 0 : seen_k[v] == 0, "top-k id %d seen %d", v, seen_k[v]);
    EXPECT(in ? seen_p[v] > 0 : seen_p[v] == 0, "top-p id %d seen %d", v, seen_p[v]);
  }
}

static void test_frequencies(void **st) {
  (void)st;
  const float T = 1.5f;
  mt_sample_opts o = {T, 0, 1.0f, 11};
  mt_sampler *s = mt_sampler_create(&o, V);
  double p[V], z = 0.0;
  for (int v = 0; v < V; v++) z += p[v] = exp(L[v] / T);
  int cnt[V] = {0};
  const int N = 20000;
  for (int step = 0; step < N; step++) cnt[mt_sample_next(s, L, step)]++;
  mt_sampler_free(s);
  for (int v = 0; v < V; v++) {
    double f = (double)cnt[v] / N, want = p[v] / z;
    print_message("id %d: freq %.4f softmax %.4f\n", v, f, want);
    EXPECT(fabs(f - want) < 0.015, "id %d", v);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy),
      cmocka_unit_test(test_seed),
      cmocka_unit_test(test_sets),
      cmocka_unit_test(test_frequencies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
