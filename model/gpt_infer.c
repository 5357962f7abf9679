/* model/gpt_infer.c — see gpt_infer.h. The layer below is the training
 * forward of model/gpt_block.c without dropout, on `rows` new tokens of one
 * sequence (b = 1) at global positions pos0 .., with the core attention
 * reading its keys and values from the KV cache (or from the whole
 * recomputed sequence). */
#include "model/gpt_infer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/gpt_infer_mla.h"
#include "model/gpt_internal.h"
#include "model/linear.h"

struct mt_gpt_infer {
  mt_gpt *m;
  mt_group *pp;              /* pipeline group (NULL: one stage) */
  int pp_size, pp_rank;
  mt_backend *be;
  int max_len, use_cache, len;
  size_t es;                 /* bytes of one T element */
  int npg;                   /* query heads per group */
  int32_t *tok_dev;          /* [max_len] device */
  int32_t *tok_host;         /* [max_len] host: the sequence so far (recompute path) */
  void *x, *ln, *tmp;        /* [max_len, h] */
  void *qkv, *qkv_lin;       /* [max_len, qkvl] (qkv_lin: qk_layernorm only) */
  void *ctx;                 /* [max_len, hl] */
  void *fc1, *act;           /* [max_len, glu·fl], [max_len, fl] */
  float *mean, *rstd;        /* [max_len] */
  float *qk_mean, *qk_rstd;  /* [max_len·(np + ng)] (qk_layernorm only) */
  float *lse;                /* [np, max_len] */
  void *lnf, *logits;        /* [h], [vl] (T) */
  float *logits_f, *gathered; /* [vl], [tp·vl] fp32 device */
  float *host_logits;        /* [tp·vl] host */
  void **cache;              /* [layers] x [max_len, 1, ng, 2, hn] (use_cache) */
  int32_t *kv_rows;          /* [max_len·ng·2] device: qkv row (of hn) of each cache row (of hn) */
  int64_t sample_id0;        /* the attention descriptor's (unused: no dropout) sample id */
  void *moe_out;             /* [max_len, h]: the routed experts' output (MoE models) */
  mt_moe *moe;               /* MoE context of the current call's rows (NULL between calls) */
  mt_moe_acts *moe_acts;
  mt_infer_mla *mla;         /* multi-latent attention: its latent cache (NULL without) */
};

static void *dalloc(mt_gpt_infer *g, int64_t n, size_t es, mt_mem_cat cat) {
  return g->be->ops->alloc(g->be, (size_t)n * es, cat);
}

