/* model/gpt_mtp.c — multi-token prediction (DeepSeek-V3 §2.2; Megatron-core's
 * MultiTokenPredictionBlock / MultiTokenPredictionLayer and
 * process_mtp_loss), on the model's last chunk after the main head.
 *
 * Depth k = 1..D (D = model.mtp_num_layers), on this rank's [sl, b, h] rows:
 *   x_k   = tokens shifted left by k: x_k[p] = x[p + k], 0 where p + k >= s
 *           (Megatron's roll_tensor, which fills the vacated end with 0);
 *   e_k   = dropout(Embedding(x_k) [+ position table at p + k, 0 past s])
 *           (the shared embedding module, embedding dropout keyed by k);
 *   h_0   = decoder.final_layernorm output (the main head's input);
 *   u_k   = eh_proj([enorm(e_k); hnorm(h_{k-1})]),  eh_proj [h, 2h];
 *   h_k   = final_layernorm_k(TransformerLayer_k(u_k)),
 *           the layer of the last decoder layer's kind (dense or MoE), global
 *           index num_layers + k - 1 (keys its dropout and MoE state);
 *   loss_k[p] = mask_k[p] · CE(OutputLayer(h_k)[p], y[p + k]) with the shared
 *           output weight, mask_k[p] = mask[p + k] (0 where p + k >= s).
 * Gradient (Megatron's MTPLossAutoScaler with calculate_per_token_loss, the
 * normalisation megatrain uses for the main loss): each micro-batch adds
 *   (λ / D) · loss_scale · (N_mb / N_mb,k) · Σ_p loss_k[p]
 * to the loss it differentiates, λ = mtp_loss_scaling_factor, N_mb the
 * micro-batch's loss tokens, N_mb,k its unmasked shifted targets. Evaluation
 * runs no depth (the validation loss is the main loss, as Megatron's).
 *
 * Parallelism: the shifted tokens, targets and masks are computed from the
 * whole samples every rank holds, at global positions (context parallelism
 * needs no exchange); embedding, output layer and cross-entropy are the
 * vocabulary-parallel ones of the main model; eh_proj is replicated over TP
 * (each rank applies it to its own sequence shard; Megatron splits its
 * output features and gathers them: the same values), its gradient partial
 * under sequence parallelism like the norms'. With tied embeddings and
 * pp > 1 the last stage's copy of the word embedding (output_layer) serves
 * the MTP embedding too; its gradient joins the first stage's over the
 * embedding group. The parameters belong to the head's hook part
 * (MT_GPT_HEAD), after the output layer. Full recomputation does not re-run
 * a depth's layer: each depth keeps its activation set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/linear.h"

void mt_gpt_layer_name(const mt_gpt_config *c, int l, char *buf, size_t n) {
  const int L = c->model.num_layers;
  if (l >= L)
    snprintf(buf, n, "mtp.layers.%d.mtp_model_layer", l - L);
  else
    snprintf(buf, n, "decoder.layers.%d", l);
}

/* A [1, h] norm of the model's kind named prefix.{weight,bias}. */
static void add_norm(mt_gpt *m, mt_wb *w, mt_wb *g, const char *prefix, int sp) {
  const int64_t h = m->cfg.model.hidden_size;
  char name[MT_PARAM_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  mt_gpt_add_param(m, &w->weight, &g->weight, name, 1, h, 1, h, 0, 0, MT_INIT_ONES, 1, 1)
      ->sp_partial = sp;
  if (m->rmsnorm) return;
  snprintf(name, sizeof name, "%s.bias", prefix);
  mt_gpt_add_param(m, &w->bias, &g->bias, name, 1, h, 1, h, 0, 0, MT_INIT_ZEROS, 1, 1)
      ->sp_partial = sp;
}

void mt_gpt_mtp_register(mt_gpt *m) {
  const mt_gpt_config *c = &m->cfg;
  if (m->n_mtp <= 0) return;
  const int64_t h = c->model.hidden_size;
  const int sp = c->sequence_parallel && c->tp_size > 1;
  m->w.mtp = mt_xcalloc((size_t)m->n_mtp, sizeof(mt_mtp_tensors));
  m->g.mtp = mt_xcalloc((size_t)m->n_mtp, sizeof(mt_mtp_tensors));
  if (m->params.embedding[1] < 0 && c->model.untie_embeddings_and_output_weights)
    /* the stage's copy of the word embedding (same name: same initial values;
     * its gradient joins the first stage's over the embedding group) */
    mt_gpt_add_param(m, &m->w.mtp_word_embeddings.weight, &m->g.mtp_word_embeddings.weight,
                     "embedding.word_embeddings.weight", c->padded_vocab_size, h, m->vl, h,
                     m->v_start, 0, MT_INIT_NORMAL, 0, 0)->shared_copy = 1;
  for (int k = 0; k < m->n_mtp; k++) {
    mt_mtp_tensors *w = &m->w.mtp[k], *g = &m->g.mtp[k];
    char p[MT_PARAM_NAME_MAX];
    snprintf(p, sizeof p, "mtp.layers.%d.enorm", k);
    add_norm(m, &w->enorm, &g->enorm, p, sp);
    snprintf(p, sizeof p, "mtp.layers.%d.hnorm", k);
    add_norm(m, &w->hnorm, &g->hnorm, p, sp);
    snprintf(p, sizeof p, "mtp.layers.%d.eh_proj.weight", k);
    mt_gpt_add_param(m, &w->eh_proj.weight, &g->eh_proj.weight, p, h, 2 * h, h, 2 * h, 0, 0,
                     MT_INIT_NORMAL, 0, 1)->sp_partial = sp;
    const int l = c->model.num_layers + k;
    mt_gpt_layer_name(c, l, p, sizeof p);
    mt_gpt_register_layer(m, m->n_local_layers + k, l, p);
    snprintf(p, sizeof p, "mtp.layers.%d.final_layernorm", k);
    add_norm(m, &w->final_layernorm, &g->final_layernorm, p, sp);
  }
  m->params.head[1] = m->params.list.n - 1;
}

static void slot_free(mt_gpt *m, mt_slot *sl);

static void *wsp(mt_gpt *m, int64_t n) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(m->be->dtype), MT_MEM_WORKSPACE);
}

