/* tests/unit/config/test_config_model_object.c — every model key of the key table
 * (config/config_table.c) reaches the model's config object: its field lies
 * inside mt_config.model (config/model_config.h), and a non-default value
 * given through the loader (--set model.KEY=VALUE) changes that field of
 * the mt_gpt_config the trainer builds (mt_trainer_model_config) and of the
 * copy the created model keeps (mt_gpt_get_config); and the model accepts
 * every choice of each enumerated model key. Table-driven: a new
 * model key is covered without touching this file, unless the loader needs
 * other keys to accept a non-default value of it (k_context below) or the
 * automatic value is not valid (k_value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/registry.h"
#include "config/config_internal.h"
#include "model/gpt.h"
#include "trainer/train_internal.h"

/* A MoE model (so that the MoE keys take effect), small, checked for a
 * world of 2 ranks (dp 2, or ep 2 where a key needs it). */
static const char *k_base =
    "{\"model\": {\"num_layers\": 2, \"hidden_size\": 32, \"num_attention_heads\": 4, "
    "\"seq_length\": 16, \"vocab_size\": 256, \"make_vocab_size_divisible_by\": 8, "
    "\"num_experts\": 4},\n"
    " \"training\": {\"train_iters\": 10, \"lr\": 0.1, \"micro_batch_size\": 2},\n"
    " \"data\": {\"data_path\": \"prefix\"}}\n";

/* Keys whose non-default value the loader accepts only with others set
 * (a key without effect under the config is an error): the overrides given
 * to both loads, the base and the changed one (the change comes last and
 * wins over a context value of the same key). */
static const struct {
  const char *key, *context[2];
} k_context[] = {
    {"rotary_base", {"model.position_embedding_type=\"rope\""}},
    {"rotary_percent", {"model.position_embedding_type=\"rope\""}},
    {"rotary_interleaved", {"model.position_embedding_type=\"rope\""}},
    {"num_query_groups", {"model.group_query_attention=true"}},
    {"recompute_num_layers", {"model.recompute_granularity=\"full\""}},
    {"moe_router_bias_update_rate", {"model.moe_router_enable_expert_bias=true",
                                     "model.moe_router_score_function=\"sigmoid\""}},
    {"moe_router_enable_expert_bias", {"model.moe_router_score_function=\"sigmoid\""}},
    {"moe_pad_expert_input_to_capacity", {"model.moe_expert_capacity_factor=1.0"}},
    {"moe_token_drop_policy", {"model.moe_expert_capacity_factor=1.0"}},
    {"moe_router_group_topk", {"model.moe_router_num_groups=2", "model.moe_router_group_topk=2"}},
    {"moe_router_num_groups", {"model.moe_router_num_groups=2", "model.moe_router_group_topk=2"}},
    /* a shared expert and an all-to-all to hide behind (ep 2: the loads
     * below check a world of 2) */
    {"moe_shared_expert_overlap",
     {"model.moe_shared_expert_intermediate_size=16", "parallel.expert_model_parallel_size=2"}},
    {"rope_type", {"model.position_embedding_type=\"rope\""}},
    {"use_rope_scaling", {"model.position_embedding_type=\"rope\""}},
    {"rope_scaling_factor", {"model.position_embedding_type=\"rope\"", "model.use_rope_scaling=true"}},
    {"mtp_loss_scaling_factor", {"model.mtp_num_layers=1"}},
#define MLA_CTX {"model.position_embedding_type=\"rope\"", "model.multi_latent_attention=true"}
    {"multi_latent_attention", {"model.position_embedding_type=\"rope\""}},
    {"q_lora_rank", MLA_CTX},
    {"kv_lora_rank", MLA_CTX},
    {"qk_head_dim", MLA_CTX},
    {"qk_pos_emb_head_dim", MLA_CTX},
    {"v_head_dim", MLA_CTX},
    {"rotary_scaling_factor", MLA_CTX},
    {"original_max_position_embeddings", MLA_CTX},
    {"beta_fast", MLA_CTX},
    {"beta_slow", MLA_CTX},
    {"mscale", MLA_CTX},
    {"mscale_all_dim", MLA_CTX},
};

/* Keys (and choices) the loader refuses with their context: given with
 * it, the load must fail with a message containing `refusal`. */
static const struct {
  const char *key, *choice, *context[2], *refusal;
} k_pending[] = {
    /* standard attention: Megatron's assert */
    {"rope_type", "yarn", {"model.position_embedding_type=\"rope\""},
     "\"yarn\" needs multi_latent_attention true"},
};

/* Index of the k_pending row of key `name` (choice NULL: any value), or -1. */
static int pending(const char *name, const char *choice, int len) {
  for (int i = 0; i < (int)(sizeof k_pending / sizeof *k_pending); i++)
    if (!strcmp(k_pending[i].key, name) &&
        (!k_pending[i].choice ||
         (choice && (int)strlen(k_pending[i].choice) == len && !strncmp(k_pending[i].choice, choice, len))))
      return i;
  return -1;
}

