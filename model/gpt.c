/* model/gpt.c — GPT construction, parameters and buffers (see gpt.h).
 * The forward/backward passes live in model/gpt_block.c (one transformer
 * layer) and model/gpt_forward.c (embedding, stack, head, loss). */
#include "model/gpt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static const char *k_layer_param_names[MT_LP_N] = {
    "input_layernorm.weight",         "input_layernorm.bias",
    "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
    "pre_mlp_layernorm.weight",       "pre_mlp_layernorm.bias",
    "mlp.linear_fc1.weight",          "mlp.linear_fc1.bias",
    "mlp.linear_fc2.weight",          "mlp.linear_fc2.bias",
};

/* Parameter shards of this TP rank (Megatron's column/row/vocab split):
 * column-parallel weights (linear_qkv, linear_fc1) and their biases split
 * the output features (rows of W), row-parallel weights (linear_proj,
 * linear_fc2) the input features (columns of W), the word embedding and an
 * untied output layer the (padded) vocabulary rows. LayerNorms, the position
 * embedding and row-parallel biases are replicated. */
static void register_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_param_list *pl = &m->params;
  const int64_t h = c->hidden_size, f = c->ffn_hidden_size, V = c->padded_vocab_size;
  const int64_t tr = c->tp_rank, hl = m->hl, fl = m->fl, vl = m->vl;
  const int sp = c->sequence_parallel && c->tp_size > 1;
  char name[MT_PARAM_NAME_MAX];
  m->p_wte = mt_params_add(pl, "embedding.word_embeddings.weight", V, h, vl, h, m->v_start, 0,
                           MT_INIT_NORMAL, 0, 0);
  m->p_wpe = mt_params_add(pl, "embedding.position_embeddings.weight",
                           c->max_position_embeddings, h, c->max_position_embeddings, h, 0, 0,
                           MT_INIT_NORMAL, 0, 1);
  pl->p[m->p_wpe].sp_partial = sp;
  /* global [rows, cols], local [rows, cols], offsets [row, col] per slot */
  const int64_t g[MT_LP_N][6] = {
      {1, h, 1, h, 0, 0},                   {1, h, 1, h, 0, 0},
      {3 * h, h, 3 * hl, h, tr * 3 * hl, 0}, {1, 3 * h, 1, 3 * hl, 0, tr * 3 * hl},
      {h, h, h, hl, 0, tr * hl},            {1, h, 1, h, 0, 0},
      {1, h, 1, h, 0, 0},                   {1, h, 1, h, 0, 0},
      {f, h, fl, h, tr * fl, 0},            {1, f, 1, fl, 0, tr * fl},
      {h, f, h, fl, 0, tr * fl},            {1, h, 1, h, 0, 0}};
  const mt_init_kind init[MT_LP_N] = {MT_INIT_ONES,   MT_INIT_ZEROS, MT_INIT_NORMAL, MT_INIT_ZEROS,
                                      MT_INIT_SCALED, MT_INIT_ZEROS, MT_INIT_ONES,   MT_INIT_ZEROS,
                                      MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS};
  const int is_ln[MT_LP_N] = {1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  m->layer_p = mt_xcalloc((size_t)c->num_layers, sizeof(*m->layer_p));
  for (int l = 0; l < c->num_layers; l++) {
    for (int k = 0; k < MT_LP_N; k++) {
      snprintf(name, sizeof name, "decoder.layers.%d.%s", l, k_layer_param_names[k]);
      int no_wd = g[k][0] == 1; /* biases and LayerNorm */
      int replicated = g[k][1] == g[k][3] && g[k][0] == g[k][2];
      int idx = mt_params_add(pl, name, g[k][0], g[k][1], g[k][2], g[k][3], g[k][4], g[k][5],
                              init[k], no_wd, replicated);
      pl->p[idx].sp_partial = sp && is_ln[k];
      m->layer_p[l][k] = idx;
    }
  }
  m->p_lnf_w = mt_params_add(pl, "decoder.final_layernorm.weight", 1, h, 1, h, 0, 0,
                             MT_INIT_ONES, 1, 1);
  m->p_lnf_b = mt_params_add(pl, "decoder.final_layernorm.bias", 1, h, 1, h, 0, 0,
                             MT_INIT_ZEROS, 1, 1);
  pl->p[m->p_lnf_w].sp_partial = pl->p[m->p_lnf_b].sp_partial = sp;
  m->p_out = m->p_wte;
  if (c->untie_embeddings_and_output_weights)
    m->p_out = mt_params_add(pl, "output_layer.weight", V, h, vl, h, m->v_start, 0,
                             MT_INIT_NORMAL, 0, 0);
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
        mt_rng_key_t key = mt_rng_key(c->seed, p->name, 0, 0);
        float std = p->init == MT_INIT_NORMAL ? c->init_method_std : scaled;
        be->ops->init_normal(be, dst, p->local_rows, p->local_cols, p->cols, p->row_offset,
                             p->col_offset, key, std);
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
    for (int j = 0; j < (m->p_out == m->p_wte ? 1 : 2); j++) {
      char *w = mt_gpt_param_ptr(m, outs[j]);
      be->ops->memset0(be, w + (size_t)m->v_valid * c->hidden_size * es,
                       (size_t)(m->vl - m->v_valid) * c->hidden_size * es);
    }
  }
}

