/* checkpoint/views.c — this rank's parameters, optimizer state and
 * buffers as views of global tensors (see ckpt_views.h for the rules). */
#include "checkpoint/views.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define PFX_EXP_AVG "optimizer.state.exp_avg."
#define PFX_EXP_AVG_SQ "optimizer.state.exp_avg_sq."
#define PFX_FP32 "optimizer.state.fp32_param."

/* Append one zeroed view; the array is realloc'ed to the power of two
 * (>= 16) above *n + 1 (realloc to the same size is cheap), so any array
 * the caller started with (NULL, 0 included) can be grown. */
static mt_dckpt_view *push(mt_dckpt_view **v, int *n) {
  size_t cap = 16;
  while (cap < (size_t)*n + 1) cap *= 2;
  *v = mt_xrealloc(*v, cap * sizeof **v);
  mt_dckpt_view *x = &(*v)[(*n)++];
  memset(x, 0, sizeof *x);
  return x;
}

static int is_vocab_tensor(const char *name) {
  return !strcmp(name, "embedding.word_embeddings.weight") || !strcmp(name, "output_layer.weight");
}

int mt_ckpt_param_writes(const mt_param *p, int dp_writer, int tp_rank, int etp_rank) {
  if (p->shared_copy || !dp_writer) return 0;
  if (p->tp_replicated && (p->is_expert ? etp_rank : tp_rank) != 0) return 0;
  return 1;
}

/* One box [r0, r0+nr) x [c0, c0+nc) holding elements [lo, hi) of it at data. */
static void add_box(const mt_param *p, const char *prefix, int64_t vocab_size, mt_dtype dt,
                    int64_t r0, int64_t nr, int64_t c0, int64_t nc, int64_t lo, int64_t hi,
                    void *data, int write, mt_dckpt_view **v, int *n) {
  int64_t rows = p->rows;
  if (is_vocab_tensor(p->name) && vocab_size > 0 && vocab_size < rows) {
    rows = vocab_size;
    int64_t keep = rows - r0;
    if (keep < 0) keep = 0;
    if (keep < nr) nr = keep;
    if (hi > nr * nc) hi = nr * nc;
  }
  if (lo >= hi || nr <= 0 || nc <= 0) return;
  mt_dckpt_view *x = push(v, n);
  int len = snprintf(x->name, sizeof x->name, "%s%s", prefix, p->name);
  MT_ASSERT(len > 0 && (size_t)len < sizeof x->name);
  x->rows = rows;
  x->cols = p->cols;
  x->r0 = r0;
  x->c0 = c0;
  x->nr = nr;
  x->nc = nc;
  x->lo = lo;
  x->hi = hi;
  x->dtype = dt;
  x->data = data;
  x->write = write;
}

void mt_ckpt_param_range_views(const mt_param *p, const char *prefix, int64_t vocab_size,
                               mt_dtype dt, int64_t lo, int64_t hi, void *data, int write,
                               mt_dckpt_view **v, int *n) {
  MT_ASSERT(0 <= lo && lo <= hi && hi <= p->numel);
  if (!p->halves) {
    add_box(p, prefix, vocab_size, dt, p->row_offset, p->local_rows, p->col_offset,
            p->local_cols, lo, hi, data, write, v, n);
    return;
  }
  /* two halves of numel / 2 elements each: weights split along rows, a
   * [1, n] bias along columns (model/params.h) */
  const int64_t half = p->numel / 2;
  const size_t es = mt_dtype_size(dt);
  for (int k = 0; k < 2; k++) {
    int64_t a = lo > k * half ? lo : k * half, b = hi < (k + 1) * half ? hi : (k + 1) * half;
    if (a >= b) continue;
    int64_t r0, nr, c0, nc;
    if (p->rows > 1) {
      nr = p->local_rows / 2;
      r0 = (k ? p->rows / 2 : 0) + p->row_offset;
      c0 = p->col_offset;
      nc = p->local_cols;
    } else {
      r0 = 0;
      nr = 1;
      nc = p->local_cols / 2;
      c0 = (k ? p->cols / 2 : 0) + p->col_offset;
    }
    add_box(p, prefix, vocab_size, dt, r0, nr, c0, nc, a - k * half, b - k * half,
            (char *)data + (size_t)(a - lo) * es, write, v, n);
  }
}

