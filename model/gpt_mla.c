/* model/gpt_mla.c — multi-latent attention's projections, forward and
 * backward (DeepSeek-V2 §2.1; Megatron-core's MLASelfAttention
 * get_query_key_value_tensors), up to the fused attention's input and from
 * its input gradient. The attention core and linear_proj are the standard
 * layer's (model/gpt_block.c) with q/k heads of hq = dn + dr channels,
 * value heads of dv and the softmax scale of mt_gpt_mla_attn_desc.
 *
 * Per layer, this rank's rows (sl = s/tp under sequence parallelism, else
 * s; np = n/tp heads):
 *   q   = linear_q_proj(x)                                   [s, b, np·hq]
 *       | linear_q_up_proj(q_layernorm(linear_q_down_proj(x)))
 *   ckv = linear_kv_down_proj(x)                  [sl, b, kr + dr] (kv_c, k_pe)
 *   kv  = linear_kv_up_proj(kv_layernorm(kv_c))              [s, b, np·(dn + dv)]
 *   q_pe, k_pe turned by RoPE (YaRN with rope_type yarn), k_pe shared by the heads
 *   q = [q_nope, q_pe], k = [k_nope, k_pe], v -> the fused attention.
 * The down projections are replicated and read this rank's rows; the up
 * projections are column-parallel (the latents are all-gathered under
 * sequence parallelism, model/tensor_parallel.h) and k_pe is all-gathered
 * likewise. Backward: the heads' k_pe gradients are summed over the local
 * heads, then over TP (reduce-scatter to the shard under sequence
 * parallelism, all-reduce without), since every head of every rank reads
 * the one k_pe. With FP8 (training.fp8_format) all six projections are
 * FP8 linears keyed (layer, MT_GPT_FP8_Q_PROJ .. KV_UP) as Megatron's TE spec
 * builds them as TE linears; linear_kv_down_proj is one FP8 linear over
 * its whole weight; norms, RoPE and core attention stay in T
 * (docs/fp8.md "Multi-latent attention"). Packing: model/gpt_mla.h. */
#include "core/rope_freq.h"
#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/gpt_mla.h"
#include "model/fp8_linear.h"
#include "model/linear.h"
#include "parallel/mappings.h"

static int sp_on(const mt_gpt *m) { return m->cfg.sequence_parallel && m->cfg.tp_size > 1; }

/* The latent norm (qk_layernorm) of width n over this rank's rows. */
static void latent_norm_fwd(mt_gpt *m, void *out, float *mean, float *rstd, const void *in,
                            const mt_wb *w, int64_t n) {
  mt_backend *be = m->be;
  const float eps = m->cfg.model.norm_epsilon;
  if (m->rmsnorm)
    be->ops->rmsnorm_fwd(be, out, rstd, in, w->weight, m->rows_l, n, eps);
  else
    be->ops->layernorm_fwd(be, out, mean, rstd, in, w->weight, w->bias, m->rows_l, n, eps);
}

/* din (overwrite) from dout; dw, db accumulate. */
static void latent_norm_bwd(mt_gpt *m, void *din, const mt_wb *g, const void *dout,
                            const void *in, const mt_wb *w, const float *mean, const float *rstd,
                            int64_t n) {
  mt_backend *be = m->be;
  be->ops->memset0(be, din, (size_t)(m->rows_l * n) * mt_dtype_size(be->dtype));
  if (m->rmsnorm)
    be->ops->rmsnorm_bwd(be, din, g->weight, dout, in, w->weight, rstd, m->rows_l, n);
  else
    be->ops->layernorm_bwd(be, din, g->weight, g->bias, dout, in, w->weight, mean, rstd,
                           m->rows_l, n);
}

/* RoPE (or YaRN) on R' [rows, np, 3, dr]: np groups of one query head, one
 * key head and an untouched slot, dr channels, pairs (2i, 2i + 1); one call
 * per run of global positions (two chunks with context parallelism). */
