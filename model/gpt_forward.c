/* model/gpt_forward.c — one micro-batch through the GPT: embedding,
 * transformer stack, final LayerNorm, output layer and cross-entropy, and
 * the backward pass in reverse. */
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h"

static mt_dropout_desc embedding_dropout_desc(const mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  mt_dropout_desc d = {0};
  d.p = m->pass.train ? c->model.hidden_dropout : 0.0f;
  d.key = mt_rng_key(c->seed, "embedding_dropout", 0, 0);
  d.s = (int)m->sl;
  d.b = c->micro_batch_size;
  d.h = c->model.hidden_size;
  d.s_full = c->model.seq_length; /* s_offset: per run (mt_gpt_dropout_bwd) */
  d.h_full = c->model.hidden_size;
  d.sample_ids = m->pass.sample_ids;
  return d;
}

/* Upload inputs/targets in [s, b] order from host [b, s + 1] samples: with
 * context parallelism the tokens of this rank's two chunks (local row si is
 * global position mt_cp_global_pos(si); Megatron's get_batch_on_this_cp_rank
 * slices the batch the same way). */
static void load_tokens(mt_gpt *m, mt_slot *sl, const int32_t *tokens) {
  const int s = m->cfg.model.seq_length, b = m->cfg.micro_batch_size;
  for (int64_t si = 0; si < m->s_loc; si++) {
    const int64_t p = mt_cp_global_pos(&m->cpl, si);
    for (int bi = 0; bi < b; bi++) {
      m->ws.host_tokens[si * b + bi] = tokens[(int64_t)bi * (s + 1) + p];
      m->ws.host_targets[si * b + bi] = tokens[(int64_t)bi * (s + 1) + p + 1];
    }
  }
  size_t bytes = (size_t)m->rows * sizeof(int32_t);
  m->be->ops->memcpy_h2d(m->be, sl->tokens, m->ws.host_tokens, bytes);
  m->be->ops->memcpy_h2d(m->be, sl->targets, m->ws.host_targets, bytes);
}

/* VocabParallelEmbedding + position embedding + embedding dropout ->
 * resid[0] [sl, b, h]. */
static void embedding_forward(mt_gpt *m, mt_slot *sl) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t b = c->micro_batch_size, h = c->model.hidden_size;
  mt_vocab_parallel_embedding_fwd(&m->tp, sl->resid[0], sl->tokens, m->w.word_embeddings.weight,
                                  m->v_start, m->v_start + m->vl, h);
  mt_cp_run r[2];
  const int nr = mt_gpt_shard_runs(m, r);
  const size_t rb = (size_t)(b * h) * mt_dtype_size(be->dtype);
  if (sl->pos_ids) { /* reset_position_ids: each row's position within its document */
    be->ops->embedding_fwd(be, m->ws.tmp_h, sl->pos_ids, m->rows_l,
                           m->w.position_embeddings.weight, 0, c->model.max_position_embeddings,
                           h);
    be->ops->add(be, sl->resid[0], sl->resid[0], m->ws.tmp_h, m->rows_l * h);
  } else if (m->pos == MT_POS_LEARNED) { /* (RoPE acts inside attention) */
    for (int k = 0; k < nr; k++)
      be->ops->pos_embedding_fwd(be, (char *)sl->resid[0] + (size_t)(r[k].row - r[0].row) * rb,
                                 m->w.position_embeddings.weight, r[k].n, b, h, r[k].pos);
  }
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) mt_gpt_dropout_bwd(m, &d, sl->resid[0], sl->resid[0]); /* same mask op */
}

static void embedding_backward(mt_gpt *m, mt_slot *sl) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t b = c->micro_batch_size, h = c->model.hidden_size;
  mt_dropout_desc d = embedding_dropout_desc(m);
  if (d.p > 0.0f) mt_gpt_dropout_bwd(m, &d, m->ws.dresid, m->ws.dresid);
  mt_cp_run r[2];
  const int nr = mt_gpt_shard_runs(m, r);
  const size_t rb = (size_t)(b * h) * mt_dtype_size(be->dtype);
  if (sl->pos_ids)
    be->ops->embedding_bwd(be, m->g.position_embeddings.weight, sl->pos_ids, m->rows_l,
                           m->ws.dresid, 0, c->model.max_position_embeddings, h);
  else if (m->pos == MT_POS_LEARNED)
    for (int k = 0; k < nr; k++)
      be->ops->pos_embedding_bwd(be, m->g.position_embeddings.weight,
                                 (char *)m->ws.dresid + (size_t)(r[k].row - r[0].row) * rb, r[k].n,
                                 b, h, r[k].pos);
  mt_vocab_parallel_embedding_bwd(&m->tp, m->g.word_embeddings.weight, sl->tokens, m->ws.dresid,
                                  m->v_start, m->v_start + m->vl, h);
}

