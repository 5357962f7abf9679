/* planner/plan_stage.c — the memory of one rank of one pipeline stage,
 * allocation by allocation, as this implementation makes it during training
 * (docs/planner.md "Validation against the allocator"):
 *
 *  - the parameter registry of the stage (model/gpt.c register_params:
 *    registration order, 16-element aligned offsets, the last stage's copy
 *    of a tied word embedding) gives the flat parameter/gradient buffers;
 *  - ZeRO: the exact shard layout (parallel/zero.h mt_zero_layout_build on
 *    the trainer's segments, optimizer/distrib_optimizer.c) and a replay of the
 *    stage-2/3 residency policy (optimizer/zero_residency.h, which
 *    optimizer/distrib_optimizer.c carries out) over one micro-batch's
 *    hook sequence (model/gpt_forward.c, full recomputation included) for the
 *    gathered-parameter and gradient working-buffer peaks;
 *  - activations: one slot per micro-batch in flight per model chunk
 *    (model/gpt_slots.c slot_new), the in-flight count of each chunk taken
 *    from the pipeline schedule itself (parallel/pipeline.h), plus the shared
 *    selective/full recomputation buffers (model/gpt.c alloc_buffers);
 *  - workspaces: the model's and the MoE layer's scratch buffers (the CPU
 *    backend's own op scratch is not predicted);
 *  - communication: the ZeRO padding scratch, one pipeline gradient send
 *    buffer (more only when sends are slow to complete) and, with
 *    overlap_p2p_comm, the executor's look-ahead receive buffers.
 * Pure arithmetic: builds no model and calls no backend.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "parallel/pipeline.h"
#include "parallel/zero.h"
#include "optimizer/zero_residency.h"
#include "planner/plan_internal.h"

typedef struct {
  int first, n, pre, post;
} pchunk;

/* Model chunks of stage r (model/gpt.c assign_chunks). Returns their count. */
static int stage_chunks(const mt_config *cfg, int r, pchunk *ch) {
  const mt_parallel_config *pc = &cfg->parallel;
  const int p = pc->pipeline_model_parallel_size > 0 ? pc->pipeline_model_parallel_size : 1;
  const int v = pc->virtual_pipeline_model_parallel_size > 0
                    ? pc->virtual_pipeline_model_parallel_size : 1;
  const int L = cfg->model.num_layers;
  const int nf = pc->num_layers_in_first_pipeline_stage, nl = pc->num_layers_in_last_pipeline_stage;
  if (p > 1 && v == 1 && (nf > 0 || nl > 0)) {
    const int n_free = p - (nf > 0) - (nl > 0);
    const int share = n_free ? (L - (nf > 0 ? nf : 0) - (nl > 0 ? nl : 0)) / n_free : 0;
    int first = 0;
    for (int k = 0; k < r; k++) first += (k == 0 && nf > 0) ? nf : share;
    ch[0] = (pchunk){first, (r == 0 && nf > 0) ? nf : (r == p - 1 && nl > 0) ? nl : share, r == 0,
                     r == p - 1};
    return 1;
  }
  const int per = L / (p * v);
  for (int k = 0; k < v; k++) {
    int g = k * p + r;
    ch[k] = (pchunk){g * per, per, g == 0, g == p * v - 1};
  }
  return v;
}

static int is_moe_layer(const mt_plan_dims *d, int l) {
  return l >= 0 && l < MT_MAX_LAYERS && d->moe_layer[l];
}

void mt_plan_stage_layer_counts(const mt_config *cfg, const mt_plan_dims *d, int r, int *n_layers,
                                int *n_moe) {
  pchunk *ch = mt_xcalloc((size_t)d->v, sizeof(pchunk));
  const int nc = stage_chunks(cfg, r, ch);
  *n_layers = *n_moe = 0;
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++) {
      (*n_layers)++;
      *n_moe += d->E > 0 && is_moe_layer(d, ch[k].first + lc);
    }
  free(ch);
}

/* ---- the flat parameter buffer and the ZeRO segments ---- */

/* One registered parameter: its aligned offset and elements in the flat
 * buffers, its ZeRO unit (0 embedding, 1.. the local layers, last the head;
 * one unit for the whole stage with pipelines: optimizer/distrib_optimizer.c
 * n_units) and its ZeRO part (1: an expert parameter, mt_param.is_expert). */
