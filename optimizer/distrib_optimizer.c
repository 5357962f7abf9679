/* optimizer/distrib_optimizer.c — sharded AdamW, reduction and norm for ZeRO
 * stages 1-3 (see distrib_optimizer.h). The stage 2/3 hooks are at
 * the end of this file, the shard checkpoint files in checkpoint/legacy_zero.c. */
#include "optimizer/distrib_optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "optimizer/optimizer.h"

/* First and last parameter index of unit u (embedding, layers, head; the
 * whole stage with pipelines). */
static void unit_params(const mt_zero_opt *z, int u, int *first, int *last) {
  if (z->n_units == 1) {
    *first = 0;
    *last = z->params->n - 1;
    return;
  }
  int layer = u == 0 ? MT_GPT_EMBEDDING : u == z->n_units - 1 ? MT_GPT_HEAD : u - 1;
  mt_gpt_layer_param_range(z->model, layer, first, last);
}

/* Segments of part k: the maximal runs of its parameters inside each unit,
 * in flat order; fills bounds [2 * max segments] and P->unit_seg, returns the count. */
static int part_segments(mt_zero_opt *z, mt_zero_part *P, int64_t *bounds) {
  const mt_param_list *pl = z->params;
  int n = 0;
  P->unit_seg = mt_xcalloc((size_t)z->n_units + 1, sizeof(int));
  for (int u = 0; u < z->n_units; u++) {
    int first, last;
    unit_params(z, u, &first, &last);
    P->unit_seg[u] = n;
    for (int i = first; i <= last; i++) {
      if ((pl->p[i].is_expert != 0) != P->expert) continue;
      const int64_t e = pl->p[i].offset + pl->p[i].numel;
      if (i > first && n > P->unit_seg[u] && (pl->p[i - 1].is_expert != 0) == P->expert) {
        MT_ASSERT(pl->p[i].offset >= bounds[2 * n - 1]); /* flat order follows the params */
        bounds[2 * n - 1] = e;
        continue;
      }
      bounds[2 * n] = pl->p[i].offset;
      bounds[2 * n + 1] = e;
      n++;
    }
  }
  P->unit_seg[z->n_units] = n;
  return n;
}

/* Owned pieces of every parameter of part P (bucket by bucket, parameter order). */
static void build_chunks(mt_zero_opt *z, mt_zero_part *P) {
  const mt_param_list *pl = z->params;
  int cap = 64;
  P->chunk = mt_xmalloc((size_t)cap * sizeof *P->chunk);
  for (int b = 0; b < P->L.n_bkt; b++) {
    int64_t lo, hi;
    mt_zero_owned_range(&P->L, b, P->L.dp_rank, &lo, &hi);
    if (hi <= lo) continue;
    for (int i = 0; i < pl->n; i++) {
      int64_t a = pl->p[i].offset, e = a + pl->p[i].numel;
      if (a >= hi) break;
      if (e <= lo) continue;
      MT_ASSERT((pl->p[i].is_expert != 0) == P->expert);
      int64_t x = a > lo ? a : lo, y = e < hi ? e : hi;
      if (P->n_chunk == cap) {
        cap *= 2;
        P->chunk = mt_xrealloc(P->chunk, (size_t)cap * sizeof *P->chunk);
      }
      P->chunk[P->n_chunk++] = (mt_zero_chunk){
          .param = i, .flat_off = x, .shard_off = P->L.bkt[b].shard_offset + (x - lo), .n = y - x};
    }
  }
}

static size_t es_of(const mt_zero_opt *z) { return mt_dtype_size(z->be->dtype); }

/* Device pointer of the owned parameter elements of chunk c of part P. */
static void *param_loc(mt_zero_opt *z, mt_zero_part *P, const mt_zero_chunk *c) {
  if (z->o.stage == 3) return (char *)P->param_shard + (size_t)c->shard_off * es_of(z);
  return (char *)mt_gpt_param_buffer(z->model) + (size_t)c->flat_off * es_of(z);
}

static float *grad_loc(mt_zero_opt *z, mt_zero_part *P, const mt_zero_chunk *c) {
  if (z->o.stage == 1) return mt_gpt_grad_buffer(z->model) + c->flat_off;
  return P->grad_shard + c->shard_off;
}

static void *alloc0(mt_backend *be, size_t bytes, mt_mem_cat cat) {
  void *p = be->ops->alloc(be, bytes ? bytes : 1, cat);
  be->ops->memset0(be, p, bytes);
  return p;
}

