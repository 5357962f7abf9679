/* model/gpt.c — GPT construction, parameters and buffers (see gpt.h).
 * Activation slots live in model/gpt_slots.c, one transformer layer in
 * model/gpt_block.c, the chunk passes (embedding, stack, head, loss) in
 * model/gpt_forward.c. */
#include "model/gpt_internal.h"
#include "model/gpt_mla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_shared_experts.h"

/* Layer ranges of this rank's model chunks (Megatron's assignment). */
static void assign_chunks(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int p = c->pp_size, v = c->vpp_size, L = c->model.num_layers;
  m->n_chunks = v;
  m->chunks = mt_xcalloc((size_t)v, sizeof(mt_chunk));
  if (c->first_stage_layers > 0 || c->last_stage_layers > 0) {
    /* uneven stages (Megatron's num_layers_in_first/last_pipeline_stage) */
    MT_ASSERT(v == 1 && p > 1);
    const int nf = c->first_stage_layers, nl = c->last_stage_layers;
    const int n_free = p - (nf > 0) - (nl > 0);
    const int share = n_free ? (L - (nf > 0 ? nf : 0) - (nl > 0 ? nl : 0)) / n_free : 0;
    int first = 0;
    for (int r = 0; r <= c->pp_rank; r++) {
      int n = (r == 0 && nf > 0) ? nf : (r == p - 1 && nl > 0) ? nl : share;
      if (r == c->pp_rank) {
        m->chunks[0] = (mt_chunk){first, n, r == 0, r == p - 1, 0};
        m->n_local_layers = n;
      }
      first += n;
    }
    return;
  }
  MT_ASSERT(L % (p * v) == 0);
  const int per = L / (p * v);
  int base = 0;
  for (int k = 0; k < v; k++) {
    int g = k * p + c->pp_rank;
    mt_chunk *ch = &m->chunks[k];
    ch->first_layer = g * per;
    ch->n_layers = per;
    ch->pre = g == 0;
    ch->post = g == p * v - 1;
    ch->layer_base = base;
    base += per;
  }
  m->n_local_layers = base;
}

static void init_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  float scaled = c->model.init_method_std / sqrtf(2.0f * (float)c->model.num_layers);
  for (int i = 0; i < m->params.list.n; i++) {
    const mt_param *p = &m->params.list.p[i];
    void *dst = mt_gpt_param_ptr(m, i);
    switch (p->init) {
      case MT_INIT_NORMAL:
      case MT_INIT_SCALED: {
        if (c->skip_init) { /* the caller loads every parameter */
          be->ops->fill(be, dst, be->dtype, 0.0f, p->numel);
          break;
        }
        mt_rng_key_t key = mt_rng_key(c->seed, p->name, 0, 0);
        float std = p->init == MT_INIT_NORMAL ? c->model.init_method_std : scaled;
        if (p->halves) { /* gate slice, then up slice (keyed by global rows) */
          const int64_t hr = p->local_rows / 2;
          be->ops->init_normal(be, dst, hr, p->local_cols, p->cols, p->row_offset, p->col_offset,
                               key, std);
          be->ops->init_normal(be, (char *)dst + (size_t)(hr * p->local_cols) *
                                                     mt_dtype_size(be->dtype),
                               hr, p->local_cols, p->cols, p->rows / 2 + p->row_offset,
                               p->col_offset, key, std);
        } else {
          be->ops->init_normal(be, dst, p->local_rows, p->local_cols, p->cols, p->row_offset,
                               p->col_offset, key, std);
        }
        break;
      }
      case MT_INIT_ONES: be->ops->fill(be, dst, be->dtype, 1.0f, p->numel); break;
      case MT_INIT_ZEROS: be->ops->fill(be, dst, be->dtype, 0.0f, p->numel); break;
    }
  }
  /* Padded vocabulary rows are never trained: keep them exactly zero so the
   * value is independent of how the padding is split (tp). */
  if (m->v_valid < m->vl) {
    size_t es = mt_dtype_size(be->dtype);
    void *outs[3] = {m->w.word_embeddings.weight, m->w.output_layer.weight,
                     m->w.mtp_word_embeddings.weight};
    for (int j = 0; j < 3; j++) {
      if (!outs[j]) continue;
      char *w = outs[j];
      be->ops->memset0(be, w + (size_t)m->v_valid * c->model.hidden_size * es,
                       (size_t)(m->vl - m->v_valid) * c->model.hidden_size * es);
    }
  }
}

