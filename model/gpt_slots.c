/* model/gpt_slots.c — activation slots: what one micro-batch keeps alive in
 * one model chunk between its forward and backward passes. A slot is
 * allocated (MT_MEM_ACT) the first time a chunk has more micro-batches in
 * flight than slots, and reused afterwards, so the allocator's activation
 * peak equals the schedule's maximum number of in-flight micro-batches per
 * chunk (docs/memory.md). */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/moe_shared_experts.h"

static void *act(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_ACT);
}

void mt_gpt_alloc_layer_acts(mt_gpt *m, mt_layer_acts *a, int with_lse) {
  const mt_gpt_config *c = &m->cfg;
  mt_dtype T = m->be->dtype;
  const int64_t h = c->model.hidden_size, s = m->s_loc, b = c->micro_batch_size;
  const int ln = !m->rmsnorm; /* LayerNorm saves a mean */
  a->ln1 = act(m, m->rows_l * h, T);
  a->ln1_mean = ln ? act(m, m->rows_l, MT_F32) : NULL;
  a->ln1_rstd = act(m, m->rows_l, MT_F32);
  if (c->model.qk_layernorm && !m->mla) {
    a->qkv_lin = act(m, m->rows * m->qkvl, T);
    a->qk_mean = ln ? act(m, m->rows * (m->np + m->ng), MT_F32) : NULL;
    a->qk_rstd = act(m, m->rows * (m->np + m->ng), MT_F32);
  }
  a->qkv = act(m, m->rows * m->qkvl, T);
  a->lse = with_lse ? act(m, b * m->np * s, MT_F32) : m->acts.lse_shared;
  a->ctx = act(m, m->rows * m->hl, T);
  a->x1 = act(m, m->rows_l * h, T);
  a->ln2 = act(m, m->rows_l * h, T);
  a->ln2_mean = ln ? act(m, m->rows_l, MT_F32) : NULL;
  a->ln2_rstd = act(m, m->rows_l, MT_F32);
  a->fc1 = act(m, m->rows * m->glu * m->fl, T);
  a->act = act(m, m->rows * m->fl, T);
  /* MoE: every set gets routing state (sets are shared by layers under full
   * recompute) */
  a->moe = m->moe.ctx ? mt_moe_acts_create(m->moe.ctx) : NULL;
  mt_moe_shared_alloc_acts(m, a);
  mt_gpt_mla_alloc_acts(m, a);
}

void mt_gpt_free_layer_acts(mt_gpt *m, mt_layer_acts *a) {
  void *ptrs[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv_lin,  a->qk_mean, a->qk_rstd, a->qkv,
                  a->ctx, a->x1,       a->ln2,      a->ln2_mean, a->ln2_rstd, a->fc1,    a->act};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) m->be->ops->free(m->be, ptrs[i]);
  if (a->lse != m->acts.lse_shared) m->be->ops->free(m->be, a->lse);
  mt_moe_acts_free(m->moe.ctx, a->moe);
  mt_moe_shared_free_acts(m, a);
  mt_gpt_mla_free_acts(m, a);
}

/* Documents inside packed sequences (gpt_docs.c fills them): the slot's
 * buffers for chunk ch, and their release. */
void mt_gpt_docs_alloc(mt_gpt *m, mt_slot *sl, const mt_chunk *ch) {
  const mt_gpt_config *c = &m->cfg;
  mt_backend *be = m->be;
  const size_t i4 = sizeof(int32_t);
  if (c->reset_attention_mask && ch->n_layers > 0)
    sl->doc_start = be->ops->alloc(be, (size_t)c->micro_batch_size * c->model.seq_length * i4,
                                   MT_MEM_ACT);
  if (c->reset_position_ids && ch->pre && m->pos == MT_POS_LEARNED)
    sl->pos_ids = be->ops->alloc(be, (size_t)m->rows_l * i4, MT_MEM_ACT);
  if (c->eod_mask_loss && ch->post)
    sl->loss_mask = be->ops->alloc(be, (size_t)m->rows * sizeof(float), MT_MEM_ACT);
}

void mt_gpt_docs_free_slot(mt_gpt *m, mt_slot *sl) {
  m->be->ops->free(m->be, sl->doc_start);
  m->be->ops->free(m->be, sl->pos_ids);
  m->be->ops->free(m->be, sl->loss_mask);
}