typedef struct {
  int64_t off, n;
  int unit, expert;
  int pos; /* 0 the embedding (when on the stage), then the layers, then the head */
} pparam;

typedef struct {
  int64_t flat;     /* elements of the flat buffers (aligned offsets) */
  int64_t numel;    /* parameter elements (no alignment) */
  pparam *p;        /* [np] in registration order */
  int np, cap, n_units, has_emb, has_head;
  int unit, expert; /* of the parameters being added */
  int pos;
} flat_layout;

static void padd(flat_layout *f, int64_t n) {
  if (f->np == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 256;
    f->p = mt_xrealloc(f->p, (size_t)f->cap * sizeof *f->p);
  }
  f->p[f->np++] = (pparam){f->flat, n, f->unit, f->expert, f->pos};
  f->flat = mt_round_up(f->flat + n, 16);
  f->numel += n;
}

/* model/gpt.c register_params for the chunks ch[0..nc) of one rank: the
 * embedding (word, + positions when learned), per layer input norm (weight
 * [+ bias]), linear_qkv [(a + 2 ng) hn / t, h] (+ bias), q/k norms [hn] each
 * (weight [+ bias]), linear_proj [h, a hn / t] (+ bias), pre-MLP norm, then
 * linear_fc1 [g f / t, h] (+ bias), linear_fc2 [h, f / t] (+ bias) or the
 * router, the local experts' fc1 [g F / etp, h] (+ bias) / fc2 [h, F / etp]
 * (+ bias) and the shared expert's fc1 [g S / t, h] (+ bias) / fc2
 * [h, S / t] (+ bias); the final norm and the output layer. Each tensor
 * starts at a 16-element aligned offset, so the order inside a layer does
 * not change the sizes; the order of dense and expert tensors gives the
 * ZeRO segments of each part. */
static void build_flat(const mt_plan_dims *d, const pchunk *ch, int nc, flat_layout *f) {
  const int64_t t = (int64_t)d->t, h = (int64_t)d->h, fl = (int64_t)(d->f / d->t);
  const int64_t hn = (int64_t)d->hn, npl = (int64_t)d->a / t, ngl = (int64_t)d->ng / t;
  const int64_t hl = npl * hn, qkvl = (npl + 2 * ngl) * hn, g = (int64_t)d->g;
  const int64_t vl = (int64_t)(d->Vp / d->t), maxpos = (int64_t)d->maxpos;
  const int64_t E = (int64_t)d->E, El = (int64_t)(d->E / d->ep), F = (int64_t)(d->fm / d->etp);
  const int64_t Sl = (int64_t)(d->S / d->t);
  const int ln = !d->rms, bias = d->bias, one_unit = d->p > 1;
  memset(f, 0, sizeof *f);
  const int pre = ch[0].pre, post = ch[nc - 1].post;
  int s = 0;
  if (pre) {
    padd(f, vl * h);
    if (d->pos_table) padd(f, maxpos * h);
    f->has_emb = 1;
    s = 1;
  }
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++, s++) {
      int moe = is_moe_layer(d, ch[k].first + lc);
      f->unit = one_unit ? 0 : s;
      f->pos = s;
      padd(f, h); /* input norm */
      if (ln) padd(f, h);
      padd(f, qkvl * h);
      if (bias) padd(f, qkvl);
      if (d->qkln)
        for (int j = 0; j < 2 * (1 + ln); j++) padd(f, hn); /* q_layernorm, k_layernorm */
      padd(f, h * hl);
      if (bias) padd(f, h);
      padd(f, h); /* pre-MLP norm */
      if (ln) padd(f, h);
      if (!moe) {
        padd(f, g * fl * h);
        if (bias) padd(f, g * fl);
        padd(f, h * fl);
        if (bias) padd(f, h);
      } else {
        padd(f, E * h); /* router */
        f->expert = 1;
        for (int64_t e = 0; e < El; e++) {
          padd(f, g * F * h);
          if (bias) padd(f, g * F);
          padd(f, h * F);
          if (bias) padd(f, h);
        }
        f->expert = 0;
        if (Sl > 0) { /* shared expert, after the routed experts */
          padd(f, g * Sl * h);
          if (bias) padd(f, g * Sl);
          padd(f, h * Sl);
          if (bias) padd(f, h);
        }
      }
    }
  if (post) {
    f->unit = one_unit ? 0 : s;
    f->pos = s;
    padd(f, h); /* final norm */
    if (ln) padd(f, h);
    if (d->untied || !pre) padd(f, vl * h); /* output layer, or the tied copy */
    f->has_head = 1;
    s++;
  }
  f->n_units = one_unit ? 1 : s;
}