static void *wsp(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_WORKSPACE);
}

static void alloc_buffers(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  mt_dtype T = be->dtype;
  const int64_t s = m->s_loc, b = c->micro_batch_size, h = c->model.hidden_size;
  mt_gpt_params_state *ps = &m->params;
  const size_t n = (size_t)ps->list.numel;
  ps->buf = be->ops->alloc(be, n * mt_dtype_size(T), MT_MEM_PARAM);
  be->ops->memset0(be, ps->buf, n * mt_dtype_size(T));
  ps->grad_buf = be->ops->alloc(be, n * sizeof(float), MT_MEM_GRAD);
  be->ops->memset0(be, ps->grad_buf, n * sizeof(float));
  for (int i = 0; i < ps->list.n; i++) { /* the named tensors point into them */
    *ps->ref[i].w = (char *)ps->buf + (size_t)ps->list.p[i].offset * mt_dtype_size(T);
    *ps->ref[i].g = ps->grad_buf + ps->list.p[i].offset;
  }
  /* Shared activation storage: selective recompute keeps one log-sum-exp
   * buffer (the fused attention forward re-runs before each layer's backward);
   * full recompute keeps recompute_num_layers layer sets that every chunk and
   * micro-batch reuses while it re-runs a chunk of layers. */
  if (m->recompute == MT_RECOMPUTE_SELECTIVE)
    m->acts.lse_shared = be->ops->alloc(be, (size_t)(b * m->np * s) * sizeof(float), MT_MEM_ACT);
  if (m->recompute == MT_RECOMPUTE_FULL) {
    int maxn = 0;
    for (int k = 0; k < m->n_chunks; k++)
      if (m->chunks[k].n_layers > maxn) maxn = m->chunks[k].n_layers;
    m->acts.n_rc_sets = c->model.recompute_num_layers < maxn ? c->model.recompute_num_layers : maxn;
    const int nrc = m->acts.n_rc_sets;
    m->acts.rc_sets = mt_xcalloc((size_t)(nrc ? nrc : 1), sizeof(mt_layer_acts));
    for (int k = 0; k < nrc; k++) mt_gpt_alloc_layer_acts(m, &m->acts.rc_sets[k], 1);
  }
  m->acts.slots = mt_xcalloc((size_t)m->n_chunks, sizeof(mt_slot **));
  m->acts.n_slots = mt_xcalloc((size_t)m->n_chunks, sizeof(int));

  m->ws.tmp_h = wsp(m, m->rows_l * h, T);
  m->ws.dresid = wsp(m, m->rows_l * h, T);
  m->ws.dtmp_h = wsp(m, m->rows_l * h, T);
  m->ws.dqkv = wsp(m, m->rows * (m->qkvl + mt_gpt_mla_dqkv_extra(m)), T); /* MLA: + dR' */
  if (c->model.qk_layernorm && !m->mla) m->ws.dqkv2 = wsp(m, m->rows * m->qkvl, T);
  m->ws.dctx = wsp(m, m->rows * m->hl, T);
  const int64_t fw = m->fl > m->shl ? m->fl : m->shl; /* dense MLP or shared expert */
  m->ws.dffn = wsp(m, m->rows * m->glu * fw, T);
  if (m->glu == 2) m->ws.dact = wsp(m, m->rows * fw, T);
  if (m->shl > 0) m->ws.sh_out = wsp(m, m->rows_l * h, T);
  if (c->tp_size > 1) {
    const int64_t gw = mt_gpt_mla_gather_width(m); /* h, or an MLA latent when wider */
    m->ws.gather_ws = wsp(m, m->rows * gw, T);
    m->ws.grad_ws = wsp(m, m->rows * gw, T);
  }
  m->ws.host_tokens = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
  m->ws.host_targets = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
}

