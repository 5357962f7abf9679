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
  d.s = c->seq_length;
  d.b = c->micro_batch_size;
  d.h = c->hidden_size;
  d.s_full = c->seq_length;
  d.h_full = c->hidden_size;
  d.sample_ids = m->sample_ids;
  return d;
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

static void embedding_forward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t s = c->seq_length, b = c->micro_batch_size, h = c->hidden_size;
  be->ops->embedding_fwd(be, m->resid[0], m->tokens, s * b, mt_gpt_param_ptr(m, m->p_wte), 0,
                         c->padded_vocab_size, h);
  be->ops->pos_embedding_fwd(be, m->resid[0], mt_gpt_param_ptr(m, m->p_wpe), s, b, h, 0);
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) be->ops->dropout_bwd(be, &d, m->resid[0], m->resid[0]); /* same mask op */
}

static void embedding_backward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t s = c->seq_length, b = c->micro_batch_size, h = c->hidden_size;
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) be->ops->dropout_bwd(be, &d, m->dresid, m->dresid);
  be->ops->embedding_bwd(be, mt_gpt_grad_ptr(m, m->p_wte), m->tokens, s * b, m->dresid, 0,
                         c->padded_vocab_size, h);
  be->ops->pos_embedding_bwd(be, mt_gpt_grad_ptr(m, m->p_wpe), m->dresid, s, b, h, 0);
}

/* Final LayerNorm, logits = lnf @ W_out^T, per-token cross-entropy. Returns
 * the sum of token losses. */
static double head_forward(mt_gpt *m) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t sb = (int64_t)c->seq_length * c->micro_batch_size, h = c->hidden_size;
  const int64_t V = c->padded_vocab_size;
  be->ops->layernorm_fwd(be, m->lnf, m->lnf_mean, m->lnf_rstd, m->resid[c->num_layers],
                         mt_gpt_param_ptr(m, m->p_lnf_w), mt_gpt_param_ptr(m, m->p_lnf_b), sb, h,
                         c->layernorm_epsilon);
  mt_linear_fwd(be, m->logits, m->lnf, mt_gpt_param_ptr(m, m->p_out), NULL, sb, V, h);
  be->ops->xent_max(be, m->row_max, m->logits, sb, V, c->vocab_size);
  be->ops->xent_stats(be, m->sumexp, m->tgt_logit, m->logits, m->row_max, m->targets, sb, V,
                      c->vocab_size, 0);
  be->ops->xent_loss(be, m->loss, m->row_max, m->sumexp, m->tgt_logit, sb);
  return be->ops->sum_f32(be, m->loss, sb);
}

static void head_backward(mt_gpt *m, float loss_scale) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t sb = (int64_t)c->seq_length * c->micro_batch_size, h = c->hidden_size;
  const int64_t V = c->padded_vocab_size;
  be->ops->xent_bwd(be, m->logits, m->row_max, m->sumexp, m->targets, sb, V, c->vocab_size, 0,
                    loss_scale);
  mt_linear_bwd(be, m->dtmp_h, mt_gpt_grad_ptr(m, m->p_out), NULL, m->logits, m->lnf,
                mt_gpt_param_ptr(m, m->p_out), sb, V, h);
  be->ops->memset0(be, m->dresid, (size_t)(sb * h) * mt_dtype_size(be->dtype));
  be->ops->layernorm_bwd(be, m->dresid, mt_gpt_grad_ptr(m, m->p_lnf_w),
                         mt_gpt_grad_ptr(m, m->p_lnf_b), m->dtmp_h, m->resid[c->num_layers],
                         mt_gpt_param_ptr(m, m->p_lnf_w), m->lnf_mean, m->lnf_rstd, sb, h);
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
    for (int l = m->cfg.num_layers - 1; l >= 0; l--) {
      MT_HOOK(m, before_backward, l);
      mt_gpt_layer_backward(m, l);
      MT_HOOK(m, after_backward, l);
    }
    MT_HOOK(m, before_backward, MT_GPT_EMBEDDING);
    embedding_backward(m);
    MT_HOOK(m, after_backward, MT_GPT_EMBEDDING);
  }
  m->sample_ids = NULL;
  return loss_sum;
}