void mt_gpt_mtp_create(mt_gpt *m) {
  const int D = m->cfg.model.mtp_num_layers;
  if (D <= 0) return;
  m->mtp_loss_sum = mt_xcalloc((size_t)D, sizeof(double));
  m->mtp_loss_count = mt_xcalloc((size_t)D, sizeof(int64_t));
  if (m->n_mtp <= 0) return;
  const int64_t n = m->rows_l * m->cfg.model.hidden_size;
  m->ws.mtp_carry = wsp(m, n);
  m->ws.mtp_dl = wsp(m, n);
  m->ws.mtp_de = wsp(m, n);
  m->ws.mtp_dh = wsp(m, n);
  m->ws.mtp_host_mask = mt_xmalloc((size_t)m->rows * sizeof(float));
  if (m->cfg.fp8) { /* eh_proj as one FP8 linear over [e; h] */
    m->ws.mtp_cat = wsp(m, 2 * n);
    m->ws.mtp_dcat = wsp(m, 2 * n);
  }
}

void mt_gpt_mtp_destroy(mt_gpt *m) {
  mt_backend *be = m->be;
  const int c = m->n_chunks - 1; /* the slots of the last chunk (before they go) */
  for (int i = 0; m->n_mtp > 0 && i < m->acts.n_slots[c]; i++) slot_free(m, m->acts.slots[c][i]);
  void *p[] = {m->ws.mtp_carry, m->ws.mtp_dl, m->ws.mtp_de, m->ws.mtp_dh, m->ws.mtp_cat,
               m->ws.mtp_dcat};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  free(m->ws.mtp_host_mask);
  free(m->mtp_loss_sum);
  free(m->mtp_loss_count);
}

int mt_gpt_mtp_losses(const mt_gpt *m, double *sum, double *count) {
  const int D = m->cfg.model.mtp_num_layers;
  for (int k = 0; k < D; k++) {
    sum[k] = m->mtp_loss_sum[k];
    count[k] = (double)m->mtp_loss_count[k];
  }
  return D > 0 ? D : 0;
}

void mt_gpt_mtp_stats_reset(mt_gpt *m) {
  const int D = m->cfg.model.mtp_num_layers;
  for (int k = 0; k < D; k++) {
    m->mtp_loss_sum[k] = 0.0;
    m->mtp_loss_count[k] = 0;
  }
}