/* Layout, chunks and shard buffers of part P (its segments in bounds). */
static void part_init(mt_zero_opt *z, mt_zero_part *P, const int64_t *bounds, int n_seg) {
  mt_backend *be = z->be;
  const mt_zero_options *o = &z->o;
  mt_zero_layout_build(&P->L, bounds, n_seg, z->params->numel, o->bucket_size,
                       mt_group_size(P->group), mt_group_rank(P->group));
  build_chunks(z, P);
  const int64_t sn = P->L.shard_numel;
  const mt_dtype T = be->dtype;
  P->m = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
  P->v = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
  if (o->stage == 3) {
    P->param_shard = be->ops->alloc(be, (size_t)sn * es_of(z), MT_MEM_PARAM);
    mt_zero_flat_to_shard(be, &P->L, mt_gpt_param_buffer(z->model), P->param_shard, T);
  }
  if (T != MT_F32) {
    P->master = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
    for (int i = 0; i < P->n_chunk; i++) {
      const mt_zero_chunk *c = &P->chunk[i];
      be->ops->cast(be, P->master + c->shard_off, MT_F32,
                    (char *)mt_gpt_param_buffer(z->model) + (size_t)c->flat_off * es_of(z), T,
                    c->n);
    }
  }
  if (o->stage >= 2) P->grad_shard = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_GRAD);
  if (o->stage <= 2 && P->L.padding > 0)
    P->scratch = be->ops->alloc(be, (size_t)P->L.max_bucket_padded * sizeof(float), MT_MEM_COMM);
  if (o->stage >= 2) {
    P->pwork = mt_xcalloc((size_t)n_seg, sizeof(void *));
    P->gwork = mt_xcalloc((size_t)n_seg, sizeof(float *));
  }
}

void mt_zero_opt_init(mt_zero_opt *z, mt_backend *be, mt_gpt *model, const mt_zero_groups *g,
                      const mt_zero_options *o) {
  memset(z, 0, sizeof *z);
  MT_ASSERT(o->stage >= 1 && o->stage <= 3);
  z->be = be;
  z->model = model;
  z->params = mt_gpt_params(model);
  z->o = *o;
  z->g = *g;
  z->dp_group = g->dp;
  z->n_layers = mt_gpt_get_config(model)->model.num_layers;
  /* the head reads the word embedding: tied output weights, or the MTP
   * depths' embedding (model/gpt_mtp.c) */
  z->tied = !mt_gpt_get_config(model)->model.untie_embeddings_and_output_weights ||
            mt_gpt_get_config(model)->model.mtp_num_layers > 0;
  /* a pipeline stage holds some layers (and maybe the embedding / head):
   * stage 1 needs no per-layer units, so one unit covers its parameters */
  MT_ASSERT(mt_gpt_get_config(model)->pp_size == 1 || o->stage == 1);
  z->n_units = mt_gpt_get_config(model)->pp_size > 1 ? 1 : z->n_layers + 2;
  int64_t *bounds = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)(z->params->n + 1));
  for (int k = 0; k < 2; k++) {
    mt_zero_part *P = &z->part[z->n_part];
    P->expert = k;
    P->group = k ? g->edp : g->dp;
    int n_seg = part_segments(z, P, bounds);
    if (n_seg == 0) { /* no expert parameters on this rank */
      MT_ASSERT(k == 1);
      free(P->unit_seg);
      memset(P, 0, sizeof *P);
      continue;
    }
    MT_ASSERT(P->group != NULL);
    part_init(z, P, bounds, n_seg);
    z->n_part++;
  }
  free(bounds);
  z->norm_acc = be->ops->alloc(be, 2 * sizeof(double), MT_MEM_COMM);
  if (o->stage >= 2) {
    mt_gpt_release_flat_buffers(model, o->stage == 3, 1);
    mt_zero_residency_init(&z->res, z->n_units, o->stage, o->prefetch, z->tied);
    mt_zero_hooks_install(z);
  }
}

void mt_zero_opt_free(mt_zero_opt *z) {
  mt_backend *be = z->be;
  if (!be) return;
  mt_zero_ov_free(z);
  if (z->o.stage >= 2) {
    mt_zero_hooks_release_all(z);
    mt_zero_ov_free(z);
    mt_gpt_hooks none = {0};
    mt_gpt_set_hooks(z->model, &none);
  }
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    if (P->gwork)
      for (int s = 0; s < P->L.n_seg; s++) be->ops->free(be, P->gwork[s]);
    void *bufs[] = {P->param_shard, P->grad_shard, P->master, P->m, P->v, P->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
    free(P->pwork);
    free(P->gwork);
    free(P->unit_seg);
    free(P->chunk);
    mt_zero_layout_free(&P->L);
  }
  if (z->o.stage >= 2) mt_zero_residency_free(&z->res);
  be->ops->free(be, z->norm_acc);
  memset(z, 0, sizeof *z);
}

void mt_zero_opt_zero_grad(mt_zero_opt *z) {
  if (z->o.stage == 1) {
    mt_gpt_zero_grad(z->model);
    return;
  }
  for (int k = 0; k < z->n_part; k++)
    z->be->ops->memset0(z->be, z->part[k].grad_shard,
                        (size_t)z->part[k].L.shard_numel * sizeof(float));
}