/* The ZeRO segments of part k (0 dense, 1 experts) as the trainer cuts them
 * (optimizer/distrib_optimizer.c part_segments): the maximal runs of the part's
 * parameters inside each unit, from the first parameter's offset to the
 * last one's end. Fills bounds [2 np] and unit_seg [n_units + 1] (the
 * segments of unit u are unit_seg[u] .. unit_seg[u+1]-1); returns the count. */
static int part_segments(const flat_layout *f, int k, int64_t *bounds, int *unit_seg) {
  int n = 0, u = -1;
  for (int i = 0; i < f->np; i++) {
    const pparam *q = &f->p[i];
    while (u < q->unit) unit_seg[++u] = n;
    if (q->expert != k) continue;
    if (i > 0 && f->p[i - 1].unit == q->unit && n > unit_seg[u] && f->p[i - 1].expert == k) {
      bounds[2 * n - 1] = q->off + q->n;
      continue;
    }
    bounds[2 * n] = q->off;
    bounds[2 * n + 1] = q->off + q->n;
    n++;
  }
  while (u < f->n_units) unit_seg[++u] = n;
  return n;
}

/* ---- ZeRO-2/3 residency (optimizer/zero_residency.h, as optimizer/distrib_optimizer.c
 * runs it, replayed) ---- */

typedef struct {
  const double *unit_len; /* padded elements of each unit, both parts */
  mt_zero_residency R;
  double es; /* parameter element size */
  double plive, glive, ppeak, gpeak;
} zsim;

/* The working-buffer bytes of the policy's decision at step i. */
static void z_step(zsim *z, int i, int after) {
  const int n = mt_zero_residency_step(&z->R, i, after);
  for (int k = 0; k < n; k++) {
    const double len = z->unit_len[z->R.act[k].seg];
    switch (z->R.act[k].kind) {
    case MT_ZERO_FREE_PARAMS:
      z->plive -= len * z->es;
      break;
    case MT_ZERO_GATHER_PARAMS:
      z->plive += len * z->es;
      z->ppeak = fmax(z->ppeak, z->plive);
      break;
    case MT_ZERO_ALLOC_GRADS:
      z->glive += len * 4;
      z->gpeak = fmax(z->gpeak, z->glive);
      break;
    case MT_ZERO_REDUCE_GRADS:
      z->glive -= len * 4;
      break;
    }
  }
}

static void z_before(zsim *z, int i) { z_step(z, i, 0); }
static void z_after(zsim *z, int i) { z_step(z, i, 1); }

/* One training micro-batch's hook sequence (model/gpt_forward.c): unit
 * x's forward is step x, its backward step 2S-1-x; under full
 * recomputation a group of n_rc layers begins its backward steps together.
 * Every action on a unit is carried out on all its segments of both parts
 * (optimizer/distrib_optimizer.c), so a unit's working buffers are unit_len[u]
 * elements. */
