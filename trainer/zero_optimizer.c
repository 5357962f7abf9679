/* trainer/zero_optimizer.c — sharded AdamW, reduction and norm for ZeRO
 * stages 1-3 (see zero_optimizer.h). The stage 2/3 hooks are in
 * trainer/zero_hooks.c, the shard checkpoint files in trainer/zero_checkpoint.c. */
#include "trainer/zero_optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "trainer/optimizer.h"

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
  z->tied = !mt_gpt_get_config(model)->model.untie_embeddings_and_output_weights;
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
  if (z->o.stage >= 2) {
    mt_zero_hooks_release_all(z);
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
  if (z->o.stage != 1) return;
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
  if (z->o.stage <= 2) mt_zero_opt_sync_params(z);
}

void mt_zero_opt_sync_params(mt_zero_opt *z) {
  if (z->o.stage > 2) return;
  for (int k = 0; k < z->n_part; k++)
    mt_zero_allgather_flat(z->part[k].group, z->be, &z->part[k].L, mt_gpt_param_buffer(z->model),
                           z->part[k].scratch, z->be->dtype);
}

void mt_zero_opt_full_params(mt_zero_opt *z, void *dst) {
  mt_backend *be = z->be;
  size_t es = es_of(z), bytes = (size_t)z->params->numel * es;
  if (z->o.stage <= 2) {
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

void mt_zero_opt_part_expected_bytes(const mt_zero_opt *z, int k, size_t out[MT_MEM_NCAT]) {
  memset(out, 0, sizeof(size_t) * MT_MEM_NCAT);
  const mt_zero_part *P = &z->part[k];
  const mt_param_list *pl = z->params;
  /* the full buffers of stages 1/2 count the whole flat buffer: its
   * alignment gaps go to the dense part */
  size_t full = 0;
  if (k == 0) {
    full = (size_t)pl->numel;
    for (int i = 0; i < pl->n; i++)
      if (pl->p[i].is_expert) full -= (size_t)pl->p[i].numel;
  } else {
    for (int i = 0; i < pl->n; i++)
      if (pl->p[i].is_expert) full += (size_t)pl->p[i].numel;
  }
  size_t sn = (size_t)P->L.shard_numel, es = es_of(z);
  out[MT_MEM_PARAM] = (z->o.stage == 3 ? sn : full) * es;
  out[MT_MEM_GRAD] = (z->o.stage == 1 ? full : sn) * sizeof(float);
  out[MT_MEM_OPTIM] = sn * sizeof(float) * (P->master ? 3 : 2);
}

void mt_zero_opt_expected_bytes(const mt_zero_opt *z, size_t out[MT_MEM_NCAT]) {
  memset(out, 0, sizeof(size_t) * MT_MEM_NCAT);
  for (int k = 0; k < z->n_part; k++) {
    size_t b[MT_MEM_NCAT];
    mt_zero_opt_part_expected_bytes(z, k, b);
    for (int c = 0; c < MT_MEM_NCAT; c++) out[c] += b[c];
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