/* Load with the pending row's context and `set`: it must be refused with
 * the row's message. */
static void expect_pending(int i, const char *set) {
  const char *ov[4] = {NULL};
  int n = 0;
  for (int j = 0; j < 2 && k_pending[i].context[j]; j++) ov[n++] = k_pending[i].context[j];
  ov[n++] = set;
  mt_config c;
  char err[1024] = "";
  if (mt_config_load_string(&c, "{\"model\": {\"num_layers\": 2, \"hidden_size\": 32, "
                                "\"num_attention_heads\": 4, \"seq_length\": 16, "
                                "\"vocab_size\": 256, \"make_vocab_size_divisible_by\": 8}, "
                                "\"training\": {\"train_iters\": 10, \"lr\": 0.1, "
                                "\"micro_batch_size\": 2}, \"data\": {\"data_path\": \"p\"}}",
                            "test", ov, n, 1, err, sizeof err) == 0) {
    mt_config_free(&c);
    fail_msg("--set %s: accepted, expected the refusal '%s'", set, k_pending[i].refusal);
  }
  if (!strstr(err, k_pending[i].refusal))
    fail_msg("--set %s: '%s' lacks '%s'", set, err, k_pending[i].refusal);
}

/* Keys whose automatic non-default value (below) the loader would refuse. */
static const struct {
  const char *key, *value;
} k_value[] = {
    {"moe_layer_freq", "[0, 1]"},
    {"moe_router_num_groups", "4"},
    {"moe_router_group_topk", "1"},
    {"moe_shared_expert_intermediate_size", "16"},
    {"moe_router_topk", "1"},
};

static int load(mt_config *cfg, const char *const *ov, int n, char *err, size_t errlen) {
  return mt_config_load_string(cfg, k_base, "test", ov, n, 2, err, errlen);
}

/* "model.KEY=VALUE" with a value of key k other than the one in cfg. */
static void other_value(const mt_config *cfg, int k, char *out, size_t n) {
  const mt_cfg_key *kd = &mt_cfg_keys[k];
  for (size_t i = 0; i < sizeof k_value / sizeof *k_value; i++)
    if (!strcmp(k_value[i].key, kd->name)) {
      snprintf(out, n, "model.%s=%s", kd->name, k_value[i].value);
      return;
    }
  const void *f = mt_cfg_cfield(cfg, k);
  switch (kd->type) {
    case MT_CT_BOOL:
      snprintf(out, n, "model.%s=%s", kd->name, *(const int *)f ? "false" : "true");
      break;
    case MT_CT_INT: {
      const int v = *(const int *)f;
      snprintf(out, n, "model.%s=%d", kd->name, v > 0 ? 2 * v : 1);
      break;
    }
    case MT_CT_FLOAT: {
      const float v = *(const float *)f;
      snprintf(out, n, "model.%s=%.9g", kd->name, v != 0.0f ? 0.5 * v : 0.5);
      break;
    }
    case MT_CT_STR: { /* the first choice that is not the current value */
      const char *cur = f, *q = kd->choices;
      assert_non_null(q);
      while (*q) {
        const char *bar = strchr(q, '|');
        const size_t len = bar ? (size_t)(bar - q) : strlen(q);
        if (strlen(cur) != len || strncmp(cur, q, len)) {
          snprintf(out, n, "model.%s=\"%.*s\"", kd->name, (int)len, q);
          return;
        }
        q = bar ? bar + 1 : q + len;
      }
      fail_msg("model.%s: no other choice than '%s'", kd->name, cur);
      break;
    }
    default:
      fail_msg("model.%s: type %d has no automatic value (add it to k_value)", kd->name, kd->type);
  }
}

/* Every model key's field lies inside mt_config.model. */
static void test_model_keys_in_model_section(void **state) {
  (void)state;
  const size_t lo = offsetof(mt_config, model), hi = lo + sizeof(mt_model_config);
  int n = 0;
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    if (strcmp(mt_cfg_sections[kd->sec], "model")) continue;
    n++;
    if (kd->off < lo || kd->off + kd->size > hi)
      fail_msg("model.%s is stored outside mt_config.model (offset %zu, model section [%zu, %zu))",
               kd->name, kd->off, lo, hi);
  }
  print_message("%d model keys\n", n);
  assert_true(n >= 40); /* the table's model keys were found */
}

/* A non-default value of every model key reaches the trainer's mt_gpt_config
 * and the created model's copy. */
