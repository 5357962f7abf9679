/* tools/hf_map.c — megatrain <-> Hugging Face names and layouts (see
 * tools/hf_map.h). */
#include "tools/hf_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

const char *mt_hf_family_name(mt_hf_family f) {
  static const char *const name[] = {"GPT-2", "Llama",   "Qwen3",
                                     "Qwen3-MoE", "Mixtral", "DeepSeek-V3"};
  return name[f];
}

#define REFUSE(...)                   \
  do {                                \
    snprintf(err, errlen, __VA_ARGS__); \
    return -1;                        \
  } while (0)

/* The MoE side of a rope model (num_experts > 0): Qwen3-MoE with
 * qk_layernorm, Mixtral without. */
/* DeepSeek-V3's MoE side (sigmoid scores): the expert bias, groups whose
 * score is the sum of their top two (HF's DeepseekV3TopkRouter: megatrain's
 * ⌊k / group_topk⌋ must be 2), shared experts of whole expert widths, the
 * layer pattern first_k_dense_replace + moe_layer_freq. */
static int deepseek_model_of(const mt_config *cfg, mt_hf_model *m, char *err, size_t errlen) {
  const mt_model_config *c = &cfg->model;
  const int L = c->num_layers;
  if (c->qk_layernorm && !c->multi_latent_attention)
    REFUSE("model.qk_layernorm is true with sigmoid routing and standard attention: the "
           "DeepSeek-V3 naming has no query/key norm (its latent norms need "
           "multi_latent_attention)");
  if (!c->qk_layernorm && c->multi_latent_attention)
    REFUSE("model.qk_layernorm is false with multi_latent_attention: the DeepSeek-V3 naming "
           "has the latent norms q_a_layernorm and kv_a_layernorm (expected true)");
  if (!c->moe_router_enable_expert_bias)
    REFUSE("model.moe_router_enable_expert_bias is false: the DeepSeek-V3 naming (sigmoid "
           "routing) carries e_score_correction_bias (expected true)");
  if (c->moe_shared_expert_intermediate_size % c->moe_ffn_hidden_size)
    REFUSE("model.moe_shared_expert_intermediate_size is %d: the DeepSeek-V3 naming has "
           "n_shared_experts experts of moe_ffn_hidden_size %d (expected a multiple)",
           c->moe_shared_expert_intermediate_size, c->moe_ffn_hidden_size);
  if (c->moe_router_num_groups > 0 && c->moe_router_topk / c->moe_router_group_topk != 2)
    REFUSE("model.moe_router_topk %d / moe_router_group_topk %d is not 2: the DeepSeek-V3 "
           "naming scores a group by the sum of its two best experts", c->moe_router_topk,
           c->moe_router_group_topk);
  int first = 0;
  while (first < L && !mt_config_is_moe_layer(cfg, first)) first++;
  int freq = 1;
  for (; freq <= L; freq++) {
    int same = 1;
    for (int l = 0; l < L && same; l++)
      same = mt_config_is_moe_layer(cfg, l) == (l >= first && l % freq == 0);
    if (same) break;
  }
  if (first == L || freq > L)
    REFUSE("model.moe_layer_freq: the DeepSeek-V3 naming's MoE layers are those l >= "
           "first_k_dense_replace with l %% moe_layer_freq == 0, which the config's pattern is "
           "not");
  m->shared_ffn = c->moe_shared_expert_intermediate_size;
  m->n_group = c->moe_router_num_groups > 0 ? c->moe_router_num_groups : 1;
  m->topk_group = c->moe_router_num_groups > 0 ? c->moe_router_group_topk : 1;
  m->first_dense = first;
  m->moe_freq = freq;
  m->scaling = c->moe_router_topk_scaling_factor > 0
                   ? mt_float_decimal(c->moe_router_topk_scaling_factor) : 1.0;
  return 0;
}

/* DeepSeek-V3's attention side: MLA's dimensions, YaRN as HF's rope_scaling
 * (whose "factor" HF recomputes as max_position_embeddings /
 * original_max_position_embeddings when the latter is given), and the MTP
 * layers, MoE as megatrain makes them (like the last decoder layer). */
