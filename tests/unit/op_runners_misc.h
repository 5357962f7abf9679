/* tests/unit/op_runners_misc.h — op-case runners (op_harness.h) for
 * dropout, elementwise ops and reductions, the MoE row ops, AdamW and
 * initialisation / fill / cast, each with a double-precision reference; the
 * attention descriptor of the fused-attention runners (op_runners_flash.h). */
#ifndef MT_TESTS_OP_RUNNERS_MISC_H
#define MT_TESTS_OP_RUNNERS_MISC_H

#include "op_runners_dense.h"

static const int64_t ot_sample_ids[4] = {3, 17, 8, 1};

/* attention (op_runners_flash.h): ne = {s, b, np, hn}; ip[0] = ng (query groups, 0 = np: the
 * qkv layout [s, b, ng, np/ng + 2, hn]); fp[0] = dropout p; head_offset 2 of
 * np + 5 heads. */
static mt_attn_desc ot_attn_desc(const op_case *c) {
  int hn = (int)c->ne[3];
  mt_attn_desc d = {.s = (int)c->ne[0], .b = (int)c->ne[1], .np = (int)c->ne[2], .hn = hn,
                    .ng = c->ip[0], .head_offset = 2, .n_heads_total = (int)c->ne[2] + 5,
                    .scale = 1.0f / sqrtf((float)hn), .dropout_p = c->fp[0],
                    .key = mt_rng_key(42, "attention_dropout", 1, 0), .sample_ids = ot_sample_ids};
  return d;
}

/* dropout: ne = {s, b, h}; ip = {s_offset, s_full, h_offset, h_full};
 * fp = {p, unit}: unit = 1 uses x = dout = 1 and residual = 0, so the
 * output is the scaled mask, exactly 1/(1-p) or 0 at the documented counter
 * (and the keep fraction must be 1-p within 0.01 for large shapes). */
static mt_dropout_desc ot_drop_desc(const op_case *c) {
  mt_dropout_desc d = {.p = c->fp[0], .key = mt_rng_key(9, "hidden_dropout.mlp", 5, 0),
                       .s = (int)c->ne[0], .b = (int)c->ne[1], .h = (int)c->ne[2],
                       .s_offset = c->ip[0], .s_full = c->ip[1], .h_offset = c->ip[2],
                       .h_full = c->ip[3], .sample_ids = ot_sample_ids};
  return d;
}

static double *ot_drop_scale(ot_run *r, const mt_dropout_desc *d) {
  int64_t n = (int64_t)d->s * d->b * d->h, kept = 0;
  double *m = ot_dbl(n);
  const float inv = 1.0f / (1.0f - d->p);
  for (int si = 0; si < d->s; si++)
    for (int bi = 0; bi < d->b; bi++)
      for (int hi = 0; hi < d->h; hi++) {
        uint64_t ctr = ((uint64_t)d->sample_ids[bi] * d->s_full + d->s_offset + si) * d->h_full + d->h_offset + hi;
        int64_t i = ((int64_t)si * d->b + bi) * d->h + hi;
        m[i] = d->p == 0.0f ? 1.0 : mt_rng_uniform(d->key, ctr) >= d->p ? inv : 0.0;
        kept += m[i] != 0.0;
      }
  if (n >= 10000 && fabs((double)kept / n - (1.0 - d->p)) > 0.01)
    ot_failf(r, "keep fraction %.4f, want %.2f", (double)kept / n, 1.0 - d->p);
  return m;
}

/* dropout_add_fwd: output "out" = residual + dropout(x); out aliasing the
 * residual must give bitwise the same result. */
static void ot_run_dropout_add_fwd(ot_run *r) {
  mt_dropout_desc d = ot_drop_desc(r->c);
  int64_t n = (int64_t)d.s * d.b * d.h;
  int unit = r->c->fp[1] != 0.0f;
  ot_t *x = ot_rnd(r, n, r->T, -1, 1), *res = ot_rnd(r, n, r->T, -1, 1), *y = ot_rnd(r, n, r->T, -1, 1);
  if (unit) {
    for (int64_t i = 0; i < n; i++) x->h[i] = 1.0f, res->h[i] = 0.0f;
    ot_put(r, x), ot_put(r, res);
  }
  r->be->ops->dropout_add_fwd(r->be, &d, y->d, x->d, res->d);
  double *m = ot_drop_scale(r, &d);
  for (int64_t i = 0; i < n; i++) m[i] = unit ? m[i] : res->h[i] + x->h[i] * m[i];
  ot_output(r, "out", y, m, NULL);
  r->be->ops->dropout_add_fwd(r->be, &d, res->d, x->d, res->d); /* out aliases residual */
  float *a = ot_get(r, res), *b = ot_get(r, y);
  if (memcmp(a, b, (size_t)n * 4)) ot_failf(r, "out aliasing residual is not bitwise the same");
  free(a), free(b);
}

