/* tests/unit/tools/test_hf_map.c — tools/hf_map.h: the row regrouping of
 * linear_qkv into HF's q/k/v (Llama, GQA) and c_attn (GPT-2, transposed)
 * on known values, SwiGLU halves, import inverting export for every tensor
 * of both namings, and the refusals naming the config key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/support/probes.h"
#include "config/config.h"
#include "tools/hf_map.h"

static mt_hf_model llama(void) {
  mt_hf_model m = {.family = MT_HF_LLAMA, .L = 1, .h = 3, .nh = 4, .ng = 2, .hn = 2,
                   .ffn = 5, .V = 7, .max_pos = 4, .bias = 1, .untie = 1};
  return m;
}

static const mt_hf_entry *find(const mt_hf_entry *e, int n, const char *hf) {
  for (int i = 0; i < n; i++)
    if (!strcmp(e[i].hf, hf)) return &e[i];
  fail_msg("no entry %s", hf);
  return NULL;
}

/* megatrain linear_qkv rows per group g (np/ng = 2 query heads, hn = 2):
 * [q(2g) q(2g+1) k(g) v(g)] x 2 rows; element (r, c) = 100 r + c */
static void test_llama_qkv(void **state) {
  (void)state;
  mt_hf_model m = llama();
  mt_hf_entry *e;
  int n = mt_hf_entries(&m, &e);
  const int64_t R = (m.nh + 2 * m.ng) * m.hn, C = m.h;
  float *mt = malloc((size_t)(R * C) * sizeof(float)), hf[64];
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < C; c++) mt[r * C + c] = (float)(100 * r + c);
  /* q head n: group n / 2, slot n % 2 -> megatrain rows 8 (n/2) + 2 (n%2) + d */
  const mt_hf_entry *q = find(e, n, "model.layers.0.self_attn.q_proj.weight");
  assert_int_equal(q->hf_rows, 8);
  mt_hf_export(&m, q, mt, hf);
  for (int head = 0; head < 4; head++)
    for (int d = 0; d < 2; d++)
      assert_true(hf[(head * 2 + d) * C] == 100.0f * (8 * (head / 2) + 2 * (head % 2) + d));
  const mt_hf_entry *k = find(e, n, "model.layers.0.self_attn.k_proj.weight");
  mt_hf_export(&m, k, mt, hf);
  for (int g = 0; g < 2; g++)
    for (int d = 0; d < 2; d++) assert_true(hf[(g * 2 + d) * C] == 100.0f * (8 * g + 4 + d));
  const mt_hf_entry *v = find(e, n, "model.layers.0.self_attn.v_proj.bias");
  assert_int_equal(v->ndim, 1);
  float bias[16];
  for (int i = 0; i < 16; i++) bias[i] = (float)i;
  mt_hf_export(&m, v, bias, hf);
  for (int g = 0; g < 2; g++)
    for (int d = 0; d < 2; d++) assert_true(hf[g * 2 + d] == (float)(8 * g + 6 + d));
  /* SwiGLU: gate = rows [0, ffn), up = rows [ffn, 2 ffn) */
  const mt_hf_entry *up = find(e, n, "model.layers.0.mlp.up_proj.weight");
  float fc1[30];
  for (int i = 0; i < 30; i++) fc1[i] = (float)i;
  mt_hf_export(&m, up, fc1, hf);
  assert_true(hf[0] == 15.0f && up->hf_rows == 5 && up->hf_cols == 3);
  free(mt);
  free(e);
}