static int deepseek_attn_of(const mt_config *cfg, mt_hf_model *m, char *err, size_t errlen) {
  const mt_model_config *c = &cfg->model;
  m->mtp = c->mtp_num_layers;
  for (int64_t k = 0; k < m->mtp && m->E > 0; k++) {
    const int64_t l = m->L + k;
    const int ds = l >= m->first_dense && l % m->moe_freq == 0;
    if (ds != m->moe[m->L - 1])
      REFUSE("model.mtp_num_layers is %d: megatrain's MTP layer %lld is %s like the last "
             "decoder layer, but the DeepSeek-V3 naming (first_k_dense_replace %lld, "
             "moe_layer_freq %lld) makes its layer %lld %s", c->mtp_num_layers, (long long)k,
             m->moe[m->L - 1] ? "an MoE layer" : "dense", (long long)m->first_dense,
             (long long)m->moe_freq, (long long)l, ds ? "an MoE layer" : "dense");
  }
  if (!c->multi_latent_attention) return 0;
  m->mla = 1;
  m->qr = c->q_lora_rank;
  m->kr = c->kv_lora_rank;
  m->dn = c->qk_head_dim;
  m->dr = c->qk_pos_emb_head_dim;
  m->dv = c->v_head_dim;
  m->ng = m->nh;
  m->yarn = mt_model_yarn(c);
  const double s = mt_float_decimal(c->rotary_scaling_factor);
  m->mscale_all_dim = mt_float_decimal(c->mscale_all_dim);
  if (!m->yarn) {
    if (s > 1 && m->mscale_all_dim != 0)
      REFUSE("model.rotary_scaling_factor is %g with mscale_all_dim %g and rope_type \"rope\": "
             "megatrain's MLA softmax scale takes mscale(%g, %g)^2, which the DeepSeek-V3 "
             "naming applies only with YaRN rope_scaling (expected mscale_all_dim 0 or "
             "rotary_scaling_factor <= 1)", s, m->mscale_all_dim, s, m->mscale_all_dim);
    return 0;
  }
  m->yarn_factor = s;
  m->yarn_orig = c->original_max_position_embeddings;
  m->beta_fast = mt_float_decimal(c->beta_fast);
  m->beta_slow = mt_float_decimal(c->beta_slow);
  m->mscale = mt_float_decimal(c->mscale);
  if ((m->mscale == 0 || m->mscale_all_dim == 0) && !(m->mscale == 1 && m->mscale_all_dim == 0))
    REFUSE("model.mscale is %g with mscale_all_dim %g: megatrain scales YaRN's cos and sin by "
           "mscale(s, mscale) / mscale(s, mscale_all_dim), which Hugging Face's YaRN does only "
           "when both are non-zero (else mscale(s, 1)); expected both non-zero, or mscale 1 "
           "with mscale_all_dim 0", m->mscale, m->mscale_all_dim);
  if ((double)m->yarn_orig * s != (double)m->max_pos)
    REFUSE("model.rotary_scaling_factor is %g with original_max_position_embeddings %lld and "
           "max_position_embeddings %lld: Hugging Face's YaRN takes the factor as "
           "max_position_embeddings / original_max_position_embeddings (expected %lld "
           "positions)", s, (long long)m->yarn_orig, (long long)m->max_pos,
           (long long)((double)m->yarn_orig * s));
  return 0;
}

