/* tests/unit/model/test_moe_router.c — the router options of model/moe_router.h
 * without PyTorch (tests/integration/test_moe_router_pytorch.sh compares
 * with the reference): the backward of every variant (softmax, pre-softmax,
 * sigmoid; scaling; group limit; expert bias; aux / seq_aux / global_aux /
 * none) against central differences of the objective
 * Σ dgate·gate + lb_scale·LB + z_scale·Z; the expert bias moves the selection
 * but never a gate weight of an unchanged token nor the balance loss; the
 * group limit keeps every chosen expert inside group_topk groups; the
 * balance losses are 1 at perfect balance; global_aux_loss with no counts
 * equals aux_loss; the balance losses ignore capacity dropping and padding;
 * bf16 rounding of the logits. */
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

enum { N = 12, E = 8, B = 3 };

static void rand_fill(float *a, int64_t n, uint64_t seed, float scale) {
  mt_rng_key_t key = mt_rng_key(seed, "router", 0, 0);
  for (int64_t i = 0; i < n; i++) a[i] = scale * mt_rng_normal(key, (uint64_t)i);
}

static double objective(const mt_moe_routing *r, const float *dg, double lbs, double zs) {
  double f = lbs * r->lb_loss + zs * r->z_loss;
  for (int64_t i = 0; i < r->n * r->k; i++) f += (double)dg[i] * r->gate[i];
  return f;
}

static void check_backward(mt_moe_route_opts o, const float *bias, const int64_t *gtpe) {
  const int k = o.k;
  float lg[N * E], dg[N * 8], dl[N * E];
  rand_fill(lg, N * E, 17 + (uint64_t)o.lb_type * 7 + (uint64_t)k, 1.5f);
  rand_fill(dg, N * k, 5, 1.0f);
  mt_moe_routing r, r2;
  mt_moe_routing_init(&r, N, E, k);
  mt_moe_routing_init(&r2, N, E, k);
  mt_moe_route(&o, lg, bias, gtpe, N, &r);
  /* in two token ranges, as the layer does under SP */
  mt_moe_route_backward(&o, &r, 0, N / 2, dg, 0.7, 0.3, dl);
  mt_moe_route_backward(&o, &r, N / 2, N / 2, dg + (N / 2) * k, 0.7, 0.3, dl + (N / 2) * E);
  int checked = 0;
  for (int i = 0; i < N * E; i += 3) {
    const float h = 1e-2f, v = lg[i];
    lg[i] = v + h;
    mt_moe_route(&o, lg, bias, gtpe, N, &r2);
    int same = !memcmp(r.expert, r2.expert, sizeof(int) * N * k) &&
               !memcmp(r.aux_routed, r2.aux_routed, sizeof(int64_t) * E);
    double fp = objective(&r2, dg, 0.7, 0.3);
    lg[i] = v - h;
    mt_moe_route(&o, lg, bias, gtpe, N, &r2);
    same = same && !memcmp(r.expert, r2.expert, sizeof(int) * N * k);
    double fm = objective(&r2, dg, 0.7, 0.3);
    lg[i] = v;
    if (!same) continue; /* a selection changed inside the step */
    double fd = (fp - fm) / (2 * h);
    EXPECT(fabs(fd - dl[i]) < 2e-3 * (1 + fabs(fd)),
           "logit %d: finite difference %.6g vs backward %.6g (sigmoid %d pre %d lb %d k %d "
           "groups %d bias %d)",
           i, fd, (double)dl[i], o.score_sigmoid, o.pre_softmax, o.lb_type, k, o.num_groups,
           bias != NULL);
    checked++;
  }
  EXPECT(checked > N * E / 6, "only %d logits checked", checked);
  mt_moe_routing_free(&r);
  mt_moe_routing_free(&r2);
}

static void test_backward(void **st) {
  (void)st;
  float bias[E];
  rand_fill(bias, E, 99, 0.3f);
  const int64_t gtpe[E] = {5, 0, 9, 3, 3, 12, 1, 7};
  for (int sg = 0; sg < 2; sg++)
    for (int pre = 0; pre < 2 - sg; pre++)
      for (int lb = MT_MOE_LB_AUX; lb <= MT_MOE_LB_NONE; lb++)
        for (int v = 0; v < 3; v++) {
          mt_moe_route_opts o = {.E = E, .k = v == 0 ? 1 : 2 + 2 * (v == 2), .pre_softmax = pre,
                                 .score_sigmoid = sg, .lb_type = lb, .seq_b = B};
          if (v == 1) o.topk_scaling_factor = 2.5f;
          if (v == 2) o.num_groups = 4, o.group_topk = 2;
          if (v == 1) o.capacity_factor = 1.0f;
          check_backward(o, v == 2 ? bias : NULL, lb == MT_MOE_LB_GLOBAL_AUX && v ? gtpe : NULL);
        }
}

