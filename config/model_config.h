/* config/model_config.h — the model section of the config file, which is
 * also the model's configuration object: the loader (config/config.c) fills
 * it from the key table (config/config_table.c: one row per key, its field
 * found by offsetof), and the model embeds it as mt_gpt_config.model
 * (model/gpt.h), whole, without a copy field by field. A new model key is
 * then a row of the table, a field here and the code that reads it; nothing
 * in between can forget it (tests/unit/config/test_config_model_object.c checks that
 * every model key reaches the model's config).
 *
 * Every field is the key of the same name (Megatron's argument, snake_case)
 * with Megatron's default; enumerated keys stay strings, as in Megatron-core's
 * TransformerConfig (normalization "LayerNorm", ...). After loading, derived
 * keys are resolved (never 0) and layernorm_epsilon equals norm_epsilon. The
 * header holds the struct and one inline helper (model/ may include it and
 * call mt_model_is_moe_layer: scripts/layers.txt).
 */
#ifndef MT_CONFIG_MODEL_CONFIG_H
#define MT_CONFIG_MODEL_CONFIG_H

#include <stdint.h>

#define MT_MAX_MTP 16      /* model.mtp_num_layers at most (logged losses) */
#define MT_MAX_LAYERS 512 /* model.num_layers at most (moe_layer_freq list form) */

typedef struct {
  int num_layers;
  int hidden_size;
  int num_attention_heads;
  int ffn_hidden_size;            /* derived keys: 0 after parsing = derive */
  int seq_length;
  int max_position_embeddings;
  int vocab_size;                 /* before padding (mt_config_padded_vocab) */
  int make_vocab_size_divisible_by;
  float hidden_dropout;
  float attention_dropout;
  float init_method_std;
  float norm_epsilon;             /* LayerNorm/RMSNorm epsilon (Megatron's --norm-epsilon) */
  float layernorm_epsilon;        /* alias of norm_epsilon (older name); equal after loading */
  int untie_embeddings_and_output_weights;
  /* Llama-style block options (docs/model.md); defaults give the GPT-2 block */
  char position_embedding_type[24]; /* "learned_absolute" | "rope" | "none" */
  float rotary_base;
  float rotary_percent;             /* (0, 1]: fraction of each head's channels rotated */
  int rotary_interleaved;
  /* RoPE frequency scaling (docs/model.md): YaRN (rope_type "yarn", MLA only) and Llama-3.1 */
  char rope_type[8];                /* "rope" | "yarn" | "" (null: mt_model_yarn) */
  float rotary_scaling_factor;
  int original_max_position_embeddings;
  float beta_fast, beta_slow;
  float mscale, mscale_all_dim;
  int use_rope_scaling;
  float rope_scaling_factor;
  char normalization[16];           /* "LayerNorm" | "RMSNorm" */
  int swiglu;
  int group_query_attention;
  int num_query_groups;             /* derived: 1 with group_query_attention (MQA), else
                                       num_attention_heads; always resolved after loading */
  int kv_channels;                  /* derived: hidden_size / num_attention_heads */
  int add_bias_linear;
  int qk_layernorm;
  /* multi-latent attention (docs/attention.md) */
  int multi_latent_attention;
  int q_lora_rank;                  /* 0 (null): direct linear_q_proj */
  int kv_lora_rank;
  int qk_head_dim, qk_pos_emb_head_dim, v_head_dim;
  char recompute_granularity[16]; /* "" (none) | "selective" | "full" */
  int recompute_num_layers;
  /* mixture of experts (docs/moe.md); num_experts = 0 means dense */
  int num_experts;
  int moe_router_topk;
  int moe_ffn_hidden_size;
  int moe_layer_freq;
  float moe_aux_loss_coeff;
  float moe_z_loss_coeff;
  float moe_expert_capacity_factor; /* <= 0: dropless */
  char moe_token_drop_policy[16]; /* "probs" | "position" */
  int moe_router_pre_softmax;
  int moe_pad_expert_input_to_capacity;
  /* layer pattern: moe_layer_freq given as a list ([1, 0, 1, ...], one entry per
   * layer, 1 = MoE) sets moe_layer_pattern_len = num_layers and moe_layer_freq 0;
   * the integer form leaves moe_layer_pattern_len 0 (layer l is MoE when
   * l % moe_layer_freq == 0). mt_config_is_moe_layer answers for both. */
  uint8_t moe_layer_pattern[MT_MAX_LAYERS];
  int moe_layer_pattern_len;
  /* modern routing (docs/moe.md "Router") */
  char moe_router_score_function[16];   /* "softmax" | "sigmoid" */
  float moe_router_topk_scaling_factor; /* 0 (null) = no scaling */
  int moe_router_enable_expert_bias;
  float moe_router_bias_update_rate;
  char moe_router_load_balancing_type[16]; /* "aux_loss" | "seq_aux_loss" | "global_aux_loss" |
                                              "none" */
  int moe_router_num_groups;            /* 0 (null) = no group-limited routing */
  int moe_router_group_topk;            /* 0 (null) */
  char moe_router_dtype[8];             /* "" (null) | "fp32" | "fp64" */
  int moe_shared_expert_intermediate_size; /* 0 (null) = no shared expert */
  int moe_shared_expert_overlap;        /* shared expert during the token all-to-alls */
  int moe_grouped_gemm;
  /* multi-token prediction (DeepSeek-V3 §2.2; model/gpt_mtp.c) */
  int mtp_num_layers;               /* 0 (null) = off */
  float mtp_loss_scaling_factor;
} mt_model_config;

/* model.rope_type resolved as Megatron resolves an unset --rope-type (the
 * config class's default): YaRN with multi-latent attention, plain RoPE
 * without. */
static inline int mt_model_yarn(const mt_model_config *m) {
  return m->rope_type[0] ? m->rope_type[0] == 'y' : m->multi_latent_attention;
}

/* 1 when layer l (0-based, global) is an MoE layer: num_experts > 0 and the
 * moe_layer_freq integer (every k-th layer from 0) or list selects it. The one
 * definition behind mt_config_is_moe_layer and mt_gpt_is_moe_layer. */
static inline int mt_model_is_moe_layer(const mt_model_config *m, int l) {
  if (m->num_experts <= 0 || l < 0 || l >= m->num_layers) return 0;
  if (m->moe_layer_pattern_len > 0) return l < m->moe_layer_pattern_len && m->moe_layer_pattern[l];
  return l % (m->moe_layer_freq > 0 ? m->moe_layer_freq : 1) == 0;
}

#endif