static void test_model_keys_reach_model_config(void **state) {
  (void)state;
  mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  char err[1024] = "";
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  assert_non_null(be);
  mt_parallel_state ps;
  memset(&ps, 0, sizeof ps); /* one process: every rank 0, no groups */
  int checked = 0, refused = 0;
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    if (strcmp(mt_cfg_sections[kd->sec], "model")) continue;
    const char *ov[4] = {NULL};
    int n = 0;
    for (size_t i = 0; i < sizeof k_context / sizeof *k_context; i++)
      if (!strcmp(k_context[i].key, kd->name))
        for (int j = 0; j < 2 && k_context[i].context[j]; j++) ov[n++] = k_context[i].context[j];
    mt_config c0, c1;
    if (load(&c0, ov, n, err, sizeof err)) fail_msg("model.%s: base config: %s", kd->name, err);
    char set[256];
    other_value(&c0, k, set, sizeof set);
    const int pk = pending(kd->name, strchr(set, '=') + 1 + (kd->type == MT_CT_STR),
                           (int)strlen(strchr(set, '=') + 1) - 2 * (kd->type == MT_CT_STR));
    if (pk >= 0) {
      expect_pending(pk, set);
      mt_config_free(&c0);
      refused++;
      continue;
    }
    ov[n] = set;
    if (load(&c1, ov, n + 1, err, sizeof err)) fail_msg("--set %s: %s", set, err);
    const size_t off = kd->off - offsetof(mt_config, model);
    const mt_gpt_config g0 = mt_trainer_model_config(&c0, &ps);
    const mt_gpt_config g1 = mt_trainer_model_config(&c1, &ps);
    const char *f0 = (const char *)&g0.model + off, *f1 = (const char *)&g1.model + off;
    if (!memcmp(f0, f1, kd->size))
      fail_msg("--set %s does not reach the model's config (mt_gpt_config.model.%s unchanged)",
               set, kd->name);
    assert_memory_equal(f1, (const char *)mt_cfg_cfield(&c1, k), kd->size);
    mt_gpt *m = mt_gpt_create(be, &g1);
    const char *fm = (const char *)&mt_gpt_get_config(m)->model + off;
    if (memcmp(fm, f1, kd->size))
      fail_msg("--set %s: the created model's copy of model.%s differs from its config", set,
               kd->name);
    mt_gpt_destroy(m);
    mt_config_free(&c0);
    mt_config_free(&c1);
    checked++;
  }
  print_message("%d model keys reach mt_gpt_config.model and the model, %d refused until their "
                "layer is built\n", checked, refused);
  mt_backend_destroy(be);
}

/* The model accepts every choice the loader accepts for each enumerated
 * model key (it resolves the strings itself, model/gpt.c: a choice it does
 * not know is fatal). */
static void test_model_accepts_every_choice(void **state) {
  (void)state;
  mt_backend_options bo = {.device = "cpu", .num_threads = 1, .dtype = MT_F32};
  mt_backends_process_init(&bo);
  char err[1024] = "";
  mt_backend *be = mt_backend_create(&bo, err, sizeof err);
  assert_non_null(be);
  mt_parallel_state ps;
  memset(&ps, 0, sizeof ps);
  int created = 0;
  for (int k = 0; k < mt_cfg_nkeys; k++) {
    const mt_cfg_key *kd = &mt_cfg_keys[k];
    if (strcmp(mt_cfg_sections[kd->sec], "model") || kd->type != MT_CT_STR || !kd->choices)
      continue;
    const char *ov[4] = {NULL};
    int n = 0;
    for (size_t i = 0; i < sizeof k_context / sizeof *k_context; i++)
      if (!strcmp(k_context[i].key, kd->name))
        for (int j = 0; j < 2 && k_context[i].context[j]; j++) ov[n++] = k_context[i].context[j];
    for (const char *q = kd->choices; *q;) {
      const char *bar = strchr(q, '|');
      const int len = bar ? (int)(bar - q) : (int)strlen(q);
      char set[128];
      snprintf(set, sizeof set, "model.%s=\"%.*s\"", kd->name, len, q);
      const int pk = pending(kd->name, q, len);
      if (pk >= 0 && k_pending[pk].choice) {
        expect_pending(pk, set);
        q = bar ? bar + 1 : q + len;
        continue;
      }
      ov[n] = set;
      mt_config c;
      if (load(&c, ov, n + 1, err, sizeof err)) fail_msg("--set %s: %s", set, err);
      const mt_gpt_config g = mt_trainer_model_config(&c, &ps);
      mt_gpt_destroy(mt_gpt_create(be, &g));
      mt_config_free(&c);
      created++;
      q = bar ? bar + 1 : q + len;
    }
  }
  print_message("%d models, one per choice of each enumerated model key\n", created);
  assert_true(created >= 10);
  mt_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_keys_in_model_section),
      cmocka_unit_test(test_model_keys_reach_model_config),
      cmocka_unit_test(test_model_accepts_every_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
