/* model/gpt_register.c — this rank's parameters: registered in the registry
 * (model/params.h) in the order that fixes the flat buffers, and bound to
 * the named tensors of model/gpt_tensors.h (m->w, m->g).
 *
 * Shards (Megatron's column/row/vocab split, model/tensor_parallel.h):
 * column-parallel weights (linear_qkv, linear_fc1) and their biases split
 * the output features, row-parallel weights (linear_proj, linear_fc2) the
 * input features, the word embedding and an untied output layer the padded
 * vocabulary rows. Norms, the position embedding and row-parallel biases are
 * replicated over TP. Registration order: embedding, layers (ascending;
 * within a layer input_layernorm, self_attention.{linear_qkv, q_layernorm,
 * k_layernorm, linear_proj}, pre_mlp_layernorm, then the dense mlp or the MoE
 * router, experts and shared expert), head — so the flat buffers keep one
 * contiguous range per hook part (embedding, each layer, head), which ZeRO
 * shards and checkpoints slice. */
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "model/gpt_internal.h"

mt_param *mt_gpt_add_param(mt_gpt *m, void **w, void **g, const char *name, int64_t rows,
                           int64_t cols, int64_t lrows, int64_t lcols, int64_t r0, int64_t c0,
                           mt_init_kind init, int no_weight_decay, int tp_replicated) {
  mt_param_list *pl = &m->params.list;
  const int idx = mt_params_add(pl, name, rows, cols, lrows, lcols, r0, c0, init,
                                no_weight_decay, tp_replicated);
  m->params.ref = mt_xrealloc(m->params.ref, (size_t)pl->cap * sizeof(mt_param_ref));
  m->params.ref[idx] = (mt_param_ref){w, g};
  return &pl->p[idx];
}

/* A [1, n] bias or norm vector, replicated over TP (hidden-size norms are
 * partial under SP, q/k norms under any tp > 1: sp_partial); no weight
 * decay unless `decay` (the q/k norms under apply_wd_to_qk_layernorm). */
static void add_vec_wd(mt_gpt *m, void **w, void **g, const char *name, int64_t n,
                       mt_init_kind init, int sp_partial, int decay) {
  mt_gpt_add_param(m, w, g, name, 1, n, 1, n, 0, 0, init, !decay, 1)->sp_partial = sp_partial;
}
static void add_vec(mt_gpt *m, void **w, void **g, const char *name, int64_t n, mt_init_kind init,
                    int sp_partial) {
  add_vec_wd(m, w, g, name, n, init, sp_partial, 0);
}

/* Norm `prefix` of width n: weight (ones) and, with LayerNorm, bias (zeros). */
static void add_norm(mt_gpt *m, mt_wb *w, mt_wb *g, const char *prefix, int64_t n,
                     int sp_partial, int decay) {
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  add_vec_wd(m, &w->weight, &g->weight, name, n, MT_INIT_ONES, sp_partial, decay);
  if (m->rmsnorm) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  add_vec_wd(m, &w->bias, &g->bias, name, n, MT_INIT_ZEROS, sp_partial, decay);
}

/* Column-parallel linear `prefix`: weight [out, in] of which this rank holds
 * lout rows from r0 (halves: SwiGLU's gate and up slices), bias [out] (zeros,
 * sliced likewise) unless add_bias_linear is false. */
static void add_column(mt_gpt *m, mt_wb *w, mt_wb *g, const char *prefix, int64_t out,
                       int64_t in, int64_t lout, int64_t r0, mt_init_kind init, int halves) {
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  mt_gpt_add_param(m, &w->weight, &g->weight, name, out, in, lout, in, r0, 0, init, 0,
                   lout == out)->halves = halves;
  if (!m->cfg.model.add_bias_linear) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  mt_gpt_add_param(m, &w->bias, &g->bias, name, 1, out, 1, lout, 0, r0, MT_INIT_ZEROS, 1,
                   lout == out)->halves = halves;
}

/* Row-parallel linear `prefix`: weight [out, in] of which this rank holds lin
 * columns from c0, bias [out] replicated (zeros) unless add_bias_linear is
 * false. */