static void *act(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_ACT);
}

static void *wsp(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_WORKSPACE);
}

static void alloc_layer_acts(mt_gpt *m, mt_layer_acts *a, int with_probs) {
  const mt_gpt_config *c = &m->cfg;
  mt_dtype T = m->be->dtype;
  const int64_t h = c->hidden_size, s = c->seq_length, b = c->micro_batch_size;
  a->ln1 = act(m, m->rows_l * h, T);
  a->ln1_mean = act(m, m->rows_l, MT_F32);
  a->ln1_rstd = act(m, m->rows_l, MT_F32);
  a->qkv = act(m, m->rows * 3 * m->hl, T);
  a->probs = with_probs ? act(m, b * m->np * s * s, T) : m->probs_shared;
  a->ctx = act(m, m->rows * m->hl, T);
  a->x1 = act(m, m->rows_l * h, T);
  a->ln2 = act(m, m->rows_l * h, T);
  a->ln2_mean = act(m, m->rows_l, MT_F32);
  a->ln2_rstd = act(m, m->rows_l, MT_F32);
  a->fc1 = act(m, m->rows * m->fl, T);
  a->gelu = act(m, m->rows * m->fl, T);
}

static void free_layer_acts(mt_gpt *m, mt_layer_acts *a) {
  void *ptrs[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->ctx, a->x1,
                  a->ln2, a->ln2_mean, a->ln2_rstd, a->fc1, a->gelu};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) m->be->ops->free(m->be, ptrs[i]);
  if (a->probs != m->probs_shared) m->be->ops->free(m->be, a->probs);
}

static void alloc_buffers(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  mt_dtype T = be->dtype;
  const int64_t s = c->seq_length, b = c->micro_batch_size, h = c->hidden_size;
  const int L = c->num_layers;
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

  /* Activation sets: one per layer; under full recompute one per layer of a
   * chunk, shared by all chunks. Selective recompute shares one probs buffer. */
  int selective = c->recompute == MT_RECOMPUTE_SELECTIVE;
  if (selective) m->probs_shared = act(m, b * m->np * s * s, T);
  m->n_act_sets = c->recompute == MT_RECOMPUTE_FULL ? c->recompute_num_layers : L;
  if (m->n_act_sets > L) m->n_act_sets = L;
  m->act_sets = mt_xcalloc((size_t)m->n_act_sets, sizeof(mt_layer_acts));
  for (int k = 0; k < m->n_act_sets; k++) alloc_layer_acts(m, &m->act_sets[k], !selective);
  m->acts = mt_xcalloc((size_t)L, sizeof(mt_layer_acts *));
  for (int l = 0; l < L; l++) m->acts[l] = &m->act_sets[l % m->n_act_sets];
  m->resid = mt_xcalloc((size_t)L + 1, sizeof(void *));
  for (int l = 0; l <= L; l++) m->resid[l] = act(m, m->rows_l * h, T);
  m->lnf = act(m, m->rows_l * h, T);
  m->lnf_mean = act(m, m->rows_l, MT_F32);
  m->lnf_rstd = act(m, m->rows_l, MT_F32);
  m->logits = act(m, m->rows * m->vl, T);
  m->row_max = act(m, m->rows, MT_F32);
  m->stats = act(m, 2 * m->rows, MT_F32);
  m->loss = act(m, m->rows, MT_F32);
  m->tokens = act(m, m->rows, MT_I32);
  m->targets = act(m, m->rows, MT_I32);

  m->tmp_h = wsp(m, m->rows_l * h, T);
  m->dresid = wsp(m, m->rows_l * h, T);
  m->dtmp_h = wsp(m, m->rows_l * h, T);
  m->dqkv = wsp(m, m->rows * 3 * m->hl, T);
  m->dctx = wsp(m, m->rows * m->hl, T);
  m->dffn = wsp(m, m->rows * m->fl, T);
  if (c->tp_size > 1) {
    m->gather_ws = wsp(m, m->rows * h, T);
    m->grad_ws = wsp(m, m->rows * h, T);
  }
  m->host_tokens = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
  m->host_targets = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
}

static void local_sizes(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  const int tp = c->tp_size > 0 ? c->tp_size : 1;
  MT_ASSERT(c->num_attention_heads % tp == 0 && c->ffn_hidden_size % tp == 0);
  MT_ASSERT(c->padded_vocab_size % tp == 0);
  m->hn = c->hidden_size / c->num_attention_heads;
  m->np = c->num_attention_heads / tp;
  m->hl = (int64_t)m->np * m->hn;
  m->fl = c->ffn_hidden_size / tp;
  m->vl = c->padded_vocab_size / tp;
  m->v_start = (int64_t)c->tp_rank * m->vl;
  int64_t valid = c->vocab_size - m->v_start;
  m->v_valid = valid < 0 ? 0 : (valid > m->vl ? m->vl : valid);
  int sp = c->sequence_parallel && tp > 1;
  MT_ASSERT(!sp || c->seq_length % tp == 0);
  m->sl = sp ? c->seq_length / tp : c->seq_length;
  m->rows = (int64_t)c->seq_length * c->micro_batch_size;
  m->rows_l = m->sl * c->micro_batch_size;
}

