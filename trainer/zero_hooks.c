/* trainer/zero_hooks.c — ZeRO-2/3 residency of layer parameters and
 * gradients during one micro-batch (see zero_optimizer.h, docs/zero.md).
 * The policy — which segments are gathered, freed, allocated and reduced
 * before and after each step — is parallel/zero.h's mt_zero_residency (the
 * planner replays the same one); this file maps the model's layer hooks
 * onto its steps (segment 0 = embedding, 1..layers = layer l-1, last = head;
 * F(x) is step x, B(x) step 2S-1-x) and carries its decisions out: gather /
 * free parameter working buffers and point the model's parameters at them,
 * allocate zeroed gradient working buffers, and reduce-scatter complete
 * segments into the owned gradient shard (accumulating).
 */
#include "core/util.h"
#include "trainer/zero_optimizer.h"

static int n_seg(const mt_zero_opt *z) { return z->L.n_seg; }

static int layer_of_seg(const mt_zero_opt *z, int s) {
  return s == 0 ? MT_GPT_EMBEDDING : s == n_seg(z) - 1 ? MT_GPT_HEAD : s - 1;
}

static int seg_of_layer(const mt_zero_opt *z, int layer) {
  return layer == MT_GPT_EMBEDDING ? 0 : layer == MT_GPT_HEAD ? n_seg(z) - 1 : layer + 1;
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
  MT_ASSERT(z->pwork[s] == NULL);
  mt_backend *be = z->be;
  size_t es = mt_dtype_size(be->dtype);
  z->pwork[s] = be->ops->alloc(be, (size_t)z->L.seg[s].padded_len * es, MT_MEM_PARAM);
  mt_zero_allgather_segment(z->dp_group, be, &z->L, s, z->param_shard, z->pwork[s], be->dtype);
  point_params(z, s, z->pwork[s], 0);
}

static void release(mt_zero_opt *z, int s) {
  MT_ASSERT(z->pwork[s] != NULL);
  z->be->ops->free(z->be, z->pwork[s]);
  z->pwork[s] = NULL;
  point_params(z, s, NULL, 0);
}

/* Some gradients are partial per TP rank (mt_param.sp_partial: norms and the
 * position table under sequence parallelism, q/k norms under any tp > 1):
 * sum them over TP before the dp reduce-scatter, as mt_gpt_finalize_grads
 * does for the full buffer. */
static void finalize_sp(mt_zero_opt *z, int s) {
  const mt_gpt_config *c = mt_gpt_get_config(z->model);
  if (c->tp_size <= 1) return;
  int first, last;
  mt_gpt_layer_param_range(z->model, layer_of_seg(z, s), &first, &last);
  for (int i = first; i <= last; i++)
    if (z->params->p[i].sp_partial)
      mt_allreduce(c->tp_group, mt_gpt_grad_ptr(z->model, i), z->params->p[i].numel, MT_F32,
                   MT_OP_SUM);
}

/* Carry out the policy's last decision (z->res.act[0 .. n_act)) in order. */
static void apply(mt_zero_opt *z) {
  for (int k = 0; k < z->res.n_act; k++) {
    const int s = z->res.act[k].seg;
    switch (z->res.act[k].kind) {
    case MT_ZERO_FREE_PARAMS:
      release(z, s);
      break;
    case MT_ZERO_GATHER_PARAMS:
      gather(z, s);
      break;
    case MT_ZERO_ALLOC_GRADS: {
      size_t bytes = (size_t)z->L.seg[s].padded_len * sizeof(float);
      z->gwork[s] = z->be->ops->alloc(z->be, bytes, MT_MEM_GRAD);
      z->be->ops->memset0(z->be, z->gwork[s], bytes);
      point_params(z, s, (char *)z->gwork[s], 1);
      break;
    }
    case MT_ZERO_REDUCE_GRADS:
      finalize_sp(z, s);
      mt_zero_reduce_scatter_segment(z->dp_group, z->be, &z->L, s, z->gwork[s], z->grad_shard);
      z->be->ops->free(z->be, z->gwork[s]);
      z->gwork[s] = NULL;
      point_params(z, s, NULL, 1);
      break;
    }
  }
}

static void step(mt_zero_opt *z, int i, int after) {
  mt_zero_residency_step(&z->res, i, after);
  apply(z);
}

static void h_before_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, seg_of_layer(z, layer), 0);
}
static void h_after_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, seg_of_layer(z, layer), 1);
}
static void h_before_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, 2 * n_seg(z) - 1 - seg_of_layer(z, layer), 0);
}
static void h_after_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, 2 * n_seg(z) - 1 - seg_of_layer(z, layer), 1);
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
  mt_zero_residency_release_all(&z->res);
  apply(z);
  for (int s = 0; s < n_seg(z); s++) MT_ASSERT(z->gwork[s] == NULL);
}