mt_gpt_infer *mt_gpt_infer_create(mt_gpt *m, mt_group *pp, int max_len, int use_cache,
                                  char *err, size_t errlen) {
  const mt_gpt_config *c = &m->cfg;
  if (c->model.num_experts > 0 && (c->tp_size != 1 || c->ep_size != 1 || c->etp_size > 1)) {
    snprintf(err, errlen,
             "generation of a model with experts (model.num_experts %d) runs with tensor, expert "
             "and expert tensor parallelism 1 (got %d, %d and %d)",
             c->model.num_experts, c->tp_size, c->ep_size, c->etp_size);
    return NULL;
  }
  if (c->cp_size != 1 || m->n_chunks != 1 || (c->pp_size > 1 && !pp) ||
      (pp && mt_group_size(pp) != c->pp_size)) {
    snprintf(err, errlen,
             "generation runs with context_parallel_size 1 and one model chunk per pipeline "
             "stage, given the pipeline group when pipeline_model_parallel_size > 1 (got cp %d, "
             "%d chunks, pp %d)",
             c->cp_size, m->n_chunks, c->pp_size);
    return NULL;
  }
  if (c->sequence_parallel && c->tp_size > 1) {
    snprintf(err, errlen, "generation runs without sequence_parallel (the model has it on)");
    return NULL;
  }
  if (max_len < 1 ||
      (m->pos == MT_POS_LEARNED && max_len > c->model.max_position_embeddings)) {
    snprintf(err, errlen,
             "generation length %d is outside [1, max_position_embeddings %d]", max_len,
             c->model.max_position_embeddings);
    return NULL;
  }
  mt_gpt_infer *g = mt_xcalloc(1, sizeof *g);
  g->m = m;
  g->be = m->be;
  g->pp = c->pp_size > 1 ? pp : NULL;
  g->pp_size = c->pp_size;
  g->pp_rank = c->pp_rank;
  g->max_len = max_len;
  g->use_cache = use_cache;
  g->es = mt_dtype_size(m->be->dtype);
  g->npg = m->np / m->ng;
  const int64_t R = max_len, h = c->model.hidden_size, es = (int64_t)g->es;
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  g->tok_dev = dalloc(g, R, sizeof(int32_t), W);
  g->tok_host = mt_xcalloc((size_t)R, sizeof(int32_t));
  g->x = dalloc(g, R * h, (size_t)es, W);
  g->ln = dalloc(g, R * h, (size_t)es, W);
  g->tmp = dalloc(g, R * h, (size_t)es, W);
  g->qkv = dalloc(g, R * m->qkvl, (size_t)es, W);
  g->ctx = dalloc(g, R * m->hl, (size_t)es, W);
  const int64_t fmax = m->fl > m->shl ? m->fl : m->shl; /* dense and shared-expert MLPs */
  g->fc1 = dalloc(g, R * m->glu * fmax, (size_t)es, W);
  g->act = dalloc(g, R * fmax, (size_t)es, W);
  if (c->model.num_experts > 0) g->moe_out = dalloc(g, R * h, (size_t)es, W);
  g->mean = dalloc(g, R, sizeof(float), W);
  g->rstd = dalloc(g, R, sizeof(float), W);
  if (c->model.qk_layernorm) {
    g->qkv_lin = dalloc(g, R * m->qkvl, (size_t)es, W);
    g->qk_mean = dalloc(g, R * (m->np + m->ng), sizeof(float), W);
    g->qk_rstd = dalloc(g, R * (m->np + m->ng), sizeof(float), W);
  }
  g->lse = dalloc(g, R * m->np, sizeof(float), W);
  g->lnf = dalloc(g, h, (size_t)es, W);
  g->logits = dalloc(g, m->vl, (size_t)es, W);
  g->logits_f = dalloc(g, m->vl, sizeof(float), W);
  g->gathered = dalloc(g, m->vl * c->tp_size, sizeof(float), W);
  g->host_logits = mt_xmalloc((size_t)(m->vl * c->tp_size) * sizeof(float));
  if (c->model.multi_latent_attention) {
    g->mla = mt_infer_mla_create(m, max_len); /* the latents' cache, with or without use_cache */
  } else if (use_cache) {
    /* cache row (r, q, j) of hn elements (token r, query group q, j = 0 key /
     * 1 value) is qkv row ((r·ng + q)·(npg + 2) + npg + j) of hn elements */
    const int64_t nr = R * m->ng * 2;
    int32_t *idx = mt_xmalloc((size_t)nr * sizeof(int32_t));
    for (int64_t i = 0; i < nr; i++)
      idx[i] = (int32_t)(((i / 2) * (g->npg + 2)) + g->npg + (i & 1)); /* i / 2 = r·ng + q */
    g->kv_rows = dalloc(g, nr, sizeof(int32_t), W);
    g->be->ops->memcpy_h2d(g->be, g->kv_rows, idx, (size_t)nr * sizeof(int32_t));
    free(idx);
    g->cache = mt_xcalloc((size_t)m->n_local_layers, sizeof(void *));
    for (int l = 0; l < m->n_local_layers; l++)
      g->cache[l] = dalloc(g, R * m->ng * 2 * m->hn, (size_t)es, MT_MEM_ACT);
  }
  return g;
}

int mt_gpt_infer_mla_absorb(mt_gpt_infer *g, char *err, size_t errlen) {
  if (!g->mla) {
    snprintf(err, errlen, "weight absorption needs a model with multi-latent attention "
             "(model.multi_latent_attention is false)");
    return -1;
  }
  mt_infer_mla_absorb(g->mla);
  return 0;
}