/* Index of the enumerated option value v in the NULL-terminated list
 * (the key's choices, config/config_table.c); a value the loader would have
 * refused is a caller's bug. */
static int option(const char *v, const char *key, const char *const *choices) {
  for (int i = 0; choices[i]; i++)
    if (!strcmp(v, choices[i])) return i;
  mt_fatal("mt_gpt_create: model.%s '%s' is not one of the key's choices", key, v);
}

/* The model section's enumerated strings as the model's switches, and the
 * derived sizes a hand-built config left 0 (model/gpt.h). */
static void resolve_options(mt_gpt *m) {
  mt_model_config *mc = &m->cfg.model;
  m->pos = option(mc->position_embedding_type, "position_embedding_type", /* MT_POS_* */
                  (const char *const[]){"learned_absolute", "rope", "none", NULL});
  m->rmsnorm = option(mc->normalization, "normalization",
                      (const char *const[]){"LayerNorm", "RMSNorm", NULL});
  m->recompute = option(mc->recompute_granularity, "recompute_granularity", /* MT_RECOMPUTE_* */
                        (const char *const[]){"", "selective", "full", NULL});
  m->moe_lb_type = option(mc->moe_router_load_balancing_type, /* MT_MOE_LB_* */
                          "moe_router_load_balancing_type",
                          (const char *const[]){"aux_loss", "seq_aux_loss", "global_aux_loss",
                                                "none", NULL});
  if (mc->num_query_groups < 1) mc->num_query_groups = mc->num_attention_heads;
  if (mc->kv_channels < 1 && mc->num_attention_heads > 0)
    mc->kv_channels = mc->hidden_size / mc->num_attention_heads;
  if (mc->max_position_embeddings < 1) mc->max_position_embeddings = mc->seq_length;
}

void mt_gpt_moe_ctx_config(const mt_gpt *m, mt_moe_config *out) {
  const mt_gpt_config *c = &m->cfg;
  {
    mt_moe_config mc = {0};
    mc.E = c->model.num_experts;
    mc.k = c->model.moe_router_topk;
    mc.h = c->model.hidden_size;
    mc.F = c->model.moe_ffn_hidden_size;
    mc.swiglu = c->model.swiglu;
    mc.route.capacity_factor = c->model.moe_expert_capacity_factor;
    mc.route.drop_position = option(c->model.moe_token_drop_policy, "moe_token_drop_policy",
                                    (const char *const[]){"probs", "position", NULL});
    mc.route.pre_softmax = c->model.moe_router_pre_softmax;
    mc.route.score_sigmoid = option(c->model.moe_router_score_function,
                                    "moe_router_score_function",
                                    (const char *const[]){"softmax", "sigmoid", NULL});
    mc.route.topk_scaling_factor = c->model.moe_router_topk_scaling_factor;
    mc.route.num_groups = c->model.moe_router_num_groups;
    mc.route.group_topk = c->model.moe_router_group_topk;
    mc.route.lb_type = m->moe_lb_type;
    mc.route.seq_b = c->micro_batch_size;
    mc.route.pad_to_capacity = c->model.moe_pad_expert_input_to_capacity;
    mc.router_dtype = option(c->model.moe_router_dtype, "moe_router_dtype", /* ..._DTYPE_* */
                             (const char *const[]){"", "fp32", "fp64", NULL});
    mc.lb_coeff = c->model.moe_aux_loss_coeff;
    mc.z_coeff = c->model.moe_z_loss_coeff;
    /* tokens: this rank's SP shard of its CP rank's tokens; routing sees the
     * whole micro-batch (gathered over TP, then CP) */
    const int sp = m->rows_l < m->rows;
    mc.n_loc = m->rows_l;
    mc.n_full = m->rows * c->cp_size;
    mc.t0 = ((int64_t)c->cp_rank * (sp ? c->tp_size : 1) + (sp ? c->tp_rank : 0)) * m->rows_l;
    mc.tp = sp ? c->tp_group : NULL;
    mc.cp = c->cp_size > 1 ? c->cp_group : NULL;
    mc.ep = c->ep_size > 1 ? c->ep_group : NULL;
    mc.ep_size = c->ep_size;
    mc.ep_rank = c->ep_rank;
    mc.etp = c->etp_size > 1 ? c->etp_group : NULL;
    mc.n_moe_layers = mt_gpt_num_moe_layers(c);
    mc.grouped_gemm = c->model.moe_grouped_gemm;
    *out = mc;
  }
}