static void rope(mt_gpt *m, void *r, int backward) {
  const mt_model_config *mc = &m->cfg.model;
  const mt_gpt_mla *x = m->mla;
  mt_rope_desc d = {0};
  d.s = (int)m->s_loc;
  d.b = m->cfg.micro_batch_size;
  d.np = m->np;
  d.ng = m->np;
  d.hn = x->dr;
  d.rot_dim = x->dr;
  d.interleaved = 1;
  d.base = mc->rotary_base;
  if (x->yarn) {
    d.scaling = MT_ROPE_YARN;
    d.factor = mc->rotary_scaling_factor;
    d.original_max = mc->original_max_position_embeddings;
    d.beta_fast = mc->beta_fast;
    d.beta_slow = mc->beta_slow;
    d.attn_factor = x->attn_factor;
  }
  mt_cp_run run[2];
  const int n = mt_cp_runs(&m->cpl, 0, m->s_loc, run);
  const size_t rb = (size_t)d.b * (size_t)m->np * 3 * (size_t)x->dr * mt_dtype_size(m->be->dtype);
  for (int k = 0; k < n; k++) {
    d.s = (int)run[k].n;
    d.s_offset = (int)run[k].pos;
    void *p = (char *)r + (size_t)run[k].row * rb;
    if (backward)
      m->be->ops->rope_bwd(m->be, &d, p);
    else
      m->be->ops->rope_fwd(m->be, &d, p);
  }
}

static size_t es(const mt_gpt *m) { return mt_dtype_size(m->be->dtype); }

/* The layer runs its linears in FP8 (Megatron's TE spec: all six MLA
 * projections are TE linears; model/fp8_linear.h). */
static int fp8_on(const mt_gpt *m) { return m->tp.fp8 && m->tp.fp8_on; }

/* A replicated down projection (TELinear, parallel_mode "duplicated") on
 * this rank's rows: y [rl, out] = x [rl, in] W^T, in FP8 as linear k of the
 * layer (amaxes reduced over tp and cp: under sequence parallelism each
 * rank sees [s/tp] rows, so every rank quantizes with the whole tensor's
 * scale, as one process; docs/fp8.md "MLA"). */
static void down_fwd(mt_gpt *m, int k, void *y, const void *x, const void *w, int64_t out,
                     int64_t in) {
  if (!fp8_on(m)) {
    mt_linear_fwd(m->be, y, x, w, NULL, m->rows_l, out, in);
    return;
  }
  mt_gpt_fp8_select(m, m->fp8_l, k);
  mt_fp8_linear_fwd(m->tp.fp8, y, x, w, NULL, m->rows_l, out, in);
}

/* Its backward: dW += dy^T x (fp32), dx (overwrite) = dy W. */
static void down_bwd(mt_gpt *m, int k, void *dx, float *dw, const void *dy, const void *x,
                     const void *w, int64_t out, int64_t in) {
  if (!fp8_on(m)) {
    mt_linear_bwd(m->be, dx, dw, NULL, dy, x, w, m->rows_l, out, in);
    return;
  }
  mt_gpt_fp8_select(m, m->fp8_l, k);
  mt_fp8_linear_bwd(m->tp.fp8, dx, dw, NULL, dy, x, w, m->rows_l, out, in);
}

/* Columns [c0, c0 + n) of wide [rl, ld] to (to_part) or from part [rl, n]. */
static void cols(mt_gpt *m, void *wide, int64_t ld, int64_t c0, void *part, int64_t n,
                 int to_part) {
  const size_t e = es(m);
  for (int64_t r = 0; r < m->rows_l; r++) {
    char *pw = (char *)wide + (size_t)(r * ld + c0) * e, *pp = (char *)part + (size_t)(r * n) * e;
    m->be->ops->memcpy_d2d(m->be, to_part ? pp : pw, to_part ? pw : pp, (size_t)n * e);
  }
}

/* The next column-parallel projection is linear k of the layer. */
static void up_key(mt_gpt *m, int k) { mt_gpt_fp8_select(m, m->fp8_l, k); }

