/* model/gpt.c — GPT construction, parameters and buffers (see gpt.h).
 * Activation slots live in model/gpt_slots.c, one transformer layer in
 * model/gpt_block.c, the chunk passes (embedding, stack, head, loss) in
 * model/gpt_forward.c. */
#include "model/gpt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_shared_experts.h"

static const char *k_layer_param_names[MT_LP_N] = {
    "input_layernorm.weight",            "input_layernorm.bias",
    "self_attention.linear_qkv.weight",  "self_attention.linear_qkv.bias",
    "self_attention.q_layernorm.weight", "self_attention.q_layernorm.bias",
    "self_attention.k_layernorm.weight", "self_attention.k_layernorm.bias",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
    "pre_mlp_layernorm.weight",          "pre_mlp_layernorm.bias",
    "mlp.linear_fc1.weight",             "mlp.linear_fc1.bias",
    "mlp.linear_fc2.weight",             "mlp.linear_fc2.bias",
};

/* Layer ranges of this rank's model chunks (Megatron's assignment). */
static void assign_chunks(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int p = c->pp_size, v = c->vpp_size, L = c->num_layers;
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

/* MoE layer l (local index li): the router [E, h] (dense, replicated over
 * TP, partial over SP shards) and this rank's experts: linear_fc1 [g·F, h]
 * (SwiGLU: gate rows then up rows), linear_fc2 [h, F], with their biases
 * unless add_bias_linear is false (m->moe_nper tensors per expert). */
static void register_moe_params(mt_gpt *m, int li, int l) {
  const mt_gpt_config *c = &m->cfg;
  mt_param_list *pl = &m->params;
  const int64_t h = c->hidden_size, F = c->moe_ffn_hidden_size, E = c->num_experts;
  const int El = c->num_experts / c->ep_size;
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "decoder.layers.%d.mlp.router.weight", l);
  int r = mt_params_add(pl, name, E, h, E, h, 0, 0, MT_INIT_NORMAL, 0, 1);
  pl->p[r].sp_partial = c->sequence_parallel && c->tp_size > 1;
  m->moe_router_p[li] = r;
  static const char *nm[4] = {"linear_fc1.weight", "linear_fc1.bias", "linear_fc2.weight",
                              "linear_fc2.bias"};
  const int64_t shp[4][2] = {{m->glu * F, h}, {1, m->glu * F}, {h, F}, {1, h}};
  const mt_init_kind init[4] = {MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS};
  /* expert tensor parallelism: this ETP rank's slice of F (fc1 rows, per
   * SwiGLU half; fc2 columns), keyed by global indices (model/moe_etp.h) */
  const int etp = c->etp_size > 1 ? c->etp_size : 1;
  const int64_t Fl = F / etp, f0 = (int64_t)(etp > 1 ? c->etp_rank : 0) * Fl;
  const int64_t loc[4][4] = {{m->glu * Fl, h, f0, 0}, {1, m->glu * Fl, 0, f0},
                             {h, Fl, 0, f0}, {1, h, 0, 0}};
  MT_ASSERT(F % etp == 0 && (etp == 1 || c->disable_bias_linear));
  for (int le = 0; le < El; le++) {
    const int e = c->ep_rank * El + le;
    for (int j = 0; j < 4; j++) {
      if ((j & 1) && c->disable_bias_linear) continue;
      snprintf(name, sizeof name, "decoder.layers.%d.mlp.experts.%d.%s", l, e, nm[j]);
      int idx = mt_params_add(pl, name, shp[j][0], shp[j][1], loc[j][0], loc[j][1], loc[j][2],
                              loc[j][3], init[j], shp[j][0] == 1, 0);
      pl->p[idx].halves = m->glu == 2 && etp > 1 && j < 2;
      pl->p[idx].is_expert = 1;
      if (le == 0 && j == 0) m->moe_expert_p[li] = idx;
    }
  }
  mt_moe_shared_register(m, li, l); /* after the experts, as Megatron's MoELayer */
}