static void test_bias_selection_only(void **st) {
  (void)st;
  /* token 1 switches from expert 1 to expert 2; token 0 keeps experts 0, 1 */
  const float lg[2 * 4] = {3, 2, -2, -3, 2, 1, 0.9f, -1};
  const float bias[4] = {0, 0, 0.15f, 0};
  for (int mode = 0; mode < 3; mode++) {
    mt_moe_route_opts o = {.E = 4, .k = 2, .score_sigmoid = mode == 0, .pre_softmax = mode == 1,
                           .topk_scaling_factor = 1.5f};
    mt_moe_routing a, b;
    mt_moe_routing_init(&a, 2, 4, 2);
    mt_moe_routing_init(&b, 2, 4, 2);
    mt_moe_route(&o, lg, NULL, NULL, 2, &a);
    mt_moe_route(&o, lg, bias, NULL, 2, &b);
    EXPECT(a.expert[2] == 0 && a.expert[3] == 1, "mode %d: unbiased %d %d", mode, a.expert[2],
           a.expert[3]);
    EXPECT(b.expert[2] == 0 && b.expert[3] == 2, "mode %d: biased %d %d", mode, b.expert[2],
           b.expert[3]);
    EXPECT(a.gate[0] == b.gate[0] && a.gate[1] == b.gate[1], "mode %d: token 0 gates", mode);
    EXPECT(a.lb_loss == b.lb_loss, "mode %d: balance loss %.17g vs %.17g", mode, a.lb_loss,
           b.lb_loss);
    /* token 1: the gates of experts 0 and 2 from the unbiased scores */
    double w0, w2;
    if (mode == 0) {
      double s0 = 1 / (1 + exp(-2.0)), s2 = 1 / (1 + exp(-0.9));
      w0 = s0 / (s0 + s2), w2 = s2 / (s0 + s2);
    } else if (mode == 1) {
      double z = exp(2.0) + exp(1.0) + exp(0.9) + exp(-1.0);
      w0 = exp(2.0) / z, w2 = exp(0.9) / z;
    } else {
      w0 = 1 / (1 + exp(0.9 - 2.0)), w2 = 1 - w0;
    }
    EXPECT(fabs(b.gate[2] - 1.5 * w0) < 1e-6 && fabs(b.gate[3] - 1.5 * w2) < 1e-6,
           "mode %d: gates %.9g %.9g vs %.9g %.9g", mode, (double)b.gate[2], (double)b.gate[3],
           1.5 * w0, 1.5 * w2);
    mt_moe_routing_free(&a);
    mt_moe_routing_free(&b);
  }
}

static void test_groups_and_balance(void **st) {
  (void)st;
  float lg[N * E];
  rand_fill(lg, N * E, 3, 2.0f);
  mt_moe_route_opts o = {.E = E, .k = 3, .num_groups = 4, .group_topk = 2, .score_sigmoid = 1};
  mt_moe_routing r;
  mt_moe_routing_init(&r, N, E, 3);
  mt_moe_route(&o, lg, NULL, NULL, N, &r);
  for (int t = 0; t < N; t++) {
    int used[4] = {0}, n = 0;
    for (int j = 0; j < 3; j++) used[r.expert[t * 3 + j] / 2] = 1;
    for (int g = 0; g < 4; g++) n += used[g];
    EXPECT(n <= 2, "token %d uses %d groups", t, n);
  }
  mt_moe_routing_free(&r);
  /* perfect balance: every token picks every expert: each loss type is 1 */
  float eq[N * 4] = {0};
  for (int lb = MT_MOE_LB_AUX; lb <= MT_MOE_LB_GLOBAL_AUX; lb++)
    for (int sg = 0; sg < 2; sg++) {
      mt_moe_route_opts ob = {.E = 4, .k = 4, .lb_type = lb, .seq_b = B, .score_sigmoid = sg};
      mt_moe_routing_init(&r, N, 4, 4);
      mt_moe_route(&ob, eq, NULL, NULL, N, &r);
      EXPECT(fabs(r.lb_loss - 1.0) < 1e-12, "lb type %d sigmoid %d: %.17g", lb, sg, r.lb_loss);
      mt_moe_routing_free(&r);
    }
  /* global_aux_loss without counts = aux_loss; none = 0 */
  mt_moe_route_opts oa = {.E = E, .k = 2}, og = oa, on = oa;
  og.lb_type = MT_MOE_LB_GLOBAL_AUX;
  on.lb_type = MT_MOE_LB_NONE;
  mt_moe_routing ra, rg, rn;
  mt_moe_routing_init(&ra, N, E, 2);
  mt_moe_routing_init(&rg, N, E, 2);
  mt_moe_routing_init(&rn, N, E, 2);
  mt_moe_route(&oa, lg, NULL, NULL, N, &ra);
  mt_moe_route(&og, lg, NULL, NULL, N, &rg);
  mt_moe_route(&on, lg, NULL, NULL, N, &rn);
  assert_true(fabs(ra.lb_loss - rg.lb_loss) < 1e-12);
  assert_true(rn.lb_loss == 0.0);
  mt_moe_routing_free(&ra);
  mt_moe_routing_free(&rg);
  mt_moe_routing_free(&rn);
}

