/* tests/unit/config/test_config_model.c — config/ keys of the model options: the
 * Llama-style block (defaults, derivations, epsilon alias, canonical round
 * trip), context parallelism, RoPE's rotated channels, and the MoE keys of
 * issue 16 (moe_layer_freq as an integer or a list, nullable keys written as
 * null in the canonical JSON and loaded back, explicit 0 range-checked). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "core/util.h"
#include "tests/unit/config_fixtures.h"


static void test_context_parallel(void **state) {
  (void)state;
  const char *ov[] = {"parallel.context_parallel_size=2", "parallel.tensor_model_parallel_size=2",
                      "parallel.sequence_parallel=true"};
  mt_config cfg;
  char err[1024] = "";
  int rc = mt_config_load_string(&cfg, MINIMAL, SRC, ov, 3, 8, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.parallel.context_parallel_size, 2);
  assert_string_equal(cfg.parallel.cp_comm_type, "p2p");
  assert_int_equal(mt_config_data_parallel_size(&cfg, 8), 2);
  assert_int_equal(cfg.training.global_batch_size, 2 * 2); /* mbs 2 x dp 2 */
  assert_non_null(strstr(cfg.json, "\"cp_comm_type\":\"p2p\""));
  mt_config_free(&cfg);
  const char *ov2[] = {"parallel.context_parallel_size=3", "parallel.tensor_model_parallel_size=2",
                       "parallel.sequence_parallel=true", "model.seq_length=24"};
  rc = mt_config_load_string(&cfg, MINIMAL, SRC, ov2, 4, 6, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  mt_config_free(&cfg);
}

static void test_llama_keys(void **state) {
  (void)state;
  mt_config cfg;
  char err[1024] = "";
  /* defaults: the GPT-2 block, every head its own K/V group */
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, NULL, 0, 1, err, sizeof err), 0);
  assert_string_equal(cfg.model.position_embedding_type, "learned_absolute");
  assert_string_equal(cfg.model.normalization, "LayerNorm");
  assert_int_equal(cfg.model.num_query_groups, 4);
  assert_int_equal(cfg.model.kv_channels, 16);
  assert_int_equal(cfg.model.add_bias_linear, 1);
  assert_int_equal(cfg.model.swiglu, 0);
  assert_int_equal(cfg.model.qk_layernorm, 0);
  assert_true(cfg.model.norm_epsilon == 1e-5f && cfg.model.layernorm_epsilon == 1e-5f);
  assert_true(cfg.model.rotary_base == 10000.0f && cfg.model.rotary_percent == 1.0f);
  mt_config_free(&cfg);

  /* a Llama-style block on tp = 2 */
  const char *ll[] = {"model.position_embedding_type=rope", "model.normalization=RMSNorm",
                      "model.swiglu=true", "model.group_query_attention=true",
                      "model.num_query_groups=2", "model.add_bias_linear=false",
                      "model.qk_layernorm=true", "model.norm_epsilon=1e-6",
                      "model.rotary_percent=0.5", "model.rotary_base=500000",
                      "parallel.tensor_model_parallel_size=2"};
  int rc = mt_config_load_string(&cfg, MINIMAL, SRC, ll, (int)(sizeof ll / sizeof ll[0]), 2, err,
                                 sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.model.num_query_groups, 2);
  assert_int_equal(cfg.model.ffn_hidden_size, 128); /* int(4 * 64 * 2/3 / 64) * 64 */
  assert_int_equal(cfg.model.moe_ffn_hidden_size, 128);
  assert_true(cfg.model.norm_epsilon == 1e-6f && cfg.model.layernorm_epsilon == 1e-6f);
  assert_true(cfg.model.rotary_base == 500000.0f);
  mt_config again;
  rc = mt_config_load_string(&again, cfg.json, "checkpoint", NULL, 0, 2, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(again.json, cfg.json);
  mt_config_free(&again);
  mt_config_free(&cfg);

  /* swiglu derivation at Llama's widths; MQA by default with GQA */
  const char *w[] = {"model.swiglu=true", "model.hidden_size=768", "model.num_attention_heads=12",
                     "model.group_query_attention=true"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, w, 4, 1, err, sizeof err), 0);
  assert_int_equal(cfg.model.ffn_hidden_size, 2048);
  assert_int_equal(cfg.model.num_query_groups, 1);
  assert_int_equal(cfg.model.kv_channels, 64);
  mt_config_free(&cfg);
  const char *w2[] = {"model.swiglu=true", "model.hidden_size=4096", "model.num_attention_heads=32"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, w2, 3, 1, err, sizeof err), 0);
  assert_int_equal(cfg.model.ffn_hidden_size, 10880); /* Megatron's; Llama-2-7B sets 11008 */
  mt_config_free(&cfg);

  /* the old epsilon name alone, and both names agreeing */
  const char *e1[] = {"model.layernorm_epsilon=1e-6"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, e1, 1, 1, err, sizeof err), 0);
  assert_true(cfg.model.norm_epsilon == 1e-6f && cfg.model.layernorm_epsilon == 1e-6f);
  mt_config_free(&cfg);
  const char *e2[] = {"model.layernorm_epsilon=1e-6", "model.norm_epsilon=1e-6"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, e2, 2, 1, err, sizeof err), 0);
  assert_true(cfg.model.norm_epsilon == 1e-6f);
  mt_config_free(&cfg);

  /* kv_channels given: hidden_size need not be heads x kv_channels (Megatron) */
  const char *kv[] = {"model.num_attention_heads=3", "model.kv_channels=32"};
  rc = mt_config_load_string(&cfg, MINIMAL, SRC, kv, 2, 1, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.model.kv_channels, 32);
  assert_int_equal(cfg.model.num_query_groups, 3);
  mt_config_free(&cfg);
  /* num_query_groups without group_query_attention has no effect, even at the
   * value it derives to: refused (issue 26; it was accepted when equal to the
   * heads), naming the key that enables it */
  const char *kvg[] = {"model.num_attention_heads=3", "model.kv_channels=32",
                       "model.num_query_groups=3"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, kvg, 3, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "model.num_query_groups (from --set): 3 has no effect with "
                              "group_query_attention false"));
  assert_non_null(strstr(err, "expected model.group_query_attention true"));

  /* rope on part of the channels: int(16 x 0.25) = 4 */
  const char *rp[] = {"model.position_embedding_type=rope", "model.rotary_percent=0.25",
                      "model.rotary_interleaved=true"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, rp, 3, 1, err, sizeof err), 0);
  mt_config_free(&cfg);
}

