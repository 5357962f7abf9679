/* model/gpt_block.c — one pre-LayerNorm transformer layer, forward and
 * backward, through the backend op table (Megatron's TransformerLayer:
 * input_layernorm -> self_attention -> dropout + residual ->
 * pre_mlp_layernorm -> mlp -> dropout + residual). */
#include <math.h>

#include "core/rope_freq.h"
#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/moe_shared_experts.h"

/* Hidden dropout after proj / fc2 of layer l, on this rank's [sl, b, h]
 * shard (mt_gpt_dropout_* place it in the full sequence). */
static mt_dropout_desc hidden_dropout_desc(const mt_gpt *m, int l, const char *site) {
  const mt_gpt_config *c = &m->cfg;
  mt_dropout_desc d = {0};
  d.p = m->pass.train ? c->model.hidden_dropout : 0.0f;
  d.key = mt_rng_key(c->seed, site, (uint64_t)l, 0);
  d.s = (int)m->sl;
  d.b = c->micro_batch_size;
  d.h = c->model.hidden_size;
  d.s_full = c->model.seq_length;
  d.h_offset = 0;
  d.h_full = c->model.hidden_size;
  d.sample_ids = m->pass.sample_ids;
  return d;
}

int mt_gpt_shard_runs(const mt_gpt *m, mt_cp_run runs[2]) {
  const int64_t row0 = m->sl < m->s_loc ? (int64_t)m->cfg.tp_rank * m->sl : 0;
  return mt_cp_runs(&m->cpl, row0, m->sl, runs);
}

/* Bytes of one sequence row of a [sl, b, h] tensor. */
static size_t row_bytes(const mt_gpt *m) {
  return (size_t)m->cfg.micro_batch_size * (size_t)m->cfg.model.hidden_size *
         mt_dtype_size(m->be->dtype);
}

void mt_gpt_dropout_add_fwd(mt_gpt *m, const mt_dropout_desc *d, void *out, const void *x,
                            const void *residual) {
  mt_cp_run r[2];
  const int n = mt_gpt_shard_runs(m, r);
  const int64_t row0 = r[0].row;
  const size_t rb = row_bytes(m);
  for (int k = 0; k < n; k++) {
    mt_dropout_desc dk = *d;
    dk.s = (int)r[k].n;
    dk.s_offset = (int)r[k].pos;
    const size_t off = (size_t)(r[k].row - row0) * rb;
    m->be->ops->dropout_add_fwd(m->be, &dk, (char *)out + off, (const char *)x + off,
                                (const char *)residual + off);
  }
}

void mt_gpt_dropout_bwd(mt_gpt *m, const mt_dropout_desc *d, void *dx, const void *dout) {
  mt_cp_run r[2];
  const int n = mt_gpt_shard_runs(m, r);
  const int64_t row0 = r[0].row;
  const size_t rb = row_bytes(m);
  for (int k = 0; k < n; k++) {
    mt_dropout_desc dk = *d;
    dk.s = (int)r[k].n;
    dk.s_offset = (int)r[k].pos;
    const size_t off = (size_t)(r[k].row - row0) * rb;
    m->be->ops->dropout_bwd(m->be, &dk, (char *)dx + off, (const char *)dout + off);
  }
}

/* Core attention over this TP rank's heads (global head offset tp_rank·np)
 * and query groups. */
static mt_attn_desc attn_desc(const mt_gpt *m, int l) {
  const mt_gpt_config *c = &m->cfg;
  mt_attn_desc d = {0};
  d.s = c->model.seq_length;
  d.b = c->micro_batch_size;
  d.np = m->np;
  d.ng = m->ng;
  d.hn = m->hn;
  d.head_offset = c->tp_rank * m->np;
  d.n_heads_total = c->model.num_attention_heads;
  d.scale = 1.0f / sqrtf((float)d.hn);
  d.dropout_p = m->pass.train ? c->model.attention_dropout : 0.0f;
  d.key = mt_rng_key(c->seed, "attention_dropout", (uint64_t)l, 0);
  d.sample_ids = m->pass.sample_ids;
  d.doc_start = m->pass.doc_start; /* reset_attention_mask (model/gpt_docs.c) */
  if (m->mla) mt_gpt_mla_attn_desc(m, &d); /* hq-wide q/k, dv-wide v, MLA's scale */
  return d;
}

