/* planner/plan_stage.c — the memory of one rank of one pipeline stage,
 * allocation by allocation, as this implementation makes it during training
 * (docs/planner.md "Validation against the allocator"):
 *
 *  - the parameter registry of the stage (model/gpt.c register_params:
 *    registration order, 16-element aligned offsets, the last stage's copy
 *    of a tied word embedding) gives the flat parameter/gradient buffers;
 *  - ZeRO: the exact shard layout (parallel/zero.h mt_zero_layout_build on
 *    the trainer's segments, trainer/zero_optimizer.c) and a replay of the
 *    stage-2/3 residency policy (parallel/zero.h mt_zero_residency, which
 *    trainer/zero_hooks.c carries out) over one micro-batch's
 *    hook sequence (model/gpt_forward.c, full recomputation included) for the
 *    gathered-parameter and gradient working-buffer peaks;
 *  - activations: one slot per micro-batch in flight per model chunk
 *    (model/gpt_slots.c slot_new), the in-flight count of each chunk taken
 *    from the pipeline schedule itself (parallel/pipeline.h), plus the shared
 *    selective/full recomputation buffers (model/gpt.c alloc_buffers);
 *  - workspaces: the model's and the MoE layer's scratch buffers (the CPU
 *    backend's own op scratch is not predicted);
 *  - communication: the ZeRO padding scratch and one pipeline gradient send
 *    buffer (more only when sends are slow to complete).
 * Pure arithmetic: builds no model and calls no backend.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "parallel/pipeline.h"
#include "parallel/zero.h"
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

/* ---- the flat parameter buffer and the ZeRO segments ---- */

typedef struct {
  int64_t flat;     /* elements of the flat buffers (aligned offsets) */
  int64_t numel;    /* parameter elements (no alignment) */
  int64_t *bounds;  /* [2 n_seg]: embedding, local layers, head */
  int n_seg, has_emb, has_head;
  int64_t last_end; /* end of the last parameter */
} flat_layout;

static int64_t padd(flat_layout *f, int64_t n) {
  int64_t off = f->flat;
  f->flat = mt_round_up(f->flat + n, 16);
  f->numel += n;
  f->last_end = off + n;
  return off;
}

/* model/gpt.c register_params for the chunks ch[0..nc) of one rank: the
 * embedding (word, + positions when learned), per layer input norm (weight
 * [+ bias]), linear_qkv [(a + 2 ng) hn / t, h] (+ bias), q/k norms [hn] each
 * (weight [+ bias]), linear_proj [h, a hn / t] (+ bias), pre-MLP norm, then
 * linear_fc1 [g f / t, h] (+ bias), linear_fc2 [h, f / t] (+ bias) or the
 * router and the local experts' fc1/fc2; the final norm and the output
 * layer. Each tensor starts at a 16-element aligned offset, so the order
 * inside a layer does not change the sizes. */
static void build_flat(const mt_plan_dims *d, const pchunk *ch, int nc, flat_layout *f) {
  const int64_t t = (int64_t)d->t, h = (int64_t)d->h, fl = (int64_t)(d->f / d->t);
  const int64_t hn = (int64_t)d->hn, npl = (int64_t)d->a / t, ngl = (int64_t)d->ng / t;
  const int64_t hl = npl * hn, qkvl = (npl + 2 * ngl) * hn, g = (int64_t)d->g;
  const int64_t vl = (int64_t)(d->Vp / d->t), maxpos = (int64_t)d->maxpos;
  const int64_t E = (int64_t)d->E, El = (int64_t)(d->E / d->ep), F = (int64_t)(d->fm / d->etp);
  const int ln = !d->rms, bias = d->bias;
  int n_layers = 0;
  for (int k = 0; k < nc; k++) n_layers += ch[k].n;
  memset(f, 0, sizeof *f);
  f->bounds = mt_xcalloc((size_t)2 * (n_layers + 2), sizeof(int64_t));
  const int pre = ch[0].pre, post = ch[nc - 1].post;
  int s = 0;
  if (pre) {
    f->bounds[0] = padd(f, vl * h);
    if (d->pos_table) padd(f, maxpos * h);
    f->bounds[1] = f->last_end;
    f->has_emb = 1;
    s = 1;
  }
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++, s++) {
      int moe = is_moe_layer(d, ch[k].first + lc);
      f->bounds[2 * s] = padd(f, h); /* input norm */
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
        for (int64_t e = 0; e < El; e++) {
          padd(f, g * F * h);
          if (bias) padd(f, g * F);
          padd(f, h * F);
          if (bias) padd(f, h);
        }
      }
      f->bounds[2 * s + 1] = f->last_end;
    }
  if (post) {
    f->bounds[2 * s] = padd(f, h); /* final norm */
    if (ln) padd(f, h);
    if (d->untied || !pre) padd(f, vl * h); /* output layer, or the tied copy */
    f->bounds[2 * s + 1] = f->last_end;
    f->has_head = 1;
    s++;
  }
  f->n_seg = s;
}

/* ---- ZeRO-2/3 residency (parallel/zero.h's policy, as trainer/zero_hooks.c
 * runs it, replayed) ---- */

typedef struct {
  const mt_zero_layout *L;
  mt_zero_residency R;
  double es; /* parameter element size */
  double plive, glive, ppeak, gpeak;
} zsim;

