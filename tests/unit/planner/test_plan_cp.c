/* tests/unit/planner/test_plan_cp.c — the planner's context parallelism
 * (planner/plan.h, docs/planner.md "Context parallelism"):
 *  - activations per rank at cp = 2 and 4 are 1/cp of cp = 1 once the
 *    attention state is in the same form (nothing of the activations is
 *    replicated over CP; the ring keeps the log-sum-exp [b, np, s/cp] fp32
 *    where cp = 1 may keep [b, np, s, s] probabilities);
 *  - the ring traffic per layer and micro-batch equals the analytic count of
 *    model/context_parallel.h: forward (cp-1) K/V blocks, backward (2cp-1),
 *    KV = s/cp b ng/t 2 hn elements; its exposed part never exceeds it;
 *  - ZeRO shards over dp x cp; the gradient group spans dp x cp;
 *  - `--sweep` lists CP layouts; cp = 1 plans carry no CP time or traffic.
 * Pure arithmetic: no backend. Run from the repository root. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/check.h"

#include "planner/plan.h"

#define HW "configs/hardware/h100-sxm.json"

/* GPT-2 124M at seq 2048, micro-batch 2 (tied, learned positions). */
static const char *k_gpt2 =
    "{\"model\":{\"num_layers\":12,\"hidden_size\":768,\"num_attention_heads\":12,"
    "\"seq_length\":2048,\"max_position_embeddings\":2048,\"vocab_size\":50257},"
    "\"training\":{\"micro_batch_size\":2,\"train_iters\":1,\"lr\":1e-3},"
    "\"data\":{\"data_path\":\"x\"}}";

/* A Llama-style model with GQA (8 heads, 2 groups) at seq 4096. */
static const char *k_llama =
    "{\"model\":{\"num_layers\":4,\"hidden_size\":512,\"num_attention_heads\":8,"
    "\"seq_length\":4096,\"vocab_size\":32000,\"position_embedding_type\":\"rope\","
    "\"normalization\":\"RMSNorm\",\"swiglu\":true,\"group_query_attention\":true,"
    "\"num_query_groups\":2,\"add_bias_linear\":false,"
    "\"untie_embeddings_and_output_weights\":true},"
    "\"training\":{\"micro_batch_size\":1,\"train_iters\":1,\"lr\":1e-3},"
    "\"data\":{\"data_path\":\"x\"}}";