/* GPT-2: c_attn [h, 3h] = transposed [all q | all k | all v] */
static void test_gpt2_c_attn(void **state) {
  (void)state;
  mt_hf_model m = {.family = MT_HF_GPT2, .L = 1, .h = 4, .nh = 2, .ng = 2, .hn = 2,
                   .ffn = 8, .V = 5, .max_pos = 3, .bias = 1};
  mt_hf_entry *e;
  int n = mt_hf_entries(&m, &e);
  const mt_hf_entry *ca = find(e, n, "transformer.h.0.attn.c_attn.weight");
  assert_int_equal(ca->hf_rows, 4);
  assert_int_equal(ca->hf_cols, 12);
  float mt[48], hf[48];
  for (int r = 0; r < 12; r++)
    for (int c = 0; c < 4; c++) mt[r * 4 + c] = (float)(100 * r + c);
  mt_hf_export(&m, ca, mt, hf);
  /* HF column j: q head j/2 (j < 4), k head (j-4)/2, v head (j-8)/2; megatrain
   * group g rows [6g, 6g+2) q, [6g+2, 6g+4) k, [6g+4, 6g+6) v */
  const int want_row[12] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11};
  for (int j = 0; j < 12; j++)
    for (int c = 0; c < 4; c++) assert_true(hf[c * 12 + j] == (float)(100 * want_row[j] + c));
  assert_null(strstr(e[n - 1].hf, "lm_head")); /* tied: no lm_head */
  free(e);
}

/* import(export(x)) == x for every tensor of both namings */
static void test_inverse(void **state) {
  (void)state;
  mt_hf_model ms[2] = {llama(), {.family = MT_HF_GPT2, .L = 2, .h = 4, .nh = 2, .ng = 2, .hn = 2,
                                 .ffn = 8, .V = 5, .max_pos = 3, .bias = 1, .untie = 1}};
  for (int k = 0; k < 2; k++) {
    mt_hf_entry *e;
    int n = mt_hf_entries(&ms[k], &e);
    for (int i = 0; i < n; i++) {
      size_t sz = (size_t)(e[i].mt_rows * e[i].mt_cols);
      float *a = malloc(sz * sizeof(float)), *b = calloc(sz, sizeof(float));
      float *h = malloc((size_t)(e[i].hf_rows * e[i].hf_cols) * sizeof(float));
      for (size_t j = 0; j < sz; j++) a[j] = (float)j + 0.5f;
      /* all the entries of the same megatrain tensor together fill it */
      int first = i;
      while (first > 0 && !strcmp(e[first - 1].mt, e[i].mt)) first--;
      int last = i;
      while (last + 1 < n && !strcmp(e[last + 1].mt, e[i].mt)) last++;
      for (int j = first; j <= last; j++) {
        float *hj = malloc((size_t)(e[j].hf_rows * e[j].hf_cols) * sizeof(float));
        mt_hf_export(&ms[k], &e[j], a, hj);
        mt_hf_import(&ms[k], &e[j], hj, b);
        free(hj);
      }
      if (memcmp(a, b, sz * sizeof(float))) fail_msg("%s / %s not inverted", e[i].hf, e[i].mt);
      free(a);
      free(b);
      free(h);
      i = last;
    }
    free(e);
  }
}

static void test_refusals(void **state) {
  (void)state;
  mt_config cfg;
  mt_config_defaults(&cfg);
  cfg.model.num_layers = 2;
  cfg.model.hidden_size = 64;
  cfg.model.num_attention_heads = 4;
  cfg.model.num_query_groups = 4;
  cfg.model.kv_channels = 16;
  cfg.model.ffn_hidden_size = 256;
  cfg.model.vocab_size = 100;
  cfg.model.add_bias_linear = 1;
  mt_hf_model m;
  char err[512];
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_GPT2);
  cfg.model.num_experts = 4;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.num_experts"));
  cfg.model.num_experts = 0;
  snprintf(cfg.model.position_embedding_type, sizeof cfg.model.position_embedding_type, "rope");
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.normalization"));
  snprintf(cfg.model.normalization, sizeof cfg.model.normalization, "RMSNorm");
  cfg.model.swiglu = 1;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_LLAMA);
  cfg.model.qk_layernorm = 1;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.add_bias_linear"));
  cfg.model.add_bias_linear = 0;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_QWEN3);
  cfg.model.rotary_percent = 0.5f;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.rotary_percent"));
}

/* experts: Qwen3-MoE with qk_layernorm, Mixtral without; what neither
 * expresses is refused naming the key; config.json round-trips through the
 * check, and a layer pattern or gate normalisation that differs is refused */