/* Core attention of global layer l (Megatron's core_attention): the fused
 * op (FlashAttention-2, docs/attention.md) over this rank's heads and the
 * whole sequence (under SP, qkv is the all-gathered sequence), saving
 * a->ctx and the log-sum-exp a->lse [b, np, s] fp32 instead of the
 * [b, np, s, s] probabilities. With context parallelism the attention runs
 * over the ring of the CP group instead (model/context_parallel.h: kv != NULL
 * blocks merged with attn_merge; lse as two halves, one per local chunk). */
static void core_attention_fwd(mt_gpt *m, int l, mt_layer_acts *a) {
  mt_backend *be = m->be;
  mt_attn_desc d = attn_desc(m, l);
  if (m->cp_attn)
    mt_cp_attn_fwd(m->cp_attn, &d, a->ctx, a->lse, a->qkv);
  else
    be->ops->flash_attn_fwd(be, &d, a->ctx, a->lse, a->qkv, NULL);
}

/* Backward: m->ws.dqkv (overwritten) from m->ws.dctx, given the final a->ctx and
 * a->lse of the forward (the probabilities are recomputed per tile). */
static void core_attention_bwd(mt_gpt *m, int l, mt_layer_acts *a) {
  mt_backend *be = m->be;
  mt_attn_desc d = attn_desc(m, l);
  if (m->cp_attn)
    mt_cp_attn_bwd(m->cp_attn, &d, m->ws.dqkv, m->ws.dctx, a->ctx, a->lse, a->qkv);
  else
    be->ops->flash_attn_bwd(be, &d, m->ws.dqkv, NULL, m->ws.dctx, a->ctx, a->lse, a->qkv, NULL);
}

void mt_gpt_rope_scaling(const mt_model_config *mc, mt_rope_desc *d) {
  if (!mc->use_rope_scaling) return;
  d->scaling = MT_ROPE_LLAMA3;
  d->factor = mc->rope_scaling_factor;
}

/* RoPE on this rank's q/k heads. The qkv tensor covers this CP rank's
 * whole sequence (under sequence parallelism linear_qkv's input is
 * all-gathered first): one call per run of global positions (two chunks
 * with context parallelism). */
static mt_rope_desc rope_desc(const mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_rope_desc d = {0};
  d.s = (int)m->s_loc;
  d.b = c->micro_batch_size;
  d.np = m->np;
  d.ng = m->ng;
  d.hn = m->hn;
  d.rot_dim = mt_rotary_dim(m->hn, c->model.rotary_percent);
  d.interleaved = c->model.rotary_interleaved;
  d.base = c->model.rotary_base;
  mt_gpt_rope_scaling(&c->model, &d);
  d.s_offset = 0;
  return d;
}

static void rope_apply(mt_gpt *m, void *qkv, int backward) {
  mt_backend *be = m->be;
  mt_cp_run r[2];
  const int n = mt_cp_runs(&m->cpl, 0, m->s_loc, r);
  const size_t rb = (size_t)m->cfg.micro_batch_size * (size_t)m->qkvl * mt_dtype_size(be->dtype);
  for (int k = 0; k < n; k++) {
    mt_rope_desc d = rope_desc(m);
    d.s = (int)r[k].n;
    d.s_offset = (int)r[k].pos;
    void *p = (char *)qkv + (size_t)r[k].row * rb;
    if (backward)
      be->ops->rope_bwd(be, &d, p);
    else
      be->ops->rope_fwd(be, &d, p);
  }
}

static mt_qknorm_desc qknorm_desc(const mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_qknorm_desc d = {m->rows, m->np, m->ng, m->hn, m->rmsnorm,
                      c->model.norm_epsilon};
  return d;
}

void mt_gpt_norm_fwd(mt_gpt *m, void *out, float *mean, float *rstd, const void *in,
                     const void *w, const void *b, int64_t rows) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  if (m->rmsnorm)
    be->ops->rmsnorm_fwd(be, out, rstd, in, w, rows, c->model.hidden_size, c->model.norm_epsilon);
  else
    be->ops->layernorm_fwd(be, out, mean, rstd, in, w, b, rows, c->model.hidden_size,
                           c->model.norm_epsilon);
}