static void zero_residency(const mt_plan_dims *d, const double *unit_len, const flat_layout *f,
                           int n_rc, double *param_peak, double *grad_peak) {
  zsim z;
  memset(&z, 0, sizeof z);
  z.unit_len = unit_len;
  mt_zero_residency_init(&z.R, f->n_units, d->zero, d->prefetch,
                         !d->untied && f->has_emb && f->has_head);
  z.es = d->e;
  const int S = f->n_units, e0 = f->has_emb, nl = S - f->has_emb - f->has_head;
  for (int x = 0; x < S; x++) {
    z_before(&z, x);
    z_after(&z, x);
  }
  if (f->has_head) {
    z_before(&z, S);
    z_after(&z, S);
  }
  if (d->recompute != 2) {
    for (int lc = nl - 1; lc >= 0; lc--) {
      z_before(&z, 2 * S - 1 - (e0 + lc));
      z_after(&z, 2 * S - 1 - (e0 + lc));
    }
  } else {
    int n = n_rc > 0 ? n_rc : 1;
    for (int c1 = nl; c1 > 0;) {
      int c0 = (c1 - 1) / n * n;
      for (int lc = c0; lc < c1; lc++) z_before(&z, 2 * S - 1 - (e0 + lc));
      for (int lc = c1 - 1; lc >= c0; lc--) z_after(&z, 2 * S - 1 - (e0 + lc));
      c1 = c0;
    }
  }
  if (f->has_emb) {
    z_before(&z, 2 * S - 1);
    z_after(&z, 2 * S - 1);
  }
  *param_peak = z.ppeak;
  *grad_peak = z.gpeak;
  mt_zero_residency_free(&z.R);
}

/* ---- activations ---- */

/* Local sizes of the attention tensors: npl query heads, ngl groups,
 * hl = npl hn context channels, qkvl = (npl + 2 ngl) hn qkv channels. */
typedef struct {
  double npl, ngl, hl, qkvl, fl;
} local_dims;

static local_dims local_of(const mt_plan_dims *d) {
  local_dims l;
  l.npl = d->a / d->t;
  l.ngl = d->ng / d->t;
  l.hl = l.npl * d->hn;
  l.qkvl = (l.npl + 2 * l.ngl) * d->hn;
  l.fl = d->f / d->t;
  return l;
}

/* One layer's saved tensors (model/gpt_slots.c mt_gpt_alloc_layer_acts):
 * ln1, x1, ln2 [rows_l, h]; norm statistics fp32 (mean only with
 * LayerNorm); with qk_layernorm the pre-norm qkv and its per-head
 * statistics; qkv [rows, qkvl]; the fused attention's log-sum-exp
 * [b, npl, s_loc] fp32 (not with selective: one shared buffer); ctx
 * [rows, hl]; fc1 [rows, g fl] and the activation [rows, fl]. No
 * [b, npl, s, s] probabilities: the fused attention recomputes them per
 * tile. rows = b s_loc: with context parallelism every tensor is the rank's
 * s/cp tokens and the ring keeps the lse of its tokens (two halves), so
 * nothing of a layer is replicated over CP. */
static double layer_set_bytes(const mt_plan_dims *d, int with_lse) {
  const local_dims l = local_of(d);
  const double e = d->e, rows = d->b * d->s_loc, rows_l = d->sp ? rows / d->t : rows, h = d->h;
  const double stats = d->rms ? 1 : 2; /* fp32 vectors per norm: (mean,) rstd */
  const double lse = d->b * l.npl * d->s_loc * 4;
  double bytes = 3 * rows_l * h * e + 2 * stats * rows_l * 4 + rows * l.qkvl * e +
                 rows * l.hl * e + rows * d->g * l.fl * e + rows * l.fl * e +
                 (with_lse ? lse : 0) + mt_plan_moe_set_bytes(d);
  if (d->qkln) bytes += rows * l.qkvl * e + stats * rows * (l.npl + l.ngl) * 4;
  return bytes;
}

/* One micro-batch slot of chunk c (model/gpt_slots.c slot_new). */
static double slot_bytes(const mt_plan_dims *d, const pchunk *c) {
  double e = d->e, rows = d->b * d->s_loc, rows_l = d->sp ? rows / d->t : rows;
  double b = (c->n + 1) * rows_l * d->h * e;
  if (d->recompute != 2) b += c->n * layer_set_bytes(d, d->recompute == 0);
  if (c->post)
    b += rows_l * d->h * e + (d->rms ? 1 : 2) * rows_l * 4 + rows * (d->Vp / d->t) * e +
         4 * rows * 4;
  if (c->pre || c->post) b += 2 * rows * 4;
  return b;
}

/* Most micro-batches chunk k of stage r holds at once during a training
 * step: 1F1B min(p - r, m); interleaved from the schedule itself. */
