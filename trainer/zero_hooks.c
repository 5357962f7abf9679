/* trainer/zero_hooks.c — ZeRO-2/3 residency of layer parameters and
 * gradients during one micro-batch (see zero_optimizer.h, docs/zero.md).
 * The policy — which segments are gathered, freed, allocated and reduced
 * before and after each step — is parallel/zero.h's mt_zero_residency (the
 * planner replays the same one); this file maps the model's layer hooks
 * onto its steps over the model's UNITS (unit 0 = embedding, 1..layers =
 * layer l-1, last = head; F(x) is step x, B(x) step 2S-1-x) and carries its
 * decisions out on every segment of the unit in each part (the dense
 * parameters over dp x cp, the experts over edp: trainer/zero_optimizer.h
 * mt_zero_part): gather /
 * free parameter working buffers and point the model's parameters at them,
 * allocate zeroed gradient working buffers, and reduce-scatter complete
 * segments into the owned gradient shard (accumulating).
 */
#include "core/util.h"
#include "trainer/zero_optimizer.h"

static int n_units(const mt_zero_opt *z) { return z->n_units; }

static int layer_of_unit(const mt_zero_opt *z, int u) {
  return u == 0 ? MT_GPT_EMBEDDING : u == n_units(z) - 1 ? MT_GPT_HEAD : u - 1;
}

static int unit_of_layer(const mt_zero_opt *z, int layer) {
  return layer == MT_GPT_EMBEDDING ? 0 : layer == MT_GPT_HEAD ? n_units(z) - 1 : layer + 1;
}

/* Point the parameters (grads == 0) or gradients of segment s of part P
 * (in unit u) into base (a working buffer in segment order), or at NULL. */
static void point_params(mt_zero_opt *z, int u, const mt_zero_part *P, int s, char *base,
                         int grads) {
  int first, last;
  mt_gpt_layer_param_range(z->model, layer_of_unit(z, u), &first, &last);
  size_t es = grads ? sizeof(float) : mt_dtype_size(z->be->dtype);
  const mt_zero_segment *sg = &P->L.seg[s];
  for (int i = first; i <= last; i++) {
    const int64_t off = z->params->p[i].offset;
    if (off < sg->flat_start || off >= sg->flat_start + sg->len) continue;
    char *p = base ? base + (size_t)(off - sg->flat_start) * es : NULL;
    if (grads) mt_gpt_set_grad_ptr(z->model, i, (float *)p);
    else mt_gpt_set_param_ptr(z->model, i, p);
  }
}

/* Every segment s of part P in unit u: for (s = FIRST; s < END; s++). */
#define SEG_FIRST(P, u) ((P)->unit_seg[u])
#define SEG_END(P, u) ((P)->unit_seg[(u) + 1])

static void gather(mt_zero_opt *z, int u) {
  mt_backend *be = z->be;
  size_t es = mt_dtype_size(be->dtype);
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    for (int s = SEG_FIRST(P, u); s < SEG_END(P, u); s++) {
      MT_ASSERT(P->pwork[s] == NULL);
      P->pwork[s] = be->ops->alloc(be, (size_t)P->L.seg[s].padded_len * es, MT_MEM_PARAM);
      mt_zero_allgather_segment(P->group, be, &P->L, s, P->param_shard, P->pwork[s], be->dtype);
      point_params(z, u, P, s, P->pwork[s], 0);
    }
  }
}

static void release(mt_zero_opt *z, int u) {
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    for (int s = SEG_FIRST(P, u); s < SEG_END(P, u); s++) {
      MT_ASSERT(P->pwork[s] != NULL);
      z->be->ops->free(z->be, P->pwork[s]);
      P->pwork[s] = NULL;
      point_params(z, u, P, s, NULL, 0);
    }
  }
}

static void alloc_grads(mt_zero_opt *z, int u) {
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    for (int s = SEG_FIRST(P, u); s < SEG_END(P, u); s++) {
      size_t bytes = (size_t)P->L.seg[s].padded_len * sizeof(float);
      P->gwork[s] = z->be->ops->alloc(z->be, bytes, MT_MEM_GRAD);
      z->be->ops->memset0(z->be, P->gwork[s], bytes);
      point_params(z, u, P, s, (char *)P->gwork[s], 1);
    }
  }
}

/* Some gradients are partial per TP rank (mt_param.sp_partial: norms and the
 * position table under sequence parallelism, q/k norms under any tp > 1):
 * sum them over TP before the dp reduce-scatter, as mt_gpt_finalize_grads
 * does for the full buffer. */
static void finalize_sp(mt_zero_opt *z, int u) {
  const mt_gpt_config *c = mt_gpt_get_config(z->model);
  if (c->tp_size <= 1) return;
  int first, last;
  mt_gpt_layer_param_range(z->model, layer_of_unit(z, u), &first, &last);
  for (int i = first; i <= last; i++)
    if (z->params->p[i].sp_partial)
      mt_allreduce(c->tp_group, mt_gpt_grad_ptr(z->model, i), z->params->p[i].numel, MT_F32,
                   MT_OP_SUM);
}

/* Reduce-scatter every segment of unit u, each over its part's group (dense
 * over dp x cp, experts over edp), into the owned gradient shards; free. */
static void reduce_grads(mt_zero_opt *z, int u) {
  finalize_sp(z, u);
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    for (int s = SEG_FIRST(P, u); s < SEG_END(P, u); s++) {
      mt_zero_reduce_scatter_segment(P->group, z->be, &P->L, s, P->gwork[s], P->grad_shard);
      z->be->ops->free(z->be, P->gwork[s]);
      P->gwork[s] = NULL;
      point_params(z, u, P, s, NULL, 1);
    }
  }
}

/* Carry out the policy's last decision (z->res.act[0 .. n_act)) in order;
 * the policy's "segments" are the units. */
static void apply(mt_zero_opt *z) {
  for (int k = 0; k < z->res.n_act; k++) {
    const int u = z->res.act[k].seg;
    switch (z->res.act[k].kind) {
    case MT_ZERO_FREE_PARAMS:
      release(z, u);
      break;
    case MT_ZERO_GATHER_PARAMS:
      gather(z, u);
      break;
    case MT_ZERO_ALLOC_GRADS:
      alloc_grads(z, u);
      break;
    case MT_ZERO_REDUCE_GRADS:
      reduce_grads(z, u);
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
  step(z, unit_of_layer(z, layer), 0);
}
static void h_after_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, unit_of_layer(z, layer), 1);
}
static void h_before_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, 2 * n_units(z) - 1 - unit_of_layer(z, layer), 0);
}
static void h_after_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, 2 * n_units(z) - 1 - unit_of_layer(z, layer), 1);
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
  if (z->o.stage < 2) return;
  mt_zero_residency_release_all(&z->res);
  apply(z);
  for (int k = 0; k < z->n_part; k++)
    for (int s = 0; s < z->part[k].L.n_seg; s++) MT_ASSERT(z->part[k].gwork[s] == NULL);
}
