/* tests/unit/optimizer/test_optimizer.c — optimizer/optimizer.h on the cpu backend:
 * two AdamW steps over a small parameter list against the formula in
 * double (weight decay only where allowed, bias correction by step),
 * gradient norms (replicated / shared / expert tensors counted as
 * documented, non-finite gradients visible in the norm so the trainer can
 * skip the step) and Megatron's clipping coefficient. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/support/probes.h"
#include "backends/registry.h"
#include "optimizer/optimizer.h"

typedef struct {
  mt_backend *be;
  mt_param_list pl;
  float *param, *grad;
} fixture;

/* Four parameters: a weight, a bias (no weight decay), a TP-replicated
 * LayerNorm weight and an expert weight. */
static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  mt_backend_options o = {.device = "cpu", .dtype = MT_F32};
  char err[256];
  mt_backends_process_init(&o);
  f->be = mt_backend_create(&o, err, sizeof err);
  if (!f->be) fail_msg("cpu backend: %s", err);
  mt_params_add(&f->pl, "w", 3, 5, 3, 5, 0, 0, MT_INIT_NORMAL, 0, 0);
  mt_params_add(&f->pl, "b", 1, 5, 1, 5, 0, 0, MT_INIT_ZEROS, 1, 0);
  mt_params_add(&f->pl, "ln.weight", 1, 4, 1, 4, 0, 0, MT_INIT_ONES, 1, 1);
  int e = mt_params_add(&f->pl, "expert.w", 2, 3, 2, 3, 0, 0, MT_INIT_NORMAL, 0, 0);
  f->pl.p[e].is_expert = 1;
  size_t bytes = (size_t)f->pl.numel * sizeof(float);
  f->param = f->be->ops->alloc(f->be, bytes, MT_MEM_PARAM);
  f->grad = f->be->ops->alloc(f->be, bytes, MT_MEM_GRAD);
  memset(f->param, 0, bytes);
  memset(f->grad, 0, bytes);
  for (int i = 0; i < f->pl.n; i++)
    for (int64_t j = 0; j < f->pl.p[i].numel; j++) {
      int64_t k = f->pl.p[i].offset + j;
      f->param[k] = (float)sin(0.7 * (double)k + 0.1);
      f->grad[k] = (float)cos(1.3 * (double)k) * 0.5f;
    }
}

static void teardown(fixture *f) {
  f->be->ops->free(f->be, f->param);
  f->be->ops->free(f->be, f->grad);
  mt_params_free(&f->pl);
  mt_backend_destroy(f->be);
}

static void test_adamw_two_steps_vs_formula(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  mt_adamw opt;
  const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  mt_adamw_init(&opt, f.be, &f.pl, f.param, f.grad, b1, b2, eps, wd);
  assert_ptr_equal(opt.master, f.param); /* fp32: the parameters are the master */
  assert_int_equal(opt.step, 0);
  int64_t n = f.pl.numel;
  double *w = calloc((size_t)n, sizeof(double)), *m = calloc((size_t)n, sizeof(double)),
         *v = calloc((size_t)n, sizeof(double));
  for (int64_t k = 0; k < n; k++) w[k] = f.param[k];
  const float lrs[2] = {1e-2f, 5e-3f}, scales[2] = {1.0f, 0.25f};
  for (int s = 0; s < 2; s++) {
    mt_adamw_step(&opt, lrs[s], scales[s]);
    assert_int_equal(opt.step, s + 1);
    for (int i = 0; i < f.pl.n; i++) {
      const mt_param *p = &f.pl.p[i];
      double dec = p->no_weight_decay ? 0.0 : wd;
      for (int64_t j = 0; j < p->numel; j++) {
        int64_t k = p->offset + j;
        double g = (double)f.grad[k] * scales[s];
        m[k] = b1 * m[k] + (1 - (double)b1) * g;
        v[k] = b2 * v[k] + (1 - (double)b2) * g * g;
        double mh = m[k] / (1 - pow(b1, s + 1)), vh = v[k] / (1 - pow(b2, s + 1));
        w[k] -= lrs[s] * (mh / (sqrt(vh) + eps) + dec * w[k]);
        double got[3] = {f.param[k], opt.m[k], opt.v[k]}, want[3] = {w[k], m[k], v[k]};
        const char *nm[3] = {"param", "m", "v"};
        for (int q = 0; q < 3; q++)
          if (!(fabs(got[q] - want[q]) <= 1e-5 * fabs(want[q]) + 1e-9))
            fail_msg("step %d tensor '%s' element %lld: %s = %.9g, want %.9g", s + 1, p->name,
                     (long long)j, nm[q], got[q], want[q]);
      }
    }
  }
  free(w), free(m), free(v);
  mt_adamw_free(&opt);
  teardown(&f);
}

