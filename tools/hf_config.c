/* tools/hf_config.c — Hugging Face config.json for GPT-2 and Llama models:
 * written on export, checked on import (see tools/hf_map.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/json.h"
#include "tools/hf_map.h"

#define GPT2_EOS 50256 /* <|endoftext|> of the GPT-2 BPE megatrain tokenises with */

/* the expert keys of Qwen3MoeConfig / MixtralConfig */
static void moe_config_json(const mt_hf_model *m, cJSON *o) {
  if (m->family == MT_HF_DEEPSEEK_V3) {
    if (m->mla) { /* multi-latent attention (without: standard attention, null ranks) */
      if (m->qr > 0) cJSON_AddNumberToObject(o, "q_lora_rank", (double)m->qr);
      else cJSON_AddNullToObject(o, "q_lora_rank");
      cJSON_AddNumberToObject(o, "kv_lora_rank", (double)m->kr);
      cJSON_AddNumberToObject(o, "qk_nope_head_dim", (double)m->dn);
      cJSON_AddNumberToObject(o, "qk_rope_head_dim", (double)m->dr);
      cJSON_AddNumberToObject(o, "v_head_dim", (double)m->dv);
      cJSON_AddBoolToObject(o, "rope_interleave", !m->rope_halves); /* see tools/hf_map.h */
    } else {
      cJSON_AddNullToObject(o, "q_lora_rank");
      cJSON_AddNullToObject(o, "kv_lora_rank");
    }
    cJSON_AddNumberToObject(o, "num_nextn_predict_layers", (double)m->mtp);
    cJSON_AddNumberToObject(o, "n_routed_experts", (double)m->E);
    cJSON_AddNumberToObject(o, "n_shared_experts", (double)(m->shared_ffn / m->moe_ffn));
    cJSON_AddNumberToObject(o, "moe_intermediate_size", (double)m->moe_ffn);
    cJSON_AddNumberToObject(o, "first_k_dense_replace", (double)m->first_dense);
    cJSON_AddNumberToObject(o, "moe_layer_freq", (double)m->moe_freq);
    cJSON_AddStringToObject(o, "scoring_func", "sigmoid");
    cJSON_AddStringToObject(o, "topk_method", "noaux_tc");
    cJSON_AddNumberToObject(o, "n_group", (double)m->n_group);
    cJSON_AddNumberToObject(o, "topk_group", (double)m->topk_group);
    cJSON_AddNumberToObject(o, "routed_scaling_factor", m->scaling);
    cJSON_AddBoolToObject(o, "norm_topk_prob", m->norm_topk);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", (double)m->topk);
    return;
  }
  if (m->family == MT_HF_MIXTRAL) {
    cJSON_AddNumberToObject(o, "num_local_experts", (double)m->E);
    cJSON_AddNumberToObject(o, "router_jitter_noise", 0);
  } else {
    cJSON_AddNumberToObject(o, "max_window_layers", (double)m->L);
    cJSON_AddNumberToObject(o, "num_experts", (double)m->E);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", (double)m->moe_ffn);
    cJSON_AddNumberToObject(o, "decoder_sparse_step", 1);
    cJSON *dense = cJSON_AddArrayToObject(o, "mlp_only_layers");
    for (int l = 0; l < m->L; l++)
      if (!m->moe[l]) cJSON_AddItemToArray(dense, cJSON_CreateNumber(l));
    cJSON_AddBoolToObject(o, "norm_topk_prob", m->norm_topk);
  }
  cJSON_AddNumberToObject(o, "num_experts_per_tok", (double)m->topk);
  cJSON_AddBoolToObject(o, "output_router_logits", 0);
  cJSON_AddNumberToObject(o, "router_aux_loss_coef", m->aux_coef);
}