static void chunk_inflight(const mt_plan_dims *d, int r, int nc, int *out) {
  const int p = (int)d->p, v = nc, m = (int)d->m;
  for (int k = 0; k < nc; k++) out[k] = 1;
  if (p <= 1) return;
  if (v == 1) {
    out[0] = p - r < m ? p - r : m;
    return;
  }
  mt_pp_schedule s;
  char err[256];
  if (mt_pp_schedule_interleaved(&s, p, v, m, r, 0, err, sizeof err) != 0) {
    /* no valid schedule: Megatron's warm-up count spread over the chunks */
    double w = fmin(2.0 * (p - r - 1) + (v - 1.0) * p + 1, (double)m * v);
    for (int k = 0; k < nc; k++) out[k] = (int)ceil(w / v);
    return;
  }
  int *cur = calloc((size_t)v, sizeof(int));
  for (int k = 0; k < v; k++) out[k] = 0;
  for (int i = 0; i < s.n_actions; i++) {
    const mt_pp_action *a = &s.actions[i];
    if (a->fwd) {
      if (++cur[a->chunk] > out[a->chunk]) out[a->chunk] = cur[a->chunk];
    } else {
      cur[a->chunk]--;
    }
  }
  free(cur);
  mt_pp_schedule_free(&s);
}

/* Context parallelism: the ring attention's buffers, shared by all layers
 * (model/context_parallel.c mt_cp_attn_workspace_bytes): with one K/V block
 * KV = s_loc b ngl 2 hn, five blocks (two K/V in flight, two dK/dV in flight,
 * the local dK/dV partial), the dQ/dK/dV gather source [s_loc b qkvl], one
 * chunk's partial ctx [s_loc/2 b hl] in T and its lse in fp32, and the K/V
 * pack and unpack index tables (int32). 0 without CP. */
static double cp_ring_bytes(const mt_plan_dims *d) {
  if (d->c <= 1) return 0;
  const local_dims l = local_of(d);
  const double sb = d->s_loc * d->b, kv = sb * l.ngl * 2 * d->hn, half = d->s_loc / 2;
  return (5 * kv + sb * l.qkvl + half * d->b * l.hl) * d->e + half * d->b * l.npl * 4 +
         (sb * l.ngl * 2 + sb * (l.npl + 2 * l.ngl)) * 4;
}

/* mt_pp_run's look-ahead receive buffers on stage r (overlap_p2p_comm):
 * the most of its training and forward-only schedules; 2 (the most it
 * allocates) when no valid schedule exists. */
static int ahead_buffers(const mt_plan_dims *d, int r, int nc) {
  const int p = (int)d->p, m = (int)d->m;
  int most = 0;
  for (int fo = 0; fo < 2; fo++) {
    mt_pp_schedule s;
    char err[256];
    const int built = nc > 1 ? mt_pp_schedule_interleaved(&s, p, nc, m, r, fo, err, sizeof err)
                             : mt_pp_schedule_1f1b(&s, p, m, r, fo, err, sizeof err);
    if (built != 0) return 2;
    const int n = mt_pp_ahead_buffers(p, nc, r, &s);
    most = n > most ? n : most;
    mt_pp_schedule_free(&s);
  }
  return most;
}