static void *act(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_ACT);
}

/* The slot's per-depth buffers (on its first micro-batch on the last chunk). */
static void slot_alloc(mt_gpt *m, mt_slot *sl) {
  mt_dtype T = m->be->dtype;
  const int64_t h = m->cfg.model.hidden_size, rl = m->rows_l, r = m->rows;
  const int ln = !m->rmsnorm;
  sl->mtp = mt_xcalloc((size_t)m->n_mtp, sizeof(mt_mtp_acts));
  for (int k = 0; k < m->n_mtp; k++) {
    mt_mtp_acts *A = &sl->mtp[k];
    A->emb = act(m, rl * h, T);
    A->en = act(m, rl * h, T);
    A->hn = act(m, rl * h, T);
    A->en_mean = ln ? act(m, rl, MT_F32) : NULL;
    A->hn_mean = ln ? act(m, rl, MT_F32) : NULL;
    A->lnf_mean = ln ? act(m, rl, MT_F32) : NULL;
    A->en_rstd = act(m, rl, MT_F32);
    A->hn_rstd = act(m, rl, MT_F32);
    A->lnf_rstd = act(m, rl, MT_F32);
    A->resid[0] = act(m, rl * h, T);
    A->resid[1] = act(m, rl * h, T);
    mt_gpt_alloc_layer_acts(m, &A->set, m->recompute != MT_RECOMPUTE_SELECTIVE);
    A->lnf = act(m, rl * h, T);
    A->logits = act(m, r * m->vl, T);
    A->row_max = act(m, r, MT_F32);
    A->stats = act(m, 2 * r, MT_F32);
    A->loss = act(m, r, MT_F32);
    A->tokens = act(m, r, MT_I32);
    A->targets = act(m, r, MT_I32);
    A->mask = act(m, r, MT_F32);
    if (m->pos == MT_POS_LEARNED) A->pos_ids = act(m, rl, MT_I32);
  }
}

static void slot_free(mt_gpt *m, mt_slot *sl) {
  if (!sl->mtp) return;
  mt_backend *be = m->be;
  for (int k = 0; k < m->n_mtp; k++) {
    mt_mtp_acts *A = &sl->mtp[k];
    void *p[] = {A->emb,      A->en,        A->hn,      A->en_mean, A->hn_mean, A->lnf_mean,
                 A->en_rstd,  A->hn_rstd,   A->lnf_rstd, A->resid[0], A->resid[1], A->lnf,
                 A->logits,   A->row_max,   A->stats,   A->loss,    A->tokens,  A->targets,
                 A->mask,     A->pos_ids};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
    mt_gpt_free_layer_acts(m, &A->set);
  }
  free(sl->mtp);
  sl->mtp = NULL;
}

/* Loss mask of the target at global position q of sample bi (eod_mask_loss:
 * none for the prediction made at an end-of-document token). */
static int mask_at(const mt_gpt *m, const int32_t *tokens, int bi, int64_t q) {
  const int s = m->cfg.model.seq_length;
  if (q >= s) return 0;
  return !m->cfg.eod_mask_loss || tokens[(int64_t)bi * (s + 1) + q] != m->cfg.eod_token;
}