char *mt_hf_config_json(const mt_hf_model *m, const char *torch_dtype) {
  cJSON *o = cJSON_CreateObject();
  cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
  if (m->family == MT_HF_GPT2) {
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddNumberToObject(o, "vocab_size", (double)m->V);
    cJSON_AddNumberToObject(o, "n_positions", (double)m->max_pos);
    cJSON_AddNumberToObject(o, "n_ctx", (double)m->max_pos);
    cJSON_AddNumberToObject(o, "n_embd", (double)m->h);
    cJSON_AddNumberToObject(o, "n_layer", (double)m->L);
    cJSON_AddNumberToObject(o, "n_head", (double)m->nh);
    cJSON_AddNumberToObject(o, "n_inner", (double)m->ffn);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new"); /* tanh GELU */
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", m->eps);
    cJSON_AddNumberToObject(o, "resid_pdrop", m->hidden_dropout);
    cJSON_AddNumberToObject(o, "embd_pdrop", m->hidden_dropout);
    cJSON_AddNumberToObject(o, "attn_pdrop", m->attention_dropout);
    cJSON_AddBoolToObject(o, "scale_attn_weights", 1);
  } else {
    static const char *const arch_name[] = {"",
                                            "LlamaForCausalLM",
                                            "Qwen3ForCausalLM",
                                            "Qwen3MoeForCausalLM",
                                            "MixtralForCausalLM",
                                            "DeepseekV3ForCausalLM"};
    static const char *const type_name[] = {"",        "llama",   "qwen3",
                                            "qwen3_moe", "mixtral", "deepseek_v3"};
    const int qwen = m->family == MT_HF_QWEN3 || m->family == MT_HF_QWEN3_MOE;
    const int mix = m->family == MT_HF_MIXTRAL;
    cJSON_AddItemToArray(arch, cJSON_CreateString(arch_name[m->family]));
    cJSON_AddStringToObject(o, "model_type", type_name[m->family]);
    if (qwen) cJSON_AddBoolToObject(o, "use_sliding_window", 0);
    if (qwen || mix) cJSON_AddNullToObject(o, "sliding_window");
    cJSON_AddNumberToObject(o, "vocab_size", (double)m->V);
    cJSON_AddNumberToObject(o, "hidden_size", (double)m->h);
    cJSON_AddNumberToObject(o, "intermediate_size", (double)(mix ? m->moe_ffn : m->ffn));
    if (m->E > 0) moe_config_json(m, o);
    cJSON_AddNumberToObject(o, "num_hidden_layers", (double)m->L);
    cJSON_AddNumberToObject(o, "num_attention_heads", (double)m->nh);
    cJSON_AddNumberToObject(o, "num_key_value_heads", (double)m->ng);
    cJSON_AddNumberToObject(o, "head_dim", (double)(m->mla ? m->dr : m->hn));
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "max_position_embeddings", (double)m->max_pos);
    cJSON_AddNumberToObject(o, "rms_norm_eps", m->eps);
    cJSON_AddNumberToObject(o, "rope_theta", m->rope_theta);
    if (m->yarn) {
      cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
      cJSON_AddStringToObject(rs, "type", "yarn");
      cJSON_AddStringToObject(rs, "rope_type", "yarn");
      cJSON_AddNumberToObject(rs, "factor", m->yarn_factor);
      cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)m->yarn_orig);
      cJSON_AddNumberToObject(rs, "beta_fast", m->beta_fast);
      cJSON_AddNumberToObject(rs, "beta_slow", m->beta_slow);
      cJSON_AddNumberToObject(rs, "mscale", m->mscale);
      cJSON_AddNumberToObject(rs, "mscale_all_dim", m->mscale_all_dim);
    } else {
      cJSON_AddNullToObject(o, "rope_scaling");
    }
    if (!mix) cJSON_AddBoolToObject(o, "attention_bias", m->bias);
    if (m->E == 0) cJSON_AddBoolToObject(o, "mlp_bias", m->bias);
    cJSON_AddNumberToObject(o, "attention_dropout", m->attention_dropout);
    cJSON_AddNumberToObject(o, "pretraining_tp", 1);
  }
  cJSON_AddBoolToObject(o, "tie_word_embeddings", !m->untie);
  cJSON_AddNumberToObject(o, "initializer_range", m->init_std);
  if (m->V > GPT2_EOS) {
    cJSON_AddNumberToObject(o, "bos_token_id", GPT2_EOS);
    cJSON_AddNumberToObject(o, "eos_token_id", GPT2_EOS);
  }
  cJSON_AddBoolToObject(o, "use_cache", 1);
  cJSON_AddStringToObject(o, "torch_dtype", torch_dtype);
  char *s = cJSON_Print(o);
  cJSON_Delete(o);
  return s;
}

typedef struct {
  const cJSON *o;
  const char *path;
  char *err;
  size_t errlen;
  int bad;
} ctx;

/* key must be the integer `want` (absent: `dflt`, -1 = required) */
static void want_int(ctx *c, const char *key, int64_t want, int64_t dflt) {
  if (c->bad) return;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->o, key);
  double got;
  if (!j || cJSON_IsNull(j)) {
    if (dflt < 0) {
      snprintf(c->err, c->errlen, "'%s' has no \"%s\" (expected %lld from the config)", c->path,
               key, (long long)want);
      c->bad = 1;
      return;
    }
    got = (double)dflt;
  } else if (cJSON_IsNumber(j)) {
    got = j->valuedouble;
  } else {
    got = NAN;
  }
  if (got != (double)want) {
    char gs[64];
    if (j && !cJSON_IsNull(j) && !cJSON_IsNumber(j)) snprintf(gs, sizeof gs, "not a number");
    else snprintf(gs, sizeof gs, "%.17g%s", got, j && !cJSON_IsNull(j) ? "" : " (absent: default)");
    snprintf(c->err, c->errlen, "'%s': \"%s\" is %s but the config gives %lld", c->path, key,
             gs, (long long)want);
    c->bad = 1;
  }
}