static void create_moe(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  if (c->model.num_experts > 0) {
    mt_moe_config mc;
    mt_gpt_moe_ctx_config(m, &mc);
    m->moe.ctx = mt_moe_create(m->be, &mc);
    const int El = c->model.num_experts / c->ep_size;
    m->moe.wp = mt_xcalloc((size_t)4 * El, sizeof(void *));
    m->moe.gp = mt_xcalloc((size_t)4 * El, sizeof(float *));
    mt_gpt_moe_bias_init(m);
  }
}

static void local_sizes(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int tp = c->tp_size;
  const mt_model_config *mc = &c->model;
  const int ng = mc->num_query_groups; /* resolved (resolve_options) */
  MT_ASSERT(mc->num_attention_heads % ng == 0 && ng % tp == 0 && mc->ffn_hidden_size % tp == 0);
  MT_ASSERT(c->padded_vocab_size % tp == 0);
  m->hn = mc->kv_channels;
  m->np = c->model.num_attention_heads / tp;
  m->ng = ng / tp;
  m->hl = (int64_t)m->np * m->hn;
  m->qkvl = (int64_t)(m->np + 2 * m->ng) * m->hn;
  m->glu = c->model.swiglu ? 2 : 1;
  m->fl = c->model.ffn_hidden_size / tp;
  MT_ASSERT(c->model.moe_shared_expert_intermediate_size % tp == 0);
  m->shl = c->model.num_experts > 0 ? c->model.moe_shared_expert_intermediate_size / tp : 0;
  m->vl = c->padded_vocab_size / tp;
  m->v_start = (int64_t)c->tp_rank * m->vl;
  int64_t valid = c->model.vocab_size - m->v_start;
  m->v_valid = valid < 0 ? 0 : (valid > m->vl ? m->vl : valid);
  int sp = c->sequence_parallel && tp > 1;
  m->cpl = mt_cp_layout_make(c->model.seq_length, c->cp_size, c->cp_rank);
  m->s_loc = mt_cp_local_len(&m->cpl);
  MT_ASSERT(!sp || m->s_loc % tp == 0);
  m->sl = sp ? m->s_loc / tp : m->s_loc;
  m->rows = m->s_loc * c->micro_batch_size;
  m->rows_l = m->sl * c->micro_batch_size;
  if (mc->multi_latent_attention) mt_gpt_mla_sizes(m);
}