void mt_zero_opt_reduce_gradients(mt_zero_opt *z) {
  if (z->o.stage != 1) {
    mt_zero_ov_finish_grads(z); /* overlap_grad_reduce: the started reduce-scatters */
    return;
  }
  for (int k = 0; k < z->n_part; k++)
    mt_zero_reduce_scatter_flat(z->part[k].group, z->be, &z->part[k].L,
                                mt_gpt_grad_buffer(z->model), z->part[k].scratch);
}

void mt_zero_opt_flush(mt_zero_opt *z) {
  if (z->o.stage == 3) mt_zero_hooks_release_all(z);
}

/* Adds the sum of squares of the owned chunks of part P (replicated tensors
 * on rank 0 of their replication group only, pipeline copies skipped) to
 * the backend double acc. */
static void part_sumsq(mt_zero_opt *z, mt_zero_part *P, double *acc) {
  const int rep_rank = P->expert ? z->g.etp_rank : z->g.tp_rank;
  for (int i = 0; i < P->n_chunk; i++) {
    const mt_zero_chunk *c = &P->chunk[i];
    const mt_param *p = &z->params->p[c->param];
    if ((p->tp_replicated && rep_rank != 0) || p->shared_copy) continue;
    z->be->ops->sumsq_acc_f32(z->be, acc, grad_loc(z, P, c), c->n);
  }
}

static void allreduce_if(mt_group *g, double *x) {
  if (g && mt_group_size(g) > 1) mt_allreduce(g, x, 1, MT_F64, MT_OP_SUM);
}

/* Dense sum in norm_acc[0], expert sum in norm_acc[1], each all-reduced on
 * the backend buffer over its own groups, then ONE device-to-host copy. */
double mt_zero_opt_grad_sumsq(mt_zero_opt *z) {
  double *acc = z->norm_acc, v[2];
  z->be->ops->memset0(z->be, acc, 2 * sizeof(double));
  part_sumsq(z, &z->part[0], acc);
  if (z->g.edp && z->n_part > 1) part_sumsq(z, &z->part[1], acc + 1);
  mt_allreduce(z->g.dp, acc, 1, MT_F64, MT_OP_SUM);
  allreduce_if(z->g.mp, acc);
  if (z->g.edp) { /* MoE: every rank joins, also a pipeline stage without experts */
    mt_allreduce(z->g.edp, acc + 1, 1, MT_F64, MT_OP_SUM);
    allreduce_if(z->g.etp_ep, acc + 1);
    allreduce_if(z->g.pp, acc + 1);
  }
  z->be->ops->memcpy_d2h(z->be, v, acc, sizeof v);
  return v[0] + v[1];
}

void mt_zero_opt_step(mt_zero_opt *z, float lr, float grad_scale) {
  mt_backend *be = z->be;
  z->step++;
  for (int k = 0; k < z->n_part; k++) {
    mt_zero_part *P = &z->part[k];
    for (int i = 0; i < P->n_chunk; i++) {
      const mt_zero_chunk *c = &P->chunk[i];
      const mt_param *p = &z->params->p[c->param];
      mt_adamw_hparams hp = {.lr = lr,
                             .beta1 = z->o.beta1,
                             .beta2 = z->o.beta2,
                             .eps = z->o.eps,
                             .weight_decay = p->no_weight_decay ? 0.0f : z->o.weight_decay,
                             .step = z->step,
                             .grad_scale = grad_scale};
      void *ploc = param_loc(z, P, c);
      float *master = P->master ? P->master + c->shard_off : (float *)ploc;
      be->ops->adamw(be, &hp, master, P->m + c->shard_off, P->v + c->shard_off,
                     grad_loc(z, P, c), P->master ? ploc : NULL, c->n);
    }
  }
  if (z->o.stage <= 2 && !z->defer_param_sync) {
    mt_timer_start(z->timers, z->gather_timer);
    mt_zero_opt_sync_params(z);
    mt_timer_stop(z->timers, z->gather_timer);
  }
}

void mt_zero_opt_sync_params(mt_zero_opt *z) {
  if (z->o.stage > 2) return;
  for (int k = 0; k < z->n_part; k++) {
    if (k == 0 && z->dense_gather) {
      z->dense_gather(z->dense_ctx); /* fp8_param_gather */
      continue;
    }
    mt_zero_allgather_flat(z->part[k].group, z->be, &z->part[k].L, mt_gpt_param_buffer(z->model),
                           z->part[k].scratch, z->be->dtype);
  }
}

