/* trainer/train_ddp.c — glue between the model's parameter list and the
 * bucketed data-parallel all-reduce (parallel/ddp.h), and the choice between
 * it and ZeRO's reduction (see train_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "trainer/train_internal.h"

void mt_trainer_ddp_init(mt_trainer *t) {
  const mt_param_list *pl = mt_gpt_params(t->model);
  int64_t n = pl->numel;
  /* runs of dense parameters reduce over dp, runs of experts over edp (the
   * ranks holding the same experts); both sums give the global-batch mean
   * gradient since the loss is pre-normalised */
  mt_ddp_range *r = mt_xcalloc((size_t)pl->n + 1, sizeof *r);
  int n_r = 0;
  int64_t start = 0;
  for (int i = 0; i <= pl->n; i++) {
    int kind = i < pl->n ? pl->p[i].is_expert : -1;
    int prev = i > 0 ? pl->p[i - 1].is_expert : kind;
    if (i > 0 && kind == prev) continue;
    int64_t end = i < pl->n ? pl->p[i].offset : n;
    if (i > 0) r[n_r++] = (mt_ddp_range){start, end, prev ? t->ps->edp : t->dp_group};
    start = end;
  }
  mt_ddp_buffer_build(&t->ddp, r, n_r, t->cfg->parallel.ddp_bucket_size);
  free(r);
}

void mt_trainer_reduce_gradients(mt_trainer *t) {
  if (t->ov.grad) { /* the buckets started during the backward */
    mt_grad_sync_finish(&t->ov.sync);
    return;
  }
  if (t->zero) {
    mt_zero_opt_reduce_gradients(t->zero);
    return;
  }
  mt_ddp_allreduce(&t->ddp, mt_gpt_grad_buffer(t->model));
}

/* ---- overlap_grad_reduce / overlap_param_gather (train_internal.h) ---- */

static int unit_of_layer(const mt_trainer *t, int layer) {
  return layer == MT_GPT_EMBEDDING ? 0 : layer == MT_GPT_HEAD ? t->ov.n_units - 1 : layer + 1;
}

static int layer_of_unit(const mt_trainer *t, int u) {
  return u == 0 ? MT_GPT_EMBEDDING : u == t->ov.n_units - 1 ? MT_GPT_HEAD : u - 1;
}

static mt_request *start_grad(void *ctx, int i) {
  mt_trainer *t = ctx;
  const mt_overlap_bucket *o = &t->ov.bkt[i];
  if (o->part < 0) {
    const mt_ddp_bucket *k = &t->ddp.bkt[o->b];
    return mt_iallreduce(k->group, mt_gpt_grad_buffer(t->model) + k->offset, k->len, MT_F32,
                         MT_OP_SUM);
  }
  mt_zero_part *P = &t->zero->part[o->part];
  return mt_zero_reduce_scatter_flat_start(P->group, t->be, &P->L, o->b,
                                           mt_gpt_grad_buffer(t->model), o->scratch);
}

static void done_grad(void *ctx, int i) {
  mt_trainer *t = ctx;
  const mt_overlap_bucket *o = &t->ov.bkt[i];
  if (o->part >= 0)
    mt_zero_reduce_scatter_flat_done(t->be, &t->zero->part[o->part].L, o->b,
                                     mt_gpt_grad_buffer(t->model), o->scratch);
}

static void unit_final(void *ctx, int u) {
  mt_trainer *t = ctx;
  mt_gpt_finalize_layer_grads(t->model, layer_of_unit(t, u));
}

/* Wait for the parameter all-gathers of the buckets first read by unit u
 * (u < 0: all of them). */
static void params_wait(mt_trainer *t, int u) {
  for (int i = 0; i < t->ov.n_bkt; i++) {
    mt_overlap_bucket *o = &t->ov.bkt[i];
    if (!o->gather || (u >= 0 && o->first_unit != u)) continue;
    mt_wait(o->gather);
    o->gather = NULL;
    mt_zero_part *P = &t->zero->part[o->part];
    mt_zero_allgather_flat_done(t->be, &P->L, o->b, mt_gpt_param_buffer(t->model), o->scratch,
                                t->be->dtype);
  }
}

