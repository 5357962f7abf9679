/* tests/unit/optimizer/test_lr_schedule.c — optimizer/lr_schedule.h: style parsing, and
 * mt_lr_at for every style at chosen iterations (warmup, its end, inside the
 * decay, decay end, beyond) against the documented formula in double. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "optimizer/lr_schedule.h"
#include "tests/support/lr_at.h"

/* The documented schedule in double. */
static double formula(const mt_lr_schedule *s, int64_t it) {
  double mx = s->max_lr, mn = s->min_lr;
  if (s->warmup_iters > 0 && it <= s->warmup_iters) return mx * (double)it / (double)s->warmup_iters;
  if (s->style == MT_LR_CONSTANT) return mx;
  if (it >= s->decay_iters) return mn;
  double r = (double)(it - s->warmup_iters) / (double)(s->decay_iters - s->warmup_iters);
  return s->style == MT_LR_LINEAR ? mn + (mx - mn) * (1.0 - r) : mn + (mx - mn) * 0.5 * (1.0 + cos(M_PI * r));
}

static void check_at(const mt_lr_schedule *s, int64_t it) {
  double got = mt_lr_at(s, it), want = formula(s, it);
  if (!(fabs(got - want) <= 1e-7 * fabs(want) + 1e-12))
    fail_msg("style %d warmup %lld decay %lld max %g min %g: lr(%lld) = %.9g, want %.9g", s->style,
             (long long)s->warmup_iters, (long long)s->decay_iters, (double)s->max_lr,
             (double)s->min_lr, (long long)it, got, want);
}

static void test_parse(void **state) {
  (void)state;
  assert_int_equal(mt_lr_style_parse("constant"), MT_LR_CONSTANT);
  assert_int_equal(mt_lr_style_parse("linear"), MT_LR_LINEAR);
  assert_int_equal(mt_lr_style_parse("cosine"), MT_LR_COSINE);
  assert_int_equal(mt_lr_style_parse("inverse-square-root"), MT_LR_INVERSE_SQRT);
  assert_int_equal(mt_lr_style_parse("WSD"), MT_LR_WSD);
  assert_int_equal(mt_wsd_style_parse("exponential"), MT_WSD_EXPONENTIAL);
  assert_int_equal(mt_wsd_style_parse("minus_sqrt"), MT_WSD_MINUS_SQRT);
  assert_int_equal(mt_wsd_style_parse("sqrt"), -1);
  assert_int_equal(mt_wd_style_parse("cosine"), MT_WD_COSINE);
  assert_int_equal(mt_wd_style_parse("exponential"), -1);
  assert_int_equal(mt_lr_style_parse("Cosine"), -1);
  assert_int_equal(mt_lr_style_parse(""), -1);
}

static void test_every_style_against_formula(void **state) {
  (void)state;
  const int64_t its[] = {1, 2, 5, 9, 10, 11, 25, 54, 55, 56, 99, 100, 101, 1000};
  for (int style = 0; style < 3; style++)
    for (int w = 0; w < 2; w++) {
      mt_lr_schedule s = {.max_lr = 6e-4f, .min_lr = 6e-5f, .warmup_iters = w ? 10 : 0,
                          .decay_iters = 100, .style = style};
      for (size_t i = 0; i < sizeof its / sizeof *its; i++) check_at(&s, its[i]);
    }
}

/* Landmarks stated exactly: warmup is linear from max/warmup to max; the
 * decay ends at min_lr (constant: stays at max); half-way cosine = mean. */
static void test_landmarks(void **state) {
  (void)state;
  mt_lr_schedule s = {.max_lr = 1e-3f, .min_lr = 1e-4f, .warmup_iters = 10, .decay_iters = 110,
                      .style = MT_LR_COSINE};
  assert_true(mt_lr_at(&s, 1) == (float)(1e-3f * 1.0 / 10));
  assert_true(mt_lr_at(&s, 10) == 1e-3f);
  assert_true(fabsf(mt_lr_at(&s, 60) - 5.5e-4f) <= 1e-10f);
  assert_true(mt_lr_at(&s, 110) == 1e-4f);
  assert_true(mt_lr_at(&s, 5000) == 1e-4f);
  s.style = MT_LR_LINEAR;
  assert_true(fabsf(mt_lr_at(&s, 60) - 5.5e-4f) <= 1e-10f);
  assert_true(mt_lr_at(&s, 110) == 1e-4f);
  s.style = MT_LR_CONSTANT;
  assert_true(mt_lr_at(&s, 60) == 1e-3f);
  assert_true(mt_lr_at(&s, 5000) == 1e-3f);
  /* monotone non-increasing after warmup */
  for (int style = 1; style < 3; style++) {
    s.style = style;
    for (int64_t it = 11; it < 120; it++)
      if (mt_lr_at(&s, it + 1) > mt_lr_at(&s, it))
        fail_msg("style %d: lr(%lld) = %.9g > lr(%lld) = %.9g", style, (long long)(it + 1),
                 (double)mt_lr_at(&s, it + 1), (long long)it, (double)mt_lr_at(&s, it));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_every_style_against_formula),
      cmocka_unit_test(test_landmarks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