/* dropout_bwd: output "dx" = mask * dout / (1 - p), regenerated from the
 * key; dx aliasing dout must give bitwise the same result. */
static void ot_run_dropout_bwd(ot_run *r) {
  mt_dropout_desc d = ot_drop_desc(r->c);
  int64_t n = (int64_t)d.s * d.b * d.h;
  ot_t *g = ot_rnd(r, n, r->T, -1, 1), *dx = ot_rnd(r, n, r->T, -1, 1);
  if (r->c->fp[1] != 0.0f) {
    for (int64_t i = 0; i < n; i++) g->h[i] = 1.0f;
    ot_put(r, g);
  }
  r->be->ops->dropout_bwd(r->be, &d, dx->d, g->d);
  double *m = ot_drop_scale(r, &d);
  for (int64_t i = 0; i < n; i++) m[i] = r->c->fp[1] != 0.0f ? m[i] : g->h[i] * m[i];
  ot_output(r, "dx", dx, m, NULL);
  r->be->ops->dropout_bwd(r->be, &d, g->d, g->d);
  float *a = ot_get(r, g), *b = ot_get(r, dx);
  if (memcmp(a, b, (size_t)n * 4)) ot_failf(r, "dx aliasing dout is not bitwise the same");
  free(a), free(b);
}

/* add / axpy_f32 / scale_f32: ne = {n}; fp[0] = alpha; outputs "out"
 * (add: a + b, also with out aliasing a), "y" (axpy: y + alpha x), "x"
 * (scale: alpha x), each the float expression, bitwise on cpu. */
static void ot_run_elementwise(ot_run *r) {
  int64_t n = r->c->ne[0];
  const mt_backend_ops *op = r->be->ops;
  float al = r->c->fp[0];
  ot_t *a = ot_rnd(r, n, r->T, -1, 1), *b = ot_rnd(r, n, r->T, -1, 1), *o = ot_rnd(r, n, r->T, -1, 1);
  ot_t *x = ot_rnd(r, n, MT_F32, -1, 1), *y = ot_rnd(r, n, MT_F32, -1, 1), *z = ot_rnd(r, n, MT_F32, -1, 1);
  double *wo = ot_dbl(n), *wy = ot_dbl(n), *wz = ot_dbl(n);
  for (int64_t i = 0; i < n; i++) {
    float s = a->h[i] + b->h[i], t = y->h[i] + al * x->h[i], u = z->h[i] * al;
    wo[i] = s, wy[i] = t, wz[i] = u;
  }
  op->add(r->be, o->d, a->d, b->d, n);
  op->axpy_f32(r->be, y->d, al, x->d, n);
  op->scale_f32(r->be, z->d, al, n);
  ot_output(r, "out", o, wo, NULL);
  ot_output(r, "y", y, wy, NULL);
  ot_output(r, "x", z, wz, NULL);
  op->add(r->be, a->d, a->d, b->d, n); /* out aliases a */
  float *p = ot_get(r, a), *q = ot_get(r, o);
  if (memcmp(p, q, (size_t)n * 4)) ot_failf(r, "add with out aliasing a is not bitwise the same");
  free(p), free(q);
}

/* sum_f32 / sumsq_f32: ne = {n}; scalar outputs "sum", "sumsq" (double
 * accumulation, against a double loop). */
static void ot_run_reduce(ot_run *r) {
  int64_t n = r->c->ne[0];
  ot_t *a = ot_rnd(r, n, MT_F32, -1, 1);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += a->h[i], s2 += (double)a->h[i] * a->h[i];
  ot_output_scalar(r, "sum", r->be->ops->sum_f32(r->be, a->d, n), s);
  ot_output_scalar(r, "sumsq", r->be->ops->sumsq_f32(r->be, a->d, n), s2);
}

/* sumsq_acc_f32: ne = {n}; x split into three tensors of n/3, n/3 + 1 and
 * the rest (one may be empty), accumulated into one device double after
 * memset0, read once. Scalar output "acc" against a double loop; the
 * runner checks it is bitwise the in-order sum of sumsq_f32 of the pieces
 * on the same backend (the optimizer's cpu results must not change), and
 * that a second accumulation continues from the first. */
