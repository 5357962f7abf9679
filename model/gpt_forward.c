/* model/gpt_forward.c — one micro-batch through the GPT: embedding,
 * transformer stack, final LayerNorm, output layer and cross-entropy, and
 * the backward pass in reverse. */
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h"

static mt_dropout_desc embedding_dropout_desc(const mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_dropout_desc d = {0};
  d.p = m->train ? c->hidden_dropout : 0.0f;
  d.key = mt_rng_key(c->seed, "embedding_dropout", 0, 0);
  d.s = (int)m->sl;
  d.b = c->micro_batch_size;
  d.h = c->hidden_size;
  d.s_offset = m->sl < c->seq_length ? (int)(c->tp_rank * m->sl) : 0;
  d.s_full = c->seq_length;
  d.h_full = c->hidden_size;
  d.sample_ids = m->sample_ids;
  return d;
}

static int64_t s_offset(const mt_gpt *m) {
  return m->sl < m->cfg.seq_length ? (int64_t)m->cfg.tp_rank * m->sl : 0;
}

/* Upload inputs/targets in [s, b] order from host [b, s + 1] samples. */
static void load_tokens(mt_gpt *m, const int32_t *tokens) {
  const int s = m->cfg.seq_length, b = m->cfg.micro_batch_size;
  for (int si = 0; si < s; si++)
    for (int bi = 0; bi < b; bi++) {
      m->host_tokens[si * b + bi] = tokens[(int64_t)bi * (s + 1) + si];
      m->host_targets[si * b + bi] = tokens[(int64_t)bi * (s + 1) + si + 1];
    }
  size_t bytes = (size_t)s * b * sizeof(int32_t);
  m->be->ops->memcpy_h2d(m->be, m->tokens, m->host_tokens, bytes);
  m->be->ops->memcpy_h2d(m->be, m->targets, m->host_targets, bytes);
}

/* VocabParallelEmbedding + position embedding + embedding dropout ->
 * resid[0] [sl, b, h]. */
static void embedding_forward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t b = c->micro_batch_size, h = c->hidden_size;
  mt_vocab_parallel_embedding_fwd(&m->tp, m->resid[0], m->tokens, mt_gpt_param_ptr(m, m->p_wte),
                                  m->v_start, m->v_start + m->vl, h);
  be->ops->pos_embedding_fwd(be, m->resid[0], mt_gpt_param_ptr(m, m->p_wpe), m->sl, b, h,
                             s_offset(m));
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) be->ops->dropout_bwd(be, &d, m->resid[0], m->resid[0]); /* same mask op */
}

static void embedding_backward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t b = c->micro_batch_size, h = c->hidden_size;
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) be->ops->dropout_bwd(be, &d, m->dresid, m->dresid);
  be->ops->pos_embedding_bwd(be, mt_gpt_grad_ptr(m, m->p_wpe), m->dresid, m->sl, b, h,
                             s_offset(m));
  mt_vocab_parallel_embedding_bwd(&m->tp, mt_gpt_grad_ptr(m, m->p_wte), m->tokens, m->dresid,
                                  m->v_start, m->v_start + m->vl, h);
}

/* Final LayerNorm, logits = lnf @ W_out^T on this rank's vocabulary slice
 * (ColumnParallelLinear without bias), vocab-parallel cross-entropy. Returns
 * the sum of token losses. */
static double head_forward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->hidden_size;
  be->ops->layernorm_fwd(be, m->lnf, m->lnf_mean, m->lnf_rstd, m->resid[c->num_layers],
                         mt_gpt_param_ptr(m, m->p_lnf_w), mt_gpt_param_ptr(m, m->p_lnf_b),
                         m->rows_l, h, c->layernorm_epsilon);
  mt_column_parallel_linear_fwd(&m->tp, m->logits, m->lnf, mt_gpt_param_ptr(m, m->p_out), NULL,
                                m->vl, h);
  return mt_vocab_parallel_cross_entropy_fwd(&m->tp, m->loss, m->row_max, m->stats, m->logits,
                                             m->targets, m->vl, m->v_valid, m->v_start);
}

static void head_backward(mt_gpt *m, float loss_scale) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->hidden_size;
  mt_vocab_parallel_cross_entropy_bwd(&m->tp, m->logits, m->row_max, m->stats, m->targets, m->vl,
                                      m->v_valid, m->v_start, loss_scale);
  mt_column_parallel_linear_bwd(&m->tp, m->dtmp_h, mt_gpt_grad_ptr(m, m->p_out), NULL, m->logits,
                                m->lnf, mt_gpt_param_ptr(m, m->p_out), m->vl, h);
  be->ops->memset0(be, m->dresid, (size_t)(m->rows_l * h) * mt_dtype_size(be->dtype));
  be->ops->layernorm_bwd(be, m->dresid, mt_gpt_grad_ptr(m, m->p_lnf_w),
                         mt_gpt_grad_ptr(m, m->p_lnf_b), m->dtmp_h, m->resid[c->num_layers],
                         mt_gpt_param_ptr(m, m->p_lnf_w), m->lnf_mean, m->lnf_rstd, m->rows_l, h);
}

/* Backward through the transformer stack. Under full recomputation each
 * chunk of recompute_num_layers layers is first re-run forward from its
 * stored input (same RNG counters, so identical values), then backward. */
static void stack_backward(mt_gpt *m) {
  const int L = m->cfg.num_layers;
  if (m->cfg.recompute != MT_RECOMPUTE_FULL) {
    for (int l = L - 1; l >= 0; l--) {
      MT_HOOK(m, before_backward, l);
      mt_gpt_layer_backward(m, l);
      MT_HOOK(m, after_backward, l);
    }
    return;
  }
  const int n = m->n_act_sets;
  for (int c1 = L; c1 > 0;) {
    int c0 = (c1 - 1) / n * n;
    for (int l = c0; l < c1; l++) MT_HOOK(m, before_backward, l);
    for (int l = c0; l < c1; l++) mt_gpt_layer_forward(m, l);
    for (int l = c1 - 1; l >= c0; l--) {
      mt_gpt_layer_backward(m, l);
      MT_HOOK(m, after_backward, l);
    }
    c1 = c0;
  }
}

double mt_gpt_forward_backward(mt_gpt *m, const int32_t *tokens, const int64_t *sample_ids,
                               int train, float loss_scale) {
  m->sample_ids = sample_ids;
  m->train = train;
  load_tokens(m, tokens);
  MT_HOOK(m, before_forward, MT_GPT_EMBEDDING);
  embedding_forward(m);
  MT_HOOK(m, after_forward, MT_GPT_EMBEDDING);
  for (int l = 0; l < m->cfg.num_layers; l++) {
    MT_HOOK(m, before_forward, l);
    mt_gpt_layer_forward(m, l);
    MT_HOOK(m, after_forward, l);
  }
  MT_HOOK(m, before_forward, MT_GPT_HEAD);
  double loss_sum = head_forward(m);
  MT_HOOK(m, after_forward, MT_GPT_HEAD);
  if (train) {
    MT_HOOK(m, before_backward, MT_GPT_HEAD);
    head_backward(m, loss_scale);
    MT_HOOK(m, after_backward, MT_GPT_HEAD);
    stack_backward(m);
    MT_HOOK(m, before_backward, MT_GPT_EMBEDDING);
    embedding_backward(m);
    MT_HOOK(m, after_backward, MT_GPT_EMBEDDING);
  }
  m->sample_ids = NULL;
  return loss_sum;
}