static void add_row(mt_gpt *m, mt_wb *w, mt_wb *g, const char *prefix, int64_t out, int64_t in,
                    int64_t lin, int64_t c0, mt_init_kind init) {
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  mt_gpt_add_param(m, &w->weight, &g->weight, name, out, in, out, lin, 0, c0, init, 0, lin == in);
  if (!m->cfg.model.add_bias_linear) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  add_vec(m, &w->bias, &g->bias, name, out, MT_INIT_ZEROS, 0);
}

/* The shared expert of MoE layer l (model/moe_shared_experts.h): laid out
 * and sharded exactly as the dense MLP, width S = moe_shared_expert_intermediate_size;
 * nothing without it. */
static void register_shared(mt_gpt *m, mt_mlp_tensors *w, mt_mlp_tensors *g,
                            const char *pre) {
  const mt_gpt_config *c = &m->cfg;
  if (c->model.moe_shared_expert_intermediate_size <= 0) return;
  const int64_t h = c->model.hidden_size, S = c->model.moe_shared_expert_intermediate_size;
  const int64_t Sl = m->shl;
  const int64_t r0 = (int64_t)c->tp_rank * Sl;
  char p[MT_PARAM_NAME_MAX];
  snprintf(p, sizeof p, "%s.mlp.shared_experts.linear_fc1", pre);
  add_column(m, &w->linear_fc1, &g->linear_fc1, p, m->glu * S, h, m->glu * Sl, r0,
             MT_INIT_NORMAL, m->glu == 2);
  snprintf(p, sizeof p, "%s.mlp.shared_experts.linear_fc2", pre);
  add_row(m, &w->linear_fc2, &g->linear_fc2, p, h, S, Sl, r0, MT_INIT_SCALED);
}

/* MoE layer l (local index li): the router [E, h] (replicated over TP,
 * partial over SP shards) and this rank's experts e = ep_rank·E/ep + le:
 * linear_fc1 [g·F, h], linear_fc2 [h, F] (with their biases unless
 * add_bias_linear is false; is_expert, never tp_replicated); with expert
 * tensor parallelism each expert's fc1 rows (per SwiGLU half) and fc2
 * columns are split over ETP (model/moe_etp.h). Then the shared expert,
 * after the experts as in Megatron's MoELayer. */
static void register_moe(mt_gpt *m, int li, const char *pre) {
  const mt_gpt_config *c = &m->cfg;
  mt_moe_tensors *w = &m->w.layers[li].moe, *g = &m->g.layers[li].moe;
  const int64_t h = c->model.hidden_size, F = c->model.moe_ffn_hidden_size;
  const int64_t E = c->model.num_experts;
  const int El = c->model.num_experts / c->ep_size;
  char p[MT_PARAM_NAME_MAX];
  snprintf(p, sizeof p, "%s.mlp.router.weight", pre);
  mt_gpt_add_param(m, &w->router.weight, &g->router.weight, p, E, h, E, h, 0, 0, MT_INIT_NORMAL,
                   0, 1)->sp_partial = c->sequence_parallel && c->tp_size > 1;
  const int etp = c->etp_size > 1 ? c->etp_size : 1;
  const int64_t Fl = F / etp, f0 = (int64_t)(etp > 1 ? c->etp_rank : 0) * Fl;
  MT_ASSERT(F % etp == 0 && (etp == 1 || !c->model.add_bias_linear));
  w->experts = mt_xcalloc((size_t)El, sizeof(mt_mlp_tensors));
  g->experts = mt_xcalloc((size_t)El, sizeof(mt_mlp_tensors));
  const int first = m->params.list.n;
  for (int le = 0; le < El; le++) {
    const int e = c->ep_rank * El + le;
    mt_mlp_tensors *we = &w->experts[le], *ge = &g->experts[le];
    snprintf(p, sizeof p, "%s.mlp.experts.%d.linear_fc1", pre, e);
    add_column(m, &we->linear_fc1, &ge->linear_fc1, p, m->glu * F, h, m->glu * Fl, f0,
               MT_INIT_NORMAL, m->glu == 2 && etp > 1);
    snprintf(p, sizeof p, "%s.mlp.experts.%d.linear_fc2", pre, e);
    add_row(m, &we->linear_fc2, &ge->linear_fc2, p, h, F, Fl, f0, MT_INIT_SCALED);
  }
  for (int i = first; i < m->params.list.n; i++) {
    m->params.list.p[i].is_expert = 1;
    m->params.list.p[i].tp_replicated = 0;
  }
  register_shared(m, &w->shared_experts, &g->shared_experts, pre);
}