static void test_moe(void **state) {
  (void)state;
  mt_config cfg;
  mt_config_defaults(&cfg);
  mt_model_config *c = &cfg.model;
  c->num_layers = 4;
  c->hidden_size = 64;
  c->num_attention_heads = 4;
  c->num_query_groups = 2;
  c->kv_channels = 16;
  c->ffn_hidden_size = 96;
  c->vocab_size = 100;
  c->add_bias_linear = 0;
  c->swiglu = 1;
  c->qk_layernorm = 1;
  snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "rope");
  snprintf(c->normalization, sizeof c->normalization, "RMSNorm");
  c->num_experts = 4;
  c->moe_router_topk = 2;
  c->moe_ffn_hidden_size = 32;
  c->moe_layer_pattern_len = 4;
  const uint8_t pat[4] = {0, 1, 1, 1};
  memcpy(c->moe_layer_pattern, pat, 4);
  mt_hf_model m;
  char err[512];
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_QWEN3_MOE);
  assert_int_equal(m.norm_topk, 1);
  mt_hf_entry *e;
  int n = mt_hf_entries(&m, &e);
  int experts = 0, dense_mlp = 0;
  for (int i = 0; i < n; i++) {
    experts += strstr(e[i].hf, ".mlp.experts.") != NULL;
    dense_mlp += strstr(e[i].hf, ".mlp.gate_proj.") != NULL;
  }
  assert_int_equal(experts, 3 * 4 * 3); /* 3 MoE layers x 4 experts x gate, up, down */
  assert_int_equal(dense_mlp, 1);
  free(e);
  char *js = mt_hf_config_json(&m, "float32");
  assert_int_equal(mt_hf_config_check(&m, js, "c.json", err, sizeof err), 0);
  const char *ol = strstr(js, "\"mlp_only_layers\"");
  assert_non_null(ol);
  assert_non_null(strstr(ol, "[0]"));
  mt_hf_model m2 = m;
  m2.moe[0] = 1; /* every layer MoE: layer 0 differs */
  assert_int_equal(mt_hf_config_check(&m2, js, "c.json", err, sizeof err), -1);
  assert_non_null(strstr(err, "make layer 0 dense"));
  m2 = m;
  m2.norm_topk = 0;
  assert_int_equal(mt_hf_config_check(&m2, js, "c.json", err, sizeof err), -1);
  assert_non_null(strstr(err, "norm_topk_prob"));
  free(js);
  /* sigmoid routing: DeepSeek-V3 naming (no q/k norm, the expert bias) */
  snprintf(c->moe_router_score_function, sizeof c->moe_router_score_function, "sigmoid");
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.qk_layernorm"));
  c->qk_layernorm = 0;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_router_enable_expert_bias"));
  c->moe_router_enable_expert_bias = 1;
  c->moe_shared_expert_intermediate_size = 48;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_shared_expert_intermediate_size"));
  c->moe_shared_expert_intermediate_size = 64;
  c->moe_router_num_groups = 2;
  c->moe_router_group_topk = 2; /* 2 / 2 = 1 expert per group score: HF sums two */
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "moe_router_group_topk"));
  c->moe_router_group_topk = 1;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_DEEPSEEK_V3);
  assert_int_equal(m.first_dense, 1);
  assert_int_equal(m.moe_freq, 1);
  n = mt_hf_entries(&m, &e);
  int bias = 0, shared = 0;
  for (int i = 0; i < n; i++) {
    bias += strstr(e[i].hf, ".mlp.gate.e_score_correction_bias") != NULL;
    shared += strstr(e[i].hf, ".mlp.shared_experts.") != NULL;
  }
  assert_int_equal(bias, 3);
  assert_int_equal(shared, 3 * 3);
  free(e);
  js = mt_hf_config_json(&m, "float32");
  assert_int_equal(mt_hf_config_check(&m, js, "c.json", err, sizeof err), 0);
  free(js);
  c->moe_layer_pattern[2] = 0; /* dense, MoE, dense, MoE: first 1, but no moe_layer_freq */
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_layer_freq"));
  c->moe_layer_pattern[2] = 1;
  c->moe_router_enable_expert_bias = 0;
  c->moe_router_num_groups = c->moe_router_group_topk = 0;
  c->moe_shared_expert_intermediate_size = 0;
  c->qk_layernorm = 1;
  snprintf(c->moe_router_score_function, sizeof c->moe_router_score_function, "softmax");
  c->moe_expert_capacity_factor = 1.0f;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_expert_capacity_factor"));
  c->moe_expert_capacity_factor = 0;
  c->qk_layernorm = 0; /* Mixtral: experts in every layer */
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_layer_freq makes layer 0 dense"));
  c->moe_layer_pattern[0] = 1;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_MIXTRAL);
  js = mt_hf_config_json(&m, "float32");
  assert_non_null(strstr(js, "\"num_local_experts\""));
  assert_int_equal(mt_hf_config_check(&m, js, "c.json", err, sizeof err), 0);
  free(js);
  c->moe_router_pre_softmax = 1;
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.moe_router_pre_softmax"));
}