static void load(mt_config *cfg, const char *json, int world, int cp, int tp, int zero) {
  char o1[96], o2[96], o3[96], o4[96], err[2048];
  snprintf(o1, sizeof o1, "parallel.context_parallel_size=%d", cp);
  snprintf(o2, sizeof o2, "parallel.tensor_model_parallel_size=%d", tp);
  snprintf(o3, sizeof o3, "parallel.sequence_parallel=%s", tp > 1 ? "true" : "false");
  snprintf(o4, sizeof o4, "parallel.zero_stage=%d", zero);
  const char *ov[] = {o1, o2, o3, o4};
  int rc = mt_config_load_string(cfg, json, "test", ov, 4, world, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
}

static void plan(const char *json, int world, int cp, int tp, int zero, mt_plan *p) {
  mt_config cfg;
  mt_hardware hw;
  char err[2048];
  assert_int_equal(mt_hardware_load(&hw, HW, err, sizeof err), 0);
  load(&cfg, json, world, cp, tp, zero);
  mt_plan_options o = {0};
  int rc = mt_plan_compute(&cfg, world, &hw, &o, p, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  mt_config_free(&cfg);
}

/* ACT(cp) x cp == ACT(1) with the attention state of both in lse form:
 * either cp = 1 stores probabilities (b np s^2 |T| per layer, the unfused
 * op) and ACT(cp) cp = ACT(1) - L probs + L b np s 4, or cp = 1 stores the
 * lse too (the fused op) and ACT(cp) cp = ACT(1). One of them holds
 * exactly. */
static void check_act_scaling(const char *json, int tp) {
  mt_config cfg;
  load(&cfg, json, tp, 1, tp, 0);
  const double L = cfg.model.num_layers, b = cfg.training.micro_batch_size;
  const double np = (double)cfg.model.num_attention_heads / tp, s = cfg.model.seq_length;
  mt_config_free(&cfg);
  mt_plan p1;
  plan(json, tp, 1, tp, 0, &p1);
  const double a1 = p1.mem.bytes[MT_PM_ACT];
  for (int cp = 2; cp <= 4; cp *= 2) {
    mt_plan pc;
    plan(json, tp * cp, cp, tp, 0, &pc);
    const double ac = pc.mem.bytes[MT_PM_ACT];
    const double unfused = a1 - L * b * np * s * s * 4 + L * b * np * s * 4;
    printf("tp %d cp %d: activations %.0f B per rank, cp=1 %.0f B (ratio %.4f); "
           "(cp=1 in lse form)/cp = %.0f or %.0f\n",
           tp, cp, ac, a1, a1 / ac, unfused / cp, a1 / cp);
    EXPECT(ac * cp == unfused || ac * cp == a1,
           "tp %d cp %d: ACT %.0f x cp != %.0f (unfused cp=1) nor %.0f (fused cp=1)", tp, cp, ac,
           unfused, a1);
    /* parameters, gradients and optimizer state are replicated over CP */
    for (int k = MT_PM_PARAM; k <= MT_PM_OPTIM; k++)
      EXPECT(pc.mem.bytes[k] == p1.mem.bytes[k], "tp %d cp %d: %s differs", tp, cp,
             mt_plan_mem_name(k));
  }
}

static void test_activations_scale(void **state) {
  (void)state;
  check_act_scaling(k_gpt2, 1);
  check_act_scaling(k_gpt2, 2); /* tp 2 + SP: each CP shard split further */
  check_act_scaling(k_llama, 1);
}

/* Ring bytes per layer and micro-batch, and the overlap bookkeeping. */
static void test_ring_traffic(void **state) {
  (void)state;
  mt_plan p1;
  plan(k_gpt2, 1, 1, 1, 0, &p1);
  assert_true(p1.time.comp[MT_PT_CP_COMM] == 0);
  assert_true(p1.time.cp_ring.fwd_bytes == 0 && p1.time.cp_ring.bwd_bytes == 0);
  assert_int_equal(p1.cp, 1);
  struct { const char *json; int cp, tp; double b, s, ng, hn; } c[] = {
      {k_gpt2, 2, 1, 2, 2048, 12, 64},  {k_gpt2, 4, 1, 2, 2048, 12, 64},
      {k_gpt2, 2, 2, 2, 2048, 12, 64},  {k_llama, 2, 1, 1, 4096, 2, 64},
      {k_llama, 4, 2, 1, 4096, 2, 64},
  };
  for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
    mt_plan p;
    plan(c[i].json, c[i].cp * c[i].tp, c[i].cp, c[i].tp, 0, &p);
    const double kv = c[i].s / c[i].cp * c[i].b * c[i].ng / c[i].tp * 2 * c[i].hn * 4;
    const mt_plan_cp_ring *r = &p.time.cp_ring;
    printf("case %zu (cp %d tp %d): fwd %.0f B bwd %.0f B per layer; transfer %.3g ms, block "
           "%.3g ms, exposed %.3g + %.3g ms\n",
           i, c[i].cp, c[i].tp, r->fwd_bytes, r->bwd_bytes, 1e3 * r->transfer_s, 1e3 * r->block_s,
           1e3 * r->exposed_fwd_s, 1e3 * r->exposed_bwd_s);
    EXPECT(r->fwd_bytes == (c[i].cp - 1) * kv, "case %zu: forward %.0f != %.0f", i, r->fwd_bytes,
           (c[i].cp - 1) * kv);
    EXPECT(r->bwd_bytes == (2 * c[i].cp - 1) * kv, "case %zu: backward %.0f != %.0f", i,
           r->bwd_bytes, (2 * c[i].cp - 1) * kv);
    assert_true(r->exposed_fwd_s >= 0 && r->exposed_bwd_s > 0);
    assert_true(r->exposed_fwd_s + r->exposed_bwd_s <= r->transfer_s);
    assert_true(p.time.comp[MT_PT_CP_COMM] > 0);
    assert_int_equal(p.cp, c[i].cp);
    assert_int_equal(p.cp_intra, 1); /* tp x cp <= 8 GPUs of a node */
  }
}

/* ZeRO-1 over dp x cp: 4 ranks = cp 2 x dp 2 shard the optimizer state 4
 * ways (up to bucket padding), like dp 4 without CP. */
static void test_zero_over_dp_cp(void **state) {
  (void)state;
  mt_plan z0, z1, d4;
  plan(k_llama, 4, 2, 1, 0, &z0);
  plan(k_llama, 4, 2, 1, 1, &z1);
  plan(k_llama, 4, 1, 1, 1, &d4);
  printf("optimizer: zero 0 %.0f, zero 1 cp2 x dp2 %.0f, zero 1 dp4 %.0f\n",
         z0.mem.bytes[MT_PM_OPTIM], z1.mem.bytes[MT_PM_OPTIM], d4.mem.bytes[MT_PM_OPTIM]);
  assert_int_equal(z1.dp, 2);
  assert_true(z1.mem.bytes[MT_PM_OPTIM] == d4.mem.bytes[MT_PM_OPTIM]);
  assert_true(fabs(z0.mem.bytes[MT_PM_OPTIM] / z1.mem.bytes[MT_PM_OPTIM] - 4) < 0.01);
  assert_true(z1.time.comp[MT_PT_DP_COMM] > 0); /* dp x cp = 4 ranks reduce */
  /* dp 1 x cp 2 still reduces gradients (over the two CP ranks) */
  mt_plan c2;
  plan(k_llama, 2, 2, 1, 0, &c2);
  assert_int_equal(c2.dp, 1);
  assert_true(c2.time.comp[MT_PT_DP_COMM] > 0);
}

/* `--sweep` includes CP layouts, and the text row names cp. */
static void test_sweep_has_cp(void **state) {
  (void)state;
  mt_config cfg;
  mt_hardware hw;
  char err[2048];
  assert_int_equal(mt_hardware_load(&hw, HW, err, sizeof err), 0);
  load(&cfg, k_llama, 8, 1, 1, 0);
  mt_plan_options o = {0};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(mt_plan_sweep(&cfg, 8, &hw, &o, 0, 1, f, err, sizeof err), 0);
  fclose(f);
  int n2 = 0, n4 = 0, n8 = 0;
  for (const char *q = buf; (q = strstr(q, "\"cp\":")) != NULL; q += 5) {
    int v = atoi(q + 5);
    n2 += v == 2, n4 += v == 4, n8 += v == 8;
  }
  printf("sweep of 8 ranks: %d layouts with cp 2, %d with cp 4, %d with cp 8\n", n2, n4, n8);
  assert_true(n2 > 0 && n4 > 0 && n8 > 0);
  free(buf);
  mt_config_free(&cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_activations_scale),
      cmocka_unit_test(test_ring_traffic),
      cmocka_unit_test(test_zero_over_dp_cp),
      cmocka_unit_test(test_sweep_has_cp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