void mt_gpt_norm_bwd(mt_gpt *m, void *din, float *dw, float *db, const void *dout, const void *in,
                     const void *w, const float *mean, const float *rstd, int64_t rows) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  if (m->rmsnorm)
    be->ops->rmsnorm_bwd(be, din, dw, dout, in, w, rstd, rows, c->model.hidden_size);
  else
    be->ops->layernorm_bwd(be, din, dw, db, dout, in, w, mean, rstd, rows, c->model.hidden_size);
}

mt_moe_weights mt_gpt_moe_weights(mt_gpt *m, int li) {
  const int El = m->cfg.model.num_experts / m->cfg.ep_size;
  const mt_moe_tensors *t = &m->w.layers[li].moe;
  const void **p = m->moe.wp;
  for (int le = 0; le < El; le++) {
    p[le] = t->experts[le].linear_fc1.weight;
    p[El + le] = t->experts[le].linear_fc1.bias;
    p[2 * El + le] = t->experts[le].linear_fc2.weight;
    p[3 * El + le] = t->experts[le].linear_fc2.bias;
  }
  mt_moe_weights w = {.router = t->router.weight,
                      .fc1_w = p, .fc1_b = p + El, .fc2_w = p + 2 * El, .fc2_b = p + 3 * El};
  return w;
}

static mt_moe_grads moe_grads(mt_gpt *m, int li) {
  const int El = m->cfg.model.num_experts / m->cfg.ep_size;
  const mt_moe_tensors *t = &m->g.layers[li].moe;
  float **p = m->moe.gp;
  for (int le = 0; le < El; le++) {
    p[le] = t->experts[le].linear_fc1.weight;
    p[El + le] = t->experts[le].linear_fc1.bias;
    p[2 * El + le] = t->experts[le].linear_fc2.weight;
    p[3 * El + le] = t->experts[le].linear_fc2.bias;
  }
  mt_moe_grads g = {t->router.weight, p, p + El, p + 2 * El, p + 3 * El};
  return g;
}

/* moe_shared_expert_overlap: the shared expert's parts as work for the
 * token all-to-alls (model/moe_token_dispatcher.h, mt_moe_overlap). */
typedef struct {
  mt_gpt *m;
  const mt_mlp_tensors *w, *g;
  mt_layer_acts *a;
} shared_part;

static void shared_fc1(void *p) {
  shared_part *s = p;
  mt_moe_shared_forward_fc1(s->m, s->w, s->a);
}

static void shared_fc2(void *p) {
  shared_part *s = p;
  mt_moe_shared_forward_fc2(s->m, s->w, s->a);
}

static void shared_bwd(void *p) {
  shared_part *s = p;
  mt_moe_shared_backward_own(s->m, s->w, s->g, s->a, s->m->ws.dtmp_h);
}

/* Global layer l runs its linear layers in FP8 (first_last_layers_bf16;
 * MTP layers, l >= num_layers, take Megatron's global FP8 context, which
 * ignores it). */
static int fp8_layer(const mt_gpt_config *c, int l) {
  if (l >= c->model.num_layers) return c->fp8;
  return c->fp8 && l >= c->fp8_bf16_start && l < c->model.num_layers - c->fp8_bf16_end;
}

/* Tell the FP8 linears what this forward is: a training forward, its replay
 * under full recomputation, or an evaluation (model/fp8_linear.h). */
static void fp8_pass(mt_gpt *m) {
  const mt_fp8_pass p = !m->pass.train       ? MT_FP8_PASS_EVAL
                        : m->pass.recomputing ? MT_FP8_PASS_RECOMPUTE
                                              : MT_FP8_PASS_TRAIN;
  mt_fp8_linear_set_pass(m->tp.fp8, p);
  mt_fp8_linear_set_pass(m->moe.fp8, p);
}


/* The FP8 keys of this rank's first local expert of layer l (global expert
 * ep_rank·E/ep; local expert le takes key + le). */
static void expert_keys(const mt_gpt_config *c, int l, mt_moe_weights *mw) {
  const int e0 = c->ep_rank * (c->model.num_experts / c->ep_size);
  for (int fc = 0; fc < 2; fc++) mw->fp8_key[fc] = mt_gpt_fp8_expert_key(c, l, fc, e0);
}

void mt_gpt_layer_forward(mt_gpt *m, int ci, mt_slot *sl, int lc) {
  const mt_chunk *ch = &m->chunks[ci];
  /* global layer: keys the dropout RNG */
  mt_gpt_block_forward(m, ch->first_layer + lc, ch->layer_base + lc, mt_gpt_layer_acts(m, sl, lc),
                       sl->resid + lc);
}