/* RoPE's rotated channels equal Megatron's int(kv_channels * rotary_percent)
 * in double precision on the decimal written in the config, although the
 * config stores a float (80 x 0.35f would give 27 in float arithmetic). */
static void test_rotary_dim(void **state) {
  (void)state;
  assert_int_equal(mt_rotary_dim(80, 0.35f), 28);
  assert_int_equal(mt_rotary_dim(20, 0.7f), 14);
  assert_int_equal(mt_rotary_dim(100, 0.29f), 28); /* Python: int(100 * 0.29) == 28 */
  assert_int_equal(mt_rotary_dim(64, 0.5f), 32);
  assert_int_equal(mt_rotary_dim(128, 1.0f), 128);
}

static void test_moe_keys(void **state) {
  (void)state;
  mt_config cfg, again;
  char err[1024] = "";
  const char *ov[] = {"model.num_layers=4", "model.num_experts=8",
                      "model.moe_layer_freq=[0,1,1,1]", "model.moe_router_score_function=sigmoid",
                      "model.moe_router_num_groups=4", "model.moe_router_group_topk=2",
                      "model.moe_router_enable_expert_bias=true"};
  int rc = mt_config_load_string(&cfg, MINIMAL, SRC, ov, 7, 1, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(cfg.model.moe_layer_pattern_len, 4);
  assert_false(mt_config_is_moe_layer(&cfg, 0));
  for (int l = 1; l < 4; l++) assert_true(mt_config_is_moe_layer(&cfg, l));
  /* the canonical JSON keeps the list and writes unset nullable numbers as null */
  assert_non_null(strstr(cfg.json, "\"moe_layer_freq\":[0,1,1,1]"));
  assert_non_null(strstr(cfg.json, "\"moe_router_topk_scaling_factor\":null"));
  assert_non_null(strstr(cfg.json, "\"moe_shared_expert_intermediate_size\":null"));
  rc = mt_config_load_string(&again, cfg.json, "checkpoint", NULL, 0, 1, err, sizeof err);
  if (rc) print_message("%s\n", err);
  assert_int_equal(rc, 0);
  assert_string_equal(again.json, cfg.json);
  mt_config_free(&again);
  mt_config_free(&cfg);
  /* the integer form: layers 0, 2 of 4 */
  const char *iv[] = {"model.num_layers=4", "model.num_experts=8", "model.moe_layer_freq=2"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, iv, 3, 1, err, sizeof err), 0);
  assert_int_equal(cfg.model.moe_layer_pattern_len, 0);
  assert_true(mt_config_is_moe_layer(&cfg, 0) && mt_config_is_moe_layer(&cfg, 2));
  assert_false(mt_config_is_moe_layer(&cfg, 1) || mt_config_is_moe_layer(&cfg, 3));
  mt_config_free(&cfg);
  /* null is off, an explicit 0 is out of range */
  const char *nv[] = {"model.num_experts=8", "model.moe_router_topk_scaling_factor=null"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, nv, 2, 1, err, sizeof err), 0);
  mt_config_free(&cfg);
  const char *zv[] = {"model.num_experts=8", "model.moe_router_topk_scaling_factor=0"};
  assert_int_equal(mt_config_load_string(&cfg, MINIMAL, SRC, zv, 2, 1, err, sizeof err), 2);
  assert_non_null(strstr(err, "model.moe_router_topk_scaling_factor"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_keys),
      cmocka_unit_test(test_rotary_dim),
      cmocka_unit_test(test_context_parallel),
      cmocka_unit_test(test_moe_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