/* Multi-latent attention (model/gpt_mla.c; model/gpt_mla.h the packing).
 * Parameters (Megatron-core's MLASelfAttention names, weights only, no
 * biases on the q/kv projections as Megatron builds them): with n heads,
 * dn = qk_head_dim, dr = qk_pos_emb_head_dim, dv = v_head_dim,
 * hq = dn + dr, qr = q_lora_rank, kr = kv_lora_rank:
 *   linear_q_proj.weight       [n·hq, h]       column-parallel (no q_lora_rank)
 *   linear_q_down_proj.weight  [qr, h]         replicated over TP
 *   q_layernorm.weight (.bias) [qr]            replicated (qk_layernorm)
 *   linear_q_up_proj.weight    [n·hq, qr]      column-parallel
 *   linear_kv_down_proj.weight [kr + dr, h]    replicated over TP
 *   kv_layernorm.weight (.bias)[kr]            replicated (qk_layernorm)
 *   linear_kv_up_proj.weight   [n·(dn+dv), kr] column-parallel
 *   linear_proj.weight         [h, n·dv]       row-parallel (the standard layer's
 *                                              registration)
 * The replicated ones read this rank's token rows: under sequence
 * parallelism their gradients are partial sums over the TP ranks' shards
 * (sp_partial: finalize sums them, Megatron's sequence_parallel attribute
 * of its duplicated linears); without it every rank computes the same
 * gradient. */

/* A replicated [rows, cols] weight read by this rank's token rows. */
static void add_replicated(mt_gpt *m, mt_wb *w, mt_wb *g, const char *name, int64_t rows,
                           int64_t cols, mt_init_kind init, int no_wd) {
  const mt_gpt_config *c = &m->cfg;
  mt_gpt_add_param(m, &w->weight, &g->weight, name, rows, cols, rows, cols, 0, 0, init, no_wd,
                   1)->sp_partial = c->sequence_parallel && c->tp_size > 1;
}

/* The latent norm `prefix` of width n (qk_layernorm): weight and, with
 * LayerNorm, bias. */
static void add_latent_norm(mt_gpt *m, mt_wb *w, mt_wb *g, const char *prefix, int64_t n,
                            int decay) {
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  add_replicated(m, w, g, name, 1, n, MT_INIT_ONES, !decay);
  if (m->rmsnorm) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  const mt_gpt_config *c = &m->cfg;
  mt_gpt_add_param(m, &w->bias, &g->bias, name, 1, n, 1, n, 0, 0, MT_INIT_ZEROS, !decay,
                   1)->sp_partial = c->sequence_parallel && c->tp_size > 1;
}

/* A column-parallel weight [n·per, in] split by heads: this rank's np heads. */
static void add_heads(mt_gpt *m, mt_wb *w, mt_wb *g, const char *name, int64_t per, int64_t in) {
  const mt_gpt_config *c = &m->cfg;
  const int64_t lr = (int64_t)m->np * per;
  mt_gpt_add_param(m, &w->weight, &g->weight, name, lr * c->tp_size, in, lr, in,
                   (int64_t)c->tp_rank * lr, 0, MT_INIT_NORMAL, 0, c->tp_size == 1);
}