mt_gpt *mt_gpt_create(mt_backend *be, const mt_gpt_config *cfg) {
  mt_gpt *m = mt_xcalloc(1, sizeof *m);
  m->be = be;
  m->cfg = *cfg;
  mt_gpt_config *c = &m->cfg;
  if (c->tp_size < 1) c->tp_size = 1;
  if (c->pp_size < 1) c->pp_size = 1;
  if (c->vpp_size < 1) c->vpp_size = 1;
  if (c->model.recompute_num_layers < 1) c->model.recompute_num_layers = 1;
  if (c->ep_size < 1) c->ep_size = 1;
  if (c->cp_size < 1) c->cp_size = 1;
  MT_ASSERT(c->cp_size == 1 || (c->cp_group && c->cp_rank >= 0 && c->cp_rank < c->cp_size));
  if (c->model.num_experts > 0) {
    if (c->model.moe_router_topk < 1) c->model.moe_router_topk = 1;
    if (c->model.moe_ffn_hidden_size < 1) c->model.moe_ffn_hidden_size = c->model.ffn_hidden_size;
    MT_ASSERT(c->model.num_experts % c->ep_size == 0 &&
              c->model.moe_router_topk <= c->model.num_experts);
    MT_ASSERT(c->tp_size == 1 || c->sequence_parallel); /* routing works on token shards */
  }
  MT_ASSERT(c->model.kv_channels > 0 || c->model.hidden_size % c->model.num_attention_heads == 0);
  resolve_options(m);
  MT_ASSERT(m->pos != MT_POS_LEARNED || c->model.seq_length <= c->model.max_position_embeddings);
  if (m->pos == MT_POS_ROPE) {
    if (c->model.rotary_percent <= 0.0f) c->model.rotary_percent = 1.0f;
    if (c->model.rotary_base <= 0.0f) c->model.rotary_base = 10000.0f;
    if (c->model.use_rope_scaling && c->model.rope_scaling_factor <= 0.0f)
      c->model.rope_scaling_factor = 8.0f; /* Megatron's --rope-scaling-factor default */
  }
  MT_ASSERT(c->padded_vocab_size >= c->model.vocab_size);
  local_sizes(m);
  mt_gpt_mla_create(m); /* before the activation sets and workspaces */
  if (c->cp_size > 1) /* before the activation sets, which then save lse */
    m->cp_attn = mt_cp_attn_create(be, c->cp_group, &m->cpl, c->micro_batch_size, m->np, m->ng,
                                   m->hn, m->mla ? m->mla->dv : m->hn);
  assign_chunks(m);
  mt_gpt_register_params(m);
  mt_gpt_mtp_register(m); /* after the head, inside its hook part */
  create_moe(m);
  alloc_buffers(m);
  mt_gpt_mtp_create(m);
  init_params(m);
  m->tp.be = be;
  m->tp.tp = c->tp_size > 1 ? c->tp_group : NULL;
  m->tp.tp_size = c->tp_size;
  m->tp.tp_rank = c->tp_rank;
  m->tp.sp = c->sequence_parallel;
  m->tp.s = m->s_loc; /* TP/SP act within this CP rank's tokens */
  m->tp.b = c->micro_batch_size;
  m->tp.gather_ws = m->ws.gather_ws;
  m->tp.grad_ws = m->ws.grad_ws;
  if (cfg->fp8)
    m->tp.fp8 = mt_fp8_linear_create(be, &cfg->fp8_options, cfg->tp_size > 1 ? cfg->tp_group : NULL,
                                     cfg->cp_size > 1 ? cfg->cp_group : NULL);
  if (m->tp.fp8 && cfg->fp8_dp_group) mt_fp8_linear_set_dp(m->tp.fp8, cfg->fp8_dp_group);
  if (cfg->fp8 && m->moe.ctx) /* routed experts: amax over the ETP group (each expert's
                                 rows are whole on every ETP rank; with EP it lives on one) */
    m->moe.fp8 = mt_fp8_linear_create(be, &cfg->fp8_options,
                                      c->etp_size > 1 ? c->etp_group : NULL, NULL);
  if (m->moe.fp8 && cfg->fp8_edp_group) mt_fp8_linear_set_dp(m->moe.fp8, cfg->fp8_edp_group);
  return m;
}