void mt_gpt_layer_backward(mt_gpt *m, int ci, mt_slot *sl, int lc) {
  const mt_chunk *ch = &m->chunks[ci];
  mt_gpt_block_backward(m, ch->first_layer + lc, ch->layer_base + lc,
                        mt_gpt_layer_acts(m, sl, lc), sl->resid + lc);
}

void mt_gpt_block_forward(mt_gpt *m, int l, int li, mt_layer_acts *a, void *const *resid) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  mt_tp_ctx *tp = &m->tp;
  const mt_layer_tensors *w = &m->w.layers[li];
  const mt_attention_tensors *wa = &w->self_attention;
  const int64_t h = c->model.hidden_size;
  tp->fp8_on = fp8_layer(c, l);
  m->fp8_l = l;
  fp8_pass(m);

  /* attention block: norm -> ColumnParallel(qkv) -> [q/k norm] -> [RoPE] ->
   * core attention -> RowParallel(proj) */
  mt_gpt_norm_fwd(m, a->ln1, a->ln1_mean, a->ln1_rstd, resid[0], w->input_layernorm.weight,
                  w->input_layernorm.bias, m->rows_l);
  if (!m->mla) mt_gpt_fp8_select(m, l, MT_GPT_FP8_QKV); /* MLA: its projections' own keys */
  if (m->mla) {
    mt_gpt_mla_forward(m, li, a); /* a->qkv with RoPE applied */
  } else if (c->model.qk_layernorm) {
    mt_column_parallel_linear_fwd(tp, a->qkv_lin, a->ln1, wa->linear_qkv.weight,
                                  wa->linear_qkv.bias, m->qkvl, h);
    mt_qknorm_desc qd = qknorm_desc(m);
    be->ops->qknorm_fwd(be, &qd, a->qkv, a->qk_mean, a->qk_rstd, a->qkv_lin,
                        wa->q_layernorm.weight, wa->q_layernorm.bias, wa->k_layernorm.weight,
                        wa->k_layernorm.bias);
  } else {
    mt_column_parallel_linear_fwd(tp, a->qkv, a->ln1, wa->linear_qkv.weight, wa->linear_qkv.bias,
                                  m->qkvl, h);
  }
  if (m->pos == MT_POS_ROPE && !m->mla) rope_apply(m, a->qkv, 0);
  core_attention_fwd(m, l, a);
  mt_gpt_fp8_select(m, l, MT_GPT_FP8_PROJ);
  mt_row_parallel_linear_fwd(tp, m->ws.tmp_h, a->ctx, wa->linear_proj.weight, wa->linear_proj.bias,
                             h, m->hl);
  mt_dropout_desc dd = hidden_dropout_desc(m, l, "hidden_dropout.attention");
  mt_gpt_dropout_add_fwd(m, &dd, a->x1, m->ws.tmp_h, resid[0]);

  /* MLP block: norm -> ColumnParallel(fc1) -> GELU | SwiGLU -> RowParallel(fc2) */
  mt_gpt_norm_fwd(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->x1, w->pre_mlp_layernorm.weight,
                  w->pre_mlp_layernorm.bias, m->rows_l);
  if (w->moe.experts) { /* MoE block on this rank's token shard */
    mt_moe_weights mw = mt_gpt_moe_weights(m, li);
    mw.expert_bias = mt_gpt_moe_expert_bias(m, mt_gpt_moe_layer_index(c, l)); /* selection only */
    mw.fp8 = tp->fp8_on ? m->moe.fp8 : NULL; /* the experts in FP8 (the router in T) */
    expert_keys(c, l, &mw);
    /* global_aux_loss: the previous global batch's counts (all zero on step 1) */
    mw.global_tokens_per_expert = mt_gpt_moe_bias_counts(m, mt_gpt_moe_layer_index(c, l));
    /* every CP rank routes the whole micro-batch: CP rank 0 records it */
    const int rec = m->pass.train && !m->pass.recomputing && c->cp_rank == 0;
    const int record = rec ? mt_gpt_moe_layer_index(c, l) : -1;
    if (c->model.moe_shared_expert_overlap) { /* the shared expert while the tokens travel */
      shared_part sp = {m, &w->moe.shared_experts, NULL, a};
      const mt_moe_overlap ov[2] = {{shared_fc1, &sp}, {shared_fc2, &sp}};
      mt_moe_forward(m->moe.ctx, a->moe, &mw, m->ws.tmp_h, a->ln2, record, ov);
      mt_moe_shared_forward_add(m, &w->moe.shared_experts, m->ws.tmp_h);
    } else {
      mt_moe_forward(m->moe.ctx, a->moe, &mw, m->ws.tmp_h, a->ln2, record, NULL);
      mt_moe_shared_forward(m, &w->moe.shared_experts, a, m->ws.tmp_h); /* += shared experts */
    }
    dd = hidden_dropout_desc(m, l, "hidden_dropout.mlp");
    mt_gpt_dropout_add_fwd(m, &dd, resid[1], m->ws.tmp_h, a->x1);
    return;
  }
  mt_gpt_fp8_select(m, l, MT_GPT_FP8_FC1);
  mt_column_parallel_linear_fwd(tp, a->fc1, a->ln2, w->mlp.linear_fc1.weight,
                                w->mlp.linear_fc1.bias, m->glu * m->fl, h);
  if (m->glu == 2)
    be->ops->swiglu_fwd(be, a->act, a->fc1, m->rows, m->fl);
  else
    be->ops->gelu_fwd(be, a->act, a->fc1, m->rows * m->fl);
  mt_gpt_fp8_select(m, l, MT_GPT_FP8_FC2);
  mt_row_parallel_linear_fwd(tp, m->ws.tmp_h, a->act, w->mlp.linear_fc2.weight,
                             w->mlp.linear_fc2.bias, h, m->fl);
  dd = hidden_dropout_desc(m, l, "hidden_dropout.mlp");
  mt_gpt_dropout_add_fwd(m, &dd, resid[1], m->ws.tmp_h, a->x1);
}

