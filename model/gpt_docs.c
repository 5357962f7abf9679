/* model/gpt_docs.c — documents inside packed sequences: Megatron's
 * reset_attention_mask, reset_position_ids and eod_mask_loss
 * (megatron/core/datasets/gpt_dataset.py, _get_ltor_masks_and_position_ids),
 * computed on the host from a micro-batch's samples and uploaded into its
 * activation slot. A sample's input tokens x[0..s) are split after every
 * end-of-document token (eod_token): the EOD belongs to the document it
 * ends, the next token starts a new one. For input position p of row bi,
 *   doc(p) = 1 + the largest q < p with x[q] == eod, 0 when none;
 *   reset_attention_mask: query p sees keys doc(p)..p (the explicit mask
 *     attention_mask[i+1:, :i+1] = 0 per EOD at i), passed to the fused
 *     attention as mt_attn_desc.doc_start [b, s] over GLOBAL positions (so
 *     context parallelism's chunks and the K/V ring read the same table);
 *   reset_position_ids: position p - doc(p) for the learned absolute
 *     position embedding (Megatron-core gives position_ids to the embedding
 *     only; RoPE keeps p, which inside a document changes nothing because
 *     RoPE scores depend on position differences only);
 *   eod_mask_loss: loss_mask(p) = 0 where x[p] == eod (the prediction made
 *     at an EOD), 1 elsewhere. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h"

int64_t mt_gpt_loss_tokens(const mt_gpt_config *c, const int32_t *tokens) {
  const int64_t s = c->model.seq_length, b = c->micro_batch_size;
  if (!c->eod_mask_loss) return s * b;
  int64_t n = 0;
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t p = 0; p < s; p++) n += tokens[bi * (s + 1) + p] != c->eod_token;
  return n;
}

double mt_gpt_seqlen_squared_sum(const mt_gpt_config *c, const int32_t *tokens) {
  const int64_t s = c->model.seq_length, b = c->micro_batch_size;
  if (!c->reset_attention_mask) return (double)b * (double)s * (double)s;
  double sum = 0.0;
  for (int64_t bi = 0; bi < b; bi++) {
    const int32_t *x = tokens + bi * (s + 1);
    int64_t start = 0;
    for (int64_t p = 0; p < s; p++)
      if (x[p] == c->eod_token || p == s - 1) { /* the segment start..p ends here */
        const double n = (double)(p + 1 - start);
        sum += n * n;
        start = p + 1;
      }
  }
  return sum;
}

/* Document start of every input position: ds [b, s] from tokens [b, s + 1]. */
static void doc_starts(const mt_gpt_config *c, const int32_t *tokens, int32_t *ds) {
  const int64_t s = c->model.seq_length, b = c->micro_batch_size;
  for (int64_t bi = 0; bi < b; bi++) {
    const int32_t *x = tokens + bi * (s + 1);
    int32_t start = 0;
    for (int64_t p = 0; p < s; p++) {
      if (p > 0 && x[p - 1] == c->eod_token) start = (int32_t)p;
      ds[bi * s + p] = start;
    }
  }
}

void mt_gpt_docs_load(mt_gpt *m, mt_slot *sl, const int32_t *tokens) {
  const mt_gpt_config *c = &m->cfg;
  const int64_t s = c->model.seq_length, b = c->micro_batch_size;
  mt_backend *be = m->be;
  sl->loss_tokens = mt_gpt_loss_tokens(c, tokens);
  if (!sl->doc_start && !sl->pos_ids && !sl->loss_mask) return;
  if (!m->ws.host_docs) {
    m->ws.host_docs = mt_xmalloc((size_t)(b * s) * sizeof(int32_t));
    m->ws.host_pos = mt_xmalloc((size_t)m->rows * sizeof(int32_t));
    m->ws.host_mask = mt_xmalloc((size_t)m->rows * sizeof(float));
  }
  int32_t *ds = m->ws.host_docs;
  doc_starts(c, tokens, ds);
  if (sl->doc_start) be->ops->memcpy_h2d(be, sl->doc_start, ds, (size_t)(b * s) * sizeof(int32_t));
  if (sl->pos_ids) { /* this rank's [sl, b] shard rows, run by run */
    mt_cp_run r[2];
    const int nr = mt_gpt_shard_runs(m, r);
    for (int k = 0; k < nr; k++)
      for (int64_t i = 0; i < r[k].n; i++) {
        const int64_t row = r[k].row - r[0].row + i, p = r[k].pos + i;
        for (int64_t bi = 0; bi < b; bi++)
          m->ws.host_pos[row * b + bi] = (int32_t)(p - ds[bi * s + p]);
      }
    be->ops->memcpy_h2d(be, sl->pos_ids, m->ws.host_pos, (size_t)m->rows_l * sizeof(int32_t));
  }
  if (sl->loss_mask) { /* this CP rank's [s/cp, b] rows, as the targets */
    for (int64_t si = 0; si < m->s_loc; si++) {
      const int64_t p = mt_cp_global_pos(&m->cpl, si);
      for (int64_t bi = 0; bi < b; bi++)
        m->ws.host_mask[si * b + bi] = tokens[bi * (s + 1) + p] == c->eod_token ? 0.0f : 1.0f;
    }
    be->ops->memcpy_h2d(be, sl->loss_mask, m->ws.host_mask, (size_t)m->rows * sizeof(float));
  }
}

void mt_gpt_docs_free(mt_gpt *m) {
  free(m->ws.host_docs);
  free(m->ws.host_pos);
  free(m->ws.host_mask);
}
