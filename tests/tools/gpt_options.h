/* tests/tools/gpt_options.h — KEY=VALUE options for the model tools and
 * benches (tests/tools/gpt_dump, bench/bench_gpt): sets the Llama-style and
 * MoE fields of an mt_gpt_config by their config-key names (Megatron's
 * argument names, docs/config.md), e.g.
 *   position_embedding_type=rope rotary_percent=0.5 normalization=RMSNorm
 *   swiglu=1 num_query_groups=2 kv_channels=24 add_bias_linear=0
 *   qk_layernorm=1 untie_embeddings_and_output_weights=1 num_experts=4 ...
 * Test-tool helper only (not part of the library); one header, no state. */
#ifndef MT_TESTS_GPT_OPTIONS_H
#define MT_TESTS_GPT_OPTIONS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"

/* 1 when `arg` has the KEY=VALUE form. */
static inline int mt_gpt_is_option(const char *arg) { return strchr(arg, '=') != NULL; }

static inline int mt_gpt_option_bool(const char *v) {
  return !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True");
}

/* Apply one KEY=VALUE option to c. Returns 0, or -1 with a message in err
 * (unknown key or value). */
static inline int mt_gpt_apply_option(mt_gpt_config *c, const char *arg, char *err, size_t n) {
  char key[64];
  const char *eq = strchr(arg, '=');
  if (!eq || (size_t)(eq - arg) >= sizeof key) {
    snprintf(err, n, "option '%s': expected KEY=VALUE", arg);
    return -1;
  }
  memcpy(key, arg, (size_t)(eq - arg));
  key[eq - arg] = 0;
  const char *v = eq + 1;
#define INT_KEY(name, field) \
  if (!strcmp(key, name)) { c->field = atoi(v); return 0; }
#define FLT_KEY(name, field) \
  if (!strcmp(key, name)) { c->field = (float)atof(v); return 0; }
#define BOOL_KEY(name, field) \
  if (!strcmp(key, name)) { c->field = mt_gpt_option_bool(v); return 0; }
  if (!strcmp(key, "position_embedding_type")) {
    if (!strcmp(v, "learned_absolute")) c->position_embedding = MT_POS_LEARNED;
    else if (!strcmp(v, "rope")) c->position_embedding = MT_POS_ROPE;
    else if (!strcmp(v, "none")) c->position_embedding = MT_POS_NONE;
    else { snprintf(err, n, "position_embedding_type: unknown '%s'", v); return -1; }
    return 0;
  }
  if (!strcmp(key, "normalization")) {
    if (!strcmp(v, "LayerNorm")) c->normalization = MT_NORM_LAYERNORM;
    else if (!strcmp(v, "RMSNorm")) c->normalization = MT_NORM_RMSNORM;
    else { snprintf(err, n, "normalization: unknown '%s'", v); return -1; }
    return 0;
  }
  if (!strcmp(key, "add_bias_linear")) { c->disable_bias_linear = !mt_gpt_option_bool(v); return 0; }
  if (!strcmp(key, "moe_layer_freq") && (v[0] == '[' || strchr(v, ','))) {
    /* list form: [0,1,1] or 0,1,1 (one 0/1 entry per layer) */
    int len = 0;
    for (const char *q = v; *q; q++) {
      if (*q != '0' && *q != '1') continue;
      if (len >= MT_GPT_MAX_LAYERS) { snprintf(err, n, "moe_layer_freq: too long"); return -1; }
      c->moe_layer_pattern[len++] = (uint8_t)(*q - '0');
    }
    c->moe_layer_pattern_len = len;
    c->moe_layer_freq = 0;
    return 0;
  }
  if (!strcmp(key, "moe_router_score_function")) {
    if (!strcmp(v, "softmax")) c->moe_score_sigmoid = 0;
    else if (!strcmp(v, "sigmoid")) c->moe_score_sigmoid = 1;
    else { snprintf(err, n, "moe_router_score_function: unknown '%s'", v); return -1; }
    return 0;
  }
  if (!strcmp(key, "moe_router_load_balancing_type")) {
    if (!strcmp(v, "aux_loss")) c->moe_lb_type = MT_MOE_LB_AUX;
    else if (!strcmp(v, "seq_aux_loss")) c->moe_lb_type = MT_MOE_LB_SEQ_AUX;
    else if (!strcmp(v, "global_aux_loss")) c->moe_lb_type = MT_MOE_LB_GLOBAL_AUX;
    else if (!strcmp(v, "none")) c->moe_lb_type = MT_MOE_LB_NONE;
    else { snprintf(err, n, "moe_router_load_balancing_type: unknown '%s'", v); return -1; }
    return 0;
  }
  if (!strcmp(key, "moe_token_drop_policy")) {
    if (!strcmp(v, "probs")) c->moe_drop_position = 0;
    else if (!strcmp(v, "position")) c->moe_drop_position = 1;
    else { snprintf(err, n, "moe_token_drop_policy: unknown '%s'", v); return -1; }
    return 0;
  }
  FLT_KEY("rotary_base", rotary_base)
  FLT_KEY("rotary_percent", rotary_percent)
  BOOL_KEY("rotary_interleaved", rotary_interleaved)
  BOOL_KEY("swiglu", swiglu)
  INT_KEY("num_query_groups", num_query_groups)
  INT_KEY("kv_channels", kv_channels)
  BOOL_KEY("qk_layernorm", qk_layernorm)
  BOOL_KEY("untie_embeddings_and_output_weights", untie_embeddings_and_output_weights)
  FLT_KEY("layernorm_epsilon", layernorm_epsilon)
  FLT_KEY("norm_epsilon", layernorm_epsilon)
  FLT_KEY("init_method_std", init_method_std)
  FLT_KEY("hidden_dropout", hidden_dropout)
  FLT_KEY("attention_dropout", attention_dropout)
  INT_KEY("ffn_hidden_size", ffn_hidden_size)
  INT_KEY("num_experts", num_experts)
  INT_KEY("moe_router_topk", moe_router_topk)
  INT_KEY("moe_ffn_hidden_size", moe_ffn_hidden_size)
  BOOL_KEY("moe_grouped_gemm", moe_grouped_gemm)
  BOOL_KEY("moe_pad_expert_input_to_capacity", moe_pad_expert_input_to_capacity)
  if (!strcmp(key, "moe_layer_freq")) {
    c->moe_layer_freq = atoi(v);
    c->moe_layer_pattern_len = 0;
    return 0;
  }
  FLT_KEY("moe_expert_capacity_factor", moe_expert_capacity_factor)
  BOOL_KEY("moe_router_pre_softmax", moe_router_pre_softmax)
  FLT_KEY("moe_aux_loss_coeff", moe_aux_loss_coeff)
  FLT_KEY("moe_z_loss_coeff", moe_z_loss_coeff)
  INT_KEY("moe_shared_expert_intermediate_size", moe_shared_expert_intermediate_size)
  FLT_KEY("moe_router_topk_scaling_factor", moe_router_topk_scaling_factor)
  BOOL_KEY("moe_router_enable_expert_bias", moe_router_enable_expert_bias)
  INT_KEY("moe_router_num_groups", moe_router_num_groups)
  INT_KEY("moe_router_group_topk", moe_router_group_topk)
#undef INT_KEY
#undef FLT_KEY
#undef BOOL_KEY
  snprintf(err, n, "unknown option '%s'", key);
  return -1;
}

/* Fill the Llama-style defaults a config file would give (rotary_base 10000,
 * rotary_percent 1) where the fields are still 0; MoE: top-k 2, layer
 * frequency 1, moe_ffn_hidden_size = ffn_hidden_size when experts are on. */
static inline void mt_gpt_option_defaults(mt_gpt_config *c) {
  if (c->rotary_base == 0) c->rotary_base = 10000.0f;
  if (c->rotary_percent == 0) c->rotary_percent = 1.0f;
  if (c->num_experts > 0) {
    if (c->moe_router_topk == 0) c->moe_router_topk = 2;
    if (c->moe_layer_freq == 0) c->moe_layer_freq = 1;
    if (c->moe_ffn_hidden_size == 0) c->moe_ffn_hidden_size = c->ffn_hidden_size;
    if (c->ep_size == 0) c->ep_size = 1;
  }
}

#endif