static int moe_model_of(const mt_config *cfg, mt_hf_model *m, char *err, size_t errlen) {
  const mt_model_config *c = &cfg->model;
  const int sig = !strcmp(c->moe_router_score_function, "sigmoid");
  m->family = sig ? MT_HF_DEEPSEEK_V3 : c->qk_layernorm ? MT_HF_QWEN3_MOE : MT_HF_MIXTRAL;
  const char *nm = mt_hf_family_name(m->family);
  if (c->add_bias_linear)
    REFUSE("model.add_bias_linear is true with num_experts: the %s naming has no linear biases",
           nm);
  if (c->moe_expert_capacity_factor > 0)
    REFUSE("model.moe_expert_capacity_factor is %g: the %s naming is dropless (expected null)",
           mt_float_decimal(c->moe_expert_capacity_factor), nm);
  if (c->num_layers > MT_MAX_LAYERS)
    REFUSE("model.num_layers is %d: at most %d with experts", c->num_layers, MT_MAX_LAYERS);
  for (int l = 0; l < c->num_layers; l++) m->moe[l] = (unsigned char)mt_config_is_moe_layer(cfg, l);
  m->E = c->num_experts;
  m->topk = c->moe_router_topk;
  m->moe_ffn = c->moe_ffn_hidden_size;
  m->norm_topk = sig ? c->moe_router_topk > 1 : !c->moe_router_pre_softmax;
  m->aux_coef = mt_float_decimal(c->moe_aux_loss_coeff);
  if (sig) return deepseek_model_of(cfg, m, err, errlen);
  if (c->moe_router_enable_expert_bias)
    REFUSE("model.moe_router_enable_expert_bias is true: the %s naming has no expert bias", nm);
  if (c->moe_router_num_groups > 0)
    REFUSE("model.moe_router_num_groups is %d: the %s naming has no group-limited routing",
           c->moe_router_num_groups, nm);
  if (c->moe_shared_expert_intermediate_size > 0)
    REFUSE("model.moe_shared_expert_intermediate_size is %d: the %s naming has no shared expert",
           c->moe_shared_expert_intermediate_size, nm);
  if (c->moe_router_topk_scaling_factor > 0)
    REFUSE("model.moe_router_topk_scaling_factor is %g: the %s naming does not scale the gates "
           "(expected null)", mt_float_decimal(c->moe_router_topk_scaling_factor), nm);
  for (int l = 0; l < c->num_layers; l++) {
    if (!m->moe[l] && m->family == MT_HF_MIXTRAL)
      REFUSE("model.moe_layer_freq makes layer %d dense: the Mixtral naming (no qk_layernorm) has "
             "experts in every layer (Qwen3-MoE naming, with qk_layernorm, has dense layers)", l);
  }
  if (c->moe_router_pre_softmax && m->family == MT_HF_MIXTRAL)
    REFUSE("model.moe_router_pre_softmax is true: the Mixtral naming renormalises the gates over "
           "the chosen experts (expected false)");
  return 0;
}