void mt_gpt_mla_forward(mt_gpt *m, int li, mt_layer_acts *a) {
  mt_backend *be = m->be;
  mt_tp_ctx *tp = &m->tp;
  const mt_gpt_mla *x = m->mla;
  const mt_attention_tensors *w = &m->w.layers[li].self_attention;
  const int norm = m->cfg.model.qk_layernorm;
  const int64_t h = m->cfg.model.hidden_size, rl = m->rows_l, np = m->np;
  char *W = x->stage;
  /* q [s, b, np·hq] */
  if (x->qr > 0) {
    down_fwd(m, MT_GPT_FP8_Q_DOWN, a->q_c, a->ln1, w->linear_q_down_proj.weight, x->qr, h);
    if (norm) latent_norm_fwd(m, a->q_cn, a->q_mean, a->q_rstd, a->q_c, &w->q_layernorm, x->qr);
    up_key(m, MT_GPT_FP8_Q_UP);
    mt_column_parallel_linear_fwd(tp, W, a->q_cn, w->linear_q_up_proj.weight, NULL, np * x->hq,
                                  x->qr);
  } else {
    up_key(m, MT_GPT_FP8_Q_PROJ);
    mt_column_parallel_linear_fwd(tp, W, a->ln1, w->linear_q_proj.weight, NULL, np * x->hq, h);
  }
  /* kv_c [sl, b, kr], k_pe [sl, b, dr]: the two row blocks of linear_kv_down_proj */
  const char *wd = w->linear_kv_down_proj.weight;
  void *kpe = sp_on(m) ? x->kpe_l : W + x->off_kpe * es(m);
  if (fp8_on(m)) { /* one FP8 linear over the whole weight (one tensor, one scale) */
    down_fwd(m, MT_GPT_FP8_KV_DOWN, x->f8_kv, a->ln1, wd, x->kr + x->dr, h);
    cols(m, x->f8_kv, x->kr + x->dr, 0, a->kv_c, x->kr, 1);
    cols(m, x->f8_kv, x->kr + x->dr, x->kr, kpe, x->dr, 1);
  } else {
    mt_linear_fwd(be, a->kv_c, a->ln1, wd, NULL, rl, x->kr, h);
    mt_linear_fwd(be, kpe, a->ln1, wd + (size_t)x->kr * h * es(m), NULL, rl, x->dr, h);
  }
  if (sp_on(m)) mt_sp_all_gather(m->tp.tp, kpe, W + x->off_kpe * es(m), rl * x->dr,
                                 be->dtype);
  if (norm)
    latent_norm_fwd(m, a->kv_cn, a->kv_mean, a->kv_rstd, a->kv_c, &w->kv_layernorm, x->kr);
  up_key(m, MT_GPT_FP8_KV_UP);
  mt_column_parallel_linear_fwd(tp, W + x->off_kv * es(m), a->kv_cn, w->linear_kv_up_proj.weight,
                                NULL, np * (x->dn + x->dv), x->kr);
  /* rotated parts -> R', RoPE, then the fused attention's input */
  be->ops->moe_gather_rows(be, W + x->off_r * es(m), W, x->idx_r, x->n_r, x->u);
  rope(m, W + x->off_r * es(m), 0);
  be->ops->moe_gather_rows(be, a->qkv, W, x->idx_p, x->n_p, x->u);
}

