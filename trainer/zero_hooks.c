/* trainer/zero_hooks.c — ZeRO-2/3 residency of layer parameters and
 * gradients during one micro-batch (see zero_optimizer.h, docs/zero.md).
 *
 * A training micro-batch is the sequence of 2S steps (S = layers + 2
 * segments: embedding, layers, head):
 *   F(emb) F(0) ... F(L-1) F(head) B(head) B(L-1) ... B(0) B(emb)
 * Step i needs the parameters of:  F(x), B(x): segment x; the head also needs
 * the embedding segment when the output layer is tied to the word embedding;
 * B(emb) needs none (the embedding backward only scatters gradients).
 * Gradients: B(x) writes segment x (B(head) also the embedding when tied); a
 * segment's gradients are complete after the last step that writes them.
 *
 * Stage 3, before step i: free gathered segments not needed by steps
 * i .. i+prefetch, then all-gather the missing ones in step order (so the
 * next `prefetch` steps' layers are gathered before step i computes: the
 * CPU/MPI engine's all-gather is blocking, so "prefetch" means "gathered
 * early", not overlapped). After step i: free what steps i+1 .. i+max(1,
 * prefetch) do not need (so the head, used by F(head) and B(head) back to
 * back, is gathered once for both).
 * Stages 2/3, before a backward step: allocate zeroed gradient working
 * buffers for the segments it writes; after it: reduce-scatter the
 * segments whose gradients are complete into the owned shard (accumulating)
 * and free them.
 */
#include <string.h>

#include "core/util.h"
#include "trainer/zero_optimizer.h"

static int n_seg(const mt_zero_opt *z) { return z->L.n_seg; }

static int layer_of_seg(const mt_zero_opt *z, int s) {
  return s == 0 ? MT_GPT_EMBEDDING : s == n_seg(z) - 1 ? MT_GPT_HEAD : s - 1;
}

static int seg_of_layer(const mt_zero_opt *z, int layer) {
  return layer == MT_GPT_EMBEDDING ? 0 : layer == MT_GPT_HEAD ? n_seg(z) - 1 : layer + 1;
}

/* Parameters needed by step i (0 .. 2S-1); returns the count written to out[2]. */
static int pneed(const mt_zero_opt *z, int i, int out[2]) {
  const int S = n_seg(z);
  int fwd = i < S, pos = fwd ? i : 2 * S - 1 - i, n = 0;
  if (!fwd && pos == 0) return 0;
  out[n++] = pos;
  if (pos == S - 1 && z->tied) out[n++] = 0;
  return n;
}

/* Gradient segments written by backward step i (>= S). */
static int gneed(const mt_zero_opt *z, int i, int out[2]) {
  const int S = n_seg(z);
  int pos = 2 * S - 1 - i, n = 0;
  out[n++] = pos;
  if (pos == S - 1 && z->tied) out[n++] = 0;
  return n;
}

static void point_params(mt_zero_opt *z, int s, char *base, int grads) {
  int first, last;
  mt_gpt_layer_param_range(z->model, layer_of_seg(z, s), &first, &last);
  size_t es = grads ? sizeof(float) : mt_dtype_size(z->be->dtype);
  for (int i = first; i <= last; i++) {
    char *p = base ? base + (size_t)(z->params->p[i].offset - z->L.seg[s].flat_start) * es : NULL;
    if (grads) mt_gpt_set_grad_ptr(z->model, i, (float *)p);
    else mt_gpt_set_param_ptr(z->model, i, p);
  }
}

static void gather(mt_zero_opt *z, int s) {
  if (z->pwork[s]) return;
  mt_backend *be = z->be;
  size_t es = mt_dtype_size(be->dtype);
  z->pwork[s] = be->ops->alloc(be, (size_t)z->L.seg[s].padded_len * es, MT_MEM_PARAM);
  mt_zero_allgather_segment(z->dp_group, be, &z->L, s, z->param_shard, z->pwork[s], be->dtype);
  point_params(z, s, z->pwork[s], 0);
}

static void release(mt_zero_opt *z, int s) {
  if (!z->pwork[s]) return;
  z->be->ops->free(z->be, z->pwork[s]);
  z->pwork[s] = NULL;
  point_params(z, s, NULL, 0);
}

/* want[s] = 1 for segments needed by steps [from, to] (clamped). */
static void mark_wanted(mt_zero_opt *z, int from, int to) {
  memset(z->want, 0, (size_t)n_seg(z));
  if (to > 2 * n_seg(z) - 1) to = 2 * n_seg(z) - 1;
  for (int j = from; j <= to; j++) {
    int need[2], n = pneed(z, j, need);
    for (int k = 0; k < n; k++) z->want[need[k]] = 1;
  }
}