int mt_hf_model_of(const mt_config *cfg, mt_hf_model *m, char *err, size_t errlen) {
  const mt_model_config *c = &cfg->model;
  memset(m, 0, sizeof *m);
  const int sig = c->num_experts > 0 && !strcmp(c->moe_router_score_function, "sigmoid");
  if (c->multi_latent_attention && !sig)
    REFUSE("model.multi_latent_attention is true: the Hugging Face naming with multi-latent "
           "attention is DeepSeek-V3's, which needs sigmoid-routed experts (model.num_experts "
           "> 0, moe_router_score_function \"sigmoid\")");
  if (c->mtp_num_layers > 0 && !sig)
    REFUSE("model.mtp_num_layers is %d: the Hugging Face naming with multi-token prediction "
           "layers is DeepSeek-V3's, which needs sigmoid-routed experts (model.num_experts > 0, "
           "moe_router_score_function \"sigmoid\")", c->mtp_num_layers);
  const char *pos = c->position_embedding_type;
  if (!strcmp(pos, "learned_absolute")) m->family = MT_HF_GPT2;
  else if (!strcmp(pos, "rope")) m->family = MT_HF_LLAMA;
  else
    REFUSE("model.position_embedding_type is \"%s\": the Hugging Face export knows GPT-2 "
           "naming (\"learned_absolute\") and Llama naming (\"rope\")", pos);
  if (c->num_experts > 0 && m->family == MT_HF_GPT2)
    REFUSE("model.num_experts is %d with learned_absolute positions: GPT-2 naming has no experts "
           "(the Qwen3-MoE and Mixtral namings need rope, RMSNorm and SwiGLU)", c->num_experts);
  if (c->qk_layernorm && m->family == MT_HF_GPT2)
    REFUSE("model.qk_layernorm is true with learned_absolute positions: GPT-2 naming has no "
           "query/key norm (Qwen3 naming has, with rope, RMSNorm and SwiGLU)");
  if (m->family == MT_HF_GPT2) {
    if (strcmp(c->normalization, "LayerNorm"))
      REFUSE("model.normalization is \"%s\" with learned_absolute positions: GPT-2 naming needs "
             "\"LayerNorm\" (Llama naming needs \"RMSNorm\" with \"rope\")", c->normalization);
    if (c->swiglu)
      REFUSE("model.swiglu is true with learned_absolute positions: GPT-2 naming needs the "
             "GELU MLP (Llama naming needs SwiGLU with \"rope\")");
    if (!c->add_bias_linear)
      REFUSE("model.add_bias_linear is false: GPT-2 naming needs the linear biases");
    if (c->num_query_groups != c->num_attention_heads)
      REFUSE("model.num_query_groups is %d for %d heads: GPT-2 naming has no grouped-query "
             "attention", c->num_query_groups, c->num_attention_heads);
    if ((int64_t)c->kv_channels * c->num_attention_heads != c->hidden_size)
      REFUSE("model.kv_channels is %d: GPT-2 naming needs hidden_size / num_attention_heads = %d",
             c->kv_channels, c->hidden_size / c->num_attention_heads);
  } else {
    if (strcmp(c->normalization, "RMSNorm"))
      REFUSE("model.normalization is \"%s\" with rope positions: Llama naming needs \"RMSNorm\" "
             "(GPT-2 naming needs \"LayerNorm\" with learned_absolute)", c->normalization);
    if (!c->swiglu)
      REFUSE("model.swiglu is false with rope positions: Llama naming needs the SwiGLU MLP");
    if (c->rotary_interleaved)
      REFUSE("model.rotary_interleaved is true: Llama naming needs rotate-half RoPE "
             "(non-interleaved)");
    if (c->rotary_percent != 1.0f)
      REFUSE("model.rotary_percent is %g: Llama naming rotates every channel (1.0)",
             mt_float_decimal(c->rotary_percent));
    if (c->use_rope_scaling)
      REFUSE("model.use_rope_scaling is true: this export writes \"rope_scaling\": null (the "
             "Llama-3.1 frequencies would be lost; writing its \"llama3\" entry is not "
             "implemented)");
    if (c->qk_layernorm) {
      m->family = MT_HF_QWEN3;
      if (c->add_bias_linear)
        REFUSE("model.add_bias_linear is true with qk_layernorm: Qwen3 naming (the one with "
               "q_norm/k_norm) has no linear biases");
    }
    if (c->num_experts > 0 && moe_model_of(cfg, m, err, errlen)) return -1;
  }
  m->L = c->num_layers;
  m->h = c->hidden_size;
  m->nh = c->num_attention_heads;
  m->ng = c->num_query_groups;
  m->hn = c->kv_channels;
  m->ffn = c->ffn_hidden_size;
  m->V = c->vocab_size;
  m->max_pos = c->max_position_embeddings;
  m->bias = c->add_bias_linear;
  m->untie = c->untie_embeddings_and_output_weights;
  m->eps = mt_float_decimal(c->norm_epsilon);
  m->rope_theta = mt_float_decimal(c->rotary_base);
  m->hidden_dropout = mt_float_decimal(c->hidden_dropout);
  m->attention_dropout = mt_float_decimal(c->attention_dropout);
  m->init_std = mt_float_decimal(c->init_method_std);
  return m->family == MT_HF_DEEPSEEK_V3 ? deepseek_attn_of(cfg, m, err, errlen) : 0;
}

/* rows the selection takes from a tensor of R rows */
static int64_t sel_rows(const mt_hf_model *m, mt_hf_sel s, int64_t R) {
  switch (s) {
    case MT_HF_Q: return m->nh * m->hn;
    case MT_HF_K:
    case MT_HF_V: return m->ng * m->hn;
    case MT_HF_HALF0:
    case MT_HF_HALF1: return R / 2;
    default: return R;
  }
}

/* megatrain channel of HF rope channel r: the same with rope_interleave
 * (pairs (2i, 2i + 1) on both sides); without, HF turns r with r + dr/2, the
 * pair megatrain keeps at (2r, 2r + 1) (tools/hf_map.h) */
static int64_t rope_row(const mt_hf_model *m, int64_t r) {
  if (!m->rope_halves) return r;
  return r < m->dr / 2 ? 2 * r : 2 * (r - m->dr / 2) + 1;
}