void mt_plan_stage_memory(const mt_config *cfg, const mt_plan_dims *d, int r, double out[MT_PM_N],
                          mt_plan_stage_info *info) {
  const int v = (int)d->v;
  pchunk *ch = mt_xcalloc((size_t)v, sizeof(pchunk));
  const int nc = stage_chunks(cfg, r, ch);
  flat_layout f;
  build_flat(d, ch, nc, &f);
  memset(out, 0, sizeof(double) * MT_PM_N);
  memset(info, 0, sizeof *info);
  const double e = d->e, flat = (double)f.flat;
  const double master = e < 4 ? 1 : 0;
  int maxn = 0, n_layers = 0;
  for (int k = 0; k < nc; k++) {
    maxn = ch[k].n > maxn ? ch[k].n : maxn;
    n_layers += ch[k].n;
  }
  const int n_rc = d->rc_layers < maxn ? d->rc_layers : maxn;

  /* model state */
  if (d->zero == 0) {
    out[MT_PM_PARAM] = flat * e;
    out[MT_PM_GRAD] = flat * 4;
    out[MT_PM_OPTIM] = flat * 4 * (2 + master);
  } else {
    /* two parts (optimizer/distrib_optimizer.c): the dense parameters sharded
     * over dp x cp, the experts over edp, each with its own layout of its
     * segments and its own shard buffers (Adam m, v, the fp32 master under
     * bf16, the stage-2/3 gradient shard, the stage-3 parameter shard) */
    int64_t *bounds = mt_xcalloc((size_t)2 * f.np + 2, sizeof(int64_t));
    int *useg = mt_xcalloc((size_t)f.n_units + 1, sizeof(int));
    double *ulen = mt_xcalloc((size_t)f.n_units, sizeof(double));
    double sn = 0, comm = 0;
    for (int k = 0; k < 2; k++) {
      const int n_seg = part_segments(&f, k, bounds, useg);
      if (n_seg == 0) continue; /* no expert parameters on this rank */
      mt_zero_layout L;
      mt_zero_layout_build(&L, bounds, n_seg, f.flat, d->bucket > 0 ? (int64_t)d->bucket : 0,
                           (int)(k ? d->edp : d->d * d->c), 0);
      sn += (double)L.shard_numel;
      for (int u = 0; u < f.n_units; u++)
        for (int x = useg[u]; x < useg[u + 1]; x++) ulen[u] += (double)L.seg[x].padded_len;
      if (d->zero <= 2 && L.padding > 0) comm += (double)L.max_bucket_padded * 4;
      info->shard_numel += L.shard_numel;
      info->zero_padding += L.padding;
      mt_zero_layout_free(&L);
    }
    double pwork = 0, gwork = 0;
    if (d->zero >= 2) zero_residency(d, ulen, &f, n_rc, &pwork, &gwork);
    out[MT_PM_PARAM] = d->zero == 3 ? sn * e + pwork : flat * e;
    out[MT_PM_GRAD] = d->zero == 1 ? flat * 4 : sn * 4 + gwork;
    out[MT_PM_OPTIM] = sn * 4 * (2 + master);
    out[MT_PM_COMM] += comm;
    free(bounds);
    free(useg);
    free(ulen);
  }

  /* activations */
  const double rows = d->b * d->s_loc, rows_l = d->sp ? rows / d->t : rows;
  int *infl = mt_xcalloc((size_t)nc, sizeof(int));
  chunk_inflight(d, r, nc, infl);
  double act = 0, layer_mb = 0;
  int sends_grad = 0;
  for (int k = 0; k < nc; k++) {
    act += infl[k] * slot_bytes(d, &ch[k]);
    layer_mb += (double)infl[k] * ch[k].n;
    sends_grad |= !(k == 0 && r == 0);
  }
  if (d->recompute == 1) act += d->b * (d->a / d->t) * d->s_loc * 4; /* lse_shared (fp32) */
  if (d->recompute == 2) act += n_rc * layer_set_bytes(d, 1);
  out[MT_PM_ACT] = act;
  info->inflight_layers = layer_mb;
  info->act_layer_bytes =
      rows_l * d->h * e + (d->recompute == 2 ? 0 : layer_set_bytes(d, d->recompute == 0));
  free(infl);

  /* pipeline: one pooled gradient send buffer [s/t_sp, b, h]; with
   * overlap_p2p_comm the receives posted ahead (the training or the
   * evaluation schedule, whichever needs more) */
  if (d->p > 1 && sends_grad) out[MT_PM_COMM] += rows_l * d->h * e;
  if (d->p > 1 && cfg->parallel.overlap_p2p_comm)
    out[MT_PM_COMM] += ahead_buffers(d, r, nc) * rows_l * d->h * e;

  /* workspaces (model/gpt.c alloc_buffers, model/moe_layer.c mt_moe_create):
   * tmp_h, dresid, dtmp_h [rows_l, h]; dqkv [rows, qkvl] (+ dqkv2 with
   * qk_layernorm); dctx [rows, hl]; dffn [rows, g fl] (+ dact [rows, fl]
   * with SwiGLU; both sized for max(ffn, S)); with t > 1 the gather and gradient [rows, h] buffers */
  const local_dims l = local_of(d);
  const double h = d->h;
  const double fw = mt_plan_mlp_ws_width(d); /* dense MLP or shared expert */
  double ws = (3 * rows_l * h + (1 + d->qkln) * rows * l.qkvl + rows * l.hl +
               rows * d->g * fw + d->swiglu * rows * fw) * e;
  if (d->t > 1) ws += 2 * rows * h * e;
  ws += mt_plan_moe_workspace_bytes(d);
  ws += cp_ring_bytes(d);
  out[MT_PM_WORKSPACE] = ws;
  info->flat_numel = f.flat;
  info->params = f.numel;
  info->n_layers = n_layers;
  free(f.p);
  free(ch);
}