static void want_num(ctx *c, const char *key, double want, double dflt) {
  if (c->bad) return;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->o, key);
  double got = !j || cJSON_IsNull(j) ? dflt : cJSON_IsNumber(j) ? j->valuedouble : NAN;
  if (!(fabs(got - want) <= 1e-6 * fabs(want))) {
    snprintf(c->err, c->errlen, "'%s': \"%s\" is %.9g but the config gives %.9g", c->path, key,
             got, want);
    c->bad = 1;
  }
}

static void want_bool(ctx *c, const char *key, int want, int dflt) {
  if (c->bad) return;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->o, key);
  int got = !j || cJSON_IsNull(j) ? dflt : cJSON_IsTrue(j) ? 1 : cJSON_IsFalse(j) ? 0 : -1;
  if (got != want) {
    int tie = !strcmp(key, "tie_word_embeddings"); /* the config's key is the inverse */
    snprintf(c->err, c->errlen, "'%s': \"%s\" is %s but the config gives %s%s", c->path, key,
             got < 0 ? "not a boolean" : got ? "true" : "false", want ? "true" : "false",
             tie ? (want ? " (model.untie_embeddings_and_output_weights false)"
                         : " (model.untie_embeddings_and_output_weights true)")
                 : "");
    c->bad = 1;
  }
}

/* key must be one of the strings in `ok` (NULL-terminated; absent = ok[0]) */
static void want_str(ctx *c, const char *key, const char *const *ok, const char *why) {
  if (c->bad) return;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->o, key);
  const char *got = !j || cJSON_IsNull(j) ? ok[0] : cJSON_IsString(j) ? j->valuestring : "?";
  for (int i = 0; ok[i]; i++)
    if (!strcmp(got, ok[i])) return;
  snprintf(c->err, c->errlen, "'%s': \"%s\" is \"%s\" but %s needs \"%s\"", c->path, key, got,
           why, ok[0]);
  c->bad = 1;
}

static int moe_has_dense(const mt_hf_model *m) {
  for (int l = 0; m->E > 0 && l < m->L; l++)
    if (!m->moe[l]) return 1;
  return m->E == 0;
}

/* key absent, null or equal to `want` */
static void want_null(ctx *c, const char *key, const char *want) {
  if (c->bad) return;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->o, key);
  if (!j || cJSON_IsNull(j)) return;
  char *v = cJSON_PrintUnformatted(j);
  snprintf(c->err, c->errlen, "'%s': \"%s\" is %.200s; %s", c->path, key, v ? v : "?", want);
  free(v);
  c->bad = 1;
}

/* The expert keys: counts, widths, gate normalisation, router jitter, and
 * (Qwen3-MoE) which layers are sparse: layer l has experts when it is not in
 * mlp_only_layers and (l + 1) % decoder_sparse_step == 0 (Qwen3MoeDecoderLayer),
 * which must be megatrain's moe_layer_freq pattern. */