/* megatrain row of the selection's row i */
static int64_t src_row(const mt_hf_model *m, mt_hf_sel s, int64_t R, int64_t i) {
  const int64_t hn = m->hn, qpg = m->nh / m->ng, grp = (qpg + 2) * hn;
  switch (s) {
    case MT_HF_Q: {
      int64_t head = i / hn;
      return head / qpg * grp + head % qpg * hn + i % hn;
    }
    case MT_HF_K: return i / hn * grp + qpg * hn + i % hn;
    case MT_HF_V: return i / hn * grp + (qpg + 1) * hn + i % hn;
    case MT_HF_QKV: {
      const int64_t nq = m->nh * hn, nk = m->ng * hn;
      if (i < nq) return src_row(m, MT_HF_Q, R, i);
      if (i < nq + nk) return src_row(m, MT_HF_K, R, i - nq);
      return src_row(m, MT_HF_V, R, i - nq - nk);
    }
    case MT_HF_HALF1: return R / 2 + i;
    case MT_HF_QROPE: {
      const int64_t hq = m->dn + m->dr, j = i % hq;
      return i - j + (j < m->dn ? j : m->dn + rope_row(m, j - m->dn));
    }
    case MT_HF_KVROPE: return i < m->kr ? i : m->kr + rope_row(m, i - m->kr);
    default: return i;
  }
}

typedef struct {
  mt_hf_entry *e;
  int n, cap;
} list;

static void add(list *l, const mt_hf_model *m, const char *hf, const char *mt, int64_t rows,
                int64_t cols, mt_hf_sel sel, int transpose) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->e = mt_xrealloc(l->e, (size_t)l->cap * sizeof *l->e);
  }
  mt_hf_entry *e = &l->e[l->n++];
  memset(e, 0, sizeof *e);
  snprintf(e->hf, sizeof e->hf, "%s", hf);
  snprintf(e->mt, sizeof e->mt, "%s", mt);
  e->mt_rows = rows;
  e->mt_cols = cols;
  e->sel = sel;
  e->transpose = transpose;
  e->vec = rows == 1;
  int64_t R = e->vec ? cols : rows, C = e->vec ? 1 : cols, n = sel_rows(m, sel, R);
  e->ndim = e->vec ? 1 : 2;
  e->hf_rows = transpose ? C : n;
  e->hf_cols = transpose ? n : C;
}

/* ADD("self_attn.q_proj.weight", "self_attention.linear_qkv.weight", ...): the
 * tensor of layer `hp` (HF prefix) / `mp` (megatrain prefix) */
#define ADD(hf_suffix, mt_suffix, rows, cols, sel, tr)                                \
  do {                                                                                \
    snprintf(hn_, sizeof hn_, "%s.%s", hp, hf_suffix);                                \
    snprintf(mn_, sizeof mn_, "%s.%s", mp, mt_suffix);                                \
    add(li, m, hn_, mn_, rows, cols, sel, tr);                                        \
  } while (0)