static void h_before_forward(void *ctx, int layer) {
  mt_trainer *t = ctx;
  if (t->ov.chained.before_forward) t->ov.chained.before_forward(t->ov.chained.ctx, layer);
  params_wait(t, unit_of_layer(t, layer));
}
static void h_after_forward(void *ctx, int layer) {
  mt_trainer *t = ctx;
  if (t->ov.chained.after_forward) t->ov.chained.after_forward(t->ov.chained.ctx, layer);
}
static void h_before_backward(void *ctx, int layer) {
  mt_trainer *t = ctx;
  if (t->ov.chained.before_backward) t->ov.chained.before_backward(t->ov.chained.ctx, layer);
}
static void h_after_backward(void *ctx, int layer) {
  mt_trainer *t = ctx;
  if (t->ov.chained.after_backward) t->ov.chained.after_backward(t->ov.chained.ctx, layer);
  if (t->ov.grad && t->ov.bkt) mt_grad_sync_unit_done(&t->ov.sync, unit_of_layer(t, layer));
}

static void add_bucket(mt_trainer *t, int *cap, int64_t lo, int64_t hi, int part, int b) {
  if (t->ov.n_bkt == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    t->ov.bkt = mt_xrealloc(t->ov.bkt, (size_t)*cap * sizeof *t->ov.bkt);
  }
  t->ov.bkt[t->ov.n_bkt++] = (mt_overlap_bucket){lo, hi, part, b, NULL, -1, NULL};
}

void mt_trainer_overlap_init(mt_trainer *t) {
  const mt_config *c = t->cfg;
  mt_trainer_overlap *ov = &t->ov;
  memset(ov, 0, sizeof *ov);
  const int stage = t->zero ? t->zero->o.stage : 0;
  ov->grad = c->parallel.overlap_grad_reduce && stage <= 1;
  ov->param = c->parallel.overlap_param_gather && stage >= 1 && stage <= 2;
  if (stage >= 2) { /* the ZeRO-2/3 hooks reduce (and ZeRO-3 gathers) per unit */
    t->zero->overlap_grad = c->parallel.overlap_grad_reduce;
    t->zero->overlap_param = c->parallel.overlap_param_gather && stage == 3;
  }
  if (!ov->grad && !ov->param) return;
  ov->n_units = c->model.num_layers + 2;
  int cap = 0;
  if (!t->zero) {
    for (int i = 0; i < t->ddp.n_bkt; i++)
      add_bucket(t, &cap, t->ddp.bkt[i].offset, t->ddp.bkt[i].offset + t->ddp.bkt[i].len, -1, i);
  } else {
    for (int k = 0; k < t->zero->n_part; k++) {
      mt_zero_part *P = &t->zero->part[k];
      if (mt_group_size(P->group) <= 1) continue;
      for (int b = 0; b < P->L.n_bkt; b++) {
        const mt_zero_bucket *kb = &P->L.bkt[b];
        add_bucket(t, &cap, kb->flat_start, kb->flat_start + kb->len, k, b);
        int64_t plen = kb->shard_len * P->L.dp;
        if (plen != kb->len) /* padded: a staging buffer of its own */
          t->ov.bkt[t->ov.n_bkt - 1].scratch =
              t->be->ops->alloc(t->be, (size_t)plen * sizeof(float), MT_MEM_COMM);
      }
    }
  }
  /* every parameter's unit; the tied word embedding across stages is final
   * only after the embedding group's sum (unit -1) */
  const mt_param_list *pl = mt_gpt_params(t->model);
  int64_t *plo = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  int64_t *phi = mt_xcalloc((size_t)pl->n + 1, sizeof(int64_t));
  int *pu = mt_xcalloc((size_t)pl->n + 1, sizeof(int));
  for (int i = 0; i < pl->n; i++) plo[i] = pl->p[i].offset, phi[i] = plo[i] + pl->p[i].numel;
  for (int u = 0; u < ov->n_units; u++) {
    int first, last;
    mt_gpt_layer_param_range(t->model, layer_of_unit(t, u), &first, &last);
    for (int i = first; i <= last; i++) pu[i] = u;
  }
  for (int i = 0; i < ov->n_bkt; i++) { /* first reader: the smallest unit */
    mt_overlap_bucket *o = &ov->bkt[i];
    for (int p = 0; p < pl->n; p++)
      if (phi[p] > o->lo && plo[p] < o->hi && (o->first_unit < 0 || pu[p] < o->first_unit))
        o->first_unit = pu[p];
  }
  const int tied = mt_gpt_tied_grad_param(t->model);
  if (tied >= 0) pu[tied] = -1;
  int64_t *blo = mt_xcalloc((size_t)ov->n_bkt + 1, sizeof(int64_t));
  int64_t *bhi = mt_xcalloc((size_t)ov->n_bkt + 1, sizeof(int64_t));
  for (int i = 0; i < ov->n_bkt; i++) blo[i] = ov->bkt[i].lo, bhi[i] = ov->bkt[i].hi;
  mt_grad_sync_ops ops = {.ctx = t, .start = start_grad, .done = done_grad,
                          .unit_final = unit_final};
  mt_grad_sync_build(&ov->sync, ov->n_bkt, blo, bhi, pl->n, plo, phi, pu, ov->n_units, &ops);
  free(plo), free(phi), free(pu), free(blo), free(bhi);
  if (ov->param) t->zero->defer_param_sync = 1;
  ov->chained = mt_gpt_get_hooks(t->model);
  mt_gpt_hooks h = {.ctx = t,
                    .before_forward = h_before_forward,
                    .after_forward = h_after_forward,
                    .before_backward = h_before_backward,
                    .after_backward = h_after_backward};
  mt_gpt_set_hooks(t->model, &h);
}