mt_gpt *mt_gpt_create(mt_backend *be, const mt_gpt_config *cfg) {
  mt_gpt *m = mt_xcalloc(1, sizeof *m);
  m->be = be;
  m->cfg = *cfg;
  MT_ASSERT(cfg->hidden_size % cfg->num_attention_heads == 0);
  MT_ASSERT(cfg->seq_length <= cfg->max_position_embeddings);
  MT_ASSERT(cfg->padded_vocab_size >= cfg->vocab_size);
  if (m->cfg.tp_size < 1) m->cfg.tp_size = 1;
  if (m->cfg.recompute_num_layers < 1) m->cfg.recompute_num_layers = 1;
  local_sizes(m);
  register_params(m);
  alloc_buffers(m);
  init_params(m);
  m->tp.be = be;
  m->tp.tp = m->cfg.tp_size > 1 ? m->cfg.tp_group : NULL;
  m->tp.tp_size = m->cfg.tp_size;
  m->tp.tp_rank = m->cfg.tp_rank;
  m->tp.sp = m->cfg.sequence_parallel;
  m->tp.s = m->cfg.seq_length;
  m->tp.b = m->cfg.micro_batch_size;
  m->tp.gather_ws = m->gather_ws;
  m->tp.grad_ws = m->grad_ws;
  return m;
}

void mt_gpt_destroy(mt_gpt *m) {
  if (!m) return;
  mt_backend *be = m->be;
  void (*fr)(mt_backend *, void *) = be->ops->free;
  for (int k = 0; k < m->n_act_sets; k++) free_layer_acts(m, &m->act_sets[k]);
  fr(be, m->probs_shared);
  for (int l = 0; l <= m->cfg.num_layers; l++) fr(be, m->resid[l]);
  void *rest[] = {m->lnf,   m->lnf_mean, m->lnf_rstd, m->logits,    m->row_max, m->stats,
                  m->loss,  m->tokens,   m->targets,  m->tmp_h,     m->dresid,  m->dtmp_h,
                  m->dqkv,  m->dctx,     m->dffn,     m->gather_ws, m->grad_ws, m->param_buf,
                  m->grad_buf};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) fr(be, rest[i]);
  free(m->act_sets);
  free(m->acts);
  free(m->resid);
  free(m->layer_p);
  free(m->param_ptr);
  free(m->grad_ptr);
  free(m->host_tokens);
  free(m->host_targets);
  mt_params_free(&m->params);
  free(m);
}

const mt_gpt_config *mt_gpt_get_config(const mt_gpt *m) { return &m->cfg; }
const mt_param_list *mt_gpt_params(const mt_gpt *m) { return &m->params; }
void *mt_gpt_param_buffer(mt_gpt *m) { return m->param_buf; }
float *mt_gpt_grad_buffer(mt_gpt *m) { return m->grad_buf; }

void *mt_gpt_param_ptr(mt_gpt *m, int idx) { return m->param_ptr[idx]; }
float *mt_gpt_grad_ptr(mt_gpt *m, int idx) { return m->grad_ptr[idx]; }
void mt_gpt_set_param_ptr(mt_gpt *m, int idx, void *p) { m->param_ptr[idx] = p; }
void mt_gpt_set_grad_ptr(mt_gpt *m, int idx, float *g) { m->grad_ptr[idx] = g; }
void mt_gpt_set_hooks(mt_gpt *m, const mt_gpt_hooks *h) { m->hooks = *h; }

void mt_gpt_layer_param_range(const mt_gpt *m, int layer, int *first, int *last) {
  if (layer == MT_GPT_EMBEDDING) {
    *first = m->p_wte;
    *last = m->p_wpe;
  } else if (layer == MT_GPT_HEAD) {
    *first = m->p_lnf_w;
    *last = m->params.n - 1;
  } else {
    *first = m->layer_p[layer][0];
    *last = m->layer_p[layer][MT_LP_N - 1];
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

int64_t mt_gpt_num_parameters(const mt_gpt *m) {
  int64_t n = 0;
  for (int i = 0; i < m->params.n; i++) n += m->params.p[i].rows * m->params.p[i].cols;
  return n;
}

void mt_gpt_finalize_grads(mt_gpt *m) {
  if (!(m->cfg.sequence_parallel && m->cfg.tp_size > 1)) return;
  for (int i = 0; i < m->params.n; i++)
    if (m->params.p[i].sp_partial)
      mt_allreduce(m->cfg.tp_group, mt_gpt_grad_ptr(m, i), m->params.p[i].numel, MT_F32,
                   MT_OP_SUM);
}

void mt_gpt_zero_grad(mt_gpt *m) {
  if (!m->grad_buf) return;
  m->be->ops->memset0(m->be, m->grad_buf, (size_t)m->params.numel * sizeof(float));
}