/* MoE layer l: the router, then per expert its gate, up and down projections */
static void add_experts(list *li, const mt_hf_model *m, const char *hp, const char *mp) {
  const int mix = m->family == MT_HF_MIXTRAL;
  const char *blk = mix ? "block_sparse_moe" : "mlp";
  const char *gate = mix ? "w1" : "gate_proj", *up = mix ? "w3" : "up_proj",
             *down = mix ? "w2" : "down_proj";
  const int64_t h = m->h, F = m->moe_ffn;
  char hf[160], mt[160];
  snprintf(hf, sizeof hf, "%s.%s.gate.weight", hp, blk);
  snprintf(mt, sizeof mt, "%s.mlp.router.weight", mp);
  add(li, m, hf, mt, m->E, h, MT_HF_ALL, 0);
  if (m->family == MT_HF_DEEPSEEK_V3) {
    snprintf(hf, sizeof hf, "%s.mlp.gate.e_score_correction_bias", hp);
    snprintf(mt, sizeof mt, "%s.mlp.router.expert_bias", mp);
    add(li, m, hf, mt, 1, m->E, MT_HF_ALL, 0);
  }
  for (int e = 0; e < m->E; e++) {
    snprintf(mt, sizeof mt, "%s.mlp.experts.%d.linear_fc1.weight", mp, e);
    snprintf(hf, sizeof hf, "%s.%s.experts.%d.%s.weight", hp, blk, e, gate);
    add(li, m, hf, mt, 2 * F, h, MT_HF_HALF0, 0);
    snprintf(hf, sizeof hf, "%s.%s.experts.%d.%s.weight", hp, blk, e, up);
    add(li, m, hf, mt, 2 * F, h, MT_HF_HALF1, 0);
    snprintf(mt, sizeof mt, "%s.mlp.experts.%d.linear_fc2.weight", mp, e);
    snprintf(hf, sizeof hf, "%s.%s.experts.%d.%s.weight", hp, blk, e, down);
    add(li, m, hf, mt, h, F, MT_HF_ALL, 0);
  }
  if (m->shared_ffn > 0) { /* DeepSeek-V3: n_shared_experts experts as one MLP */
    const int64_t S = m->shared_ffn;
    snprintf(mt, sizeof mt, "%s.mlp.shared_experts.linear_fc1.weight", mp);
    snprintf(hf, sizeof hf, "%s.mlp.shared_experts.gate_proj.weight", hp);
    add(li, m, hf, mt, 2 * S, h, MT_HF_HALF0, 0);
    snprintf(hf, sizeof hf, "%s.mlp.shared_experts.up_proj.weight", hp);
    add(li, m, hf, mt, 2 * S, h, MT_HF_HALF1, 0);
    snprintf(mt, sizeof mt, "%s.mlp.shared_experts.linear_fc2.weight", mp);
    snprintf(hf, sizeof hf, "%s.mlp.shared_experts.down_proj.weight", hp);
    add(li, m, hf, mt, h, S, MT_HF_ALL, 0);
  }
}

/* One decoder layer of the Llama-like namings: HF prefix hp
 * ("model.layers.L"), megatrain prefix mp; moe: its MLP is the experts'. */
static void add_layer(list *li, const mt_hf_model *m, const char *hp, const char *mp, int moe) {
  char hn_[160], mn_[160];
  const int64_t h = m->h, qkv = (m->nh + 2 * m->ng) * m->hn, ha = m->nh * m->hn, f = m->ffn;
  ADD("input_layernorm.weight", "input_layernorm.weight", 1, h, MT_HF_ALL, 0);
  if (m->mla) {
    const int64_t n = m->nh, hq = m->dn + m->dr;
    if (m->qr > 0) {
      ADD("self_attn.q_a_proj.weight", "self_attention.linear_q_down_proj.weight", m->qr, h,
          MT_HF_ALL, 0);
      ADD("self_attn.q_a_layernorm.weight", "self_attention.q_layernorm.weight", 1, m->qr,
          MT_HF_ALL, 0);
      ADD("self_attn.q_b_proj.weight", "self_attention.linear_q_up_proj.weight", n * hq, m->qr,
          MT_HF_QROPE, 0);
    } else {
      ADD("self_attn.q_proj.weight", "self_attention.linear_q_proj.weight", n * hq, h,
          MT_HF_QROPE, 0);
    }
    ADD("self_attn.kv_a_proj_with_mqa.weight", "self_attention.linear_kv_down_proj.weight",
        m->kr + m->dr, h, MT_HF_KVROPE, 0);
    ADD("self_attn.kv_a_layernorm.weight", "self_attention.kv_layernorm.weight", 1, m->kr,
        MT_HF_ALL, 0);
    ADD("self_attn.kv_b_proj.weight", "self_attention.linear_kv_up_proj.weight",
        n * (m->dn + m->dv), m->kr, MT_HF_ALL, 0);
    ADD("self_attn.o_proj.weight", "self_attention.linear_proj.weight", h, n * m->dv, MT_HF_ALL,
        0);
  } else {
    ADD("self_attn.q_proj.weight", "self_attention.linear_qkv.weight", qkv, h, MT_HF_Q, 0);
    ADD("self_attn.k_proj.weight", "self_attention.linear_qkv.weight", qkv, h, MT_HF_K, 0);
    ADD("self_attn.v_proj.weight", "self_attention.linear_qkv.weight", qkv, h, MT_HF_V, 0);
    if (m->family == MT_HF_QWEN3 || m->family == MT_HF_QWEN3_MOE) {
      ADD("self_attn.q_norm.weight", "self_attention.q_layernorm.weight", 1, m->hn, MT_HF_ALL, 0);
      ADD("self_attn.k_norm.weight", "self_attention.k_layernorm.weight", 1, m->hn, MT_HF_ALL, 0);
    }
    if (m->bias) {
      ADD("self_attn.q_proj.bias", "self_attention.linear_qkv.bias", 1, qkv, MT_HF_Q, 0);
      ADD("self_attn.k_proj.bias", "self_attention.linear_qkv.bias", 1, qkv, MT_HF_K, 0);
      ADD("self_attn.v_proj.bias", "self_attention.linear_qkv.bias", 1, qkv, MT_HF_V, 0);
    }
    ADD("self_attn.o_proj.weight", "self_attention.linear_proj.weight", h, ha, MT_HF_ALL, 0);
    if (m->bias) ADD("self_attn.o_proj.bias", "self_attention.linear_proj.bias", 1, h, MT_HF_ALL, 0);
  }
  ADD("post_attention_layernorm.weight", "pre_mlp_layernorm.weight", 1, h, MT_HF_ALL, 0);
  if (moe) {
    add_experts(li, m, hp, mp);
    return;
  }
  ADD("mlp.gate_proj.weight", "mlp.linear_fc1.weight", 2 * f, h, MT_HF_HALF0, 0);
  ADD("mlp.up_proj.weight", "mlp.linear_fc1.weight", 2 * f, h, MT_HF_HALF1, 0);
  if (m->bias) {
    ADD("mlp.gate_proj.bias", "mlp.linear_fc1.bias", 1, 2 * f, MT_HF_HALF0, 0);
    ADD("mlp.up_proj.bias", "mlp.linear_fc1.bias", 1, 2 * f, MT_HF_HALF1, 0);
  }
  ADD("mlp.down_proj.weight", "mlp.linear_fc2.weight", h, f, MT_HF_ALL, 0);
  if (m->bias) ADD("mlp.down_proj.bias", "mlp.linear_fc2.bias", 1, h, MT_HF_ALL, 0);
}