static mt_slot *slot_new(mt_gpt *m, int chunk) {
  const mt_chunk *ch = &m->chunks[chunk];
  const mt_gpt_config *c = &m->cfg;
  mt_dtype T = m->be->dtype;
  const int64_t h = c->model.hidden_size;
  mt_slot *s = mt_xcalloc(1, sizeof *s);
  s->resid = mt_xcalloc((size_t)ch->n_layers + 1, sizeof(void *));
  for (int l = 0; l <= ch->n_layers; l++) s->resid[l] = act(m, m->rows_l * h, T);
  if (m->recompute != MT_RECOMPUTE_FULL && ch->n_layers > 0) {
    s->sets = mt_xcalloc((size_t)ch->n_layers, sizeof(mt_layer_acts));
    for (int l = 0; l < ch->n_layers; l++)
      mt_gpt_alloc_layer_acts(m, &s->sets[l], m->recompute != MT_RECOMPUTE_SELECTIVE);
  }
  if (ch->post) {
    s->lnf = act(m, m->rows_l * h, T);
    s->lnf_mean = !m->rmsnorm ? act(m, m->rows_l, MT_F32) : NULL;
    s->lnf_rstd = act(m, m->rows_l, MT_F32);
    s->logits = act(m, m->rows * m->vl, T);
    s->row_max = act(m, m->rows, MT_F32);
    s->stats = act(m, 2 * m->rows, MT_F32);
    s->loss = act(m, m->rows, MT_F32);
  }
  if (ch->pre || ch->post) {
    s->tokens = act(m, m->rows, MT_I32);
    s->targets = act(m, m->rows, MT_I32);
  }
  s->sample_ids = mt_xcalloc((size_t)c->micro_batch_size, sizeof(int64_t));
  mt_gpt_docs_alloc(m, s, ch);
  return s;
}

static void slot_free(mt_gpt *m, int chunk, mt_slot *s) {
  mt_backend *be = m->be;
  for (int l = 0; l <= m->chunks[chunk].n_layers; l++) be->ops->free(be, s->resid[l]);
  if (s->sets)
    for (int l = 0; l < m->chunks[chunk].n_layers; l++) mt_gpt_free_layer_acts(m, &s->sets[l]);
  void *rest[] = {s->lnf,  s->lnf_mean, s->lnf_rstd, s->logits,  s->row_max,
                  s->stats, s->loss,    s->tokens,   s->targets};
  for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) be->ops->free(be, rest[i]);
  mt_gpt_docs_free_slot(m, s);
  free(s->resid);
  free(s->sets);
  free(s->sample_ids);
  free(s);
}

mt_slot *mt_gpt_slot_find(mt_gpt *m, int chunk, int mb) {
  for (int i = 0; i < m->acts.n_slots[chunk]; i++) {
    mt_slot *s = m->acts.slots[chunk][i];
    if (s->in_use && s->mb == mb) return s;
  }
  mt_fatal("no activation slot for chunk %d micro-batch %d (forward not begun)", chunk, mb);
}

mt_slot *mt_gpt_slot_acquire(mt_gpt *m, int chunk, int mb) {
  mt_slot *s = NULL;
  for (int i = 0; i < m->acts.n_slots[chunk]; i++) {
    mt_slot *q = m->acts.slots[chunk][i];
    MT_ASSERT(!(q->in_use && q->mb == mb));
    if (!q->in_use && !s) s = q;
  }
  if (!s) {
    int n = m->acts.n_slots[chunk];
    m->acts.slots[chunk] = mt_xrealloc(m->acts.slots[chunk], (size_t)(n + 1) * sizeof(mt_slot *));
    s = m->acts.slots[chunk][n] = slot_new(m, chunk);
    m->acts.n_slots[chunk] = n + 1;
  }
  s->in_use = 1;
  s->mb = mb;
  return s;
}

void mt_gpt_slot_release(mt_gpt *m, mt_slot *s) {
  (void)m;
  s->in_use = 0;
}

void mt_gpt_slots_free(mt_gpt *m) {
  for (int c = 0; c < m->n_chunks; c++) {
    for (int i = 0; i < m->acts.n_slots[c]; i++) slot_free(m, c, m->acts.slots[c][i]);
    free(m->acts.slots[c]);
    m->acts.slots[c] = NULL;
    m->acts.n_slots[c] = 0;
  }
}

mt_layer_acts *mt_gpt_layer_acts(mt_gpt *m, mt_slot *s, int lc) {
  if (m->recompute == MT_RECOMPUTE_FULL) return &m->acts.rc_sets[lc % m->acts.n_rc_sets];
  return &s->sets[lc];
}