void mt_gpt_infer_destroy(mt_gpt_infer *g) {
  if (!g) return;
  mt_backend *be = g->be;
  void *bufs[] = {g->tok_dev, g->x,       g->ln,     g->tmp,      g->qkv,      g->qkv_lin,
                  g->ctx,     g->fc1,     g->act,    g->mean,     g->rstd,     g->qk_mean,
                  g->qk_rstd, g->lse,     g->lnf,    g->logits,   g->logits_f, g->gathered,
                  g->kv_rows, g->moe_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->ops->free(be, bufs[i]);
  if (g->cache)
    for (int l = 0; l < g->m->n_local_layers; l++) be->ops->free(be, g->cache[l]);
  free(g->cache);
  mt_infer_mla_destroy(g->mla);
  free(g->tok_host);
  free(g->host_logits);
  free(g);
}

/* The TP context of a pass over `rows` tokens (b = 1, no sequence
 * parallelism: the TP layers then need no workspace). */
static mt_tp_ctx tp_ctx(const mt_gpt_infer *g, int64_t rows) {
  const mt_gpt *m = g->m;
  mt_tp_ctx t = {0};
  t.be = m->be;
  t.tp = m->cfg.tp_size > 1 ? m->cfg.tp_group : NULL;
  t.tp_size = m->cfg.tp_size;
  t.tp_rank = m->cfg.tp_rank;
  t.s = rows;
  t.b = 1;
  return t;
}

/* Copy the key and value heads of qkv rows [0, rows) into the cache of local
 * layer li at positions pos0 ..: one row gather of hn-element rows (per
 * token and query group its K head and V head, adjacent in both layouts). */
static void cache_append(mt_gpt_infer *g, int li, int64_t rows, int64_t pos0) {
  const mt_gpt *m = g->m;
  const int64_t per_tok = (int64_t)m->ng * 2; /* cache rows of hn per token */
  char *dst = (char *)g->cache[li] + (size_t)(pos0 * per_tok * m->hn) * g->es;
  g->be->ops->moe_gather_rows(g->be, dst, g->qkv, g->kv_rows, rows * per_tok, m->hn);
}

/* Core attention of global layer l over this rank's heads: the new rows'
 * queries (positions pos0 ..) against the cache (positions 0 .. pos0 +
 * rows - 1), or, without cache, the whole sequence (pos0 = 0) causally. */
static void attention(mt_gpt_infer *g, int li, int64_t rows, int64_t pos0) {
  const mt_gpt *m = g->m;
  const mt_gpt_config *c = &m->cfg;
  mt_attn_desc d = {0};
  d.s = (int)rows;
  d.b = 1;
  d.np = m->np;
  d.ng = m->ng;
  d.hn = m->hn;
  d.head_offset = c->tp_rank * m->np;
  d.n_heads_total = c->model.num_attention_heads;
  d.scale = 1.0f / sqrtf((float)d.hn);
  d.sample_ids = &g->sample_id0;
  if (!g->use_cache) {
    g->be->ops->flash_attn_fwd(g->be, &d, g->ctx, g->lse, g->qkv, NULL);
    return;
  }
  cache_append(g, li, rows, pos0);
  d.sq = (int)rows;
  d.sk = (int)(pos0 + rows);
  d.q_pos[0] = (int)pos0;
  d.k_pos[0] = 0;
  g->be->ops->flash_attn_fwd(g->be, &d, g->ctx, g->lse, g->qkv, g->cache[li]);
}

/* out [rows, h] = the MLP w (fc1 column-parallel, GELU or SwiGLU, fc2
 * row-parallel) of g->ln, inner width fl on this rank. */
static void mlp(mt_gpt_infer *g, mt_tp_ctx *tp, const mt_mlp_tensors *w, int64_t fl,
                void *out, int64_t rows) {
  const mt_gpt *m = g->m;
  mt_backend *be = g->be;
  const int64_t h = m->cfg.model.hidden_size;
  mt_column_parallel_linear_fwd(tp, g->fc1, g->ln, w->linear_fc1.weight, w->linear_fc1.bias,
                                m->glu * fl, h);
  if (m->glu == 2)
    be->ops->swiglu_fwd(be, g->act, g->fc1, rows, fl);
  else
    be->ops->gelu_fwd(be, g->act, g->fc1, rows * fl);
  mt_row_parallel_linear_fwd(tp, out, g->act, w->linear_fc2.weight, w->linear_fc2.bias, h, fl);
}

/* The MoE context for a call over `rows` tokens of the sequence: the
 * model's routing options, one process, every token routed on its own
 * (dropless: no capacity, so a token's experts do not depend on the others
 * of the call, and the KV cache equals the recompute path). */
static void moe_begin(mt_gpt_infer *g, int64_t rows) {
  mt_moe_config mc;
  mt_gpt_moe_ctx_config(g->m, &mc);
  mc.n_loc = mc.n_full = rows;
  mc.t0 = 0;
  mc.tp = mc.cp = mc.ep = mc.etp = NULL;
  mc.ep_size = 1;
  mc.ep_rank = 0;
  mc.route.capacity_factor = 0;
  mc.route.pad_to_capacity = 0;
  mc.route.seq_b = 1;
  g->moe = mt_moe_create(g->be, &mc);
  g->moe_acts = mt_moe_acts_create(g->moe);
}

static void moe_end(mt_gpt_infer *g) {
  mt_moe_acts_free(g->moe, g->moe_acts);
  mt_moe_destroy(g->moe);
  g->moe = NULL;
  g->moe_acts = NULL;
}

/* One transformer layer (local index li) on g->x [rows, h], in place. */
static void layer(mt_gpt_infer *g, int li, int64_t rows, int64_t pos0) {
  mt_gpt *m = g->m;
  mt_backend *be = g->be;
  const mt_gpt_config *c = &m->cfg;
  const mt_layer_tensors *w = &m->w.layers[li];
  const mt_attention_tensors *wa = &w->self_attention;
  const int64_t h = c->model.hidden_size;
  mt_tp_ctx tp = tp_ctx(g, rows);
  mt_gpt_norm_fwd(m, g->ln, g->mean, g->rstd, g->x, w->input_layernorm.weight,
                  w->input_layernorm.bias, rows);
  if (g->mla) {
    mt_infer_mla_attention(g->mla, &tp, li, g->ln, g->ctx, g->lse, rows, pos0);
  } else if (c->model.qk_layernorm) {
    mt_column_parallel_linear_fwd(&tp, g->qkv_lin, g->ln, wa->linear_qkv.weight,
                                  wa->linear_qkv.bias, m->qkvl, h);
    mt_qknorm_desc qd = {rows, m->np, m->ng, m->hn, m->rmsnorm,
                         c->model.norm_epsilon};
    be->ops->qknorm_fwd(be, &qd, g->qkv, g->qk_mean, g->qk_rstd, g->qkv_lin,
                        wa->q_layernorm.weight, wa->q_layernorm.bias, wa->k_layernorm.weight,
                        wa->k_layernorm.bias);
  } else {
    mt_column_parallel_linear_fwd(&tp, g->qkv, g->ln, wa->linear_qkv.weight, wa->linear_qkv.bias,
                                  m->qkvl, h);
  }
  if (!g->mla && m->pos == MT_POS_ROPE) {
    mt_rope_desc rd = {0};
    rd.s = (int)rows;
    rd.b = 1;
    rd.np = m->np;
    rd.ng = m->ng;
    rd.hn = m->hn;
    rd.rot_dim = mt_rotary_dim(m->hn, c->model.rotary_percent);
    rd.interleaved = c->model.rotary_interleaved;
    rd.base = c->model.rotary_base;
    mt_gpt_rope_scaling(&c->model, &rd);
    rd.s_offset = (int)pos0;
    be->ops->rope_fwd(be, &rd, g->qkv);
  }
  if (!g->mla) attention(g, li, rows, pos0);
  mt_row_parallel_linear_fwd(&tp, g->tmp, g->ctx, wa->linear_proj.weight, wa->linear_proj.bias, h,
                             m->hl);
  be->ops->add(be, g->x, g->tmp, g->x, rows * h); /* residual (dropout off) */
  mt_gpt_norm_fwd(m, g->ln, g->mean, g->rstd, g->x, w->pre_mlp_layernorm.weight,
                  w->pre_mlp_layernorm.bias, rows);
  if (!w->moe.experts) {
    mlp(g, &tp, &w->mlp, m->fl, g->tmp, rows);
  } else { /* routed experts (+ the shared expert) */
    const int l = m->chunks[0].first_layer + li; /* global layer */
    mt_moe_weights mw = mt_gpt_moe_weights(m, li);
    mw.expert_bias = mt_gpt_moe_expert_bias(m, mt_gpt_moe_layer_index(c, l)); /* selection only */
    mt_moe_forward(g->moe, g->moe_acts, &mw, g->moe_out, g->ln, -1, NULL);
    if (w->moe.shared_experts.linear_fc1.weight) {
      mlp(g, &tp, &w->moe.shared_experts, m->shl, g->tmp, rows);
      be->ops->add(be, g->moe_out, g->moe_out, g->tmp, rows * h);
    }
    be->ops->add(be, g->x, g->moe_out, g->x, rows * h);
    return;
  }
  be->ops->add(be, g->x, g->tmp, g->x, rows * h);
}

/* Final norm and output layer on the last row (last pipeline stage),
 * vocab-parallel logits all-gathered over TP, sent to the other stages
 * (a broadcast over the pipeline group), real columns copied to logits
 * (host). */
static void head(mt_gpt_infer *g, int64_t rows, float *logits) {
  mt_gpt *m = g->m;
  mt_backend *be = g->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->model.hidden_size;
  float *full = c->tp_size > 1 ? g->gathered : g->logits_f;
  if (g->pp_rank == g->pp_size - 1) {
    const char *last = (const char *)g->x + (size_t)((rows - 1) * h) * g->es;
    mt_gpt_norm_fwd(m, g->lnf, g->mean, g->rstd, last, m->w.final_layernorm.weight,
                    m->w.final_layernorm.bias, 1);
    mt_linear_fwd(be, g->logits, g->lnf, mt_gpt_output_weight(m, &m->w), NULL, 1, m->vl, h);
    be->ops->cast(be, g->logits_f, MT_F32, g->logits, be->dtype, m->vl);
    if (c->tp_size > 1) mt_allgather(c->tp_group, g->logits_f, g->gathered, m->vl, MT_F32);
  }
  if (g->pp) mt_broadcast(g->pp, full, m->vl * c->tp_size, MT_F32, g->pp_size - 1);
  const int64_t V = c->model.vocab_size; /* padded columns are cut */
  be->ops->memcpy_d2h(be, g->host_logits, full, (size_t)V * sizeof(float));
  memcpy(logits, g->host_logits, (size_t)V * sizeof(float));
}

void mt_gpt_infer_append(mt_gpt_infer *g, const int32_t *tokens, int n, float *logits) {
  mt_gpt *m = g->m;
  mt_backend *be = g->be;
  const mt_gpt_config *c = &m->cfg;
  MT_ASSERT(n >= 1 && g->len + n <= g->max_len);
  memcpy(g->tok_host + g->len, tokens, (size_t)n * sizeof(int32_t));
  /* the rows this call runs: the new tokens (cache) or the whole sequence */
  const int64_t pos0 = g->use_cache ? g->len : 0, rows = g->len + n - pos0;
  g->len += n;
  be->ops->memcpy_h2d(be, g->tok_dev, g->tok_host + pos0, (size_t)rows * sizeof(int32_t));
  const int64_t h = c->model.hidden_size;
  mt_tp_ctx tp = tp_ctx(g, rows);
  if (g->pp_rank == 0) {
    mt_vocab_parallel_embedding_fwd(&tp, g->x, g->tok_dev, m->w.word_embeddings.weight,
                                    m->v_start, m->v_start + m->vl, h);
    if (m->pos == MT_POS_LEARNED)
      be->ops->pos_embedding_fwd(be, g->x, m->w.position_embeddings.weight, rows, 1, h, pos0);
  }
  /* the stages in order: stage s runs its layers on x and sends x [rows, h]
   * to stage s + 1 (a broadcast over the pipeline group from s: the ranks
   * of other stages receive into scratch) */
  for (int s = 0; s < g->pp_size; s++) {
    if (s == g->pp_rank) {
      if (c->model.num_experts > 0) moe_begin(g, rows);
      for (int li = 0; li < m->n_local_layers; li++) layer(g, li, rows, pos0);
      if (g->moe) moe_end(g);
    }
    if (s + 1 < g->pp_size) {
      void *buf = g->pp_rank == s || g->pp_rank == s + 1 ? g->x : g->tmp;
      mt_broadcast(g->pp, buf, rows * h, be->dtype, s);
    }
  }
  head(g, rows, logits);
}

void mt_gpt_infer_kv_bytes(const mt_gpt *m, int64_t *cache, int64_t *full) {
  const mt_model_config *mc = &m->cfg.model;
  const int64_t L = mc->num_layers, es = (int64_t)mt_dtype_size(m->be->dtype);
  if (mc->multi_latent_attention) {
    *cache = L * (mc->kv_lora_rank + mc->qk_pos_emb_head_dim) * es;
    *full = L * mc->num_attention_heads *
            (mc->qk_head_dim + mc->qk_pos_emb_head_dim + mc->v_head_dim) * es;
  } else {
    *cache = *full = L * 2 * ((int64_t)m->ng * m->cfg.tp_size) * m->hn * es;
  }
}