int mt_hf_entries(const mt_hf_model *m, mt_hf_entry **out) {
  list li_ = {0}, *li = &li_;
  char hn_[160], mn_[160], hp[64], mp[96];
  const int64_t h = m->h, qkv = (m->nh + 2 * m->ng) * m->hn, ha = m->nh * m->hn, f = m->ffn;
  if (m->family == MT_HF_GPT2) {
    add(li, m, "transformer.wte.weight", "embedding.word_embeddings.weight", m->V, h, MT_HF_ALL, 0);
    add(li, m, "transformer.wpe.weight", "embedding.position_embeddings.weight", m->max_pos, h,
        MT_HF_ALL, 0);
    for (int l = 0; l < m->L; l++) {
      snprintf(hp, sizeof hp, "transformer.h.%d", l);
      snprintf(mp, sizeof mp, "decoder.layers.%d", l);
      ADD("ln_1.weight", "input_layernorm.weight", 1, h, MT_HF_ALL, 0);
      ADD("ln_1.bias", "input_layernorm.bias", 1, h, MT_HF_ALL, 0);
      ADD("attn.c_attn.weight", "self_attention.linear_qkv.weight", qkv, h,
          MT_HF_QKV, 1);
      ADD("attn.c_attn.bias", "self_attention.linear_qkv.bias", 1, qkv,
          MT_HF_QKV, 0);
      ADD("attn.c_proj.weight", "self_attention.linear_proj.weight", h, ha,
          MT_HF_ALL, 1);
      ADD("attn.c_proj.bias", "self_attention.linear_proj.bias", 1, h, MT_HF_ALL,
          0);
      ADD("ln_2.weight", "pre_mlp_layernorm.weight", 1, h, MT_HF_ALL, 0);
      ADD("ln_2.bias", "pre_mlp_layernorm.bias", 1, h, MT_HF_ALL, 0);
      ADD("mlp.c_fc.weight", "mlp.linear_fc1.weight", f, h, MT_HF_ALL, 1);
      ADD("mlp.c_fc.bias", "mlp.linear_fc1.bias", 1, f, MT_HF_ALL, 0);
      ADD("mlp.c_proj.weight", "mlp.linear_fc2.weight", h, f, MT_HF_ALL, 1);
      ADD("mlp.c_proj.bias", "mlp.linear_fc2.bias", 1, h, MT_HF_ALL, 0);
    }
    add(li, m, "transformer.ln_f.weight", "decoder.final_layernorm.weight", 1, h, MT_HF_ALL, 0);
    add(li, m, "transformer.ln_f.bias", "decoder.final_layernorm.bias", 1, h, MT_HF_ALL, 0);
  } else {
    add(li, m, "model.embed_tokens.weight", "embedding.word_embeddings.weight", m->V, h,
        MT_HF_ALL, 0);
    for (int l = 0; l < m->L; l++) {
      snprintf(hp, sizeof hp, "model.layers.%d", l);
      snprintf(mp, sizeof mp, "decoder.layers.%d", l);
      add_layer(li, m, hp, mp, m->E > 0 && m->moe[l]);
    }
    add(li, m, "model.norm.weight", "decoder.final_layernorm.weight", 1, h, MT_HF_ALL, 0);
    if (m->untie) add(li, m, "lm_head.weight", "output_layer.weight", m->V, h, MT_HF_ALL, 0);
    for (int k = 0; k < m->mtp; k++) { /* DeepSeek's layers num_hidden_layers + k */
      const char *head = m->untie ? "output_layer.weight" : "embedding.word_embeddings.weight";
      snprintf(hp, sizeof hp, "model.layers.%lld", (long long)(m->L + k));
      snprintf(mp, sizeof mp, "mtp.layers.%d", k);
      ADD("embed_tokens.weight", "", m->V, h, MT_HF_ALL, 0);
      snprintf(li->e[li->n - 1].mt, sizeof li->e[0].mt, "embedding.word_embeddings.weight");
      li->e[li->n - 1].copy = 1;
      ADD("enorm.weight", "enorm.weight", 1, h, MT_HF_ALL, 0);
      ADD("hnorm.weight", "hnorm.weight", 1, h, MT_HF_ALL, 0);
      ADD("eh_proj.weight", "eh_proj.weight", h, 2 * h, MT_HF_ALL, 0);
      snprintf(mp, sizeof mp, "mtp.layers.%d.mtp_model_layer", k);
      add_layer(li, m, hp, mp, m->E > 0 && m->moe[m->L - 1]);
      snprintf(mp, sizeof mp, "mtp.layers.%d", k);
      ADD("shared_head.norm.weight", "final_layernorm.weight", 1, h, MT_HF_ALL, 0);
      ADD("shared_head.head.weight", "", m->V, h, MT_HF_ALL, 0);
      snprintf(li->e[li->n - 1].mt, sizeof li->e[0].mt, "%s", head);
      li->e[li->n - 1].copy = 1;
    }
  }
  if (m->family == MT_HF_GPT2 && m->untie)
    add(li, m, "lm_head.weight", "output_layer.weight", m->V, h, MT_HF_ALL, 0);
  *out = li->e;
  return li->n;
}

void mt_hf_export(const mt_hf_model *m, const mt_hf_entry *e, const float *mt, float *hf) {
  const int64_t R = e->vec ? e->mt_cols : e->mt_rows, C = e->vec ? 1 : e->mt_cols;
  const int64_t n = sel_rows(m, e->sel, R);
  for (int64_t i = 0; i < n; i++) {
    const float *src = mt + src_row(m, e->sel, R, i) * C;
    if (e->transpose)
      for (int64_t c = 0; c < C; c++) hf[c * n + i] = src[c];
    else
      memcpy(hf + i * C, src, (size_t)C * sizeof(float));
  }
}

void mt_hf_import(const mt_hf_model *m, const mt_hf_entry *e, const float *hf, float *mt) {
  const int64_t R = e->vec ? e->mt_cols : e->mt_rows, C = e->vec ? 1 : e->mt_cols;
  const int64_t n = sel_rows(m, e->sel, R);
  for (int64_t i = 0; i < n; i++) {
    float *dst = mt + src_row(m, e->sel, R, i) * C;
    if (e->transpose)
      for (int64_t c = 0; c < C; c++) dst[c] = hf[c * n + i];
    else
      memcpy(dst, hf + i * C, (size_t)C * sizeof(float));
  }
}
