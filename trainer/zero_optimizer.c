/* trainer/zero_optimizer.c — sharded AdamW, reduction and norm for ZeRO
 * stages 1-3 (see zero_optimizer.h). The stage 2/3 hooks are in
 * trainer/zero_hooks.c, the shard checkpoint files in trainer/zero_checkpoint.c. */
#include "trainer/zero_optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* Segment bounds: embedding, layers 0..L-1, head, in flat order. */
static void segment_bounds(const mt_gpt *m, const mt_param_list *pl, int n_layers,
                           int64_t *bounds) {
  for (int s = 0; s < n_layers + 2; s++) {
    int layer = s == 0 ? MT_GPT_EMBEDDING : s == n_layers + 1 ? MT_GPT_HEAD : s - 1;
    int first, last;
    mt_gpt_layer_param_range(m, layer, &first, &last);
    bounds[2 * s] = pl->p[first].offset;
    bounds[2 * s + 1] = pl->p[last].offset + pl->p[last].numel;
    for (int i = first; i <= last; i++) /* the flat order must follow the segments */
      MT_ASSERT(pl->p[i].offset >= bounds[2 * s] && pl->p[i].offset < bounds[2 * s + 1]);
  }
}

/* Owned pieces of every parameter (bucket by bucket, parameter order). */
static void build_chunks(mt_zero_opt *z) {
  const mt_param_list *pl = z->params;
  int cap = 64;
  z->chunk = mt_xmalloc((size_t)cap * sizeof *z->chunk);
  for (int b = 0; b < z->L.n_bkt; b++) {
    int64_t lo, hi;
    mt_zero_owned_range(&z->L, b, z->L.dp_rank, &lo, &hi);
    if (hi <= lo) continue;
    for (int i = 0; i < pl->n; i++) {
      int64_t a = pl->p[i].offset, e = a + pl->p[i].numel;
      if (a >= hi) break;
      if (e <= lo) continue;
      int64_t x = a > lo ? a : lo, y = e < hi ? e : hi;
      if (z->n_chunk == cap) {
        cap *= 2;
        z->chunk = mt_xrealloc(z->chunk, (size_t)cap * sizeof *z->chunk);
      }
      z->chunk[z->n_chunk++] = (mt_zero_chunk){
          .param = i, .flat_off = x, .shard_off = z->L.bkt[b].shard_offset + (x - lo), .n = y - x};
    }
  }
}

static size_t es_of(const mt_zero_opt *z) { return mt_dtype_size(z->be->dtype); }

/* Device pointer of the owned parameter elements of chunk c. */
static void *param_loc(mt_zero_opt *z, const mt_zero_chunk *c) {
  if (z->o.stage == 3) return (char *)z->param_shard + (size_t)c->shard_off * es_of(z);
  return (char *)mt_gpt_param_buffer(z->model) + (size_t)c->flat_off * es_of(z);
}

static float *grad_loc(mt_zero_opt *z, const mt_zero_chunk *c) {
  if (z->o.stage == 1) return mt_gpt_grad_buffer(z->model) + c->flat_off;
  return z->grad_shard + c->shard_off;
}

static void *alloc0(mt_backend *be, size_t bytes, mt_mem_cat cat) {
  void *p = be->ops->alloc(be, bytes ? bytes : 1, cat);
  be->ops->memset0(be, p, bytes);
  return p;
}

