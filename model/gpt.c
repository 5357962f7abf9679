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

static void register_params(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_param_list *pl = &m->params;
  const int64_t h = c->hidden_size, f = c->ffn_hidden_size, V = c->padded_vocab_size;
  char name[MT_PARAM_NAME_MAX];
  m->p_wte = mt_params_add(pl, "embedding.word_embeddings.weight", V, h, V, h, 0, 0,
                           MT_INIT_NORMAL, 0, 0);
  m->p_wpe = mt_params_add(pl, "embedding.position_embeddings.weight",
                           c->max_position_embeddings, h, c->max_position_embeddings, h, 0, 0,
                           MT_INIT_NORMAL, 0, 1);
  /* global shapes [rows, cols] of each layer parameter, in enum order */
  const int64_t shp[MT_LP_N][2] = {{1, h}, {1, h}, {3 * h, h}, {1, 3 * h}, {h, h}, {1, h},
                                   {1, h}, {1, h}, {f, h},     {1, f},     {h, f}, {1, h}};
  const mt_init_kind init[MT_LP_N] = {MT_INIT_ONES,   MT_INIT_ZEROS, MT_INIT_NORMAL, MT_INIT_ZEROS,
                                      MT_INIT_SCALED, MT_INIT_ZEROS, MT_INIT_ONES,   MT_INIT_ZEROS,
                                      MT_INIT_NORMAL, MT_INIT_ZEROS, MT_INIT_SCALED, MT_INIT_ZEROS};
  m->layer_p = mt_xcalloc((size_t)c->num_layers, sizeof(*m->layer_p));
  for (int l = 0; l < c->num_layers; l++) {
    for (int k = 0; k < MT_LP_N; k++) {
      snprintf(name, sizeof name, "decoder.layers.%d.%s", l, k_layer_param_names[k]);
      int no_wd = shp[k][0] == 1; /* biases and LayerNorm */
      m->layer_p[l][k] = mt_params_add(pl, name, shp[k][0], shp[k][1], shp[k][0], shp[k][1], 0,
                                       0, init[k], no_wd, 0);
    }
  }
  m->p_lnf_w = mt_params_add(pl, "decoder.final_layernorm.weight", 1, h, 1, h, 0, 0,
                             MT_INIT_ONES, 1, 1);
  m->p_lnf_b = mt_params_add(pl, "decoder.final_layernorm.bias", 1, h, 1, h, 0, 0,
                             MT_INIT_ZEROS, 1, 1);
  m->p_out = m->p_wte;
  if (c->untie_embeddings_and_output_weights)
    m->p_out = mt_params_add(pl, "output_layer.weight", V, h, V, h, 0, 0, MT_INIT_NORMAL, 0, 0);
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
  if (c->padded_vocab_size > c->vocab_size) {
    size_t es = mt_dtype_size(be->dtype);
    int outs[2] = {m->p_wte, m->p_out};
    for (int j = 0; j < (m->p_out == m->p_wte ? 1 : 2); j++) {
      char *w = mt_gpt_param_ptr(m, outs[j]);
      be->ops->memset0(be, w + (size_t)c->vocab_size * c->hidden_size * es,
                       (size_t)(c->padded_vocab_size - c->vocab_size) * c->hidden_size * es);
    }
  }
}

static void *act(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_ACT);
}

static void *wsp(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_WORKSPACE);
}

static void alloc_buffers(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  mt_dtype T = be->dtype;
  const int64_t s = c->seq_length, b = c->micro_batch_size, h = c->hidden_size;
  const int64_t f = c->ffn_hidden_size, nh = c->num_attention_heads, sb = s * b;
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

  m->acts = mt_xcalloc((size_t)L, sizeof(mt_layer_acts));
  m->resid = mt_xcalloc((size_t)L + 1, sizeof(void *));
  for (int l = 0; l <= L; l++) m->resid[l] = act(m, sb * h, T);
  for (int l = 0; l < L; l++) {
    mt_layer_acts *a = &m->acts[l];
    a->ln1 = act(m, sb * h, T);
    a->ln1_mean = act(m, sb, MT_F32);
    a->ln1_rstd = act(m, sb, MT_F32);
    a->qkv = act(m, sb * 3 * h, T);
    a->probs = act(m, b * nh * s * s, T);
    a->ctx = act(m, sb * h, T);
    a->x1 = act(m, sb * h, T);
    a->ln2 = act(m, sb * h, T);
    a->ln2_mean = act(m, sb, MT_F32);
    a->ln2_rstd = act(m, sb, MT_F32);
    a->fc1 = act(m, sb * f, T);
    a->gelu = act(m, sb * f, T);
  }
  m->lnf = act(m, sb * h, T);
  m->lnf_mean = act(m, sb, MT_F32);
  m->lnf_rstd = act(m, sb, MT_F32);
  m->logits = act(m, sb * c->padded_vocab_size, T);
  m->row_max = act(m, sb, MT_F32);
  m->sumexp = act(m, sb, MT_F32);
  m->tgt_logit = act(m, sb, MT_F32);
  m->loss = act(m, sb, MT_F32);
  m->tokens = act(m, sb, MT_I32);
  m->targets = act(m, sb, MT_I32);

  m->tmp_h = wsp(m, sb * h, T);
  m->dresid = wsp(m, sb * h, T);
  m->dtmp_h = wsp(m, sb * h, T);
  m->dqkv = wsp(m, sb * 3 * h, T);
  m->dctx = wsp(m, sb * h, T);
  m->dffn = wsp(m, sb * f, T);
  m->host_tokens = mt_xmalloc((size_t)sb * sizeof(int32_t));
  m->host_targets = mt_xmalloc((size_t)sb * sizeof(int32_t));
}

mt_gpt *mt_gpt_create(mt_backend *be, const mt_gpt_config *cfg) {
  mt_gpt *m = mt_xcalloc(1, sizeof *m);
  m->be = be;
  m->cfg = *cfg;
  MT_ASSERT(cfg->hidden_size % cfg->num_attention_heads == 0);
  MT_ASSERT(cfg->seq_length <= cfg->max_position_embeddings);
  MT_ASSERT(cfg->padded_vocab_size >= cfg->vocab_size);
  register_params(m);
  alloc_buffers(m);
  init_params(m);
  return m;
}

void mt_gpt_destroy(mt_gpt *m) {
  if (!m) return;
  mt_backend *be = m->be;
  void (*fr)(mt_backend *, void *) = be->ops->free;
  for (int l = 0; l < m->cfg.num_layers; l++) {
    mt_layer_acts *a = &m->acts[l];
    void *ptrs[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->probs, a->ctx,
                    a->x1,  a->ln2,      a->ln2_mean, a->ln2_rstd, a->fc1, a->gelu};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) fr(be, ptrs[i]);
  }
  for (int l = 0; l <= m->cfg.num_layers; l++) fr(be, m->resid[l]);
  void *rest[] = {m->lnf,    m->lnf_mean, m->lnf_rstd, m->logits, m->row_max, m->sumexp,
                  m->tgt_logit, m->loss,  m->tokens,   m->targets, m->tmp_h,  m->dresid,
                  m->dtmp_h, m->dqkv,     m->dctx,     m->dffn,    m->param_buf, m->grad_buf};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) fr(be, rest[i]);
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

void mt_gpt_zero_grad(mt_gpt *m) {
  if (!m->grad_buf) return;
  m->be->ops->memset0(m->be, m->grad_buf, (size_t)m->params.numel * sizeof(float));
}