static void deepseek_config_check(ctx *c, mt_hf_model *m) {
  static const char *const sig[] = {"sigmoid", NULL}, *const noaux[] = {"noaux_tc", NULL};
  if (m->mla) {
    if (m->qr > 0) want_int(c, "q_lora_rank", m->qr, -1);
    else want_null(c, "q_lora_rank", "the config's model.q_lora_rank is null (expected null: "
                   "a direct q_proj)");
    want_int(c, "kv_lora_rank", m->kr, -1);
    want_int(c, "qk_nope_head_dim", m->dn, -1);
    want_int(c, "qk_rope_head_dim", m->dr, -1);
    want_int(c, "v_head_dim", m->dv, -1);
    /* either value: false permutes the rope rows (rope_halves, tools/hf_map.h) */
    const cJSON *ri = cJSON_GetObjectItemCaseSensitive(c->o, "rope_interleave");
    if (!c->bad && ri && !cJSON_IsNull(ri) && !cJSON_IsBool(ri)) {
      snprintf(c->err, c->errlen, "'%s': \"rope_interleave\" is not a boolean (expected true "
               "or false)", c->path);
      c->bad = 1;
    }
    m->rope_halves = ri && cJSON_IsFalse(ri);
  } else {
    want_null(c, "q_lora_rank", "the config has standard attention (expected null; "
              "model.multi_latent_attention true gives multi-latent attention)");
    want_null(c, "kv_lora_rank", "the config has standard attention (expected null; "
              "model.multi_latent_attention true gives multi-latent attention)");
  }
  want_int(c, "num_nextn_predict_layers", m->mtp, 0);
  want_int(c, "n_routed_experts", m->E, -1);
  want_int(c, "n_shared_experts", m->shared_ffn / m->moe_ffn, -1);
  want_int(c, "moe_intermediate_size", m->moe_ffn, -1);
  want_int(c, "first_k_dense_replace", m->first_dense, 0);
  want_int(c, "moe_layer_freq", m->moe_freq, 1);
  want_str(c, "scoring_func", sig, "megatrain's sigmoid router");
  want_str(c, "topk_method", noaux, "megatrain's expert bias (e_score_correction_bias)");
  want_int(c, "n_group", m->n_group, 1);
  want_int(c, "topk_group", m->topk_group, 1);
  want_num(c, "routed_scaling_factor", m->scaling, 1.0);
  want_bool(c, "norm_topk_prob", m->norm_topk, 1);
}

/* rope_scaling {"type"/"rope_type": "yarn", factor, original_max_position_embeddings,
 * beta_fast, beta_slow, mscale, mscale_all_dim} against the config's YaRN, and
 * max_position_embeddings (HF's YaRN takes its ratio to the original as the
 * factor). */
static void yarn_check(ctx *c, const mt_hf_model *m, const cJSON *rs) {
  static const char *const yarn[] = {"yarn", NULL};
  want_int(c, "max_position_embeddings", m->max_pos, -1);
  if (c->bad) return;
  if (!cJSON_IsObject(rs)) {
    snprintf(c->err, c->errlen, "'%s': \"rope_scaling\" is not an object but the config's "
             "model.rope_type is \"yarn\" (expected {\"type\": \"yarn\", ...})", c->path);
    c->bad = 1;
    return;
  }
  ctx r = *c;
  char path[700];
  snprintf(path, sizeof path, "%s (rope_scaling)", c->path);
  r.o = rs;
  r.path = path;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
  want_str(&r, t ? "rope_type" : "type", yarn, "the config's model.rope_type");
  want_num(&r, "factor", m->yarn_factor, NAN);
  want_int(&r, "original_max_position_embeddings", m->yarn_orig, -1);
  want_num(&r, "beta_fast", m->beta_fast, 32);
  want_num(&r, "beta_slow", m->beta_slow, 1);
  want_num(&r, "mscale", m->mscale, 1);
  want_num(&r, "mscale_all_dim", m->mscale_all_dim, 0);
  c->bad = r.bad;
}

static void moe_config_check(ctx *c, mt_hf_model *m) {
  want_int(c, "num_experts_per_tok", m->topk, -1);
  if (m->family == MT_HF_DEEPSEEK_V3) {
    deepseek_config_check(c, m);
    return;
  }
  if (m->family == MT_HF_MIXTRAL) {
    want_int(c, "num_local_experts", m->E, -1);
    want_null(c, "sliding_window", "megatrain's attention has no sliding window (expected null)");
    want_num(c, "router_jitter_noise", 0, 0);
    return;
  }
  want_int(c, "num_experts", m->E, -1);
  want_int(c, "moe_intermediate_size", m->moe_ffn, -1);
  want_bool(c, "norm_topk_prob", m->norm_topk, 0);
  if (c->bad) return;
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(c->o, "decoder_sparse_step");
  const cJSON *only = cJSON_GetObjectItemCaseSensitive(c->o, "mlp_only_layers");
  int step = !st || cJSON_IsNull(st) ? 1 : cJSON_IsNumber(st) ? st->valueint : 0;
  if (step < 1 || (only && !cJSON_IsNull(only) && !cJSON_IsArray(only))) {
    snprintf(c->err, c->errlen, "'%s': \"%s\" is not %s", c->path,
             step < 1 ? "decoder_sparse_step" : "mlp_only_layers",
             step < 1 ? "an integer >= 1" : "a list of layer indices");
    c->bad = 1;
    return;
  }
  for (int l = 0; l < m->L; l++) {
    int dense = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, only) dense |= cJSON_IsNumber(it) && it->valueint == l;
    const int sparse = !dense && (l + 1) % step == 0;
    if (sparse != m->moe[l]) {
      snprintf(c->err, c->errlen, "'%s': \"decoder_sparse_step\" %d and \"mlp_only_layers\" "
               "make layer %d %s but the config's model.moe_layer_freq makes it %s", c->path,
               step, l, sparse ? "an MoE layer" : "dense", m->moe[l] ? "an MoE layer" : "dense");
      c->bad = 1;
      return;
    }
  }
}