/* Free gathered segments that are not wanted and not in use by a step that
 * has begun and not ended (full recomputation begins the backward steps of
 * a chunk of layers before any of them ends). */
static void release_unwanted(mt_zero_opt *z) {
  for (int s = 0; s < n_seg(z); s++)
    if (!z->want[s] && z->nopen[s] == 0) release(z, s);
}

static void before_step(mt_zero_opt *z, int i) {
  const int S = n_seg(z);
  if (z->o.stage == 3) {
    int to = i + z->o.prefetch;
    mark_wanted(z, i, to);
    release_unwanted(z);
    if (to > 2 * S - 1) to = 2 * S - 1;
    for (int j = i; j <= to; j++) {
      int need[2], n = pneed(z, j, need);
      for (int k = 0; k < n; k++) gather(z, need[k]);
    }
    int need[2], n = pneed(z, i, need);
    for (int k = 0; k < n; k++) z->nopen[need[k]]++;
  }
  if (i >= S) {
    int g[2], n = gneed(z, i, g);
    for (int k = 0; k < n; k++) {
      int s = g[k];
      if (z->gwork[s]) continue;
      size_t bytes = (size_t)z->L.seg[s].padded_len * sizeof(float);
      z->gwork[s] = z->be->ops->alloc(z->be, bytes, MT_MEM_GRAD);
      z->be->ops->memset0(z->be, z->gwork[s], bytes);
      point_params(z, s, (char *)z->gwork[s], 1);
    }
  }
}

/* Sequence parallelism leaves some gradients partial per TP rank (LayerNorms,
 * position embedding): sum them over TP before the dp reduce-scatter, as
 * mt_gpt_finalize_grads does for the full buffer. */
static void finalize_sp(mt_zero_opt *z, int s) {
  const mt_gpt_config *c = mt_gpt_get_config(z->model);
  if (!(c->sequence_parallel && c->tp_size > 1)) return;
  int first, last;
  mt_gpt_layer_param_range(z->model, layer_of_seg(z, s), &first, &last);
  for (int i = first; i <= last; i++)
    if (z->params->p[i].sp_partial)
      mt_allreduce(c->tp_group, mt_gpt_grad_ptr(z->model, i), z->params->p[i].numel, MT_F32,
                   MT_OP_SUM);
}

static void after_step(mt_zero_opt *z, int i) {
  const int S = n_seg(z);
  if (z->o.stage == 3) {
    int need[2], n = pneed(z, i, need);
    for (int k = 0; k < n; k++)
      if (z->nopen[need[k]] > 0) z->nopen[need[k]]--;
    mark_wanted(z, i + 1, i + (z->o.prefetch > 1 ? z->o.prefetch : 1));
    release_unwanted(z);
  }
  if (i >= S) {
    int g[2], n = gneed(z, i, g);
    for (int k = 0; k < n; k++) {
      int s = g[k];
      if (2 * S - 1 - s != i || !z->gwork[s]) continue; /* not complete yet */
      finalize_sp(z, s);
      mt_zero_reduce_scatter_segment(z->dp_group, z->be, &z->L, s, z->gwork[s], z->grad_shard);
      z->be->ops->free(z->be, z->gwork[s]);
      z->gwork[s] = NULL;
      point_params(z, s, NULL, 1);
    }
  }
}

static void h_before_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  before_step(z, seg_of_layer(z, layer));
}
static void h_after_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  after_step(z, seg_of_layer(z, layer));
}
static void h_before_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  before_step(z, 2 * n_seg(z) - 1 - seg_of_layer(z, layer));
}
static void h_after_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  after_step(z, 2 * n_seg(z) - 1 - seg_of_layer(z, layer));
}

void mt_zero_hooks_install(mt_zero_opt *z) {
  mt_gpt_hooks h = {.ctx = z,
                    .before_forward = h_before_forward,
                    .after_forward = h_after_forward,
                    .before_backward = h_before_backward,
                    .after_backward = h_after_backward};
  mt_gpt_set_hooks(z->model, &h);
}

void mt_zero_hooks_release_all(mt_zero_opt *z) {
  if (!z->pwork) return;
  for (int s = 0; s < n_seg(z); s++) {
    z->nopen[s] = 0;
    release(z, s);
    MT_ASSERT(z->gwork[s] == NULL);
  }
}