void mt_gpt_mla_backward(mt_gpt *m, int li, mt_layer_acts *a, void *dln1) {
  mt_backend *be = m->be;
  mt_tp_ctx *tp = &m->tp;
  const mt_gpt_mla *x = m->mla;
  const mt_attention_tensors *w = &m->w.layers[li].self_attention;
  const mt_attention_tensors *g = &m->g.layers[li].self_attention;
  const int norm = m->cfg.model.qk_layernorm;
  const int64_t h = m->cfg.model.hidden_size, rl = m->rows_l, np = m->np;
  char *G = m->ws.dqkv, *W = x->stage;
  /* dR' <- dP's rotated slots; undo the rotation; [dQ | dKV] and dk_pe */
  be->ops->moe_gather_rows(be, G + x->off_gr * es(m), G, x->idx_dr, x->n_r, x->u);
  rope(m, G + x->off_gr * es(m), 1);
  be->ops->moe_gather_rows(be, W, G, x->idx_dw, x->n_w, x->u);
  be->ops->moe_combine_fwd(be, x->dkpe, G, x->slot_kpe, NULL, m->rows * x->dr / x->u, (int)np,
                           x->u);
  /* every head on every TP rank read k_pe: sum the rest of the heads */
  void *dkpe = x->dkpe;
  if (sp_on(m)) {
    mt_sp_reduce_scatter(m->tp.tp, x->dkpe, x->kpe_l, rl * x->dr, be->dtype);
    dkpe = x->kpe_l;
  } else if (m->cfg.tp_size > 1) {
    mt_tp_all_reduce(m->tp.tp, x->dkpe, m->rows * x->dr, be->dtype);
  }
  /* q path first: dln1 overwritten */
  if (x->qr > 0) {
    up_key(m, MT_GPT_FP8_Q_UP);
    mt_column_parallel_linear_bwd(tp, x->d_qcn, g->linear_q_up_proj.weight, NULL, W, a->q_cn,
                                  w->linear_q_up_proj.weight, np * x->hq, x->qr);
    const void *dqc = x->d_qcn;
    if (norm) {
      latent_norm_bwd(m, x->d_qc, &g->q_layernorm, x->d_qcn, a->q_c, &w->q_layernorm, a->q_mean,
                      a->q_rstd, x->qr);
      dqc = x->d_qc;
    }
    down_bwd(m, MT_GPT_FP8_Q_DOWN, dln1, g->linear_q_down_proj.weight, dqc, a->ln1,
             w->linear_q_down_proj.weight, x->qr, h);
  } else {
    up_key(m, MT_GPT_FP8_Q_PROJ);
    mt_column_parallel_linear_bwd(tp, dln1, g->linear_q_proj.weight, NULL, W, a->ln1,
                                  w->linear_q_proj.weight, np * x->hq, h);
  }
  /* kv path, accumulated into dln1 */
  up_key(m, MT_GPT_FP8_KV_UP);
  mt_column_parallel_linear_bwd(tp, x->d_kvcn, g->linear_kv_up_proj.weight, NULL,
                                W + x->off_kv * es(m), a->kv_cn, w->linear_kv_up_proj.weight,
                                np * (x->dn + x->dv), x->kr);
  const void *dkvc = x->d_kvcn;
  if (norm) {
    latent_norm_bwd(m, x->d_kvc, &g->kv_layernorm, x->d_kvcn, a->kv_c, &w->kv_layernorm,
                    a->kv_mean, a->kv_rstd, x->kr);
    dkvc = x->d_kvc;
  }
  const char *wd = w->linear_kv_down_proj.weight;
  float *gd = g->linear_kv_down_proj.weight;
  const char *wpe = wd + (size_t)x->kr * h * es(m);
  if (fp8_on(m)) { /* dy = [dkv_c | dk_pe] through the one FP8 linear; dln1 += dx */
    cols(m, x->f8_kv, x->kr + x->dr, 0, (void *)dkvc, x->kr, 0);
    cols(m, x->f8_kv, x->kr + x->dr, x->kr, dkpe, x->dr, 0);
    down_bwd(m, MT_GPT_FP8_KV_DOWN, x->f8_dx, gd, x->f8_kv, a->ln1, wd, x->kr + x->dr, h);
    be->ops->add(be, dln1, dln1, x->f8_dx, rl * h);
    return;
  }
  mt_linear_bwd(be, NULL, gd, NULL, dkvc, a->ln1, wd, rl, x->kr, h);
  mt_linear_bwd(be, NULL, gd + (size_t)x->kr * h, NULL, dkpe, a->ln1, wpe, rl, x->dr, h);
  /* dln1 += dkv_c W_kv + dk_pe W_pe */
  mt_linear_gemm(be, 0, 0, rl, h, x->kr, dkvc, x->kr, wd, h, 1.0f, dln1, h, be->dtype, NULL);
  mt_linear_gemm(be, 0, 0, rl, h, x->dr, dkpe, x->dr, wpe, h, 1.0f, dln1, h, be->dtype, NULL);
}