void mt_zero_opt_init(mt_zero_opt *z, mt_backend *be, mt_gpt *model, mt_group *dp_group,
                      mt_group *mp_group, int tp_rank, const mt_zero_options *o) {
  memset(z, 0, sizeof *z);
  MT_ASSERT(o->stage >= 1 && o->stage <= 3);
  z->be = be;
  z->model = model;
  z->params = mt_gpt_params(model);
  z->o = *o;
  z->dp_group = dp_group;
  z->mp_group = mp_group;
  z->tp_rank = tp_rank;
  z->n_layers = mt_gpt_get_config(model)->num_layers;
  z->tied = !mt_gpt_get_config(model)->untie_embeddings_and_output_weights;
  int n_seg = z->n_layers + 2;
  int64_t *bounds = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)n_seg);
  if (mt_gpt_get_config(model)->pp_size > 1) {
    /* a pipeline stage holds some layers (and maybe the embedding / head):
     * stage 1 needs no per-layer units, so one segment covers its params */
    MT_ASSERT(o->stage == 1);
    const mt_param *last = &z->params->p[z->params->n - 1];
    n_seg = 1;
    bounds[0] = z->params->p[0].offset;
    bounds[1] = last->offset + last->numel;
  } else {
    segment_bounds(model, z->params, z->n_layers, bounds);
  }
  mt_zero_layout_build(&z->L, bounds, n_seg, z->params->numel, o->bucket_size,
                       mt_group_size(dp_group), mt_group_rank(dp_group));
  free(bounds);
  build_chunks(z);

  const int64_t sn = z->L.shard_numel;
  const mt_dtype T = be->dtype;
  z->m = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
  z->v = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
  if (o->stage == 3) {
    z->param_shard = be->ops->alloc(be, (size_t)sn * es_of(z), MT_MEM_PARAM);
    mt_zero_flat_to_shard(be, &z->L, mt_gpt_param_buffer(model), z->param_shard, T);
  }
  if (T != MT_F32) {
    z->master = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_OPTIM);
    for (int i = 0; i < z->n_chunk; i++) {
      const mt_zero_chunk *c = &z->chunk[i];
      be->ops->cast(be, z->master + c->shard_off, MT_F32,
                    (char *)mt_gpt_param_buffer(model) + (size_t)c->flat_off * es_of(z), T, c->n);
    }
  }
  if (o->stage >= 2) z->grad_shard = alloc0(be, (size_t)sn * sizeof(float), MT_MEM_GRAD);
  if (o->stage <= 2 && z->L.padding > 0)
    z->scratch = be->ops->alloc(be, (size_t)z->L.max_bucket_padded * sizeof(float), MT_MEM_COMM);
  if (o->stage >= 2) {
    mt_gpt_release_flat_buffers(model, o->stage == 3, 1);
    z->pwork = mt_xcalloc((size_t)n_seg, sizeof(void *));
    z->gwork = mt_xcalloc((size_t)n_seg, sizeof(float *));
    mt_zero_residency_init(&z->res, n_seg, o->stage, o->prefetch, z->tied);
    mt_zero_hooks_install(z);
  }
}

void mt_zero_opt_free(mt_zero_opt *z) {
  mt_backend *be = z->be;
  if (!be) return;
  if (z->pwork) {
    mt_zero_hooks_release_all(z);
    for (int s = 0; s < z->L.n_seg; s++) be->ops->free(be, z->gwork[s]);
    mt_gpt_hooks none = {0};
    mt_gpt_set_hooks(z->model, &none);
  }
  void *bufs[] = {z->param_shard, z->grad_shard, z->master, z->m, z->v, z->scratch};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->free(be, bufs[i]);
  free(z->pwork);
  free(z->gwork);
  mt_zero_residency_free(&z->res);
  free(z->chunk);
  mt_zero_layout_free(&z->L);
  memset(z, 0, sizeof *z);
}

void mt_zero_opt_zero_grad(mt_zero_opt *z) {
  if (z->o.stage == 1) mt_gpt_zero_grad(z->model);
  else z->be->ops->memset0(z->be, z->grad_shard, (size_t)z->L.shard_numel * sizeof(float));
}

void mt_zero_opt_reduce_gradients(mt_zero_opt *z) {
  if (z->o.stage != 1) return;
  mt_zero_reduce_scatter_flat(z->dp_group, z->be, &z->L, mt_gpt_grad_buffer(z->model), z->scratch);
}

void mt_zero_opt_flush(mt_zero_opt *z) {
  if (z->o.stage == 3) mt_zero_hooks_release_all(z);
}

double mt_zero_opt_grad_sumsq(mt_zero_opt *z) {
  double s = 0.0;
  for (int i = 0; i < z->n_chunk; i++) {
    const mt_zero_chunk *c = &z->chunk[i];
    if (z->params->p[c->param].tp_replicated && z->tp_rank != 0) continue;
    if (z->params->p[c->param].shared_copy) continue; /* owned by another stage */
    s += z->be->ops->sumsq_f32(z->be, grad_loc(z, c), c->n);
  }
  mt_allreduce(z->dp_group, &s, 1, MT_F64, MT_OP_SUM);
  if (z->mp_group && mt_group_size(z->mp_group) > 1)
    mt_allreduce(z->mp_group, &s, 1, MT_F64, MT_OP_SUM);
  return s;
}