void mt_trainer_overlap_begin_step(mt_trainer *t, int64_t global_batch) {
  if (!t->ov.grad) return;
  const int64_t n_micro = global_batch / t->dp / t->cfg->training.micro_batch_size;
  mt_grad_sync_begin(&t->ov.sync, (int)n_micro);
}

void mt_trainer_finalize_grads(mt_trainer *t) {
  if (t->ov.grad) mt_gpt_finalize_tied_grads(t->model); /* the TP sums ran per unit */
  else mt_gpt_finalize_grads(t->model);
}

/* After the optimizer step (overlap_param_gather): start every bucket's
 * all-gather, in the blocking path's order (parts, then buckets). */
void mt_trainer_params_start(mt_trainer *t) {
  if (!t->ov.param) return;
  for (int i = 0; i < t->ov.n_bkt; i++) {
    mt_overlap_bucket *o = &t->ov.bkt[i];
    mt_zero_part *P = &t->zero->part[o->part];
    MT_ASSERT(o->gather == NULL);
    o->gather = mt_zero_allgather_flat_start(P->group, t->be, &P->L, o->b,
                                             mt_gpt_param_buffer(t->model), o->scratch,
                                             t->be->dtype);
  }
}

void mt_trainer_params_wait(mt_trainer *t) {
  if (t->ov.param) params_wait(t, -1);
}

void mt_trainer_overlap_free(mt_trainer *t) {
  mt_trainer_overlap *ov = &t->ov;
  if (!ov->bkt && !ov->grad && !ov->param) return;
  mt_trainer_params_wait(t);
  mt_gpt_set_hooks(t->model, &ov->chained);
  for (int i = 0; i < ov->n_bkt; i++)
    if (ov->bkt[i].scratch) t->be->ops->free(t->be, ov->bkt[i].scratch);
  free(ov->bkt);
  mt_grad_sync_free(&ov->sync);
  memset(ov, 0, sizeof *ov);
}