int mt_hf_config_check(mt_hf_model *m, const char *json, const char *path, char *err,
                       size_t errlen) {
  char what[600];
  snprintf(what, sizeof what, "'%s' is not valid JSON", path);
  cJSON *o = mt_json_parse(json, strlen(json), MT_JSON_INT53, what, err, errlen);
  if (!o) return -1;
  if (!cJSON_IsObject(o)) {
    snprintf(err, errlen, "'%s' is not a JSON object", path);
    cJSON_Delete(o);
    return -1;
  }
  ctx c = {o, path, err, errlen, 0};
  char why[96];
  if (m->family == MT_HF_GPT2) {
    static const char *const type[] = {"gpt2", NULL};
    /* megatrain's GELU is the tanh form: gelu_new = gelu_pytorch_tanh */
    static const char *const act[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    snprintf(why, sizeof why, "the config's GPT-2 naming (learned_absolute, LayerNorm, GELU)");
    want_str(&c, "model_type", type, why);
    want_str(&c, "activation_function", act, "megatrain's tanh GELU");
    want_int(&c, "n_layer", m->L, -1);
    want_int(&c, "n_embd", m->h, -1);
    want_int(&c, "n_head", m->nh, -1);
    want_int(&c, "n_inner", m->ffn, 4 * m->h);
    want_int(&c, "n_positions", m->max_pos, -1);
    want_int(&c, "vocab_size", m->V, -1);
    want_num(&c, "layer_norm_epsilon", m->eps, 1e-5);
    want_bool(&c, "scale_attn_weights", 1, 1);
    want_bool(&c, "scale_attn_by_inverse_layer_idx", 0, 0);
    want_bool(&c, "tie_word_embeddings", !m->untie, 1);
  } else {
    static const char *const type[][2] = {{NULL, NULL},        {"llama", NULL},
                                          {"qwen3", NULL},       {"qwen3_moe", NULL},
                                          {"mixtral", NULL},     {"deepseek_v3", NULL}};
    static const char *const what[] = {"", "Llama naming (rope, RMSNorm, SwiGLU)",
                                       "Qwen3 naming (Llama's with qk_layernorm)",
                                       "Qwen3-MoE naming (experts, qk_layernorm)",
                                       "Mixtral naming (experts in every layer, no qk_layernorm)",
                                       "DeepSeek-V3 naming (sigmoid-routed experts)"};
    static const char *const act[] = {"silu", NULL};
    const int qwen = m->family == MT_HF_QWEN3 || m->family == MT_HF_QWEN3_MOE;
    const int mix = m->family == MT_HF_MIXTRAL;
    snprintf(why, sizeof why, "the config's %s", what[m->family]);
    want_str(&c, "model_type", type[m->family], why);
    if (qwen) want_bool(&c, "use_sliding_window", 0, 0);
    want_str(&c, "hidden_act", act, "megatrain's SwiGLU");
    want_int(&c, "num_hidden_layers", m->L, -1);
    want_int(&c, "hidden_size", m->h, -1);
    if (mix) want_int(&c, "intermediate_size", m->moe_ffn, -1);
    else if (moe_has_dense(m)) want_int(&c, "intermediate_size", m->ffn, -1);
    if (m->E > 0) moe_config_check(&c, m);
    want_int(&c, "num_attention_heads", m->nh, -1);
    want_int(&c, "num_key_value_heads", m->ng, m->nh);
    if (!m->mla) want_int(&c, "head_dim", m->hn, m->h / m->nh);
    want_int(&c, "vocab_size", m->V, -1);
    want_num(&c, "rms_norm_eps", m->eps, 1e-6);
    want_num(&c, "rope_theta", m->rope_theta, mix ? 1e6 : 10000.0);
    want_bool(&c, "attention_bias", m->bias, 0);
    if (m->E == 0) want_bool(&c, "mlp_bias", m->bias, 0);
    want_bool(&c, "tie_word_embeddings", !m->untie, 0);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    if (m->yarn) {
      yarn_check(&c, m, rs);
    } else if (!c.bad && rs && !cJSON_IsNull(rs)) {
      snprintf(err, errlen, "'%s': \"rope_scaling\" is set; megatrain's RoPE has no scaling "
               "(expected null)", path);
      c.bad = 1;
    }
  }
  cJSON_Delete(o);
  return c.bad ? -1 : 0;
}
