/* tests/unit/planner/test_plan.c — the planner (planner/plan.h):
 *  - FLOPs formula vs the papers' own MFU from their iteration times,
 *    parameter counts vs arXiv:2104.04473 Table 1;
 *  - predictions vs arXiv:2205.05198 Table 5 and 2104.04473 Table 1 with one
 *    hardware file (configs/hardware/a100-80gb.json): MAE <= 5%, max <= 10%;
 *  - predicted per-rank memory vs the CPU allocator's measured peaks;
 *  - bad hardware files and layouts give clear errors.
 * Run from the repository root (tests/run_tests.sh does).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/probes.h"
#include "tests/unit/check.h"

#include "backends/registry.h"
#include "model/gpt.h"
#include "planner/plan.h"
#include "model/gpt_flops.h"
#include "optimizer/optimizer.h"

#define HW_A100 "configs/hardware/a100-80gb.json"

/* ---- formula: model FLOPs -> the papers' MFU from their iteration times ---- */

static double mfu_of(int64_t B, int64_t L, int64_t h, double t, int gpus) {
  /* the papers count core attention over the full s x s */
  mt_flops_shape fs = {.global_batch = B, .seq_length = 2048, .num_layers = L, .hidden_size = h,
                       .ffn_hidden_size = 4 * h, .padded_vocab_size = 51200,
                       .formula = MT_FLOPS_PAPER};
  double F = mt_flops_per_iteration(&fs);
  return F / (t * gpus * 312e12);
}

static void test_mfu_formula(void **state) {
  (void)state;
  /* 2205.05198 Table 3 layouts and Table 5 iteration times, A100 312 TFLOP/s */
  struct { int64_t B, L, h; double t; int gpus; double mfu; } r[] = {
      {4, 48, 6144, 1.10, 8, 0.415},       {64, 96, 12288, 13.75, 64, 0.514},
      {280, 105, 20480, 37.83, 280, 0.560}, {512, 128, 25600, 71.49, 512, 0.563},
      {2240, 105, 20480, 39.15, 2240, 0.542}, /* §6.3: 530B on 2240 GPUs */
  };
  for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
    double m = mfu_of(r[i].B, r[i].L, r[i].h, r[i].t, r[i].gpus);
    printf("MFU row %zu: %.2f%% (paper %.1f%%)\n", i, 100 * m, 100 * r[i].mfu);
    EXPECT(fabs(m - r[i].mfu) < 0.003, "row %zu: MFU %.4f, paper %.3f", i, m, r[i].mfu); /* iteration times are rounded */
  }
  /* HFU with the paper's eq. (8): 72 B L s h^2 (1 + s/3h + V/12hL) */
  double hfu_paper[] = {0.437, 0.528, 0.570, 0.570};
  for (int i = 0; i < 4; i++) {
    double B = r[i].B, L = r[i].L, h = r[i].h, s = 2048, V = 51200;
    double F = 72 * B * L * s * h * h * (1 + s / (3 * h) + V / (12 * h * L));
    double hfu = F / (r[i].t * r[i].gpus * 312e12);
    assert_true(fabs(hfu - hfu_paper[i]) < 0.003);
  }
}

/* 2104.04473 Table 1 parameter counts (billions) vs the planner's count. */
static const char *k_nar[10] = {"1.7b", "3.6b", "7.5b", "18b", "39b",
                                "76b",  "145b", "310b", "530b", "1t"};
static const int k_nar_world[10] = {32, 64, 128, 256, 512, 1024, 1536, 1920, 2520, 3072};
static const double k_nar_params[10] = {1.7, 3.6, 7.5, 18.4, 39.1, 76.1, 145.6, 310.1, 529.6, 1008.0};
static const double k_nar_tflops[10] = {137, 138, 142, 135, 138, 140, 148, 155, 163, 163};
static const int k_nar_overlap[10] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0}; /* torch DDP rows */