void mt_gpt_mtp_load(mt_gpt *m, int chunk, mt_slot *sl, const int32_t *tokens) {
  if (m->n_mtp <= 0 || !m->chunks[chunk].post) return;
  if (!sl->mtp) slot_alloc(m, sl);
  mt_backend *be = m->be;
  const int s = m->cfg.model.seq_length, b = m->cfg.micro_batch_size;
  int32_t *ht = m->ws.host_tokens, *hy = m->ws.host_targets;
  float *hm = m->ws.mtp_host_mask;
  for (int k = 1; k <= m->n_mtp; k++) {
    mt_mtp_acts *A = &sl->mtp[k - 1];
    A->count_local = A->count_mb = 0;
    for (int64_t si = 0; si < m->s_loc; si++) {
      const int64_t q = mt_cp_global_pos(&m->cpl, si) + k; /* the shifted position */
      for (int bi = 0; bi < b; bi++) {
        const int64_t i = si * b + bi, row = (int64_t)bi * (s + 1);
        ht[i] = q < s ? tokens[row + q] : 0;
        hy[i] = q < s ? tokens[row + q + 1] : 0;
        hm[i] = (float)mask_at(m, tokens, bi, q);
        A->count_local += hm[i] > 0.0f;
      }
    }
    for (int bi = 0; bi < b; bi++)
      for (int64_t p = 0; p < s; p++) A->count_mb += mask_at(m, tokens, bi, p + k);
    be->ops->memcpy_h2d(be, A->tokens, ht, (size_t)m->rows * sizeof(int32_t));
    be->ops->memcpy_h2d(be, A->targets, hy, (size_t)m->rows * sizeof(int32_t));
    be->ops->memcpy_h2d(be, A->mask, hm, (size_t)m->rows * sizeof(float));
    if (A->pos_ids) { /* this rank's shard rows: runs of consecutive global positions */
      mt_cp_run r[2];
      const int nr = mt_gpt_shard_runs(m, r);
      int64_t j = 0;
      for (int u = 0; u < nr; u++)
        for (int64_t t = 0; t < r[u].n; t++) {
          const int64_t q = r[u].pos + t + k;
          for (int bi = 0; bi < b; bi++) ht[j++] = q < s ? (int32_t)q : 0;
        }
      be->ops->memcpy_h2d(be, A->pos_ids, ht, (size_t)m->rows_l * sizeof(int32_t));
    }
  }
}

/* The word embedding this stage holds (the first stage's table, or on a
 * later last stage its copy: the tied output layer, or untied the MTP copy). */
static void *embedding_weight(const mt_gpt *m, const mt_gpt_tensors *t) {
  if (m->params.embedding[1] >= 0) return t->word_embeddings.weight;
  return m->cfg.model.untie_embeddings_and_output_weights ? t->mtp_word_embeddings.weight
                                                          : t->output_layer.weight;
}

static mt_dropout_desc emb_dropout(const mt_gpt *m, int k) {
  const mt_gpt_config *c = &m->cfg;
  mt_dropout_desc d = {0};
  d.p = m->pass.train ? c->model.hidden_dropout : 0.0f;
  d.key = mt_rng_key(c->seed, "mtp.embedding_dropout", (uint64_t)k, 0);
  d.s = (int)m->sl;
  d.b = c->micro_batch_size;
  d.h = c->model.hidden_size;
  d.s_full = c->model.seq_length;
  d.h_full = c->model.hidden_size;
  d.sample_ids = m->pass.sample_ids;
  return d;
}

/* FP8 (Megatron runs the MTP block under the global FP8 context): cat
 * [rows_l, 2h] (T) <-> its halves a, b [rows_l, h] row by row. */
static void cat_rows(mt_gpt *m, void *cat, void *a, void *b, int split) {
  const int64_t h = m->cfg.model.hidden_size;
  const size_t rb = (size_t)h * mt_dtype_size(m->be->dtype);
  for (int64_t r = 0; r < m->rows_l; r++) {
    char *c = (char *)cat + (size_t)r * 2 * rb, *pa = (char *)a + (size_t)r * rb,
         *pb = (char *)b + (size_t)r * rb;
    m->be->ops->memcpy_d2d(m->be, split ? pa : c, split ? c : pa, rb);
    m->be->ops->memcpy_d2d(m->be, split ? pb : c + rb, split ? c + rb : pb, rb);
  }
}

/* eh_proj forward: u [rows_l, h] = en W[:, :h]^T + hn W[:, h:]^T (W [h, 2h]);
 * with FP8 one FP8 linear over [en; hn] (amax over tp and cp: the rows are
 * this rank's shard). */
static void eh_proj_fwd(mt_gpt *m, int l, void *u, const void *en, const void *hn, const void *w) {
  const int64_t h = m->cfg.model.hidden_size, M = m->rows_l;
  const size_t es = mt_dtype_size(m->be->dtype);
  if (m->tp.fp8) {
    mt_fp8_linear_set_pass(m->tp.fp8, MT_FP8_PASS_TRAIN); /* MTP runs in training only */
    cat_rows(m, m->ws.mtp_cat, (void *)en, (void *)hn, 0);
    mt_fp8_linear_select(m->tp.fp8, mt_gpt_fp8_key(l, MT_GPT_FP8_EH_PROJ));
    mt_fp8_linear_fwd(m->tp.fp8, u, m->ws.mtp_cat, w, NULL, M, h, 2 * h);
    return;
  }
  mt_linear_gemm(m->be, 0, 1, M, h, h, en, h, w, 2 * h, 0.0f, u, h, m->be->dtype, NULL);
  mt_linear_gemm(m->be, 0, 1, M, h, h, hn, h, (const char *)w + (size_t)h * es, 2 * h, 1.0f, u,
                 h, m->be->dtype, NULL);
}