void mt_zero_opt_full_params(mt_zero_opt *z, void *dst) {
  mt_backend *be = z->be;
  size_t es = es_of(z), bytes = (size_t)z->params->numel * es;
  if (z->o.stage <= 2) {
    if (z->dense_refresh) z->dense_refresh(z->dense_ctx);
    be->ops->memcpy_d2d(be, dst, mt_gpt_param_buffer(z->model), bytes);
    return;
  }
  be->ops->memset0(be, dst, bytes);
  for (int k = 0; k < z->n_part; k++) {
    const mt_zero_layout *L = &z->part[k].L;
    size_t wmax = 0;
    for (int s = 0; s < L->n_seg; s++)
      if ((size_t)L->seg[s].padded_len > wmax) wmax = (size_t)L->seg[s].padded_len;
    void *work = be->ops->alloc(be, wmax * es, MT_MEM_COMM);
    for (int s = 0; s < L->n_seg; s++) {
      mt_zero_allgather_segment(z->part[k].group, be, L, s, z->part[k].param_shard, work,
                                be->dtype);
      be->ops->memcpy_d2d(be, (char *)dst + (size_t)L->seg[s].flat_start * es, work,
                          (size_t)L->seg[s].len * es);
    }
    be->ops->free(be, work);
  }
}

void mt_zero_opt_print_summary(const mt_zero_opt *z, FILE *f) {
  const mt_mem_stats *ms = &z->be->mem;
  for (int k = 0; k < z->n_part; k++) {
    const mt_zero_layout *L = &z->part[k].L;
    fprintf(f,
            "> ZeRO stage %d over %s=%d: %d segments, %d buckets of <= %lld elements, shard "
            "%lld elements per rank (padding %lld elements)%s\n",
            z->o.stage, k ? "edp" : "dp", L->dp, L->n_seg, L->n_bkt, (long long)L->bucket_size,
            (long long)L->shard_numel, (long long)L->padding,
            z->n_part > 1 ? (k ? " [expert parameters]" : " [dense parameters]") : "");
  }
  if (z->o.stage == 3) fprintf(f, "> ZeRO-3 prefetch: %d layer(s) ahead\n", z->o.prefetch);
  fprintf(f,
          "> model state per rank (allocator, MiB): parameters %.3f, gradients %.3f, optimizer "
          "state %.3f | total %.3f\n",
          ms->live[MT_MEM_PARAM] / 1048576.0, ms->live[MT_MEM_GRAD] / 1048576.0,
          ms->live[MT_MEM_OPTIM] / 1048576.0,
          (ms->live[MT_MEM_PARAM] + ms->live[MT_MEM_GRAD] + ms->live[MT_MEM_OPTIM]) / 1048576.0);
  fflush(f);
}

/* ---- ZeRO-2/3 hooks: residency of layer parameters and
 * gradients during one micro-batch (docs/zero.md).
 * The policy — which segments are gathered, freed, allocated and reduced
 * before and after each step — is optimizer/zero_residency.h's mt_zero_residency (the
 * planner replays the same one); this file maps the model's layer hooks
 * onto its steps over the model's UNITS (unit 0 = embedding, 1..layers =
 * layer l-1, last = head; F(x) is step x, B(x) step 2S-1-x) and carries its
 * decisions out on every segment of the unit in each part (the dense
 * parameters over dp x cp, the experts over edp: optimizer/distrib_optimizer.h
 * mt_zero_part): gather /
 * free parameter working buffers and point the model's parameters at them,
 * allocate zeroed gradient working buffers, and reduce-scatter complete
 * segments into the owned gradient shard (accumulating).
 */

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
      if (z->overlap_param) mt_zero_ov_gather_start(z, k, s, u); /* waited before use */
      else mt_zero_allgather_segment(P->group, be, &P->L, s, P->param_shard, P->pwork[s],
                                     be->dtype);
      point_params(z, u, P, s, P->pwork[s], 0);
    }
  }
}

static void release(mt_zero_opt *z, int u) {
  if (z->overlap_param) mt_zero_ov_gather_wait(z, u); /* gathered, never used */
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
      if (z->overlap_grad) mt_zero_ov_finish_segment(z, k, s); /* the last micro-batch's */
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
      if (z->overlap_grad) mt_zero_ov_reduce_start(z, k, s, P->gwork[s]); /* frees it when done */
      else {
        mt_zero_reduce_scatter_segment(P->group, z->be, &P->L, s, P->gwork[s], P->grad_shard);
        z->be->ops->free(z->be, P->gwork[s]);
      }
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
  if (z->overlap_param) mt_zero_ov_gather_wait(z, unit_of_layer(z, layer));
}
static void h_after_forward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, unit_of_layer(z, layer), 1);
}
static void h_before_backward(void *ctx, int layer) {
  mt_zero_opt *z = ctx;
  step(z, 2 * n_units(z) - 1 - unit_of_layer(z, layer), 0);
  if (z->overlap_param) mt_zero_ov_gather_wait(z, unit_of_layer(z, layer));
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