static void load_cfg(mt_config *cfg, const char *path, int world) {
  char err[2048];
  int rc = mt_config_load(cfg, path, NULL, 0, world, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
}

static void test_param_counts(void **state) {
  (void)state;
  for (int i = 0; i < 10; i++) {
    char path[256];
    snprintf(path, sizeof path, "configs/papers/narayanan21-%s.json", k_nar[i]);
    mt_config cfg;
    load_cfg(&cfg, path, k_nar_world[i]);
    mt_plan_memory mem;
    mt_plan_memory_compute(&cfg, k_nar_world[i], NULL, NULL, &mem);
    double b = mem.params_total / 1e9;
    printf("%-5s %.1fB (paper %.1fB)\n", k_nar[i], b, k_nar_params[i]);
    /* the table rounds to 0.1B */
    assert_true(fabs(b - k_nar_params[i]) <= fmax(0.0501, 0.005 * k_nar_params[i]));
    mt_config_free(&cfg);
  }
}

/* ---- Llama-style models (configs/models/) ---- */

/* Published parameter counts (Hugging Face model cards / safetensors index
 * totals: the tokenizer's vocabulary, untied embeddings) and a hand count of
 * the FLOPs per token: 3 x 2 x (GEMM weights per token: per layer
 * h (a + 2 ng) hn + a hn h + 3 h ffn, plus the logits h Vp) + 3 x 4 s a hn
 * per layer (Q K^T and P V over all s positions, as Megatron counts). */
static void test_llama_models(void **state) {
  (void)state;
  struct {
    const char *path;
    int world;
    int64_t published, L, h, a, ng, f, V, Vp, s;
    double gflop_per_token; /* the hand computation's value, written out */
  } r[] = {
      {"configs/models/llama2-7b.json", 8, 6738415616LL, 32, 4096, 32, 32, 11008, 32000, 32000,
       4096, 42.863689728},
      {"configs/models/llama3-8b.json", 8, 8030261248LL, 32, 4096, 32, 8, 14336, 128256, 128256,
       8192, 51.470401536},
      {"configs/models/llama3-70b.json", 64, 70553706496LL, 80, 8192, 64, 8, 28672, 128256,
       129024, 8192, 449.260290048},
  };
  for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
    mt_config cfg;
    load_cfg(&cfg, r[i].path, r[i].world);
    const int64_t n = mt_plan_num_parameters(&cfg, 0), np_ = mt_plan_num_parameters(&cfg, 1);
    const int64_t Vp = mt_config_padded_vocab(&cfg);
    printf("%s: %lld parameters (published %lld), %lld with the vocabulary padded to %lld\n",
           r[i].path, (long long)n, (long long)r[i].published, (long long)np_, (long long)Vp);
    EXPECT_EQ(n, r[i].published, "%s", r[i].path);
    EXPECT_EQ(Vp, r[i].Vp, "%s", r[i].path);
    /* padding adds rows to the word embedding and the untied output layer */
    EXPECT_EQ(np_, r[i].published + 2 * (Vp - r[i].V) * r[i].h, "%s", r[i].path);
    const double hn = (double)(r[i].h / r[i].a), L = (double)r[i].L, h = (double)r[i].h;
    const double w = L * (h * (double)(r[i].a + 2 * r[i].ng) * hn + (double)r[i].a * hn * h +
                          3.0 * h * (double)r[i].f) + h * (double)Vp;
    /* 6 N per token for the GEMM weights, and causal core attention (today's
     * Megatron formula, logging.flops_formula megatron): 6 s (a hn) L */
    const double hand = 6.0 * w + 6.0 * (double)r[i].s * (double)r[i].a * hn * L;
    mt_plan p;
    mt_hardware hw;
    char err[2048];
    mt_plan_options o = {0};
    assert_int_equal(mt_hardware_load(&hw, "configs/hardware/h100-sxm.json", err, sizeof err), 0);
    assert_int_equal(mt_plan_compute(&cfg, r[i].world, &hw, &o, &p, err, sizeof err), 0);
    const double per_tok = p.time.model_flops / ((double)cfg.training.global_batch_size * r[i].s);
    printf("  %.6f GFLOP per token (hand %.6f), fits %d, MFU %.1f%%\n", per_tok / 1e9, hand / 1e9,
           p.mem.fits, 100 * p.time.mfu);
    EXPECT(fabs(per_tok - hand) <= 1e-12 * hand, "%s: %.9g vs %.9g", r[i].path, per_tok, hand);
    EXPECT(fabs(hand / 1e9 - r[i].gflop_per_token) < 1e-9, "%s: hand %.12g", r[i].path, hand);
    EXPECT(p.mem.fits, "%s: the shipped layout must fit on H100 80 GB", r[i].path);
    mt_config_free(&cfg);
  }
}

/* Each option against the GPT-2 block of the same shape (test config): the
 * parameter and FLOP differences are the option's own terms. */