void mt_gpt_destroy(mt_gpt *m) {
  if (!m) return;
  mt_backend *be = m->be;
  mt_fp8_linear_destroy(m->tp.fp8);
  mt_fp8_linear_destroy(m->moe.fp8);
  mt_gpt_mtp_destroy(m); /* with the slots' MTP buffers */
  mt_gpt_slots_free(m);
  mt_cp_attn_destroy(m->cp_attn);
  mt_gpt_mla_destroy(m);
  for (int k = 0; k < m->acts.n_rc_sets; k++) mt_gpt_free_layer_acts(m, &m->acts.rc_sets[k]);
  free(m->acts.rc_sets);
  be->ops->free(be, m->acts.lse_shared);
  const mt_gpt_workspace *ws = &m->ws;
  void *rest[] = {ws->tmp_h, ws->dresid,    ws->dtmp_h,  ws->dqkv,      ws->dqkv2,
                  ws->dctx,  ws->dffn,      ws->dact,    ws->gather_ws, ws->grad_ws,
                  ws->sh_out, m->params.buf, m->params.grad_buf};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) be->ops->free(be, rest[i]);
  free(m->acts.slots);
  free(m->acts.n_slots);
  free(m->chunks);
  mt_gpt_tensors_free(m);
  free(m->moe.wp);
  free(m->moe.gp);
  mt_moe_destroy(m->moe.ctx);
  free(m->moe.bias);
  free(m->moe.bias_counts);
  free(m->ws.host_tokens);
  free(m->ws.host_targets);
  mt_gpt_docs_free(m);
  mt_params_free(&m->params.list);
  free(m);
}

const mt_gpt_config *mt_gpt_get_config(const mt_gpt *m) { return &m->cfg; }
const mt_param_list *mt_gpt_params(const mt_gpt *m) { return &m->params.list; }
mt_backend *mt_gpt_backend(const mt_gpt *m) { return m->be; }
void *mt_gpt_param_buffer(mt_gpt *m) { return m->params.buf; }
float *mt_gpt_grad_buffer(mt_gpt *m) { return m->params.grad_buf; }

void *mt_gpt_param_ptr(mt_gpt *m, int idx) { return *m->params.ref[idx].w; }
float *mt_gpt_grad_ptr(mt_gpt *m, int idx) { return *m->params.ref[idx].g; }
void mt_gpt_set_param_ptr(mt_gpt *m, int idx, void *p) { *m->params.ref[idx].w = p; }
void mt_gpt_set_grad_ptr(mt_gpt *m, int idx, float *g) { *m->params.ref[idx].g = g; }
void mt_gpt_set_hooks(mt_gpt *m, const mt_gpt_hooks *h) { m->hooks = *h; }
mt_gpt_hooks mt_gpt_get_hooks(const mt_gpt *m) { return m->hooks; }

void mt_gpt_layer_param_range(const mt_gpt *m, int layer, int *first, int *last) {
  const int *r = NULL;
  if (layer == MT_GPT_EMBEDDING) r = m->params.embedding;
  if (layer == MT_GPT_HEAD) r = m->params.head;
  for (int k = 0; k < m->n_chunks && !r; k++) {
    const mt_chunk *ch = &m->chunks[k];
    if (layer >= ch->first_layer && layer < ch->first_layer + ch->n_layers)
      r = m->params.layers[ch->layer_base + layer - ch->first_layer];
  }
  *first = r ? r[0] : 0;
  *last = r ? r[1] : -1;
}

void mt_gpt_release_flat_buffers(mt_gpt *m, int params, int grads) {
  if (params && m->params.buf) {
    m->be->ops->free(m->be, m->params.buf);
    m->params.buf = NULL;
    for (int i = 0; i < m->params.list.n; i++) *m->params.ref[i].w = NULL;
  }
  if (grads && m->params.grad_buf) {
    m->be->ops->free(m->be, m->params.grad_buf);
    m->params.grad_buf = NULL;
    for (int i = 0; i < m->params.list.n; i++) *m->params.ref[i].g = NULL;
  }
}

