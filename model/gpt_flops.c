/* model/gpt_flops.c — see gpt_flops.h. */
#include "model/gpt_flops.h"

#include <string.h>

typedef struct {
  double B, s, L, h, np, ng, hn, f, g, n_moe, k, F, S, Vp;
  double ssq; /* sum L_i^2 of the causal segments (MT_FLOPS_MEGATRON) */
} dims;

int mt_flops_formula_from_name(const char *name) {
  if (!strcmp(name, "megatron")) return MT_FLOPS_MEGATRON;
  if (!strcmp(name, "paper")) return MT_FLOPS_PAPER;
  return -1;
}

const char *mt_flops_formula_name(int formula) {
  return formula == MT_FLOPS_PAPER ? "paper" : "megatron";
}

static dims dims_of(const mt_flops_shape *m) {
  dims d;
  d.B = (double)m->global_batch;
  d.s = (double)m->seq_length;
  d.L = (double)m->num_layers;
  d.h = (double)m->hidden_size;
  d.np = m->num_attention_heads > 0 ? (double)m->num_attention_heads : 1;
  d.ng = m->num_query_groups > 0 ? (double)m->num_query_groups : d.np;
  d.hn = m->kv_channels > 0 ? (double)m->kv_channels : d.h / d.np;
  d.f = (double)m->ffn_hidden_size;
  d.g = m->swiglu ? 1.5 : 1.0;
  d.n_moe = 0;
  if (m->num_experts > 0 && m->num_layers > 0) {
    int64_t freq = m->moe_layer_freq > 0 ? m->moe_layer_freq : 1;
    d.n_moe = m->num_moe_layers > 0 ? (double)m->num_moe_layers
                                     : (double)((m->num_layers - 1) / freq + 1);
  }
  d.k = m->moe_router_topk > 0 ? (double)m->moe_router_topk : 1;
  d.F = m->moe_ffn_hidden_size > 0 ? (double)m->moe_ffn_hidden_size : d.f;
  d.S = (double)m->moe_shared_expert_intermediate_size;
  d.Vp = (double)m->padded_vocab_size;
  d.ssq = m->seqlen_squared_sum > 0 ? m->seqlen_squared_sum : d.B * d.s * d.s;
  return d;
}

/* The MLP term of Megatron's bracket: g (n_dense ffn + n_moe (k F + S)) / (L h);
 * dense models keep Megatron's (ffn / h) g exactly. */
static double mlp_term(const dims *d) {
  if (d->n_moe <= 0) return d->f / d->h * d->g;
  return d->g * ((d->L - d->n_moe) * d->f + d->n_moe * (d->k * d->F + d->S)) / (d->L * d->h);
}

/* Multi-latent attention, per layer and token: the forward multiply-adds
 * of the token-linear part (q path, kv down projection to kv_lora +
 * pos_emb, kv up projection, linear_proj, and the two latent RMSNorms at
 * one each per channel as Megatron counts them), and of core attention per
 * attended (query, key) pair: Q K^T over dq = qk_head_dim +
 * qk_pos_emb_head_dim and P V over v_head_dim, for every head. */
typedef struct {
  double linear; /* multiply-adds per token */
  double core;   /* multiply-adds per attended pair */
} mla_macs;

static mla_macs mla_macs_of(const mt_flops_shape *m, const dims *d) {
  const double n = d->np, h = d->h, dq = (double)(m->qk_head_dim + m->qk_pos_emb_head_dim);
  const double dv = (double)m->v_head_dim, ckv = (double)m->kv_lora_rank;
  const double cq = (double)m->q_lora_rank;
  mla_macs r;
  const double q = m->q_lora_rank > 0 ? cq * (h + n * dq + 1.0) : h * n * dq;
  r.linear = q + ckv * (h + n * ((double)m->qk_head_dim + dv) + 1.0) +
             h * (double)m->qk_pos_emb_head_dim + n * dv * h;
  r.core = n * (dq + dv);
  return r;
}

/* The attention FLOPs of one iteration with MLA, all layers: 3 passes x 2
 * FLOPs per multiply-add over the token-linear part, and core attention
 * over the causal half of sum L_i^2 (MT_FLOPS_MEGATRON) or all B s^2
 * pairs (MT_FLOPS_PAPER). */
static double mla_flops(const mt_flops_shape *m, const dims *d) {
  const mla_macs a = mla_macs_of(m, d);
  const double pairs = m->formula == MT_FLOPS_PAPER ? d->B * d->s * d->s : d->ssq / 2.0;
  return 6.0 * d->L * (d->B * d->s * a.linear + pairs * a.core);
}

static double decoder_flops(const mt_flops_shape *m) {
  const dims d = dims_of(m);
  if (m->multi_latent_attention) {
    const double logit = d.Vp / (2.0 * d.L * d.h);
    return 12.0 * d.B * d.s * d.L * d.h * d.h * (mlp_term(&d) + logit) + mla_flops(m, &d);
  }
  const double q_ratio = d.np * d.hn / d.h; /* query_projection_to_hidden_size_ratio */
  const double attn = (1.0 + d.ng / d.np + d.s / d.h) * q_ratio;
  const double logit = d.Vp / (2.0 * d.L * d.h);
  if (m->formula == MT_FLOPS_PAPER)
    return 12.0 * d.B * d.s * d.L * d.h * d.h * (attn + mlp_term(&d) + logit);
  /* causal: QK^T and PV over the lower triangle of each segment, 2 FLOPs per
   * multiply-add, 3 passes: 3 * 2 * 2 * (L_i^2 / 2) * np hn per layer */
  const double linear = (1.0 + d.ng / d.np) * q_ratio;
  return 12.0 * d.B * d.s * d.L * d.h * d.h * (linear + mlp_term(&d) + logit) +
         6.0 * d.L * d.np * d.hn * d.ssq;
}