static void test_option_terms(void **state) {
  (void)state;
  const char *base = "{\"model\":{\"num_layers\":3,\"hidden_size\":64,\"num_attention_heads\":8,"
                     "\"ffn_hidden_size\":160,\"seq_length\":32,\"max_position_embeddings\":48,"
                     "\"vocab_size\":1000},\"training\":{\"micro_batch_size\":2,"
                     "\"global_batch_size\":4,\"train_iters\":1,\"lr\":1e-3},"
                     "\"data\":{\"data_path\":\"x\"}}";
  const int64_t L = 3, h = 64, f = 160, a = 8, hn = 8, maxpos = 48, Vp = 1024, B = 4, s = 32;
  char err[2048];
  mt_config c0;
  assert_int_equal(mt_config_load_string(&c0, base, "t", NULL, 0, 1, err, sizeof err), 0);
  const int64_t n0 = mt_plan_num_parameters(&c0, 1);
  mt_flops_shape f0 = {.global_batch = B, .seq_length = s, .num_layers = L, .hidden_size = h,
                       .num_attention_heads = a, .ffn_hidden_size = f, .padded_vocab_size = Vp};
  const double F0 = mt_flops_per_iteration(&f0);
  /* GPT-2: 12 h^2 + 13 h + 2 h f + f per layer... as the formula in plan_mem.c */
  EXPECT_EQ(n0, L * (4 * h * h + 2 * h * f + 9 * h + f) + Vp * h + maxpos * h + 2 * h, "%s", "gpt-2");
  struct {
    const char *set[2];
    int64_t dparams;
    double dflops;
  } r[] = {
      {{"model.position_embedding_type=\"rope\"", NULL}, -maxpos * h, 0},
      {{"model.position_embedding_type=\"none\"", NULL}, -maxpos * h, 0},
      {{"model.normalization=\"RMSNorm\"", NULL}, -(2 * L + 1) * h, 0},
      /* fc1 gains f rows: h f weights + f biases per layer; 6 B s h f FLOPs */
      {{"model.swiglu=true", NULL}, L * (h * f + f), 6.0 * B * s * L * h * f},
      /* 2 groups of 8 heads: K and V lose (a - 2) hn rows each */
      {{"model.group_query_attention=true", "model.num_query_groups=2"},
       -L * 2 * (a - 2) * hn * (h + 1), -12.0 * B * s * L * h * (a - 2) * hn},
      {{"model.add_bias_linear=false", NULL}, -L * ((a + 2 * a) * hn + h + f + h), 0},
      {{"model.qk_layernorm=true", NULL}, L * 4 * hn, 0},
      {{"model.untie_embeddings_and_output_weights=true", NULL}, Vp * h, 0},
      /* kv_channels 16: q, k, v and proj double (a hn = 128 != h); the
       * causal core attention 6 B s^2 L (a hn) gains 6 B s^2 L a 8 */
      {{"model.kv_channels=16", NULL}, L * (4 * a * 8 * h + 3 * a * 8),
       12.0 * B * s * L * 2 * h * a * 8 + 6.0 * B * s * s * L * a * 8},
      /* one MTP depth: a GPT-2 layer, enorm, hnorm, final_layernorm (weight
       * and bias) and eh_proj [h, 2h] (its FLOPs: tests/unit/model/test_gpt_flops_mtp.c) */
      {{"model.mtp_num_layers=1", NULL}, (4 * h * h + 2 * h * f + 9 * h + f) + 6 * h + 2 * h * h,
       0},
  };
  for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
    mt_config c;
    int n_set = r[i].set[1] ? 2 : 1;
    int rc = mt_config_load_string(&c, base, "t", r[i].set, n_set, 1, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    const int64_t n = mt_plan_num_parameters(&c, 1);
    mt_flops_shape fs = f0;
    fs.num_query_groups = c.model.group_query_attention ? c.model.num_query_groups : 0;
    fs.kv_channels = c.model.kv_channels;
    fs.swiglu = c.model.swiglu;
    const double F = mt_flops_per_iteration(&fs);
    printf("%-48s params %+lld (expected %+lld), FLOPs %+.6g (expected %+.6g)\n", r[i].set[0],
           (long long)(n - n0), (long long)r[i].dparams, F - F0, r[i].dflops);
    EXPECT_EQ(n - n0, r[i].dparams, "%s", r[i].set[0]);
    EXPECT(fabs((F - F0) - r[i].dflops) <= 1e-9 * F0, "%s", r[i].set[0]);
    mt_config_free(&c);
  }
  mt_config_free(&c0);
}

/* ---- predictions vs the papers ---- */