static void test_grad_norms(void **state) {
  (void)state;
  fixture f;
  setup(&f);
  mt_adamw opt;
  mt_adamw_init(&opt, f.be, &f.pl, f.param, f.grad, 0.9f, 0.95f, 1e-8f, 0.1f);
  double part[4] = {0, 0, 0, 0};
  for (int i = 0; i < f.pl.n; i++)
    for (int64_t j = 0; j < f.pl.p[i].numel; j++) {
      double g = f.grad[f.pl.p[i].offset + j];
      part[i] += g * g;
    }
  double all = mt_grad_sumsq(&opt, 1), norep = mt_grad_sumsq(&opt, 0), ex = mt_grad_sumsq_experts(&opt);
  double want_all = part[0] + part[1] + part[2], want_norep = part[0] + part[1];
  if (fabs(all - want_all) > 1e-12 * want_all) fail_msg("sumsq %.17g, want %.17g", all, want_all);
  if (fabs(norep - want_norep) > 1e-12 * want_norep)
    fail_msg("sumsq without replicated %.17g, want %.17g", norep, want_norep);
  if (fabs(ex - part[3]) > 1e-12 * part[3]) fail_msg("expert sumsq %.17g, want %.17g", ex, part[3]);
  /* a shared copy (tied embedding on the last stage) is not counted */
  f.pl.p[0].shared_copy = 1;
  double shared = mt_grad_sumsq(&opt, 1);
  if (fabs(shared - (part[1] + part[2])) > 1e-12 * shared)
    fail_msg("sumsq with a shared copy %.17g, want %.17g", shared, part[1] + part[2]);
  f.pl.p[0].shared_copy = 0;
  /* a non-finite gradient makes the norm non-finite: the trainer skips the step */
  f.grad[f.pl.p[1].offset + 2] = INFINITY;
  assert_false(isfinite(mt_grad_sumsq(&opt, 1)));
  f.grad[f.pl.p[1].offset + 2] = NAN;
  assert_false(isfinite(mt_grad_sumsq(&opt, 0)));
  mt_adamw_free(&opt);
  teardown(&f);
}

static void test_clip_coefficient(void **state) {
  (void)state;
  const double norms[] = {0.0, 0.5, 0.999999, 1.0, 2.0, 1e6};
  for (size_t i = 0; i < sizeof norms / sizeof *norms; i++) {
    double c = (double)1.0f / (norms[i] + 1e-6);
    float want = c < 1.0 ? (float)c : 1.0f, got = mt_clip_coefficient(norms[i], 1.0f);
    if (got != want) fail_msg("clip(norm %.9g, max 1) = %.9g, want %.9g", norms[i], (double)got, (double)want);
    if (mt_clip_coefficient(norms[i], 0.0f) != 1.0f) fail_msg("clip(norm %.9g, max 0) != 1", norms[i]);
  }
  assert_true(fabsf(mt_clip_coefficient(4.0, 1.0f) - 0.25f) < 1e-6f);
  assert_true(mt_clip_coefficient(0.25, 1.0f) == 1.0f);
  assert_true(mt_clip_coefficient(INFINITY, 1.0f) == 0.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adamw_two_steps_vs_formula),
      cmocka_unit_test(test_grad_norms),
      cmocka_unit_test(test_clip_coefficient),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