void mt_ckpt_model_param_views(mt_gpt *m, int64_t vocab_size, int write_dense, int write_expert,
                               mt_dckpt_view **v, int *n) {
  const mt_gpt_config *c = mt_gpt_get_config(m);
  const mt_param_list *pl = mt_gpt_params(m);
  const mt_dtype dt = mt_gpt_backend(m)->dtype;
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    void *data = mt_gpt_param_ptr(m, i);
    MT_ASSERT(data || p->numel == 0);
    int w = mt_ckpt_param_writes(p, p->is_expert ? write_expert : write_dense, c->tp_rank,
                                 c->etp_size > 1 ? c->etp_rank : 0);
    mt_ckpt_param_range_views(p, "", vocab_size, dt, 0, p->numel, data, w, v, n);
  }
}

void mt_ckpt_adamw_views(mt_gpt *m, const mt_adamw *opt, int64_t vocab_size, int write_dense,
                         int write_expert, mt_dckpt_view **v, int *n) {
  const mt_gpt_config *c = mt_gpt_get_config(m);
  const mt_param_list *pl = mt_gpt_params(m);
  const int master = (void *)opt->master != opt->param_buf;
  for (int i = 0; i < pl->n; i++) {
    const mt_param *p = &pl->p[i];
    int w = mt_ckpt_param_writes(p, p->is_expert ? write_expert : write_dense, c->tp_rank,
                                 c->etp_size > 1 ? c->etp_rank : 0);
    mt_ckpt_param_range_views(p, PFX_EXP_AVG, vocab_size, MT_F32, 0, p->numel,
                              opt->m + p->offset, w, v, n);
    mt_ckpt_param_range_views(p, PFX_EXP_AVG_SQ, vocab_size, MT_F32, 0, p->numel,
                              opt->v + p->offset, w, v, n);
    if (master)
      mt_ckpt_param_range_views(p, PFX_FP32, vocab_size, MT_F32, 0, p->numel,
                                opt->master + p->offset, w, v, n);
  }
}

void mt_ckpt_zero_views(mt_zero_opt *z, int64_t vocab_size, int params, int optim, int write,
                        mt_dckpt_view **v, int *n) {
  const mt_param_list *pl = z->params;
  const mt_dtype dt = z->be->dtype;
  const size_t es = mt_dtype_size(dt);
  char *flat = z->o.stage <= 2 ? mt_gpt_param_buffer(z->model) : NULL;
  for (int k = 0; k < z->n_part; k++) {
    const mt_zero_part *P = &z->part[k];
    for (int j = 0; j < P->n_chunk; j++) {
      const mt_zero_chunk *ch = &P->chunk[j];
      const mt_param *p = &pl->p[ch->param];
      const int64_t lo = ch->flat_off - p->offset, hi = lo + ch->n;
      const int w = mt_ckpt_param_writes(p, write, z->g.tp_rank, z->g.etp_rank);
      if (params) {
        void *data = flat ? flat + (size_t)ch->flat_off * es
                          : (char *)P->param_shard + (size_t)ch->shard_off * es;
        mt_ckpt_param_range_views(p, "", vocab_size, dt, lo, hi, data, w, v, n);
      }
      if (optim) {
        mt_ckpt_param_range_views(p, PFX_EXP_AVG, vocab_size, MT_F32, lo, hi,
                                  P->m + ch->shard_off, w, v, n);
        mt_ckpt_param_range_views(p, PFX_EXP_AVG_SQ, vocab_size, MT_F32, lo, hi,
                                  P->v + ch->shard_off, w, v, n);
        if (P->master)
          mt_ckpt_param_range_views(p, PFX_FP32, vocab_size, MT_F32, lo, hi,
                                    P->master + ch->shard_off, w, v, n);
      }
    }
  }
}

void mt_ckpt_buffer_views(const mt_ckpt_buffer *b, int nb, int write, mt_dckpt_view **v,
                          int *n) {
  for (int i = 0; i < nb; i++) {
    if (b[i].numel <= 0) continue;
    mt_dckpt_view *x = push(v, n);
    snprintf(x->name, sizeof x->name, "%s", b[i].name);
    x->rows = 1;
    x->cols = b[i].numel;
    x->r0 = x->c0 = 0;
    x->nr = 1;
    x->nc = b[i].numel;
    x->lo = 0;
    x->hi = b[i].numel;
    x->dtype = b[i].dtype;
    x->data = b[i].data;
    x->host = 1;
    x->write = write;
  }
}