/* Parameter shards of this rank (Megatron's column/row/vocab split, see
 * model/tensor_parallel.h): column-parallel weights (linear_qkv, linear_fc1)
 * and their biases split the output features, row-parallel weights
 * (linear_proj, linear_fc2) the input features, the word embedding and an
 * untied output layer the padded vocabulary rows. LayerNorms, the position
 * embedding and row-parallel biases are replicated over TP. Registration
 * order: embedding, layers (ascending), head — so the flat buffers keep one
 * contiguous range per hook "layer". */
static void register_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_param_list *pl = &m->params;
  const int64_t h = c->hidden_size, f = c->ffn_hidden_size, V = c->padded_vocab_size;
  const int64_t tr = c->tp_rank, hl = m->hl, fl = m->fl, vl = m->vl, hn = m->hn;
  const int64_t qkv = m->qkvl * c->tp_size, ha = hl * c->tp_size, gl = m->glu;
  const int sp = c->sequence_parallel && c->tp_size > 1;
  const int rms = c->normalization == MT_NORM_RMSNORM, bias = !c->disable_bias_linear;
  const int has_pre = m->chunks[0].pre, has_post = m->chunks[m->n_chunks - 1].post;
  char name[MT_PARAM_NAME_MAX];
  m->p_wte = m->p_wpe = m->p_lnf_w = m->p_lnf_b = m->p_out = -1;
  if (has_pre) {
    m->p_wte = mt_params_add(pl, "embedding.word_embeddings.weight", V, h, vl, h, m->v_start, 0,
                             MT_INIT_NORMAL, 0, 0);
    if (c->position_embedding == MT_POS_LEARNED) {
      m->p_wpe = mt_params_add(pl, "embedding.position_embeddings.weight",
                               c->max_position_embeddings, h, c->max_position_embeddings, h, 0,
                               0, MT_INIT_NORMAL, 0, 1);
      pl->p[m->p_wpe].sp_partial = sp;
    }
  }
  /* global [rows, cols], local [rows, cols], offsets [row, col] per slot.
   * linear_qkv: rows grouped per query group (its q heads, k head, v head),
   * TP rank r holds query groups [r·ng, (r+1)·ng): one contiguous block.
   * linear_fc1 with SwiGLU: global rows [0, f) gate, [f, 2f) up; rank r
   * holds gate rows [r·fl, ..) and up rows [f + r·fl, ..) (mt_param.halves). */
  const int64_t g[MT_LP_N][6] = {
      {1, h, 1, h, 0, 0},                    {1, h, 1, h, 0, 0},
      {qkv, h, m->qkvl, h, tr * m->qkvl, 0}, {1, qkv, 1, m->qkvl, 0, tr * m->qkvl},
      {1, hn, 1, hn, 0, 0},                  {1, hn, 1, hn, 0, 0},
      {1, hn, 1, hn, 0, 0},                  {1, hn, 1, hn, 0, 0},
      {h, ha, h, hl, 0, tr * hl},            {1, h, 1, h, 0, 0},
      {1, h, 1, h, 0, 0},                    {1, h, 1, h, 0, 0},
      {gl * f, h, gl * fl, h, tr * fl, 0},   {1, gl * f, 1, gl * fl, 0, tr * fl},
      {h, f, h, fl, 0, tr * fl},             {1, h, 1, h, 0, 0}};
  const mt_init_kind init[MT_LP_N] = {
      MT_INIT_ONES,   MT_INIT_ZEROS, MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_ONES,  MT_INIT_ZEROS,
      MT_INIT_ONES,   MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS, MT_INIT_ONES,  MT_INIT_ZEROS,
      MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS};
  /* 1 = hidden-size norm (partial under SP), 2 = q/k norm (partial under TP) */
  const int norm_kind[MT_LP_N] = {1, 1, 0, 0, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0, 0, 0};
  int present[MT_LP_N];
  for (int j = 0; j < MT_LP_N; j++) {
    const int is_bias = j & 1; /* odd slots are biases */
    present[j] = 1;
    if (norm_kind[j] && is_bias && rms) present[j] = 0;
    if (!norm_kind[j] && is_bias && !bias) present[j] = 0;
    if (norm_kind[j] == 2 && !c->qk_layernorm) present[j] = 0;
  }
  m->layer_p = mt_xcalloc((size_t)m->n_local_layers, sizeof(*m->layer_p));
  m->layer_range = mt_xcalloc((size_t)m->n_local_layers, sizeof(*m->layer_range));
  m->moe_router_p = mt_xcalloc((size_t)m->n_local_layers, sizeof(int));
  m->moe_expert_p = mt_xcalloc((size_t)m->n_local_layers, sizeof(int));
  m->moe_shared_p = mt_xcalloc((size_t)m->n_local_layers, sizeof(*m->moe_shared_p));
  for (int k = 0; k < m->n_chunks; k++) {
    const mt_chunk *ch = &m->chunks[k];
    for (int lc = 0; lc < ch->n_layers; lc++) {
      const int l = ch->first_layer + lc, moe = mt_gpt_is_moe_layer(c, l);
      m->moe_router_p[ch->layer_base + lc] = m->moe_expert_p[ch->layer_base + lc] = -1;
      m->layer_range[ch->layer_base + lc][0] = pl->n;
      for (int j = 0; j < MT_LP_N; j++) {
        m->layer_p[ch->layer_base + lc][j] = -1;
        if (!present[j] || (moe && j >= MT_LP_FC1_W)) continue;
        snprintf(name, sizeof name, "decoder.layers.%d.%s", ch->first_layer + lc,
                 k_layer_param_names[j]);
        int no_wd = g[j][0] == 1; /* biases and norms */
        int replicated = g[j][1] == g[j][3] && g[j][0] == g[j][2];
        int idx = mt_params_add(pl, name, g[j][0], g[j][1], g[j][2], g[j][3], g[j][4], g[j][5],
                                init[j], no_wd, replicated);
        pl->p[idx].sp_partial = norm_kind[j] == 1 ? sp : norm_kind[j] == 2 ? c->tp_size > 1 : 0;
        pl->p[idx].halves = gl == 2 && (j == MT_LP_FC1_W || j == MT_LP_FC1_B);
        m->layer_p[ch->layer_base + lc][j] = idx;
      }
      if (moe) register_moe_params(m, ch->layer_base + lc, l);
      m->layer_range[ch->layer_base + lc][1] = pl->n - 1;
    }
  }
  if (has_post) {
    m->p_lnf_w = mt_params_add(pl, "decoder.final_layernorm.weight", 1, h, 1, h, 0, 0,
                               MT_INIT_ONES, 1, 1);
    pl->p[m->p_lnf_w].sp_partial = sp;
    if (!rms) {
      m->p_lnf_b = mt_params_add(pl, "decoder.final_layernorm.bias", 1, h, 1, h, 0, 0,
                                 MT_INIT_ZEROS, 1, 1);
      pl->p[m->p_lnf_b].sp_partial = sp;
    }
    if (c->untie_embeddings_and_output_weights) {
      m->p_out = mt_params_add(pl, "output_layer.weight", V, h, vl, h, m->v_start, 0,
                               MT_INIT_NORMAL, 0, 0);
    } else if (has_pre) {
      m->p_out = m->p_wte;
    } else {
      /* last stage's copy of the tied word embedding: same name, so the same
       * initial values; its gradient joins the first stage's in finalize */
      m->p_out = mt_params_add(pl, "embedding.word_embeddings.weight", V, h, vl, h, m->v_start, 0,
                               MT_INIT_NORMAL, 0, 0);
      pl->p[m->p_out].shared_copy = 1;
    }
  }
}