/* Multi-token prediction (Megatron's num_floating_point_operations: the
 * layer counts grow by D, of the last layer's kind; per token 3 · 2 · D ·
 * (3h norms + 2h² eh_proj) and the logit GEMM (D + 1) times): the D layers
 * as the decoder formula counts layers, plus the norms, eh_proj and D
 * output-layer GEMMs. */
static double mtp_flops(const mt_flops_shape *m) {
  if (m->mtp_num_layers <= 0) return 0.0;
  const double D = (double)m->mtp_num_layers, tok = (double)m->global_batch * m->seq_length;
  const double h = (double)m->hidden_size;
  mt_flops_shape with = *m;
  with.num_layers += m->mtp_num_layers;
  if (m->num_experts > 0) { /* the MoE-layer count made explicit, then grown */
    const dims d = dims_of(m);
    with.num_moe_layers = (int64_t)d.n_moe + (m->mtp_moe ? m->mtp_num_layers : 0);
    with.moe_layer_freq = 0;
  }
  with.mtp_num_layers = 0;
  const double layers = decoder_flops(&with) - decoder_flops(m); /* the logit term cancels */
  return layers + 6.0 * tok * D * (3.0 * h + 2.0 * h * h) +
         6.0 * tok * D * h * (double)m->padded_vocab_size;
}

double mt_flops_per_iteration(const mt_flops_shape *m) { return decoder_flops(m) + mtp_flops(m); }

void mt_flops_forward_parts(const mt_flops_shape *m, mt_flops_parts *out) {
  const dims d = dims_of(m);
  const double tok = d.B * d.s, q = d.np * d.hn, kv = d.ng * d.hn;
  if (m->multi_latent_attention) {
    const mla_macs a = mla_macs_of(m, &d);
    out->attn_linear = d.L * 2.0 * tok * a.linear;
    out->attn_core = d.L * 2.0 * a.core * (m->formula == MT_FLOPS_PAPER ? tok * d.s : d.ssq / 2.0);
  } else {
    /* qkv [h -> q + 2 kv] and proj [q -> h]: 2 FLOPs per multiply-add */
    out->attn_linear = d.L * 2.0 * tok * d.h * (q + 2.0 * kv + q);
    /* Q K^T and P V over all s x s positions, or the causal half of sum L_i^2 */
    out->attn_core = m->formula == MT_FLOPS_PAPER ? d.L * 2.0 * 2.0 * tok * d.s * q
                                                  : d.L * 2.0 * d.ssq * q;
  }
  /* fc1 [h -> g' f] + fc2 [f -> h], g' = 2 with SwiGLU: 2 (g'+1) = 4 g */
  out->mlp = 4.0 * d.g * tok * d.h * ((d.L - d.n_moe) * d.f + d.n_moe * (d.k * d.F + d.S));
  out->logits = 2.0 * tok * d.h * d.Vp;
}

mt_flops_shape mt_gpt_flops_shape(const mt_gpt_config *c, int64_t global_batch) {
  mt_flops_shape f = {0};
  f.global_batch = global_batch;
  f.seq_length = c->model.seq_length;
  f.num_layers = c->model.num_layers;
  f.hidden_size = c->model.hidden_size;
  f.num_attention_heads = c->model.num_attention_heads;
  f.num_query_groups = c->model.num_query_groups;
  f.kv_channels = c->model.kv_channels;
  f.ffn_hidden_size = c->model.ffn_hidden_size;
  f.swiglu = c->model.swiglu;
  f.num_experts = c->model.num_experts;
  f.moe_router_topk = c->model.moe_router_topk;
  f.moe_ffn_hidden_size = c->model.moe_ffn_hidden_size;
  f.moe_layer_freq = c->model.moe_layer_freq;
  f.mtp_num_layers = c->model.mtp_num_layers;
  f.mtp_moe = mt_gpt_is_moe_layer(c, c->model.num_layers); /* an MTP layer's kind */
  f.num_moe_layers = mt_gpt_num_moe_layers(c) - (f.mtp_moe ? f.mtp_num_layers : 0);
  f.padded_vocab_size = c->padded_vocab_size;
  f.moe_shared_expert_intermediate_size =
      c->model.num_experts > 0 ? c->model.moe_shared_expert_intermediate_size : 0;
  f.multi_latent_attention = c->model.multi_latent_attention;
  if (f.multi_latent_attention) {
    f.q_lora_rank = c->model.q_lora_rank;
    f.kv_lora_rank = c->model.kv_lora_rank;
    f.qk_head_dim = c->model.qk_head_dim;
    f.qk_pos_emb_head_dim = c->model.qk_pos_emb_head_dim;
    f.v_head_dim = c->model.v_head_dim;
  }
  return f;
}
