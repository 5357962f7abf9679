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

void mt_plan_stage_layer_counts(const mt_config *cfg, const mt_plan_dims *d, int r, int *n_layers,
                                int *n_moe) {
  mt_plan_chunk *ch = mt_xcalloc((size_t)d->v, sizeof(mt_plan_chunk));
  const int nc = mt_plan_stage_chunks(cfg, r, ch);
  *n_layers = *n_moe = 0;
  for (int k = 0; k < nc; k++)
    for (int lc = 0; lc < ch[k].n; lc++) {
      (*n_layers)++;
      *n_moe += d->E > 0 && mt_plan_is_moe_layer(d, ch[k].first + lc);
    }
  free(ch);
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
static void zero_residency(const mt_plan_dims *d, const double *unit_len, const mt_plan_flat *f,
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
  if (d->mla) { /* the fused attention's input per head: q, k of dn + dr, v of dv */
    l.ngl = l.npl;
    l.hl = l.npl * d->dv;
    l.qkvl = l.npl * (2 * (d->dn + d->dr) + d->dv);
  }
  l.fl = d->f / d->t;
  return l;
}

/* Multi-latent attention's own tensors of one layer set (the MLA layer's
 * design on branch mla31, model/gpt_mla_setup.c mt_gpt_mla_alloc_acts;
 * Megatron's MLASelfAttention saves the same latents): the latents of this
 * rank's rows_l rows, q_c [rows_l, qr] and kv_c [rows_l, kr], with
 * qk_layernorm also the normalised copies and the norms' statistics. */
static double mla_set_bytes(const mt_plan_dims *d) {
  if (!d->mla) return 0;
  const double rows_l = d->sp ? d->b * d->s_loc / d->t : d->b * d->s_loc;
  const double stats = d->qkln ? (d->rms ? 1 : 2) : 0, copies = d->qkln ? 2 : 1;
  double b = (copies * rows_l * d->kr * d->e + stats * rows_l * 4);
  if (d->qr > 0) b += copies * rows_l * d->qr * d->e + stats * rows_l * 4;
  return b;
}

/* Multi-latent attention's workspaces (branch mla31, model/gpt_mla_setup.c
 * mt_gpt_mla_create): the staging buffer W = [Q | KV | KPE | R'] (rows
 * [npl hq + npl (dn + dv) + dr + 3 npl dr]), dKPE [rows, dr], the rank's
 * k_pe [rows_l, dr], the latents' gradients [rows_l, kr] x 2 and
 * [rows_l, qr] x 2, the index tables (int32, units of u = gcd(dn, dr, dv)
 * channels), and m->ws.dqkv's extra 3 npl dr per row for dR'. */
static double mla_workspace_bytes(const mt_plan_dims *d) {
  if (!d->mla) return 0;
  const double rows = d->b * d->s_loc, rows_l = d->sp ? rows / d->t : rows, npl = d->a / d->t;
  const double hq = d->dn + d->dr, qkvl = npl * (2 * hq + d->dv);
  int64_t u = (int64_t)d->dn, x = (int64_t)d->dr;
  while (x) { const int64_t r = u % x; u = x; x = r; }
  x = (int64_t)d->dv;
  while (x) { const int64_t r = u % x; u = x; x = r; }
  const double stage = rows * (npl * hq + npl * (d->dn + d->dv) + d->dr + 3 * npl * d->dr);
  double el = stage + rows * d->dr + rows_l * d->dr + 2 * rows_l * d->kr +
              (d->qr > 0 ? 2 * rows_l * d->qr : 0) + rows * 3 * npl * d->dr;
  const double idx = 2 * rows * npl * 3 * d->dr / u + rows * qkvl / u +
                     rows * npl * (hq + d->dn + d->dv) / u + rows * d->dr / u * npl;
  return el * d->e + idx * 4;
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
                 (with_lse ? lse : 0) + mt_plan_moe_set_bytes(d) + mla_set_bytes(d);
  if (d->qkln && !d->mla) bytes += rows * l.qkvl * e + stats * rows * (l.npl + l.ngl) * 4;
  return bytes;
}

/* One micro-batch slot of chunk c (model/gpt_slots.c slot_new). */
static double slot_bytes(const mt_plan_dims *d, const mt_plan_chunk *c) {
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
  mt_plan_chunk *ch = mt_xcalloc((size_t)v, sizeof(mt_plan_chunk));
  const int nc = mt_plan_stage_chunks(cfg, r, ch);
  mt_plan_flat f;
  mt_plan_build_flat(d, ch, nc, &f);
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
      const int n_seg = mt_plan_part_segments(&f, k, bounds, useg);
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
  double ws = (3 * rows_l * h + (1 + (d->qkln && !d->mla)) * rows * l.qkvl + rows * l.hl +
               rows * d->g * fw + d->swiglu * rows * fw) * e;
  /* with t > 1 the gather and gradient buffers, MLA's as wide as its widest latent */
  const double gw = d->mla ? fmax(h, fmax(d->qr, d->kr)) : h;
  if (d->t > 1) ws += 2 * rows * gw * e;
  ws += mla_workspace_bytes(d);
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
  mt_plan_chunk *ch = mt_xcalloc((size_t)cfg->parallel.virtual_pipeline_model_parallel_size + 1,
                          sizeof *ch);
  const int nc = mt_plan_stage_chunks(cfg, r, ch);
  mt_plan_flat f;
  mt_plan_build_flat(d, ch, nc, &f);
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
      n_seg = mt_plan_part_segments(&f, k, bounds, useg);
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