static void test_paper_reproduction(void **state) {
  (void)state;
  char err[2048];
  mt_hardware hw;
  assert_int_equal(mt_hardware_load(&hw, HW_A100, err, sizeof err), 0);
  const char *kor[4] = {"22b", "175b", "530b", "1t"};
  const int kor_world[4] = {8, 64, 280, 512};
  const double kor_t[4] = {1.10, 13.75, 37.83, 71.49};
  double sum = 0, worst = 0;
  int n = 0;
  for (int i = 0; i < 14; i++) {
    char path[256];
    int world;
    double pred, paper;
    mt_plan_options opt = {0};
    if (i < 4) {
      snprintf(path, sizeof path, "configs/papers/korthikanti22-%s.json", kor[i]);
      world = kor_world[i];
    } else {
      snprintf(path, sizeof path, "configs/papers/narayanan21-%s.json", k_nar[i - 4]);
      world = k_nar_world[i - 4];
      opt.overlap_grad_reduce = k_nar_overlap[i - 4];
    }
    mt_config cfg;
    load_cfg(&cfg, path, world);
    mt_plan p;
    assert_int_equal(mt_plan_compute(&cfg, world, &hw, &opt, &p, err, sizeof err), 0);
    assert_true(p.mem.fits); /* the papers ran these layouts on 80 GB GPUs */
    if (i < 4) {
      pred = p.time.t_iter;
      paper = kor_t[i];
    } else {
      pred = p.time.hw_tflops_per_gpu; /* 2104.04473 eq. (3) counts recomputation */
      paper = k_nar_tflops[i - 4];
    }
    double e = (pred - paper) / paper;
    printf("%-40s predicted %9.3f paper %8.2f error %+5.1f%%  (MFU %.1f%%)\n", path, pred, paper,
           100 * e, 100 * p.time.mfu);
    sum += fabs(e);
    worst = fmax(worst, fabs(e));
    n++;
    mt_config_free(&cfg);
  }
  printf("mean absolute error %.2f%%, worst %.2f%%\n", 100 * sum / n, 100 * worst);
  assert_true(sum / n <= 0.05);
  assert_true(worst <= 0.10);
}

/* ---- memory: prediction vs the allocator on the CPU backend ---- */