const mt_moe_stats *mt_gpt_moe_stats(const mt_gpt *m) {
  return m->moe.ctx ? mt_moe_get_stats(m->moe.ctx) : NULL;
}

int mt_gpt_moe_buffer_rows(const mt_gpt *m, int64_t *recv, int64_t *expert, int64_t *worst) {
  *recv = *expert = *worst = 0;
  if (!m->moe.ctx) return 0;
  mt_moe_buffer_rows(m->moe.ctx, recv, expert, worst);
  return 1;
}

void mt_gpt_moe_stats_reset(mt_gpt *m) {
  if (m->moe.ctx) mt_moe_stats_reset(m->moe.ctx);
}

int64_t mt_gpt_num_parameters(const mt_gpt *m) {
  int64_t n = 0;
  for (int i = 0; i < m->params.list.n; i++)
    if (!m->params.list.p[i].shared_copy)
      n += m->params.list.p[i].rows * m->params.list.p[i].cols *
           (m->params.list.p[i].is_expert ? m->cfg.ep_size : 1); /* other EP ranks' experts */
  return n;
}

/* The TP sum of the SP/TP-partial gradients of parameters [first, last]. */
static void finalize_partial(mt_gpt *m, int first, int last) {
  const mt_gpt_config *c = &m->cfg;
  if (c->tp_size <= 1) return;
  for (int i = first; i <= last; i++)
    if (m->params.list.p[i].sp_partial)
      mt_allreduce(c->tp_group, mt_gpt_grad_ptr(m, i), m->params.list.p[i].numel, MT_F32,
                   MT_OP_SUM);
}

/* The gradient of the tied word embedding on this stage, NULL when the
 * embedding group has nothing to sum. */
static float *tied_grad(const mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int untied = c->model.untie_embeddings_and_output_weights;
  /* untied: only the MTP depths' copy on the last stage shares the table */
  if (c->pp_size <= 1 || (untied && c->model.mtp_num_layers <= 0) || !c->embd_group) return NULL;
  const int pre = m->params.embedding[1] >= 0, post = m->params.head[1] >= 0;
  return pre    ? m->g.word_embeddings.weight
         : post ? (untied ? m->g.mtp_word_embeddings.weight : m->g.output_layer.weight)
                : NULL;
}

void mt_gpt_finalize_layer_grads(mt_gpt *m, int layer) {
  int first, last;
  mt_gpt_layer_param_range(m, layer, &first, &last);
  finalize_partial(m, first, last);
}

void mt_gpt_finalize_tied_grads(mt_gpt *m) {
  float *g = tied_grad(m);
  if (g) mt_allreduce(m->cfg.embd_group, g, m->vl * m->cfg.model.hidden_size, MT_F32, MT_OP_SUM);
}

int mt_gpt_tied_grad_param(const mt_gpt *m) {
  const float *g = tied_grad(m);
  for (int i = 0; g && i < m->params.list.n; i++)
    if (mt_gpt_grad_ptr((mt_gpt *)m, i) == g) return i;
  return -1;
}

void mt_gpt_finalize_grads(mt_gpt *m) {
  finalize_partial(m, 0, m->params.list.n - 1);
  /* tied word embedding split over the first and last stage */
  mt_gpt_finalize_tied_grads(m);
}

void mt_gpt_zero_grad(mt_gpt *m) {
  if (!m->params.grad_buf) return;
  m->be->ops->memset0(m->be, m->params.grad_buf, (size_t)m->params.list.numel * sizeof(float));
}

int64_t mt_gpt_stage_tensor_elems(const mt_gpt *m) { return m->rows_l * m->cfg.model.hidden_size; }
void *mt_gpt_grad_buffer_stage(mt_gpt *m) { return m->ws.dresid; }