/* Final LayerNorm, logits = lnf @ W_out^T on this rank's vocabulary slice
 * (ColumnParallelLinear without bias), vocab-parallel cross-entropy. Returns
 * the sum of token losses. */
static double head_forward(mt_gpt *m, mt_slot *sl, void *x) {
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->model.hidden_size;
  mt_gpt_norm_fwd(m, sl->lnf, sl->lnf_mean, sl->lnf_rstd, x, m->w.final_layernorm.weight,
                  m->w.final_layernorm.bias, m->rows_l);
  m->tp.fp8_on = 0; /* the output layer stays in T (TE / Megatron) */
  mt_column_parallel_linear_fwd(&m->tp, sl->logits, sl->lnf, mt_gpt_output_weight(m, &m->w), NULL,
                                m->vl, h);
  return mt_vocab_parallel_cross_entropy_fwd(&m->tp, sl->loss, sl->row_max, sl->stats,
                                             sl->logits, sl->targets, m->vl, m->v_valid,
                                             m->v_start, sl->loss_mask);
}

static void head_backward(mt_gpt *m, mt_slot *sl, void *x, float loss_scale) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->model.hidden_size;
  if (sl->mtp) mt_gpt_mtp_backward(m, sl, loss_scale); /* first: it uses the layer workspaces */
  mt_vocab_parallel_cross_entropy_bwd(&m->tp, sl->logits, sl->row_max, sl->stats, sl->targets,
                                      m->vl, m->v_valid, m->v_start, loss_scale, sl->loss_mask);
  m->tp.fp8_on = 0;
  mt_column_parallel_linear_bwd(&m->tp, m->ws.dtmp_h, mt_gpt_output_weight(m, &m->g), NULL,
                                sl->logits, sl->lnf, mt_gpt_output_weight(m, &m->w), m->vl, h);
  if (sl->mtp) /* + the MTP depths' gradient of the final norm's output (hnorm of depth 1) */
    be->ops->add(be, m->ws.dtmp_h, m->ws.dtmp_h, m->ws.mtp_carry, m->rows_l * h);
  be->ops->memset0(be, m->ws.dresid, (size_t)(m->rows_l * h) * mt_dtype_size(be->dtype));
  mt_gpt_norm_bwd(m, m->ws.dresid, m->g.final_layernorm.weight, m->g.final_layernorm.bias,
                  m->ws.dtmp_h, x, m->w.final_layernorm.weight, sl->lnf_mean, sl->lnf_rstd,
                  m->rows_l);
}

/* Backward through the chunk's layers. Under full recomputation each group
 * of recompute_num_layers layers is first re-run forward from its stored
 * input (same RNG counters, so identical values), then backward. */
static void stack_backward(mt_gpt *m, int ci, mt_slot *sl) {
  const mt_chunk *ch = &m->chunks[ci];
  const int L = ch->n_layers, l0 = ch->first_layer;
  if (m->recompute != MT_RECOMPUTE_FULL) {
    for (int lc = L - 1; lc >= 0; lc--) {
      MT_HOOK(m, before_backward, l0 + lc);
      mt_gpt_layer_backward(m, ci, sl, lc);
      MT_HOOK(m, after_backward, l0 + lc);
    }
    return;
  }
  const int n = m->acts.n_rc_sets;
  for (int c1 = L; c1 > 0;) {
    int c0 = (c1 - 1) / n * n;
    for (int lc = c0; lc < c1; lc++) MT_HOOK(m, before_backward, l0 + lc);
    m->pass.recomputing = 1;
    for (int lc = c0; lc < c1; lc++) mt_gpt_layer_forward(m, ci, sl, lc);
    m->pass.recomputing = 0;
    for (int lc = c1 - 1; lc >= c0; lc--) {
      mt_gpt_layer_backward(m, ci, sl, lc);
      MT_HOOK(m, after_backward, l0 + lc);
    }
    c1 = c0;
  }
}