void mt_gpt_block_backward(mt_gpt *m, int l, int li, mt_layer_acts *a, void *const *resid) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  mt_tp_ctx *tp = &m->tp;
  const mt_layer_tensors *w = &m->w.layers[li], *g = &m->g.layers[li];
  const mt_attention_tensors *wa = &w->self_attention, *ga = &g->self_attention;
  const int64_t h = c->model.hidden_size;
  tp->fp8_on = fp8_layer(c, l);
  m->fp8_l = l;

  /* MLP block: resid[l+1] = x1 + dropout(fc2(act(fc1(norm2(x1))))) */
  mt_dropout_desc dd = hidden_dropout_desc(m, l, "hidden_dropout.mlp");
  mt_gpt_dropout_bwd(m, &dd, m->ws.dtmp_h, m->ws.dresid);
  if (w->moe.experts) {
    /* MoE: its share of the auxiliary losses is loss_scale · (the
     * micro-batch's loss tokens: s · b without eod_mask_loss, s the whole
     * sequence under CP) = one micro-batch of the global batch */
    mt_moe_weights mw = mt_gpt_moe_weights(m, li);
    mw.expert_bias = mt_gpt_moe_expert_bias(m, mt_gpt_moe_layer_index(c, l));
    mw.fp8 = tp->fp8_on ? m->moe.fp8 : NULL;
    expert_keys(c, l, &mw);
    mt_moe_grads mg = moe_grads(m, li);
    const float aux = m->pass.loss_scale * (float)m->pass.loss_tokens;
    if (c->model.moe_shared_expert_overlap) {
      /* the shared expert's backward (dtmp_h <- its dx) while the output
       * gradients travel to the experts (the routed path has read dtmp_h) */
      shared_part sp = {m, &w->moe.shared_experts, &g->moe.shared_experts, a};
      const mt_moe_overlap ov = {shared_bwd, &sp};
      mt_moe_backward(m->moe.ctx, a->moe, &mw, &mg, m->ws.tmp_h, m->ws.dtmp_h, a->ln2, aux, &ov);
      mt_moe_shared_backward_add(m, &w->moe.shared_experts, m->ws.dtmp_h, m->ws.tmp_h);
    } else {
      mt_moe_backward(m->moe.ctx, a->moe, &mw, &mg, m->ws.tmp_h, m->ws.dtmp_h, a->ln2, aux, NULL);
      /* dtmp_h <- dx (shared + routed) */
      mt_moe_shared_backward(m, &w->moe.shared_experts, &g->moe.shared_experts, a, m->ws.dtmp_h,
                             m->ws.tmp_h);
    }
  } else {
    const mt_mlp_tensors *wm = &w->mlp, *gm = &g->mlp;
    mt_gpt_fp8_select(m, l, MT_GPT_FP8_FC2);
    if (m->glu == 2) {
      mt_row_parallel_linear_bwd(tp, m->ws.dact, gm->linear_fc2.weight, gm->linear_fc2.bias,
                                 m->ws.dtmp_h, a->act, wm->linear_fc2.weight, h, m->fl);
      be->ops->swiglu_bwd(be, m->ws.dffn, m->ws.dact, a->fc1, m->rows, m->fl);
    } else {
      mt_row_parallel_linear_bwd(tp, m->ws.dffn, gm->linear_fc2.weight, gm->linear_fc2.bias,
                                 m->ws.dtmp_h, a->act, wm->linear_fc2.weight, h, m->fl);
      be->ops->gelu_bwd(be, m->ws.dffn, a->fc1, m->ws.dffn, m->rows * m->fl);
    }
    mt_gpt_fp8_select(m, l, MT_GPT_FP8_FC1);
    mt_column_parallel_linear_bwd(tp, m->ws.dtmp_h, gm->linear_fc1.weight, gm->linear_fc1.bias,
                                  m->ws.dffn, a->ln2, wm->linear_fc1.weight, m->glu * m->fl, h);
  }
  /* dresid (residual path) += norm2 backward */
  mt_gpt_norm_bwd(m, m->ws.dresid, g->pre_mlp_layernorm.weight, g->pre_mlp_layernorm.bias,
                  m->ws.dtmp_h, a->x1, w->pre_mlp_layernorm.weight, a->ln2_mean, a->ln2_rstd,
                  m->rows_l);

  /* attention block: x1 = resid[l] + dropout(proj(attn(rope(qknorm(qkv(norm1(resid[l]))))))) */
  if (m->recompute == MT_RECOMPUTE_SELECTIVE) /* "core_attn": rebuild lse (the shared buffer;
                                                   ctx is rewritten with identical values; the
                                                   ring runs again under CP) */
    core_attention_fwd(m, l, a);
  dd = hidden_dropout_desc(m, l, "hidden_dropout.attention");
  mt_gpt_dropout_bwd(m, &dd, m->ws.dtmp_h, m->ws.dresid);
  mt_gpt_fp8_select(m, l, MT_GPT_FP8_PROJ);
  mt_row_parallel_linear_bwd(tp, m->ws.dctx, ga->linear_proj.weight, ga->linear_proj.bias,
                             m->ws.dtmp_h, a->ctx, wa->linear_proj.weight, h, m->hl);
  core_attention_bwd(m, l, a);
  if (m->mla) {
    mt_gpt_mla_backward(m, li, a, m->ws.dtmp_h);
    mt_gpt_norm_bwd(m, m->ws.dresid, g->input_layernorm.weight, g->input_layernorm.bias,
                    m->ws.dtmp_h, resid[0], w->input_layernorm.weight, a->ln1_mean, a->ln1_rstd,
                    m->rows_l);
    return;
  }
  if (m->pos == MT_POS_ROPE) rope_apply(m, m->ws.dqkv, 1);
  void *dlin = m->ws.dqkv;
  if (c->model.qk_layernorm) {
    mt_qknorm_desc qd = qknorm_desc(m);
    be->ops->qknorm_bwd(be, &qd, m->ws.dqkv2, ga->q_layernorm.weight, ga->q_layernorm.bias,
                        ga->k_layernorm.weight, ga->k_layernorm.bias, m->ws.dqkv, a->qkv_lin,
                        wa->q_layernorm.weight, wa->k_layernorm.weight, a->qk_mean, a->qk_rstd);
    dlin = m->ws.dqkv2;
  }
  mt_gpt_fp8_select(m, l, MT_GPT_FP8_QKV);
  mt_column_parallel_linear_bwd(tp, m->ws.dtmp_h, ga->linear_qkv.weight, ga->linear_qkv.bias, dlin,
                                a->ln1, wa->linear_qkv.weight, m->qkvl, h);
  mt_gpt_norm_bwd(m, m->ws.dresid, g->input_layernorm.weight, g->input_layernorm.bias, m->ws.dtmp_h,
                  resid[0], w->input_layernorm.weight, a->ln1_mean, a->ln1_rstd, m->rows_l);
}