static void check_memory(const char *json, int steps, const char *recompute, int rc_layers) {
  char err[2048];
  mt_config cfg;
  char o1[96], o2[96];
  snprintf(o1, sizeof o1, "model.recompute_granularity=\"%s\"", recompute);
  /* recompute_num_layers applies to full recomputation only (given otherwise it
   * is refused): null leaves it out */
  if (!strcmp(recompute, "full")) snprintf(o2, sizeof o2, "model.recompute_num_layers=%d", rc_layers);
  else snprintf(o2, sizeof o2, "model.recompute_num_layers=null");
  const char *ov[] = {o1, o2};
  printf("%s recompute=%s/%d\n", json, recompute[0] ? recompute : "none", rc_layers);
  int rc = mt_config_load_string(&cfg, json, "test", ov, 2, 1, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  mt_plan_memory pred;
  mt_plan_memory_compute(&cfg, 1, NULL, NULL, &pred);

  mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  assert_non_null(be);
  mt_gpt_config g = {0};
  g.model = cfg.model; /* the model section is the model's config */
  g.padded_vocab_size = mt_config_padded_vocab(&cfg);
  g.micro_batch_size = cfg.training.micro_batch_size;
  g.seed = 1;
  g.tp_size = 1;
  mt_gpt *m = mt_gpt_create(be, &g);
  mt_adamw opt;
  mt_adamw_init(&opt, be, mt_gpt_params(m), mt_gpt_param_buffer(m), mt_gpt_grad_buffer(m), 0.9f,
                0.95f, 1e-8f, 0.1f);
  int b = g.micro_batch_size, s = g.model.seq_length;
  int32_t *tok = malloc(sizeof(int32_t) * (size_t)b * (s + 1));
  int64_t ids[64];
  for (int i = 0; i < b * (s + 1); i++) tok[i] = (i * 7919) % (int)g.model.vocab_size;
  for (int i = 0; i < b; i++) ids[i] = i;
  for (int it = 0; it < steps; it++) {
    mt_gpt_zero_grad(m);
    mt_gpt_forward_backward(m, tok, ids, 1, 1.0f / (b * s));
    mt_adamw_step(&opt, 1e-3f, 1.0f);
  }
  const mt_mem_stats *ms = &be->mem;
  const int cats[] = {MT_MEM_PARAM, MT_MEM_GRAD, MT_MEM_OPTIM, MT_MEM_ACT};
  const int pcat[] = {MT_PM_PARAM, MT_PM_GRAD, MT_PM_OPTIM, MT_PM_ACT};
  const double tol[] = {0, 0, 0, 0}; /* byte for byte (issue 10 allowed 2 % / 5 %) */
  for (int i = 0; i < 4; i++) {
    double meas = (double)ms->peak[cats[i]], p = pred.bytes[pcat[i]];
    double rel = meas > 0 ? fabs(p - meas) / meas : fabs(p);
    printf("  %-12s measured %12.0f predicted %12.0f (%+.3f%%)\n", mt_plan_mem_name(pcat[i]),
           meas, p, 100 * (p - meas) / (meas > 0 ? meas : 1));
    assert_true(rel <= tol[i]);
  }
  /* workspace: the model's buffers are predicted; the backend adds its op
   * scratch (cpu_workspace: one buffer that only grows, the largest request
   * of any op — the fused attention backward's tiles here, 70-80 KiB with
   * one thread), read from the backend: the rest equals the prediction */
  double ws = (double)ms->peak[MT_MEM_WORKSPACE], pw = pred.bytes[MT_PM_WORKSPACE];
  double scratch = (double)ms->op_scratch;
  printf("  %-12s measured %12.0f predicted %12.0f + op scratch %.0f\n", "workspace", ws, pw,
         scratch);
  assert_true(ws - scratch == pw);
  free(tok);
  mt_adamw_free(&opt);
  mt_gpt_destroy(m);
  mt_backend_destroy(be);
  mt_config_free(&cfg);
}

static void test_memory_vs_allocator(void **state) {
  (void)state;
  const char *a = "{\"model\":{\"num_layers\":2,\"hidden_size\":64,\"num_attention_heads\":4,"
                  "\"seq_length\":32,\"vocab_size\":50257},"
                  "\"training\":{\"micro_batch_size\":2,\"train_iters\":1,\"lr\":1e-3},"
                  "\"data\":{\"data_path\":\"x\"}}";
  const char *b = "{\"model\":{\"num_layers\":4,\"hidden_size\":96,\"num_attention_heads\":6,"
                  "\"ffn_hidden_size\":200,\"seq_length\":48,\"max_position_embeddings\":64,"
                  "\"vocab_size\":1000,\"untie_embeddings_and_output_weights\":true},"
                  "\"training\":{\"micro_batch_size\":3,\"train_iters\":1,\"lr\":1e-3},"
                  "\"data\":{\"data_path\":\"x\"}}";
  check_memory(a, 2, "", 1);
  check_memory(b, 1, "", 1);
  check_memory(b, 1, "selective", 1);
  check_memory(b, 1, "full", 1);
  check_memory(b, 1, "full", 2);
  /* Llama-style block (RoPE, RMSNorm, SwiGLU, GQA 2 groups, no biases,
   * untied) and a qk_layernorm + LayerNorm variant with kv_channels 24 */
  const char *l = "{\"model\":{\"num_layers\":3,\"hidden_size\":64,\"num_attention_heads\":4,"
                  "\"ffn_hidden_size\":176,\"seq_length\":32,\"vocab_size\":1000,"
                  "\"position_embedding_type\":\"rope\",\"normalization\":\"RMSNorm\","
                  "\"swiglu\":true,\"group_query_attention\":true,\"num_query_groups\":2,"
                  "\"add_bias_linear\":false,\"untie_embeddings_and_output_weights\":true},"
                  "\"training\":{\"micro_batch_size\":2,\"train_iters\":1,\"lr\":1e-3},"
                  "\"data\":{\"data_path\":\"x\"}}";
  const char *q = "{\"model\":{\"num_layers\":3,\"hidden_size\":64,\"num_attention_heads\":4,"
                  "\"ffn_hidden_size\":176,\"seq_length\":32,\"vocab_size\":1000,"
                  "\"position_embedding_type\":\"rope\",\"qk_layernorm\":true,\"kv_channels\":24,"
                  "\"swiglu\":true,\"group_query_attention\":true,\"num_query_groups\":1},"
                  "\"training\":{\"micro_batch_size\":2,\"train_iters\":1,\"lr\":1e-3},"
                  "\"data\":{\"data_path\":\"x\"}}";
  check_memory(l, 1, "", 1);
  check_memory(l, 1, "selective", 1);
  check_memory(l, 1, "full", 2);
  check_memory(q, 1, "", 1);
  check_memory(q, 1, "full", 1);
}

/* ---- errors ---- */

static void test_bad_inputs(void **state) {
  (void)state;
  char err[2048];
  mt_hardware hw;
  assert_int_equal(mt_hardware_load(&hw, "configs/hardware/no-such-gpu.json", err, sizeof err), 2);
  assert_non_null(strstr(err, "no-such-gpu.json"));
  FILE *f = fopen("build/test_plan_bad_hw.json", "w");
  assert_non_null(f);
  fprintf(f, "{\"name\":\"x\",\"peak_tflops_bf16\":1}");
  fclose(f);
  assert_int_equal(mt_hardware_load(&hw, "build/test_plan_bad_hw.json", err, sizeof err), 2);
  assert_non_null(strstr(err, "peak_tflops_fp32"));
  remove("build/test_plan_bad_hw.json");
  /* an integer key beyond int (once an undefined cast, found by fuzzing) */
  assert_int_equal(mt_hardware_load(&hw, "tests/fuzz/regress/hw/gpus_per_node_1e300", err,
                                    sizeof err), 2);
  assert_non_null(strstr(err, "\"gpus_per_node\" must be an integer"));
  /* a layout that cannot divide the world: the config loader names it */
  mt_config cfg;
  int rc = mt_config_load(&cfg, "configs/papers/korthikanti22-175b.json", NULL, 0, 60, err,
                          sizeof err);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(err, "world size 60"));
  /* the shipped GPU hardware files load; the FP8 peak (dense) where the GPU has one */
  const char *files[] = {HW_A100, "configs/hardware/h100-sxm.json", "configs/hardware/h200-sxm.json",
                         "configs/hardware/h800-sxm.json", "configs/hardware/b200.json"};
  const double fp8[] = {0, 1979, 1979, 1979, 4500};
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(mt_hardware_load(&hw, files[i], err, sizeof err), 0, "%s: %s", files[i], err);
    EXPECT_EQ(hw.peak_tflops_fp8 == fp8[i], 1, "%s: peak_tflops_fp8 %g", files[i], hw.peak_tflops_fp8);
  }
}