/* ---- gradient buckets for the overlap model (planner/plan_overlap.c) ---- */

int mt_plan_stage_buckets(const mt_config *cfg, const mt_plan_dims *d, int r,
                          mt_plan_bucket **out, int *n_pos) {
  pchunk *ch = mt_xcalloc((size_t)cfg->parallel.virtual_pipeline_model_parallel_size + 1,
                          sizeof *ch);
  const int nc = stage_chunks(cfg, r, ch);
  flat_layout f;
  build_flat(d, ch, nc, &f);
  free(ch);
  *n_pos = f.np ? f.p[f.np - 1].pos + 1 : 0;
  int n = 0, cap = 0;
  mt_plan_bucket *b = NULL;
  for (int k = 0; k < 2; k++) { /* dense, experts */
    const double N = k ? d->edp : d->d * d->c;
    if (N <= 1) continue;
    int64_t *bounds = mt_xcalloc((size_t)2 * f.np + 2, sizeof(int64_t));
    int *useg = mt_xcalloc((size_t)f.n_units + 2, sizeof(int));
    int n_seg = 0;
    if (d->zero > 0) {
      n_seg = part_segments(&f, k, bounds, useg);
    } else {
      /* parallel/ddp.h's ranges (trainer/train_ddp.c): maximal runs of dense
       * or expert parameters over the whole flat buffer, cut into
       * ddp_bucket_size buckets from each run's start (mt_ddp_buffer_build
       * needs live groups, so its 4-line cut is repeated here) */
      for (int i = 0; i < f.np; i++) {
        if (f.p[i].expert != k) continue;
        if (n_seg && i > 0 && f.p[i - 1].expert == k) {
          bounds[2 * n_seg - 1] = i + 1 < f.np ? f.p[i + 1].off : f.flat;
          continue;
        }
        bounds[2 * n_seg] = f.p[i].off;
        bounds[2 * n_seg + 1] = i + 1 < f.np ? f.p[i + 1].off : f.flat;
        n_seg++;
      }
    }
    mt_zero_layout L;
    memset(&L, 0, sizeof L);
    if (n_seg && d->zero > 0)
      mt_zero_layout_build(&L, bounds, n_seg, f.flat, d->bucket > 0 ? (int64_t)d->bucket : 0,
                           (int)N, 0);
    for (int s = 0, j = 0; s < n_seg; s++) {
      const int64_t bs = d->bucket > 0 ? (int64_t)d->bucket : f.flat;
      const int64_t a = bounds[2 * s], e = bounds[2 * s + 1];
      for (int64_t off = a; off < e; j++) {
        int64_t lo = off, len;
        if (d->zero > 0) {
          lo = L.bkt[j].flat_start;
          len = L.bkt[j].shard_len * (int64_t)N; /* padded */
          off = lo + L.bkt[j].len;
        } else {
          len = e - off < bs ? e - off : bs;
          off += len;
        }
        const int64_t hi = lo + (d->zero > 0 ? L.bkt[j].len : len);
        if (n == cap) {
          cap = cap ? 2 * cap : 16;
          b = mt_xrealloc(b, (size_t)cap * sizeof *b);
        }
        mt_plan_bucket *q = &b[n++];
        q->elems = (double)len;
        q->expert = k;
        q->lo_pos = q->hi_pos = -1;
        for (int i = 0; i < f.np; i++) {
          if (f.p[i].off + f.p[i].n <= lo || f.p[i].off >= hi) continue;
          if (q->lo_pos < 0) q->lo_pos = f.p[i].pos;
          q->hi_pos = f.p[i].pos;
        }
      }
    }
    if (d->zero > 0 && n_seg) mt_zero_layout_free(&L);
    free(bounds);
    free(useg);
  }
  free(f.p);
  *out = b;
  return n;
}