/* Backward: dW[:, :h] += du^T en, dW[:, h:] += du^T hn (fp32); den = du W[:, :h],
 * dhn = du W[:, h:]. */
static void eh_proj_bwd(mt_gpt *m, int l, void *den, void *dhn, float *dw, const void *du,
                        const void *en, const void *hn, const void *w) {
  const int64_t h = m->cfg.model.hidden_size, M = m->rows_l;
  const size_t es = mt_dtype_size(m->be->dtype);
  if (m->tp.fp8) {
    cat_rows(m, m->ws.mtp_cat, (void *)en, (void *)hn, 0);
    mt_fp8_linear_select(m->tp.fp8, mt_gpt_fp8_key(l, MT_GPT_FP8_EH_PROJ));
    mt_fp8_linear_bwd(m->tp.fp8, m->ws.mtp_dcat, dw, NULL, du, m->ws.mtp_cat, w, M, h, 2 * h);
    cat_rows(m, m->ws.mtp_dcat, den, dhn, 1);
    return;
  }
  mt_linear_gemm(m->be, 1, 0, h, h, M, du, h, en, h, 1.0f, dw, 2 * h, MT_F32, NULL);
  mt_linear_gemm(m->be, 1, 0, h, h, M, du, h, hn, h, 1.0f, dw + h, 2 * h, MT_F32, NULL);
  mt_linear_gemm(m->be, 0, 0, M, h, h, du, h, w, 2 * h, 0.0f, den, h, m->be->dtype, NULL);
  mt_linear_gemm(m->be, 0, 0, M, h, h, du, h, (const char *)w + (size_t)h * es, 2 * h, 0.0f, dhn,
                 h, m->be->dtype, NULL);
}

void mt_gpt_mtp_forward(mt_gpt *m, mt_slot *sl) {
  if (!sl->mtp || !m->pass.train) return;
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->model.hidden_size;
  const void *hprev = sl->lnf;
  for (int k = 1; k <= m->n_mtp; k++) {
    mt_mtp_acts *A = &sl->mtp[k - 1];
    const mt_mtp_tensors *w = &m->w.mtp[k - 1];
    mt_vocab_parallel_embedding_fwd(&m->tp, A->emb, A->tokens, embedding_weight(m, &m->w),
                                    m->v_start, m->v_start + m->vl, h);
    if (A->pos_ids) {
      be->ops->embedding_fwd(be, m->ws.tmp_h, A->pos_ids, m->rows_l,
                             m->w.position_embeddings.weight, 0, c->model.max_position_embeddings,
                             h);
      be->ops->add(be, A->emb, A->emb, m->ws.tmp_h, m->rows_l * h);
    }
    mt_dropout_desc d = emb_dropout(m, k);
    if (d.p > 0.0f) mt_gpt_dropout_bwd(m, &d, A->emb, A->emb); /* same mask op */
    mt_gpt_norm_fwd(m, A->en, A->en_mean, A->en_rstd, A->emb, w->enorm.weight, w->enorm.bias,
                    m->rows_l);
    mt_gpt_norm_fwd(m, A->hn, A->hn_mean, A->hn_rstd, hprev, w->hnorm.weight, w->hnorm.bias,
                    m->rows_l);
    eh_proj_fwd(m, c->model.num_layers + k - 1, A->resid[0], A->en, A->hn, w->eh_proj.weight);
    mt_gpt_block_forward(m, c->model.num_layers + k - 1, m->n_local_layers + k - 1, &A->set,
                         A->resid);
    mt_gpt_norm_fwd(m, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[1], w->final_layernorm.weight,
                    w->final_layernorm.bias, m->rows_l);
    m->tp.fp8_on = 0; /* the shared output layer stays in T, as the main head's */
    mt_column_parallel_linear_fwd(&m->tp, A->logits, A->lnf, mt_gpt_output_weight(m, &m->w),
                                  NULL, m->vl, h);
    const double sum = mt_vocab_parallel_cross_entropy_fwd(
        &m->tp, A->loss, A->row_max, A->stats, A->logits, A->targets, m->vl, m->v_valid,
        m->v_start, A->mask);
    m->mtp_loss_sum[k - 1] += sum;
    m->mtp_loss_count[k - 1] += A->count_local;
    hprev = A->lnf;
  }
}