/* ---- sanity: monotonic behaviour the sweep relies on ---- */

static void test_model_directions(void **state) {
  (void)state;
  char err[2048];
  mt_hardware hw;
  assert_int_equal(mt_hardware_load(&hw, HW_A100, err, sizeof err), 0);
  const char *path = "configs/papers/korthikanti22-175b.json";
  const char *none[] = {"model.recompute_granularity=\"\""};
  const char *base[] = {"model.recompute_granularity=\"\"", "parallel.sequence_parallel=false"};
  const char *full[] = {"model.recompute_granularity=\"full\"", "parallel.sequence_parallel=false"};
  const char *z1[] = {"parallel.zero_stage=1"};
  mt_config c0, cn, cf;
  mt_plan p0, pn, pf;
  mt_plan_options o = {0};
  assert_int_equal(mt_config_load(&c0, path, NULL, 0, 64, err, sizeof err), 0);
  assert_int_equal(mt_config_load(&cn, path, none, 1, 64, err, sizeof err), 0);
  assert_int_equal(mt_config_load(&cf, path, full, 2, 64, err, sizeof err), 0);
  mt_plan_compute(&c0, 64, &hw, &o, &p0, err, sizeof err);
  mt_plan_compute(&cn, 64, &hw, &o, &pn, err, sizeof err);
  mt_plan_compute(&cf, 64, &hw, &o, &pf, err, sizeof err);
  /* no recompute: more activation memory, less time; full: the opposite */
  assert_true(pn.mem.bytes[MT_PM_ACT] > p0.mem.bytes[MT_PM_ACT]);
  assert_true(pf.mem.bytes[MT_PM_ACT] < p0.mem.bytes[MT_PM_ACT]);
  assert_true(pn.time.t_iter < p0.time.t_iter && p0.time.t_iter < pf.time.t_iter);
  /* 2205.05198 Fig. 1: the TP-only baseline (no SP, no recompute) does not fit */
  mt_config cb;
  mt_plan pb;
  assert_int_equal(mt_config_load(&cb, path, base, 2, 64, err, sizeof err), 0);
  mt_plan_compute(&cb, 64, &hw, &o, &pb, err, sizeof err);
  assert_false(pb.mem.fits);
  assert_true(p0.mem.fits);
  mt_config_free(&cb);
  /* Table 5's full-recompute (no SP) time 18.13 s within 10% (not fitted) */
  assert_true(fabs(pf.time.t_iter - 18.13) / 18.13 < 0.10);
  mt_config_free(&c0);
  mt_config_free(&cn);
  mt_config_free(&cf);
  /* ZeRO-1 over dp = 8 shrinks optimizer state 8x */
  mt_config a, z;
  mt_plan pa, pz;
  assert_int_equal(mt_config_load(&a, "configs/papers/narayanan21-1.7b.json", NULL, 0, 32, err, sizeof err), 0);
  assert_int_equal(mt_config_load(&z, "configs/papers/narayanan21-1.7b.json", z1, 1, 32, err, sizeof err), 0);
  mt_plan_compute(&a, 32, &hw, &o, &pa, err, sizeof err);
  mt_plan_compute(&z, 32, &hw, &o, &pz, err, sizeof err);
  assert_true(fabs(pa.mem.bytes[MT_PM_OPTIM] / pz.mem.bytes[MT_PM_OPTIM] - 32) < 0.01);
  mt_config_free(&a);
  mt_config_free(&z);
}

/* ---- MoE (issue 16): placement of the EP group, ETP/EDP, shared experts,
 * padding (docs/moe.md "Memory and communication formulas") ---- */