static void init_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  float scaled = c->init_method_std / sqrtf(2.0f * (float)c->num_layers);
  for (int i = 0; i < m->params.n; i++) {
    const mt_param *p = &m->params.p[i];
    void *dst = mt_gpt_param_ptr(m, i);
    switch (p->init) {
      case MT_INIT_NORMAL:
      case MT_INIT_SCALED: {
        if (c->skip_init) { /* the caller loads every parameter */
          be->ops->fill(be, dst, be->dtype, 0.0f, p->numel);
          break;
        }
        mt_rng_key_t key = mt_rng_key(c->seed, p->name, 0, 0);
        float std = p->init == MT_INIT_NORMAL ? c->init_method_std : scaled;
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
    int outs[2] = {m->p_wte, m->p_out};
    for (int j = 0; j < 2; j++) {
      if (outs[j] < 0 || (j == 1 && outs[1] == outs[0])) continue;
      char *w = mt_gpt_param_ptr(m, outs[j]);
      be->ops->memset0(be, w + (size_t)m->v_valid * c->hidden_size * es,
                       (size_t)(m->vl - m->v_valid) * c->hidden_size * es);
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
  const int64_t s = m->s_loc, b = c->micro_batch_size, h = c->hidden_size;
  m->param_buf = be->ops->alloc(be, (size_t)m->params.numel * mt_dtype_size(T), MT_MEM_PARAM);
  be->ops->memset0(be, m->param_buf, (size_t)m->params.numel * mt_dtype_size(T));
  m->grad_buf = be->ops->alloc(be, (size_t)m->params.numel * sizeof(float), MT_MEM_GRAD);
  be->ops->memset0(be, m->grad_buf, (size_t)m->params.numel * sizeof(float));
  m->param_ptr = mt_xcalloc((size_t)m->params.n, sizeof(void *));
  m->grad_ptr = mt_xcalloc((size_t)m->params.n, sizeof(float *));
  for (int i = 0; i < m->params.n; i++) {
    m->param_ptr[i] = (char *)m->param_buf + (size_t)m->params.p[i].offset * mt_dtype_size(T);
    m->grad_ptr[i] = m->grad_buf + m->params.p[i].offset;
  }
  /* Shared activation storage: selective recompute keeps one log-sum-exp
   * buffer (the fused attention forward re-runs before each layer's backward);
   * full recompute keeps recompute_num_layers layer sets that every chunk and
   * micro-batch reuses while it re-runs a chunk of layers. */
  if (c->recompute == MT_RECOMPUTE_SELECTIVE)
    m->lse_shared = be->ops->alloc(be, (size_t)(b * m->np * s) * sizeof(float), MT_MEM_ACT);
  if (c->recompute == MT_RECOMPUTE_FULL) {
    int maxn = 0;
    for (int k = 0; k < m->n_chunks; k++)
      if (m->chunks[k].n_layers > maxn) maxn = m->chunks[k].n_layers;
    m->n_rc_sets = c->recompute_num_layers < maxn ? c->recompute_num_layers : maxn;
    m->rc_sets = mt_xcalloc((size_t)(m->n_rc_sets ? m->n_rc_sets : 1), sizeof(mt_layer_acts));
    for (int k = 0; k < m->n_rc_sets; k++) mt_gpt_alloc_layer_acts(m, &m->rc_sets[k], 1);
  }
  m->slots = mt_xcalloc((size_t)m->n_chunks, sizeof(mt_slot **));
  m->n_slots = mt_xcalloc((size_t)m->n_chunks, sizeof(int));

  m->tmp_h = wsp(m, m->rows_l * h, T);
  m->dresid = wsp(m, m->rows_l * h, T);
  m->dtmp_h = wsp(m, m->rows_l * h, T);
  m->dqkv = wsp(m, m->rows * m->qkvl, T);
  if (c->qk_layernorm) m->dqkv2 = wsp(m, m->rows * m->qkvl, T);
  m->dctx = wsp(m, m->rows * m->hl, T);
  const int64_t fw = m->fl > m->shl ? m->fl : m->shl; /* dense MLP or shared expert */
  m->dffn = wsp(m, m->rows * m->glu * fw, T);
  if (m->glu == 2) m->dact = wsp(m, m->rows * fw, T);
  if (m->shl > 0) m->sh_out = wsp(m, m->rows_l * h, T);
  if (c->tp_size > 1) {
    m->gather_ws = wsp(m, m->rows * h, T);
    m->grad_ws = wsp(m, m->rows * h, T);
  }
  m->host_tokens = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
  m->host_targets = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
}

static void create_moe(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  if (c->num_experts > 0) {
    mt_moe_config mc = {0};
    mc.E = c->num_experts;
    mc.k = c->moe_router_topk;
    mc.h = c->hidden_size;
    mc.F = c->moe_ffn_hidden_size;
    mc.swiglu = c->swiglu;
    mc.route.capacity_factor = c->moe_expert_capacity_factor;
    mc.route.drop_position = c->moe_drop_position;
    mc.route.pre_softmax = c->moe_router_pre_softmax;
    mc.route.score_sigmoid = c->moe_score_sigmoid;
    mc.route.topk_scaling_factor = c->moe_router_topk_scaling_factor;
    mc.route.num_groups = c->moe_router_num_groups;
    mc.route.group_topk = c->moe_router_group_topk;
    mc.route.lb_type = c->moe_lb_type;
    mc.route.seq_b = c->micro_batch_size;
    mc.route.pad_to_capacity = c->moe_pad_expert_input_to_capacity;
    mc.router_dtype = c->moe_router_dtype;
    mc.lb_coeff = c->moe_aux_loss_coeff;
    mc.z_coeff = c->moe_z_loss_coeff;
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
    mc.grouped_gemm = c->moe_grouped_gemm;
    m->moe = mt_moe_create(be, &mc);
    const int El = c->num_experts / c->ep_size;
    m->moe_nper = c->disable_bias_linear ? 2 : 4;
    m->moe_wp = mt_xcalloc((size_t)4 * El, sizeof(void *));
    m->moe_gp = mt_xcalloc((size_t)4 * El, sizeof(float *));
    mt_gpt_moe_bias_init(m);
  }
}

static void local_sizes(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int tp = c->tp_size;
  const int ng = c->num_query_groups > 0 ? c->num_query_groups : c->num_attention_heads;
  MT_ASSERT(c->num_attention_heads % ng == 0 && ng % tp == 0 && c->ffn_hidden_size % tp == 0);
  MT_ASSERT(c->padded_vocab_size % tp == 0);
  m->hn = c->kv_channels > 0 ? c->kv_channels : c->hidden_size / c->num_attention_heads;
  m->np = c->num_attention_heads / tp;
  m->ng = ng / tp;
  m->hl = (int64_t)m->np * m->hn;
  m->qkvl = (int64_t)(m->np + 2 * m->ng) * m->hn;
  m->glu = c->swiglu ? 2 : 1;
  m->fl = c->ffn_hidden_size / tp;
  MT_ASSERT(c->moe_shared_expert_intermediate_size % tp == 0);
  m->shl = c->num_experts > 0 ? c->moe_shared_expert_intermediate_size / tp : 0;
  m->vl = c->padded_vocab_size / tp;
  m->v_start = (int64_t)c->tp_rank * m->vl;
  int64_t valid = c->vocab_size - m->v_start;
  m->v_valid = valid < 0 ? 0 : (valid > m->vl ? m->vl : valid);
  int sp = c->sequence_parallel && tp > 1;
  m->cpl = mt_cp_layout_make(c->seq_length, c->cp_size, c->cp_rank);
  m->s_loc = mt_cp_local_len(&m->cpl);
  MT_ASSERT(!sp || m->s_loc % tp == 0);
  m->sl = sp ? m->s_loc / tp : m->s_loc;
  m->rows = m->s_loc * c->micro_batch_size;
  m->rows_l = m->sl * c->micro_batch_size;
}

mt_gpt *mt_gpt_create(mt_backend *be, const mt_gpt_config *cfg) {
  mt_gpt *m = mt_xcalloc(1, sizeof *m);
  m->be = be;
  m->cfg = *cfg;
  mt_gpt_config *c = &m->cfg;
  if (c->tp_size < 1) c->tp_size = 1;
  if (c->pp_size < 1) c->pp_size = 1;
  if (c->vpp_size < 1) c->vpp_size = 1;
  if (c->recompute_num_layers < 1) c->recompute_num_layers = 1;
  if (c->ep_size < 1) c->ep_size = 1;
  if (c->cp_size < 1) c->cp_size = 1;
  MT_ASSERT(c->cp_size == 1 || (c->cp_group && c->cp_rank >= 0 && c->cp_rank < c->cp_size));
  if (c->moe_layer_freq < 1) c->moe_layer_freq = 1;
  if (c->num_experts > 0) {
    if (c->moe_router_topk < 1) c->moe_router_topk = 1;
    if (c->moe_ffn_hidden_size < 1) c->moe_ffn_hidden_size = c->ffn_hidden_size;
    MT_ASSERT(c->num_experts % c->ep_size == 0 && c->moe_router_topk <= c->num_experts);
    MT_ASSERT(c->tp_size == 1 || c->sequence_parallel); /* routing works on token shards */
  }
  MT_ASSERT(c->kv_channels > 0 || c->hidden_size % c->num_attention_heads == 0);
  MT_ASSERT(c->position_embedding != MT_POS_LEARNED ||
            c->seq_length <= c->max_position_embeddings);
  if (c->position_embedding == MT_POS_ROPE) {
    if (c->rotary_percent <= 0.0f) c->rotary_percent = 1.0f;
    if (c->rotary_base <= 0.0f) c->rotary_base = 10000.0f;
  }
  MT_ASSERT(c->padded_vocab_size >= c->vocab_size);
  local_sizes(m);
  if (c->cp_size > 1) /* before the activation sets, which then save lse */
    m->cp_attn = mt_cp_attn_create(be, c->cp_group, &m->cpl, c->micro_batch_size, m->np, m->ng,
                                   m->hn);
  assign_chunks(m);
  register_params(m);
  create_moe(m);
  alloc_buffers(m);
  init_params(m);
  m->tp.be = be;
  m->tp.tp = c->tp_size > 1 ? c->tp_group : NULL;
  m->tp.tp_size = c->tp_size;
  m->tp.tp_rank = c->tp_rank;
  m->tp.sp = c->sequence_parallel;
  m->tp.s = m->s_loc; /* TP/SP act within this CP rank's tokens */
  m->tp.b = c->micro_batch_size;
  m->tp.gather_ws = m->gather_ws;
  m->tp.grad_ws = m->grad_ws;
  return m;
}

void mt_gpt_destroy(mt_gpt *m) {
  if (!m) return;
  mt_backend *be = m->be;
  mt_gpt_slots_free(m);
  mt_cp_attn_destroy(m->cp_attn);
  for (int k = 0; k < m->n_rc_sets; k++) mt_gpt_free_layer_acts(m, &m->rc_sets[k]);
  free(m->rc_sets);
  be->ops->free(be, m->lse_shared);
  void *rest[] = {m->tmp_h,   m->dresid,  m->dtmp_h,    m->dqkv,      m->dqkv2,   m->dctx,
                  m->dffn,    m->dact,    m->gather_ws, m->grad_ws,   m->param_buf, m->grad_buf,
                  m->sh_out};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) be->ops->free(be, rest[i]);
  free(m->slots);
  free(m->n_slots);
  free(m->chunks);
  free(m->layer_p);
  free(m->layer_range);
  free(m->moe_router_p);
  free(m->moe_expert_p);
  free(m->moe_shared_p);
  free(m->moe_wp);
  free(m->moe_gp);
  mt_moe_destroy(m->moe);
  free(m->moe_bias);
  free(m->moe_bias_counts);
  free(m->param_ptr);
  free(m->grad_ptr);
  free(m->host_tokens);
  free(m->host_targets);
  mt_gpt_docs_free(m);
  mt_params_free(&m->params);
  free(m);
}

const mt_gpt_config *mt_gpt_get_config(const mt_gpt *m) { return &m->cfg; }
const mt_param_list *mt_gpt_params(const mt_gpt *m) { return &m->params; }
mt_backend *mt_gpt_backend(const mt_gpt *m) { return m->be; }
void *mt_gpt_param_buffer(mt_gpt *m) { return m->param_buf; }
float *mt_gpt_grad_buffer(mt_gpt *m) { return m->grad_buf; }

void *mt_gpt_param_ptr(mt_gpt *m, int idx) { return m->param_ptr[idx]; }
float *mt_gpt_grad_ptr(mt_gpt *m, int idx) { return m->grad_ptr[idx]; }
void mt_gpt_set_param_ptr(mt_gpt *m, int idx, void *p) { m->param_ptr[idx] = p; }
void mt_gpt_set_grad_ptr(mt_gpt *m, int idx, float *g) { m->grad_ptr[idx] = g; }
void mt_gpt_set_hooks(mt_gpt *m, const mt_gpt_hooks *h) { m->hooks = *h; }

void mt_gpt_layer_param_range(const mt_gpt *m, int layer, int *first, int *last) {
  *first = 0;
  *last = -1;
  if (layer == MT_GPT_EMBEDDING) {
    if (m->p_wte >= 0) {
      *first = m->p_wte;
      *last = m->p_wpe >= 0 ? m->p_wpe : m->p_wte;
    }
  } else if (layer == MT_GPT_HEAD) {
    if (m->p_lnf_w >= 0) {
      *first = m->p_lnf_w;
      *last = m->params.n - 1;
    }
  } else {
    for (int k = 0; k < m->n_chunks; k++) {
      const mt_chunk *ch = &m->chunks[k];
      if (layer >= ch->first_layer && layer < ch->first_layer + ch->n_layers) {
        int lc = ch->layer_base + layer - ch->first_layer;
        *first = m->layer_range[lc][0];
        *last = m->layer_range[lc][1];
      }
    }
  }
}

void mt_gpt_release_flat_buffers(mt_gpt *m, int params, int grads) {
  if (params && m->param_buf) {
    m->be->ops->free(m->be, m->param_buf);
    m->param_buf = NULL;
    for (int i = 0; i < m->params.n; i++) m->param_ptr[i] = NULL;
  }
  if (grads && m->grad_buf) {
    m->be->ops->free(m->be, m->grad_buf);
    m->grad_buf = NULL;
    for (int i = 0; i < m->params.n; i++) m->grad_ptr[i] = NULL;
  }
}

int mt_gpt_is_moe_layer(const mt_gpt_config *c, int l) {
  if (c->num_experts <= 0 || l < 0 || l >= c->num_layers) return 0;
  if (c->moe_layer_pattern_len > 0) return l < c->moe_layer_pattern_len && c->moe_layer_pattern[l];
  return l % (c->moe_layer_freq > 0 ? c->moe_layer_freq : 1) == 0;
}

int mt_gpt_moe_layer_index(const mt_gpt_config *c, int l) {
  if (!mt_gpt_is_moe_layer(c, l)) return -1;
  int n = 0;
  for (int j = 0; j < l; j++) n += mt_gpt_is_moe_layer(c, j);
  return n;
}

int mt_gpt_num_moe_layers(const mt_gpt_config *c) {
  int n = 0;
  for (int l = 0; l < c->num_layers; l++) n += mt_gpt_is_moe_layer(c, l);
  return n;
}

const mt_moe_stats *mt_gpt_moe_stats(const mt_gpt *m) {
  return m->moe ? mt_moe_get_stats(m->moe) : NULL;
}

void mt_gpt_moe_stats_reset(mt_gpt *m) {
  if (m->moe) mt_moe_stats_reset(m->moe);
}

int64_t mt_gpt_num_parameters(const mt_gpt *m) {
  int64_t n = 0;
  for (int i = 0; i < m->params.n; i++)
    if (!m->params.p[i].shared_copy)
      n += m->params.p[i].rows * m->params.p[i].cols *
           (m->params.p[i].is_expert ? m->cfg.ep_size : 1); /* other EP ranks' experts */
  return n;
}

void mt_gpt_finalize_grads(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  if (c->tp_size > 1) {
    for (int i = 0; i < m->params.n; i++)
      if (m->params.p[i].sp_partial)
        mt_allreduce(c->tp_group, mt_gpt_grad_ptr(m, i), m->params.p[i].numel, MT_F32,
                     MT_OP_SUM);
  }
  /* tied word embedding split over the first and last stage */
  if (c->pp_size > 1 && !c->untie_embeddings_and_output_weights && c->embd_group) {
    int idx = m->p_wte >= 0 ? m->p_wte : m->p_out;
    if (idx >= 0)
      mt_allreduce(c->embd_group, mt_gpt_grad_ptr(m, idx), m->params.p[idx].numel, MT_F32,
                   MT_OP_SUM);
  }
}

void mt_gpt_zero_grad(mt_gpt *m) {
  if (!m->grad_buf) return;
  m->be->ops->memset0(m->be, m->grad_buf, (size_t)m->params.numel * sizeof(float));
}

int mt_gpt_num_chunks(const mt_gpt *m) { return m->n_chunks; }
int mt_gpt_chunk_is_first(const mt_gpt *m, int c) { return m->chunks[c].pre; }
int mt_gpt_chunk_is_last(const mt_gpt *m, int c) { return m->chunks[c].post; }
int64_t mt_gpt_stage_tensor_elems(const mt_gpt *m) { return m->rows_l * m->cfg.hidden_size; }
void *mt_gpt_grad_buffer_stage(mt_gpt *m) { return m->dresid; }