void mt_gpt_mtp_backward(mt_gpt *m, mt_slot *sl, float loss_scale) {
  mt_backend *be = m->be;
  const mt_gpt_config *c = &m->cfg;
  const int64_t h = c->model.hidden_size, n = m->rows_l * h;
  const size_t bytes = (size_t)n * mt_dtype_size(be->dtype);
  mt_gpt_workspace *ws = &m->ws;
  be->ops->memset0(be, ws->mtp_carry, bytes); /* dL/dh_D from a deeper depth: none */
  for (int k = m->n_mtp; k >= 1; k--) {
    mt_mtp_acts *A = &sl->mtp[k - 1];
    const mt_mtp_tensors *w = &m->w.mtp[k - 1], *g = &m->g.mtp[k - 1];
    const double ratio = A->count_mb > 0 ? (double)m->pass.loss_tokens / (double)A->count_mb : 0;
    const float scale = (float)((double)c->model.mtp_loss_scaling_factor / m->n_mtp *
                                (double)loss_scale * ratio);
    mt_vocab_parallel_cross_entropy_bwd(&m->tp, A->logits, A->row_max, A->stats, A->targets,
                                        m->vl, m->v_valid, m->v_start, scale, A->mask);
    m->tp.fp8_on = 0;
    mt_column_parallel_linear_bwd(&m->tp, ws->mtp_dl, mt_gpt_output_weight(m, &m->g), NULL,
                                  A->logits, A->lnf, mt_gpt_output_weight(m, &m->w), m->vl, h);
    be->ops->add(be, ws->mtp_dl, ws->mtp_dl, ws->mtp_carry, n); /* + from depth k + 1 */
    be->ops->memset0(be, ws->dresid, bytes);
    mt_gpt_norm_bwd(m, ws->dresid, g->final_layernorm.weight, g->final_layernorm.bias, ws->mtp_dl,
                    A->resid[1], w->final_layernorm.weight, A->lnf_mean, A->lnf_rstd, m->rows_l);
    mt_gpt_block_backward(m, c->model.num_layers + k - 1, m->n_local_layers + k - 1, &A->set,
                          A->resid);
    eh_proj_bwd(m, c->model.num_layers + k - 1, ws->mtp_de, ws->mtp_dh, g->eh_proj.weight,
                ws->dresid, A->en, A->hn, w->eh_proj.weight);
    /* hidden-state path: carry = dL/dh_{k-1} */
    be->ops->memset0(be, ws->mtp_carry, bytes);
    mt_gpt_norm_bwd(m, ws->mtp_carry, g->hnorm.weight, g->hnorm.bias, ws->mtp_dh,
                    k > 1 ? sl->mtp[k - 2].lnf : sl->lnf, w->hnorm.weight, A->hn_mean,
                    A->hn_rstd, m->rows_l);
    /* embedding path: enorm, dropout, the shared tables */
    be->ops->memset0(be, ws->mtp_dl, bytes);
    mt_gpt_norm_bwd(m, ws->mtp_dl, g->enorm.weight, g->enorm.bias, ws->mtp_de, A->emb,
                    w->enorm.weight, A->en_mean, A->en_rstd, m->rows_l);
    mt_dropout_desc d = emb_dropout(m, k);
    if (d.p > 0.0f) mt_gpt_dropout_bwd(m, &d, ws->mtp_dl, ws->mtp_dl);
    if (A->pos_ids)
      be->ops->embedding_bwd(be, m->g.position_embeddings.weight, A->pos_ids, m->rows_l,
                             ws->mtp_dl, 0, c->model.max_position_embeddings, h);
    mt_vocab_parallel_embedding_bwd(&m->tp, embedding_weight(m, &m->g), A->tokens, ws->mtp_dl,
                                    m->v_start, m->v_start + m->vl, h);
  }
}