static void moe_plan(const char *const *set, int n_set, int world, const mt_hardware *hw,
                     mt_plan *p) {
  static const char *json =
      "{\"device\":\"cpu\",\"model\":{\"num_layers\":8,\"hidden_size\":2048,"
      "\"num_attention_heads\":16,\"ffn_hidden_size\":8192,\"seq_length\":2048,"
      "\"vocab_size\":32000,\"swiglu\":true,\"normalization\":\"RMSNorm\","
      "\"position_embedding_type\":\"rope\",\"add_bias_linear\":false,"
      "\"num_experts\":16,\"moe_router_topk\":2,\"moe_ffn_hidden_size\":1024},"
      "\"parallel\":{\"expert_tensor_parallel_size\":1},"
      "\"training\":{\"micro_batch_size\":1,\"global_batch_size\":256,\"precision\":\"bf16\","
      "\"train_iters\":10,\"lr\":1e-4},\"data\":{\"data_path\":[\"x\"]}}";
  char err[2048];
  mt_config c;
  int rc = mt_config_load_string(&c, json, "moe", set, n_set, world, err, sizeof err);
  EXPECT_EQ(rc, 0, "%s", err);
  mt_plan_options o = {0};
  rc = mt_plan_compute(&c, world, hw, &o, p, err, sizeof err);
  EXPECT_EQ(rc, 0, "%s", err);
  mt_config_free(&c);
}

static void test_moe_plan(void **state) {
  (void)state;
  char err[2048];
  mt_hardware hw;
  assert_int_equal(mt_hardware_load(&hw, HW_A100, err, sizeof err), 0); /* 8 GPUs per node */
  const double h = 2048, s = 2048, k = 2, E = 16, es = 2;
  mt_plan p8, p16, pe, psh, ppad;
  const char *ep8[] = {"parallel.expert_model_parallel_size=8"};
  const char *ep16[] = {"parallel.expert_model_parallel_size=16"};
  moe_plan(ep8, 1, 64, &hw, &p8);
  moe_plan(ep16, 1, 64, &hw, &p16);
  /* the same rows per rank; 8 EP ranks fill a node, 16 cross the network */
  assert_true(p8.moe.a2a_bytes == 4 * s * k * h * es + 8 * E);
  assert_true(p16.moe.a2a_bytes == p8.moe.a2a_bytes);
  assert_int_equal(p8.moe.ep_per_node, 8);
  assert_int_equal(p16.moe.ep_per_node, 8);
  assert_true(p16.moe.a2a_s > 2 * p8.moe.a2a_s);
  assert_int_equal(p8.moe.edp, 8);
  assert_int_equal(p16.moe.edp, 4);
  const char *etp[] = {"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true",
                       "parallel.expert_model_parallel_size=8",
                       "parallel.expert_tensor_parallel_size=2"};
  moe_plan(etp, 4, 64, &hw, &pe);
  /* ETP: EP stride 2 -> 4 EP ranks per node; SP halves each rank's rows */
  assert_int_equal(pe.moe.ep_per_node, 4);
  assert_true(pe.moe.a2a_bytes == 4 * s / 2 * k * h * es + 8 * E);
  assert_true(pe.moe.etp_bytes == 4 * 0.5 * 2 * (s / 2 * k) * h * es + 8 * E);
  assert_true(pe.moe.etp_intra && pe.moe.etp_s > 0);
  assert_int_equal(pe.moe.edp, 4);
  /* shared expert: + L (g S h + h S) parameters, and its TP traffic */
  const char *sh[] = {"parallel.tensor_model_parallel_size=2", "parallel.sequence_parallel=true",
                      "parallel.expert_model_parallel_size=8",
                      "parallel.expert_tensor_parallel_size=2",
                      "model.moe_shared_expert_intermediate_size=2048"};
  moe_plan(sh, 5, 64, &hw, &psh);
  assert_true(psh.mem.params_total - pe.mem.params_total == (int64_t)(8 * (2 * 2048 + 2048) * h));
  assert_true(psh.moe.shared_tp_bytes == 5 * 0.5 * s * h * es);
  assert_true(psh.time.t_iter > pe.time.t_iter);
  /* padding to capacity: every rank sends E C rows, C = ceil(s k / E cf) */
  const char *pad[] = {"parallel.expert_model_parallel_size=8",
                       "model.moe_expert_capacity_factor=1.5",
                       "model.moe_pad_expert_input_to_capacity=true"};
  moe_plan(pad, 3, 64, &hw, &ppad);
  const double C = ceil(s * k / E * 1.5);
  assert_true(ppad.moe.a2a_bytes == 4 * E * C * h * es);
  /* the dispatcher's buffers: E C rows instead of n_loc k sent and, dropless,
   * r = ceil(1.25 n_loc k) received under the default routing assumption
   * (3 + 3 of them), the experts' d_f [r, 2F], d_a [r, F] */
  const double smax = s * k, rmax = ceil(MT_PLAN_MOE_LOAD_FACTOR * s * k), F = 1024;
  const double dws = (3 * (smax - E * C) + 3 * (rmax - E * C)) * h * es + (rmax - E * C) * 3 * F * es;
  assert_true(p8.mem.bytes[MT_PM_WORKSPACE] - ppad.mem.bytes[MT_PM_WORKSPACE] == dws);
  assert_true(p8.mem.moe_recv_rows == rmax && p8.mem.moe_expert_rows == rmax);
  assert_true(p8.mem.moe_load_factor == MT_PLAN_MOE_LOAD_FACTOR);
  /* the worst case (every token of the 8 EP ranks routed to one): ep n_loc k
   * rows, more memory; padding fixes the rows (worst = planned) */
  assert_true(p8.mem.moe_worst_rows == 8 * s * k && p8.mem.total_worst > p8.mem.total);
  assert_true(ppad.mem.moe_recv_rows == E * C && ppad.mem.total_worst == ppad.mem.total);
  assert_true(ppad.mem.moe_load_factor == 0);
}

