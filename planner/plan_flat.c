/* planner/plan_flat.c — one pipeline stage's model chunks and its flat
 * parameter/gradient buffer as model/gpt_register.c lays it out (offsets,
 * ZeRO units and parts), and the ZeRO segments the trainer cuts from it:
 * the layout half of plan_stage.c's memory model (docs/planner.md
 * "Validation against the allocator"). Pure arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "planner/plan_internal.h"

int mt_plan_stage_chunks(const mt_config *cfg, int r, mt_plan_chunk *ch) {
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
    ch[0] = (mt_plan_chunk){first,
                            (r == 0 && nf > 0) ? nf : (r == p - 1 && nl > 0) ? nl : share,
                            r == 0, r == p - 1};
    return 1;
  }
  const int per = L / (p * v);
  for (int k = 0; k < v; k++) {
    int g = k * p + r;
    ch[k] = (mt_plan_chunk){g * per, per, g == 0, g == p * v - 1};
  }
  return v;
}

static void padd(mt_plan_flat *f, int64_t n) {
  if (f->np == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 256;
    f->p = mt_xrealloc(f->p, (size_t)f->cap * sizeof *f->p);
  }
  f->p[f->np++] = (mt_plan_param){f->flat, n, f->unit, f->expert, f->pos};
  f->flat = mt_round_up(f->flat + n, 16);
  f->numel += n;
}

/* Multi-latent attention's projections on one TP rank (model/gpt_mla_setup.c,
 * Megatron-core's MLASelfAttention, no biases): linear_q_proj [npl (dn + dr),
 * h] or linear_q_down_proj [qr, h] (replicated), q_layernorm [qr] (weight
 * [+ bias], with qk_layernorm), linear_q_up_proj [npl (dn + dr), qr];
 * linear_kv_down_proj [kr + dr, h] (replicated), kv_layernorm [kr],
 * linear_kv_up_proj [npl (dn + dv), kr]. */
static void mla_add(mt_plan_flat *f, const mt_plan_dims *d) {
  const int64_t h = (int64_t)d->h, npl = (int64_t)(d->a / d->t), qr = (int64_t)d->qr;
  const int64_t kr = (int64_t)d->kr, dn = (int64_t)d->dn, dr = (int64_t)d->dr;
  const int64_t dv = (int64_t)d->dv, norms = d->qkln ? (d->rms ? 1 : 2) : 0;
  if (qr > 0) {
    padd(f, qr * h);
    for (int64_t j = 0; j < norms; j++) padd(f, qr);
    padd(f, npl * (dn + dr) * qr);
  } else {
    padd(f, npl * (dn + dr) * h);
  }
  padd(f, (kr + dr) * h);
  for (int64_t j = 0; j < norms; j++) padd(f, kr);
  padd(f, npl * (dn + dv) * kr);
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
void mt_plan_build_flat(const mt_plan_dims *d, const mt_plan_chunk *ch, int nc, mt_plan_flat *f) {
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
      int moe = mt_plan_is_moe_layer(d, ch[k].first + lc);
      f->unit = one_unit ? 0 : s;
      f->pos = s;
      padd(f, h); /* input norm */
      if (ln) padd(f, h);
      if (d->mla) {
        mla_add(f, d);
      } else {
        padd(f, qkvl * h);
        if (bias) padd(f, qkvl);
        if (d->qkln)
          for (int j = 0; j < 2 * (1 + ln); j++) padd(f, hn); /* q_layernorm, k_layernorm */
      }
      padd(f, h * (d->mla ? npl * (int64_t)d->dv : hl)); /* linear_proj */
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
int mt_plan_part_segments(const mt_plan_flat *f, int k, int64_t *bounds, int *unit_seg) {
  int n = 0, u = -1;
  for (int i = 0; i < f->np; i++) {
    const mt_plan_param *q = &f->p[i];
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