static void ot_run_sumsq_acc(ot_run *r) {
  int64_t n = r->c->ne[0], n0 = n / 3, n1 = n0 + (n > 2 ? 1 : 0), n2 = n - n0 - n1;
  const int64_t off[3] = {0, n0, n0 + n1}, len[3] = {n0, n1, n2};
  ot_t *a = ot_rnd(r, n, MT_F32, -1, 1);
  const mt_backend_ops *op = r->be->ops;
  double want = 0, ins = 0, got = 0, got2 = 0;
  for (int64_t i = 0; i < n; i++) want += (double)a->h[i] * a->h[i];
  double *acc = op->alloc(r->be, sizeof(double), MT_MEM_ACT);
  op->memset0(r->be, acc, sizeof(double));
  for (int k = 0; k < 3; k++) {
    op->sumsq_acc_f32(r->be, acc, (const float *)a->d + off[k], len[k]);
    ins += op->sumsq_f32(r->be, (const float *)a->d + off[k], len[k]);
  }
  op->memcpy_d2h(r->be, &got, acc, sizeof got);
  if (memcmp(&got, &ins, sizeof got))
    ot_failf(r, "acc %.17g is not bitwise the in-order sum of sumsq_f32 %.17g", got, ins);
  op->sumsq_acc_f32(r->be, acc, (const float *)a->d, n);
  op->memcpy_d2h(r->be, &got2, acc, sizeof got2);
  ins += op->sumsq_f32(r->be, (const float *)a->d, n);
  if (memcmp(&got2, &ins, sizeof got2))
    ot_failf(r, "second accumulation %.17g, want %.17g bitwise", got2, ins);
  op->free(r->be, acc);
  ot_output_scalar(r, "acc", got, want);
}

/* MoE row ops: ne = {n_tok, k, h, rows} with the fixed slot table below
 * (n_tok * k <= 10, rows >= 10); ip[0] = 1: combine without weights.
 * Outputs "gather" (moe_gather_rows of 7 fixed indices), "y"
 * (moe_combine_fwd), "dsrc" (unreferenced rows keep their values) and "dw"
 * (moe_combine_bwd). */
static void ot_run_moe(ot_run *r) {
  int64_t nt = r->c->ne[0], h = r->c->ne[2], rows = r->c->ne[3];
  int k = (int)r->c->ne[1];
  const int32_t idx[7] = {3, 0, 9, 3, 5, 1, 8}, slot[10] = {0, 4, -1, 2, 7, 1, -1, -1, 9, 3};
  const mt_backend_ops *op = r->be->ops;
  int32_t *ix = ot_ints(r, idx, 7), *sl = ot_ints(r, slot, nt * k);
  ot_t *src = ot_rnd(r, rows * h, r->T, -1, 1), *dst = ot_rnd(r, 7 * h, r->T, -1, 1);
  ot_t *w = ot_rnd(r, nt * k, MT_F32, -1, 1), *y = ot_rnd(r, nt * h, r->T, -1, 1);
  ot_t *dy = ot_rnd(r, nt * h, r->T, -1, 1), *ds = ot_rnd(r, rows * h, r->T, -1, 1);
  ot_t *dw = ot_rnd(r, nt * k, MT_F32, -1, 1);
  const float *wv = r->c->ip[0] ? NULL : w->h;
  op->moe_gather_rows(r->be, dst->d, src->d, ix, 7, h);
  op->moe_combine_fwd(r->be, y->d, src->d, sl, wv ? w->d : NULL, nt, k, h);
  op->moe_combine_bwd(r->be, ds->d, dw->d, dy->d, src->d, sl, w->d, nt, k, h);
  double *wg = ot_dbl(7 * h), *wy = ot_dbl(nt * h), *wds = ot_dbl(rows * h), *wdw = ot_dbl(nt * k);
  for (int64_t i = 0; i < 7 * h; i++) wg[i] = src->h[idx[i / h] * h + i % h];
  for (int64_t i = 0; i < rows * h; i++) wds[i] = ds->h[i];
  for (int64_t t = 0; t < nt; t++)
    for (int j = 0; j < k; j++) {
      int32_t s = slot[t * k + j];
      if (s < 0) continue;
      for (int64_t e = 0; e < h; e++) {
        wy[t * h + e] += (wv ? wv[t * k + j] : 1.0) * src->h[s * h + e];
        wds[s * h + e] = (double)w->h[t * k + j] * dy->h[t * h + e];
        wdw[t * k + j] += (double)dy->h[t * h + e] * src->h[s * h + e];
      }
    }
  ot_output(r, "gather", dst, wg, NULL);
  ot_output(r, "y", y, wy, NULL);
  ot_output(r, "dsrc", ds, wds, NULL);
  ot_output(r, "dw", dw, wdw, NULL);
}

/* adamw: ne = {n, step}; fp[0] = grad_scale; lr 1e-3, betas 0.9/0.95, eps
 * 1e-8, weight decay 0.1. Outputs "master", "m", "v", "param_lowp" (on an
 * fp32 backend bitwise the master); a second step without a low-precision
 * copy must not fail. */