/* Multi-latent attention's parameters (Megatron-core's MLASelfAttention,
 * no biases on its projections, latent RMSNorms with qk_layernorm), hand
 * counted: h 64, 8 heads, q_lora 12, kv_lora 16, qk_head_dim 8,
 * qk_pos_emb_head_dim 4, v_head_dim 8; whole model, and one rank of tp 2
 * where the down projections and latent norms are replicated and the up
 * projections and linear_proj split by heads. */
static void test_mla_params(void **state) {
  (void)state;
  const char *base =
      "{\"model\":{\"num_layers\":2,\"hidden_size\":64,\"num_attention_heads\":8,"
      "\"ffn_hidden_size\":160,\"seq_length\":32,\"vocab_size\":1000,"
      "\"position_embedding_type\":\"rope\",\"normalization\":\"RMSNorm\","
      "\"add_bias_linear\":false,\"multi_latent_attention\":true,\"q_lora_rank\":12,"
      "\"kv_lora_rank\":16,\"qk_head_dim\":8,\"qk_pos_emb_head_dim\":4,\"v_head_dim\":8,"
      "\"qk_layernorm\":true},"
      "\"parallel\":{\"tensor_model_parallel_size\":2,\"sequence_parallel\":true},"
      "\"training\":{\"micro_batch_size\":2,\"global_batch_size\":2,\"train_iters\":1,"
      "\"lr\":1e-3},\"data\":{\"data_path\":\"x\"}}";
  const int64_t L = 2, h = 64, f = 160, n = 8, qr = 12, kr = 16, hq = 8 + 4, dv = 8, Vp = 1024;
  char err[2048];
  mt_config c;
  int rc = mt_config_load_string(&c, base, "t", NULL, 0, 2, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  /* per layer: 2 norms, q_down, q_layernorm, q_up, kv_down, kv_layernorm, kv_up, proj, MLP */
  const int64_t rep = qr * h + qr + (kr + 4) * h + kr + 2 * h;
  const int64_t split = n * hq * qr + n * (8 + dv) * kr + h * n * dv + 2 * h * f;
  EXPECT_EQ(mt_plan_num_parameters(&c, 1), L * (rep + split) + Vp * h + h, "%s", "total");
  mt_plan_memory mem;
  mt_plan_memory_compute(&c, 2, NULL, NULL, &mem);
  EXPECT_EQ(mem.params_per_rank, L * (rep + split / 2) + Vp * h / 2 + h, "%s", "tp rank");
  mt_config_free(&c);
  /* without q compression: one linear_q_proj [n hq, h], split by heads */
  const char *set[] = {"model.q_lora_rank=null"};
  rc = mt_config_load_string(&c, base, "t", set, 1, 2, err, sizeof err);
  assert_int_equal(rc, 0);
  const int64_t rep2 = (kr + 4) * h + kr + 2 * h;
  const int64_t split2 = n * hq * h + n * (8 + dv) * kr + h * n * dv + 2 * h * f;
  EXPECT_EQ(mt_plan_num_parameters(&c, 1), L * (rep2 + split2) + Vp * h + h, "%s", "no q_lora");
  mt_plan_memory_compute(&c, 2, NULL, NULL, &mem);
  EXPECT_EQ(mem.params_per_rank, L * (rep2 + split2 / 2) + Vp * h / 2 + h, "%s", "no q_lora rank");
  mt_config_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_moe_plan),
      cmocka_unit_test(test_mfu_formula),       cmocka_unit_test(test_param_counts),
      cmocka_unit_test(test_paper_reproduction), cmocka_unit_test(test_memory_vs_allocator),
      cmocka_unit_test(test_bad_inputs),        cmocka_unit_test(test_model_directions),
      cmocka_unit_test(test_llama_models),      cmocka_unit_test(test_option_terms),
      cmocka_unit_test(test_mla_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