/* The balance losses come from the probabilities before dropping or padding
 * (users report Megatron's seq_aux_loss after the capacity mask, and an aux
 * loss of 1.0 with pad-to-capacity): capacity 0.5, with and without padding,
 * leaves LB and the router gradient of LB unchanged. */
static void test_balance_before_dropping(void **st) {
  (void)st;
  float lg[N * E], dl0[N * E], dl1[N * E], dg[N * 2] = {0};
  rand_fill(lg, N * E, 23, 3.0f);
  for (int sg = 0; sg < 2; sg++)
    for (int lb = MT_MOE_LB_AUX; lb <= MT_MOE_LB_GLOBAL_AUX; lb++)
      for (int pad = 0; pad < 2; pad++) {
        mt_moe_route_opts o = {.E = E, .k = 2, .score_sigmoid = sg, .lb_type = lb, .seq_b = B};
        mt_moe_route_opts oc = o;
        oc.capacity_factor = 0.5f;
        oc.pad_to_capacity = pad;
        mt_moe_routing a, b;
        mt_moe_routing_init(&a, N, E, 2);
        mt_moe_routing_init(&b, N, E, 2);
        mt_moe_route(&o, lg, NULL, NULL, N, &a);
        mt_moe_route(&oc, lg, NULL, NULL, N, &b);
        EXPECT(b.dropped > 0, "sigmoid %d lb %d: nothing dropped", sg, lb);
        EXPECT(a.lb_loss == b.lb_loss, "sigmoid %d lb %d pad %d: LB %.17g vs %.17g", sg, lb, pad,
               a.lb_loss, b.lb_loss);
        mt_moe_route_backward(&o, &a, 0, N, dg, 1.0, 0.0, dl0);
        mt_moe_route_backward(&oc, &b, 0, N, dg, 1.0, 0.0, dl1);
        EXPECT(!memcmp(dl0, dl1, sizeof dl0), "sigmoid %d lb %d pad %d: dLB differs", sg, lb, pad);
        mt_moe_routing_free(&a);
        mt_moe_routing_free(&b);
      }
}

static void test_bf16(void **st) {
  (void)st;
  /* 1 + 2^-8 rounds to 1 (tie, even), 1 + 3·2^-8 to 1 + 2^-6 */
  const float lg[4] = {1.0f + 1.0f / 256, 1.0f, 1.0f + 3.0f / 256, -2.0f};
  mt_moe_route_opts o = {.E = 4, .k = 2, .round_bf16 = 1};
  mt_moe_routing r;
  mt_moe_routing_init(&r, 1, 4, 2);
  mt_moe_route(&o, lg, NULL, NULL, 1, &r);
  assert_true(r.logits[0] == 1.0f && r.logits[1] == 1.0f && r.logits[2] == 1.0f + 1.0f / 64);
  assert_int_equal(r.expert[0], 2);
  assert_int_equal(r.expert[1], 0); /* tie with expert 1 after rounding: lower index */
  mt_moe_routing_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward),
      cmocka_unit_test(test_bias_selection_only),
      cmocka_unit_test(test_groups_and_balance),
      cmocka_unit_test(test_balance_before_dropping),
      cmocka_unit_test(test_bf16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