/* DeepSeek-V3 with MLA (q compression), YaRN and one MTP depth: the MLA
 * tensors map whole with their shapes, the MTP layer is DeepSeek's layer
 * num_hidden_layers with copies of the embedding and lm_head, config.json
 * round-trips through the check, and YaRN whose factor is not
 * max_position_embeddings / original is refused. */
static void test_deepseek_mla(void **state) {
  (void)state;
  mt_config cfg;
  mt_config_defaults(&cfg);
  mt_model_config *c = &cfg.model;
  c->num_layers = 2;
  c->hidden_size = 64;
  c->num_attention_heads = 4;
  c->ffn_hidden_size = 96;
  c->vocab_size = 100;
  c->max_position_embeddings = 64;
  c->add_bias_linear = 0;
  c->swiglu = 1;
  c->qk_layernorm = 1;
  c->untie_embeddings_and_output_weights = 1;
  snprintf(c->position_embedding_type, sizeof c->position_embedding_type, "rope");
  snprintf(c->normalization, sizeof c->normalization, "RMSNorm");
  c->multi_latent_attention = 1;
  c->q_lora_rank = 32;
  c->kv_lora_rank = 16;
  c->qk_head_dim = 16;
  c->qk_pos_emb_head_dim = 8;
  c->v_head_dim = 12;
  snprintf(c->rope_type, sizeof c->rope_type, "yarn");
  c->rotary_scaling_factor = 4;
  c->original_max_position_embeddings = 16;
  c->mscale = 1;
  c->mscale_all_dim = 1;
  c->num_experts = 4;
  c->moe_router_topk = 2;
  c->moe_ffn_hidden_size = 32;
  snprintf(c->moe_router_score_function, sizeof c->moe_router_score_function, "sigmoid");
  c->moe_router_enable_expert_bias = 1;
  c->moe_layer_pattern_len = 2;
  const uint8_t pat[2] = {0, 1};
  memcpy(c->moe_layer_pattern, pat, 2);
  c->mtp_num_layers = 1;
  mt_hf_model m;
  char err[512];
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), 0);
  assert_int_equal(m.family, MT_HF_DEEPSEEK_V3);
  mt_hf_entry *e;
  int n = mt_hf_entries(&m, &e), seen = 0, copies = 0;
  for (int i = 0; i < n; i++) {
    copies += e[i].copy;
    if (!strcmp(e[i].hf, "model.layers.1.self_attn.q_b_proj.weight")) {
      assert_string_equal(e[i].mt, "decoder.layers.1.self_attention.linear_q_up_proj.weight");
      assert_int_equal(e[i].hf_rows, 4 * 24);
      assert_int_equal(e[i].hf_cols, 32);
      seen++;
    }
    if (!strcmp(e[i].hf, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight")) {
      assert_int_equal(e[i].hf_rows, 16 + 8);
      seen++;
    }
    if (!strcmp(e[i].hf, "model.layers.2.self_attn.kv_b_proj.weight")) {
      assert_string_equal(e[i].mt,
                          "mtp.layers.0.mtp_model_layer.self_attention.linear_kv_up_proj.weight");
      assert_int_equal(e[i].hf_rows, 4 * (16 + 12));
      seen++;
    }
    if (!strcmp(e[i].hf, "model.layers.2.mlp.gate.e_score_correction_bias")) seen++;
    if (!strcmp(e[i].hf, "model.layers.2.shared_head.head.weight")) {
      assert_string_equal(e[i].mt, "output_layer.weight");
      assert_int_equal(e[i].copy, 1);
      seen++;
    }
  }
  assert_int_equal(seen, 5);
  assert_int_equal(copies, 2);
  free(e);
  char *js = mt_hf_config_json(&m, "float32");
  assert_int_equal(mt_hf_config_check(&m, js, "c.json", err, sizeof err), 0);
  assert_non_null(strstr(js, "\"rope_interleave\":\ttrue"));
  mt_hf_model m2 = m;
  m2.kr = 8;
  assert_int_equal(mt_hf_config_check(&m2, js, "c.json", err, sizeof err), -1);
  assert_non_null(strstr(err, "\"kv_lora_rank\" is 16 but the config gives 8"));
  assert_int_equal(m.rope_halves, 0);
  /* rope_interleave false: HF rope channel r (rotate_half pairs r, r + 4) is
   * megatrain's 2r (r < 4) or 2(r - 4) + 1 (pairs 2i, 2i + 1), in each q head
   * (rows 16 + r of 24) and in k_pe (rows 16 + r of kv_a_proj_with_mqa) */
  char *f = strstr(js, "\"rope_interleave\":\ttrue"), js2[4096];
  assert_true(strlen(js) + 8 < sizeof js2);
  assert_non_null(f);
  const int at = (int)(f - js) + (int)strlen("\"rope_interleave\":\t");
  snprintf(js2, sizeof js2, "%.*s0%s", at, js, js + at + 4); /* not a boolean */
  assert_int_equal(mt_hf_config_check(&m, js2, "c.json", err, sizeof err), -1);
  assert_non_null(strstr(err, "\"rope_interleave\" is not a boolean"));
  snprintf(js2, sizeof js2, "%.*sfalse%s", at, js, js + at + 4);
  assert_int_equal(mt_hf_config_check(&m, js2, "c.json", err, sizeof err), 0);
  assert_int_equal(m.rope_halves, 1);
  free(js);
  n = mt_hf_entries(&m, &e);
  float mt[96], hf[96];
  for (int i = 0; i < 96; i++) mt[i] = (float)i; /* row numbers (one column of q_b_proj) */
  seen = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(e[i].hf, "model.layers.0.self_attn.q_b_proj.weight")) {
      mt_hf_entry one = e[i];
      one.mt_cols = one.hf_cols = 1;
      mt_hf_export(&m, &one, mt, hf);
      const float want[24] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                              16, 18, 20, 22, 17, 19, 21, 23};
      for (int r = 0; r < 24; r++) assert_float_equal(hf[24 + r], 24 + want[r], 0);
      float back[96] = {0};
      mt_hf_import(&m, &one, hf, back);
      assert_memory_equal(back, mt, sizeof mt);
      seen++;
    }
    if (!strcmp(e[i].hf, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight")) {
      mt_hf_entry one = e[i];
      one.mt_cols = one.hf_cols = 1;
      mt_hf_export(&m, &one, mt, hf);
      assert_float_equal(hf[15], 15, 0);
      assert_float_equal(hf[16 + 3], 16 + 6, 0);
      assert_float_equal(hf[16 + 4], 16 + 1, 0);
      assert_float_equal(hf[16 + 7], 16 + 7, 0);
      seen++;
    }
  }
  assert_int_equal(seen, 2);
  free(e);
  c->max_position_embeddings = 128; /* HF's factor would be 8 */
  assert_int_equal(mt_hf_model_of(&cfg, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "model.rotary_scaling_factor is 4"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_qkv),
      cmocka_unit_test(test_gpt2_c_attn),
      cmocka_unit_test(test_inverse),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_moe),
      cmocka_unit_test(test_deepseek_mla),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