static void use_slot(mt_gpt *m, mt_slot *sl) {
  m->pass.sample_ids = sl->sample_ids;
  m->pass.doc_start = sl->doc_start;
  m->pass.loss_tokens = sl->loss_tokens;
  m->pass.train = sl->train;
}

void mt_gpt_chunk_begin(mt_gpt *m, int c, int mb, const int32_t *tokens,
                        const int64_t *sample_ids, int train) {
  mt_slot *sl = mt_gpt_slot_acquire(m, c, mb);
  sl->train = train;
  memcpy(sl->sample_ids, sample_ids, (size_t)m->cfg.micro_batch_size * sizeof(int64_t));
  if (m->chunks[c].pre || m->chunks[c].post) load_tokens(m, sl, tokens);
  mt_gpt_docs_load(m, sl, tokens);
  mt_gpt_mtp_load(m, c, sl, tokens);
}

void *mt_gpt_chunk_input(mt_gpt *m, int c, int mb) {
  return mt_gpt_slot_find(m, c, mb)->resid[0];
}

void *mt_gpt_chunk_output(mt_gpt *m, int c, int mb) {
  return mt_gpt_slot_find(m, c, mb)->resid[m->chunks[c].n_layers];
}

double mt_gpt_chunk_forward(mt_gpt *m, int c, int mb) {
  const mt_chunk *ch = &m->chunks[c];
  mt_slot *sl = mt_gpt_slot_find(m, c, mb);
  use_slot(m, sl);
  if (ch->pre) {
    MT_HOOK(m, before_forward, MT_GPT_EMBEDDING);
    embedding_forward(m, sl);
    MT_HOOK(m, after_forward, MT_GPT_EMBEDDING);
  }
  for (int lc = 0; lc < ch->n_layers; lc++) {
    MT_HOOK(m, before_forward, ch->first_layer + lc);
    mt_gpt_layer_forward(m, c, sl, lc);
    MT_HOOK(m, after_forward, ch->first_layer + lc);
  }
  double loss_sum = 0.0;
  if (ch->post) {
    MT_HOOK(m, before_forward, MT_GPT_HEAD);
    loss_sum = head_forward(m, sl, sl->resid[ch->n_layers]);
    mt_gpt_mtp_forward(m, sl); /* training only; its losses go to the MTP statistics */
    MT_HOOK(m, after_forward, MT_GPT_HEAD);
  }
  m->pass.sample_ids = NULL;
  return loss_sum;
}

void mt_gpt_chunk_backward(mt_gpt *m, int c, int mb, float loss_scale) {
  const mt_chunk *ch = &m->chunks[c];
  mt_slot *sl = mt_gpt_slot_find(m, c, mb);
  use_slot(m, sl);
  m->pass.loss_scale = loss_scale;
  if (ch->post) {
    MT_HOOK(m, before_backward, MT_GPT_HEAD);
    head_backward(m, sl, sl->resid[ch->n_layers], loss_scale);
    MT_HOOK(m, after_backward, MT_GPT_HEAD);
  }
  stack_backward(m, c, sl);
  if (ch->pre) {
    MT_HOOK(m, before_backward, MT_GPT_EMBEDDING);
    embedding_backward(m, sl);
    MT_HOOK(m, after_backward, MT_GPT_EMBEDDING);
  }
  m->pass.sample_ids = NULL;
}

void mt_gpt_chunk_end(mt_gpt *m, int c, int mb) {
  mt_gpt_slot_release(m, mt_gpt_slot_find(m, c, mb));
}

double mt_gpt_forward_backward(mt_gpt *m, const int32_t *tokens, const int64_t *sample_ids,
                               int train, float loss_scale) {
  MT_ASSERT(m->n_chunks == 1 && m->chunks[0].pre && m->chunks[0].post);
  mt_gpt_chunk_begin(m, 0, 0, tokens, sample_ids, train);
  double loss_sum = mt_gpt_chunk_forward(m, 0, 0);
  if (train) mt_gpt_chunk_backward(m, 0, 0, loss_scale);
  mt_gpt_chunk_end(m, 0, 0);
  return loss_sum;
}