static void register_mla(mt_gpt *m, int li, const char *pre) {
  const mt_gpt_config *c = &m->cfg;
  const mt_model_config *mc = &c->model;
  mt_attention_tensors *w = &m->w.layers[li].self_attention, *g = &m->g.layers[li].self_attention;
  const int64_t h = mc->hidden_size, hq = mc->qk_head_dim + mc->qk_pos_emb_head_dim;
  char p[MT_PARAM_NAME_MAX];
  if (mc->q_lora_rank <= 0) {
    snprintf(p, sizeof p, "%s.self_attention.linear_q_proj.weight", pre);
    add_heads(m, &w->linear_q_proj, &g->linear_q_proj, p, hq, h);
  } else {
    snprintf(p, sizeof p, "%s.self_attention.linear_q_down_proj.weight", pre);
    add_replicated(m, &w->linear_q_down_proj, &g->linear_q_down_proj, p, mc->q_lora_rank, h,
                   MT_INIT_NORMAL, 0);
    if (mc->qk_layernorm) { /* Megatron's apply_wd_to_qk_layernorm matches "q_layernorm" */
      snprintf(p, sizeof p, "%s.self_attention.q_layernorm", pre);
      add_latent_norm(m, &w->q_layernorm, &g->q_layernorm, p, mc->q_lora_rank,
                      c->apply_wd_to_qk_layernorm);
    }
    snprintf(p, sizeof p, "%s.self_attention.linear_q_up_proj.weight", pre);
    add_heads(m, &w->linear_q_up_proj, &g->linear_q_up_proj, p, hq, mc->q_lora_rank);
  }
  snprintf(p, sizeof p, "%s.self_attention.linear_kv_down_proj.weight", pre);
  add_replicated(m, &w->linear_kv_down_proj, &g->linear_kv_down_proj, p,
                 mc->kv_lora_rank + mc->qk_pos_emb_head_dim, h, MT_INIT_NORMAL, 0);
  if (mc->qk_layernorm) {
    snprintf(p, sizeof p, "%s.self_attention.kv_layernorm", pre);
    add_latent_norm(m, &w->kv_layernorm, &g->kv_layernorm, p, mc->kv_lora_rank, 0);
  }
  snprintf(p, sizeof p, "%s.self_attention.linear_kv_up_proj.weight", pre);
  add_heads(m, &w->linear_kv_up_proj, &g->linear_kv_up_proj, p, mc->qk_head_dim + mc->v_head_dim,
            mc->kv_lora_rank);
}

/* Transformer layer l (local index li). linear_qkv: rows grouped per query
 * group (its q heads, k head, v head), TP rank r holds query groups
 * [r·ng, (r+1)·ng): one contiguous block. linear_fc1 with SwiGLU: global
 * rows [0, f) gate, [f, 2f) up; rank r holds gate rows [r·fl, ..) and up
 * rows [f + r·fl, ..) (mt_param.halves). */
void mt_gpt_register_layer(mt_gpt *m, int li, int l, const char *pre) {
  const mt_gpt_config *c = &m->cfg;
  mt_layer_tensors *w = &m->w.layers[li], *g = &m->g.layers[li];
  const int64_t h = c->model.hidden_size, f = c->model.ffn_hidden_size, tr = c->tp_rank;
  const int64_t qkvl = m->qkvl, hl = m->hl, fl = m->fl, gl = m->glu;
  const int sp = c->sequence_parallel && c->tp_size > 1;
  char p[MT_PARAM_NAME_MAX];
  snprintf(p, sizeof p, "%s.input_layernorm", pre);
  add_norm(m, &w->input_layernorm, &g->input_layernorm, p, h, sp, 0);
  if (m->mla) { /* multi-latent attention's projections (register_mla above) */
    register_mla(m, li, pre);
  } else {
    snprintf(p, sizeof p, "%s.self_attention.linear_qkv", pre);
    add_column(m, &w->self_attention.linear_qkv, &g->self_attention.linear_qkv, p,
               qkvl * c->tp_size, h, qkvl, tr * qkvl, MT_INIT_NORMAL, 0);
  }
  if (c->model.qk_layernorm && !m->mla) { /* [hn] shared by the heads: partial under any tp > 1 */
    snprintf(p, sizeof p, "%s.self_attention.q_layernorm", pre);
    add_norm(m, &w->self_attention.q_layernorm, &g->self_attention.q_layernorm, p, m->hn,
             c->tp_size > 1, c->apply_wd_to_qk_layernorm);
    snprintf(p, sizeof p, "%s.self_attention.k_layernorm", pre);
    add_norm(m, &w->self_attention.k_layernorm, &g->self_attention.k_layernorm, p, m->hn,
             c->tp_size > 1, c->apply_wd_to_qk_layernorm);
  }
  snprintf(p, sizeof p, "%s.self_attention.linear_proj", pre);
  add_row(m, &w->self_attention.linear_proj, &g->self_attention.linear_proj, p, h,
          hl * c->tp_size, hl, tr * hl, MT_INIT_SCALED);
  snprintf(p, sizeof p, "%s.pre_mlp_layernorm", pre);
  add_norm(m, &w->pre_mlp_layernorm, &g->pre_mlp_layernorm, p, h, sp, 0);
  if (mt_gpt_is_moe_layer(c, l)) {
    register_moe(m, li, pre);
    return;
  }
  snprintf(p, sizeof p, "%s.mlp.linear_fc1", pre);
  add_column(m, &w->mlp.linear_fc1, &g->mlp.linear_fc1, p, gl * f, h, gl * fl, tr * fl,
             MT_INIT_NORMAL, gl == 2);
  snprintf(p, sizeof p, "%s.mlp.linear_fc2", pre);
  add_row(m, &w->mlp.linear_fc2, &g->mlp.linear_fc2, p, h, f, fl, tr * fl, MT_INIT_SCALED);
}