static void ot_run_adamw(ot_run *r) {
  int64_t n = r->c->ne[0];
  mt_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                         .weight_decay = 0.1f, .step = r->c->ne[1], .grad_scale = r->c->fp[0]};
  ot_t *w = ot_rnd(r, n, MT_F32, -1, 1), *m = ot_rnd(r, n, MT_F32, -0.1, 0.1);
  ot_t *v = ot_rnd(r, n, MT_F32, 0, 0.01), *g = ot_rnd(r, n, MT_F32, -1, 1), *pl = ot_rnd(r, n, r->T, 0, 1);
  double *ww = ot_dbl(n), *wm = ot_dbl(n), *wv = ot_dbl(n), *wp = ot_dbl(n);
  for (int64_t i = 0; i < n; i++) {
    double gg = (double)g->h[i] * hp.grad_scale;
    wm[i] = hp.beta1 * (double)m->h[i] + (1 - (double)hp.beta1) * gg;
    wv[i] = hp.beta2 * (double)v->h[i] + (1 - (double)hp.beta2) * gg * gg;
    double mh = wm[i] / (1 - pow(hp.beta1, hp.step)), vh = wv[i] / (1 - pow(hp.beta2, hp.step));
    wp[i] = ww[i] = w->h[i] - hp.lr * (mh / (sqrt(vh) + hp.eps) + hp.weight_decay * (double)w->h[i]);
  }
  r->be->ops->adamw(r->be, &hp, w->d, m->d, v->d, g->d, pl->d, n);
  ot_output(r, "master", w, ww, NULL);
  ot_output(r, "m", m, wm, NULL);
  ot_output(r, "v", v, wv, NULL);
  ot_output(r, "param_lowp", pl, wp, NULL);
  if (r->T == MT_F32 && memcmp(r->outs[0].got, r->outs[3].got, (size_t)n * sizeof(double)))
    ot_failf(r, "param_lowp is not bitwise the fp32 master");
  r->be->ops->adamw(r->be, &hp, w->d, m->d, v->d, g->d, NULL, n);
}

/* init_normal: ne = {rows, cols, ld_global}; ip = {row_offset, col_offset};
 * output "w" = 0.02 * N(key, (row_offset + r) * ld_global + col_offset + c),
 * so a shard is bitwise the slice of the unsharded tensor. */
static void ot_run_init_normal(ot_run *r) {
  int64_t R = r->c->ne[0], C = r->c->ne[1], ld = r->c->ne[2], r0 = r->c->ip[0], c0 = r->c->ip[1];
  mt_rng_key_t key = mt_rng_key(1234, "decoder.layers.0.mlp.linear_fc1.weight", 0, 0);
  ot_t *w = ot_rnd(r, R * C, r->T, -1, 1);
  r->be->ops->init_normal(r->be, w->d, R, C, ld, r0, c0, key, 0.02f);
  double *want = ot_dbl(R * C);
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++)
      want[i * C + j] = 0.02f * mt_rng_normal(key, (uint64_t)((r0 + i) * ld + c0 + j));
  ot_output(r, "w", w, want, NULL);
}

/* fill / cast: ne = {n}; fp[0] = fill value. Outputs "fill" (dtype T),
 * "copy" (cast fp32 -> fp32, bitwise) and "bf16" (cast fp32 -> bf16 ->
 * fp32: round to nearest even). */
static void ot_run_fill_cast(ot_run *r) {
  int64_t n = r->c->ne[0];
  ot_t *f = ot_rnd(r, n, r->T, -1, 1), *a = ot_rnd(r, n, MT_F32, -100, 100);
  ot_t *b = ot_rnd(r, n, MT_F32, -1, 1), *c = ot_rnd(r, n, MT_F32, -1, 1);
  void *bf = r->be->ops->alloc(r->be, (size_t)n * 2, MT_MEM_ACT);
  r->be->ops->fill(r->be, f->d, r->T, r->c->fp[0], n);
  r->be->ops->cast(r->be, b->d, MT_F32, a->d, MT_F32, n);
  r->be->ops->cast(r->be, bf, MT_BF16, a->d, MT_F32, n);
  r->be->ops->cast(r->be, c->d, MT_F32, bf, MT_BF16, n);
  r->be->ops->free(r->be, bf);
  double *wf = ot_dbl(n), *wa = ot_dbl(n), *wb = ot_dbl(n);
  for (int64_t i = 0; i < n; i++)
    wf[i] = r->c->fp[0], wa[i] = a->h[i], wb[i] = ot_bf2f(ot_f2bf(a->h[i]));
  ot_output(r, "fill", f, wf, NULL);
  ot_output(r, "copy", b, wa, NULL);
  ot_output(r, "bf16", c, wb, NULL);
}

#endif