void mt_zero_opt_step(mt_zero_opt *z, float lr, float grad_scale) {
  mt_backend *be = z->be;
  z->step++;
  for (int i = 0; i < z->n_chunk; i++) {
    const mt_zero_chunk *c = &z->chunk[i];
    const mt_param *p = &z->params->p[c->param];
    mt_adamw_hparams hp = {.lr = lr,
                           .beta1 = z->o.beta1,
                           .beta2 = z->o.beta2,
                           .eps = z->o.eps,
                           .weight_decay = p->no_weight_decay ? 0.0f : z->o.weight_decay,
                           .step = z->step,
                           .grad_scale = grad_scale};
    void *ploc = param_loc(z, c);
    float *master = z->master ? z->master + c->shard_off : (float *)ploc;
    be->ops->adamw(be, &hp, master, z->m + c->shard_off, z->v + c->shard_off, grad_loc(z, c),
                   z->master ? ploc : NULL, c->n);
  }
  if (z->o.stage <= 2)
    mt_zero_allgather_flat(z->dp_group, be, &z->L, mt_gpt_param_buffer(z->model), z->scratch,
                           be->dtype);
}

void mt_zero_opt_full_params(mt_zero_opt *z, void *dst) {
  mt_backend *be = z->be;
  size_t es = es_of(z), bytes = (size_t)z->params->numel * es;
  if (z->o.stage <= 2) {
    be->ops->memcpy_d2d(be, dst, mt_gpt_param_buffer(z->model), bytes);
    return;
  }
  be->ops->memset0(be, dst, bytes);
  size_t wmax = 0;
  for (int s = 0; s < z->L.n_seg; s++)
    if ((size_t)z->L.seg[s].padded_len > wmax) wmax = (size_t)z->L.seg[s].padded_len;
  void *work = be->ops->alloc(be, wmax * es, MT_MEM_COMM);
  for (int s = 0; s < z->L.n_seg; s++) {
    mt_zero_allgather_segment(z->dp_group, be, &z->L, s, z->param_shard, work, be->dtype);
    be->ops->memcpy_d2d(be, (char *)dst + (size_t)z->L.seg[s].flat_start * es, work,
                        (size_t)z->L.seg[s].len * es);
  }
  be->ops->free(be, work);
}

void mt_zero_opt_expected_bytes(const mt_zero_opt *z, size_t out[MT_MEM_NCAT]) {
  memset(out, 0, sizeof(size_t) * MT_MEM_NCAT);
  size_t full = (size_t)z->params->numel, sn = (size_t)z->L.shard_numel, es = es_of(z);
  out[MT_MEM_PARAM] = (z->o.stage == 3 ? sn : full) * es;
  out[MT_MEM_GRAD] = (z->o.stage == 1 ? full : sn) * sizeof(float);
  out[MT_MEM_OPTIM] = sn * sizeof(float) * (z->master ? 3 : 2);
}

void mt_zero_opt_print_summary(const mt_zero_opt *z, FILE *f) {
  const mt_mem_stats *ms = &z->be->mem;
  size_t exp[MT_MEM_NCAT];
  mt_zero_opt_expected_bytes(z, exp);
  fprintf(f,
          "> ZeRO stage %d over dp=%d: %d segments, %d buckets of <= %lld elements, shard %lld "
          "elements per rank (padding %lld elements)\n",
          z->o.stage, z->L.dp, z->L.n_seg, z->L.n_bkt, (long long)z->L.bucket_size,
          (long long)z->L.shard_numel, (long long)z->L.padding);
  if (z->o.stage == 3) fprintf(f, "> ZeRO-3 prefetch: %d layer(s) ahead\n", z->o.prefetch);
  fprintf(f,
          "> model state per rank (allocator, MiB): parameters %.3f, gradients %.3f, optimizer "
          "state %.3f | total %.3f\n",
          ms->live[MT_MEM_PARAM] / 1048576.0, ms->live[MT_MEM_GRAD] / 1048576.0,
          ms->live[MT_MEM_OPTIM] / 1048576.0,
          (ms->live[MT_MEM_PARAM] + ms->live[MT_MEM_GRAD] + ms->live[MT_MEM_OPTIM]) / 1048576.0);
  fflush(f);
}