void mt_gpt_register_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_gpt_tensors *w = &m->w, *g = &m->g;
  const int64_t h = c->model.hidden_size, V = c->padded_vocab_size, vl = m->vl;
  const int sp = c->sequence_parallel && c->tp_size > 1;
  const int has_pre = m->chunks[0].pre, has_post = m->chunks[m->n_chunks - 1].post;
  m->params.embedding[0] = m->params.head[0] = 0;
  m->params.embedding[1] = m->params.head[1] = -1;
  if (has_pre) {
    mt_gpt_add_param(m, &w->word_embeddings.weight, &g->word_embeddings.weight,
                     "embedding.word_embeddings.weight", V, h, vl, h, m->v_start, 0,
                     MT_INIT_NORMAL, 0, 0);
    if (m->pos == MT_POS_LEARNED) {
      const int64_t P = c->model.max_position_embeddings;
      mt_gpt_add_param(m, &w->position_embeddings.weight, &g->position_embeddings.weight,
                       "embedding.position_embeddings.weight", P, h, P, h, 0, 0, MT_INIT_NORMAL,
                       0, 1)->sp_partial = sp;
    }
    m->params.embedding[1] = m->params.list.n - 1;
  }
  m->n_mtp = has_post ? c->model.mtp_num_layers : 0; /* their layers follow the decoder's */
  const int nl = m->n_local_layers + m->n_mtp > 0 ? m->n_local_layers + m->n_mtp : 1;
  w->layers = mt_xcalloc((size_t)nl, sizeof(mt_layer_tensors));
  g->layers = mt_xcalloc((size_t)nl, sizeof(mt_layer_tensors));
  m->params.layers = mt_xcalloc((size_t)nl, sizeof(*m->params.layers));
  for (int k = 0; k < m->n_chunks; k++) {
    const mt_chunk *ch = &m->chunks[k];
    for (int lc = 0; lc < ch->n_layers; lc++) {
      const int li = ch->layer_base + lc;
      m->params.layers[li][0] = m->params.list.n;
      char pre[MT_PARAM_NAME_MAX];
      snprintf(pre, sizeof pre, "decoder.layers.%d", ch->first_layer + lc);
      mt_gpt_register_layer(m, li, ch->first_layer + lc, pre);
      m->params.layers[li][1] = m->params.list.n - 1;
    }
  }
  if (!has_post) return;
  m->params.head[0] = m->params.list.n;
  add_norm(m, &w->final_layernorm, &g->final_layernorm, "decoder.final_layernorm", h, sp, 0);
  if (c->model.untie_embeddings_and_output_weights) {
    mt_gpt_add_param(m, &w->output_layer.weight, &g->output_layer.weight, "output_layer.weight",
                     V, h, vl, h, m->v_start, 0, MT_INIT_NORMAL, 0, 0);
  } else if (has_pre) {
    m->head_shares_embedding = 1;
  } else {
    /* last stage's copy of the tied word embedding: same name, so the same
     * initial values; its gradient joins the first stage's in finalize */
    mt_gpt_add_param(m, &w->output_layer.weight, &g->output_layer.weight,
                     "embedding.word_embeddings.weight", V, h, vl, h, m->v_start, 0,
                     MT_INIT_NORMAL, 0, 0)->shared_copy = 1;
  }
  m->params.head[1] = m->params.list.n - 1; /* MTP's follow (mt_gpt_mtp_register) */
}

void mt_gpt_tensors_free(mt_gpt *m) {
  for (int li = 0; li < m->n_local_layers + m->n_mtp && m->w.layers; li++) {
    free(m->w.layers[li].moe.experts);
    free(m->g.layers[li].moe.experts);
  }
  free(m->w.layers);
  free(m->g.layers);
  free(m->w.mtp);
  free(m->g.mtp);
  free(m->params.layers);
  free(m->params.ref);
}