/* The working-buffer bytes of the policy's decision at step i. */
static void z_step(zsim *z, int i, int after) {
  const int n = mt_zero_residency_step(&z->R, i, after);
  for (int k = 0; k < n; k++) {
    const double len = (double)z->L->seg[z->R.act[k].seg].padded_len;
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

/* One training micro-batch's hook sequence (model/gpt_forward.c): segment
 * x's forward is step x, its backward step 2S-1-x; under full
 * recomputation a group of n_rc layers begins its backward steps together. */
static void zero_residency(const mt_plan_dims *d, const mt_zero_layout *L, const flat_layout *f,
                           int n_rc, double *param_peak, double *grad_peak) {
  zsim z;
  memset(&z, 0, sizeof z);
  z.L = L;
  mt_zero_residency_init(&z.R, L->n_seg, d->zero, d->prefetch,
                         !d->untied && f->has_emb && f->has_head);
  z.es = d->e;
  const int S = L->n_seg, e0 = f->has_emb, nl = S - f->has_emb - f->has_head;
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

/* Routing state of one layer set (model/moe_layer.c mt_moe_acts_create;
 * the experts' fc1 [r_max, g F] and activation [r_max, F]). */
static double moe_set_bytes(const mt_plan_dims *d, double rows_l) {
  if (d->E <= 0) return 0;
  double e = d->e, k = d->topk, smax = rows_l * k, rmax = smax * d->ep, F = d->fm / d->etp;
  return fmax(rows_l * k, 1) * 4 * 2 + fmax(smax, 1) * 4 + fmax(rmax * d->h, 1) * e +
         fmax(rmax * d->g * F, 1) * e + fmax(rmax * F, 1) * e + fmax(smax * d->h, 1) * e;
}

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
                 (with_lse ? lse : 0) + moe_set_bytes(d, rows_l);
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
    /* the trainer's segments: one per stage with pipelines (stage 1 only),
     * else embedding, layers, head */
    int64_t one[2] = {0, f.last_end};
    int seg_pp = d->p > 1 && d->zero == 1;
    mt_zero_layout L;
    mt_zero_layout_build(&L, seg_pp ? one : f.bounds, seg_pp ? 1 : f.n_seg, f.flat,
                         d->bucket > 0 ? (int64_t)d->bucket : 0, (int)(d->d * d->c), 0);
    const double sn = (double)L.shard_numel;
    double pwork = 0, gwork = 0;
    if (d->zero >= 2) zero_residency(d, &L, &f, n_rc, &pwork, &gwork);
    out[MT_PM_PARAM] = d->zero == 3 ? sn * e + pwork : flat * e;
    out[MT_PM_GRAD] = d->zero == 1 ? flat * 4 : sn * 4 + gwork;
    out[MT_PM_OPTIM] = sn * 4 * (2 + master);
    if (d->zero <= 2 && L.padding > 0) out[MT_PM_COMM] += (double)L.max_bucket_padded * 4;
    info->shard_numel = L.shard_numel;
    info->zero_padding = L.padding;
    mt_zero_layout_free(&L);
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

  /* pipeline: one pooled gradient send buffer [s/t_sp, b, h] */
  if (d->p > 1 && sends_grad) out[MT_PM_COMM] += rows_l * d->h * e;

  /* workspaces (model/gpt.c alloc_buffers, model/moe_layer.c mt_moe_create):
   * tmp_h, dresid, dtmp_h [rows_l, h]; dqkv [rows, qkvl] (+ dqkv2 with
   * qk_layernorm); dctx [rows, hl]; dffn [rows, g fl] (+ dact [rows, fl]
   * with SwiGLU); with t > 1 the gather and gradient [rows, h] buffers */
  const local_dims l = local_of(d);
  const double h = d->h;
  double ws = (3 * rows_l * h + (1 + d->qkln) * rows * l.qkvl + rows * l.hl +
               rows * d->g * l.fl + d->swiglu * rows * l.fl) * e;
  if (d->t > 1) ws += 2 * rows * h * e;
  if (d->E > 0) {
    double k = d->topk, smax = rows_l * k, rmax = smax * d->ep, F = d->fm / d->etp, E = d->E;
    /* router logits: local, gathered over the whole micro-batch (SP: TP,
     * then CP; model/moe_layer.c logits_full) and the TP-gathered stage with
     * both */
    const int gtp = rows_l < rows, gcp = d->c > 1;
    ws += fmax(rows_l * E, 1) * 4 + (gtp || gcp ? fmax(rows * d->c * E, 1) * 4 : 0) +
          (gtp && gcp ? fmax(rows * E, 1) * 4 : 0) +
          (3 * fmax(smax * h, 1) + 3 * fmax(rmax * h, 1) + fmax(rmax * d->g * F, 1) +
           (d->swiglu ? fmax(rmax * F, 1) : 0)) * e +
          fmax(rows_l * k, 1) * 4 + fmax(rows_l * E, 1) * 4 + (e < 4 ? fmax(rows_l * E, 1) * e : 0);
  }
  ws += cp_ring_bytes(d);
  out[MT_PM_WORKSPACE] = ws;
  info->flat_numel = f.flat;
  info->params = f.numel;
  info->n_layers = n_layers;
  free(f.bounds);
  free(ch);
}
