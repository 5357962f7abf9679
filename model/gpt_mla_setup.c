/* model/gpt_mla_setup.c — multi-latent attention's sizes, parameters,
 * activation sets, workspaces and the index tables of its head packing
 * (the passes are model/gpt_mla.c; the layout is described in
 * model/gpt_mla.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/rope_freq.h"
#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/gpt_mla.h"

void mt_gpt_mla_sizes(mt_gpt *m) {
  const mt_model_config *mc = &m->cfg.model;
  const int hq = mc->qk_head_dim + mc->qk_pos_emb_head_dim;
  m->hn = hq;
  m->ng = m->np; /* every head its own key and value */
  m->hl = (int64_t)m->np * mc->v_head_dim;
  m->qkvl = (int64_t)m->np * (2 * hq + mc->v_head_dim);
}

/* 0 when the model has no MLA. */
int64_t mt_gpt_mla_dqkv_extra(const mt_gpt *m) {
  if (!m->cfg.model.multi_latent_attention) return 0;
  return (int64_t)m->np * 3 * m->cfg.model.qk_pos_emb_head_dim;
}

int64_t mt_gpt_mla_gather_width(const mt_gpt *m) {
  const mt_model_config *mc = &m->cfg.model;
  int64_t w = mc->hidden_size;
  if (!mc->multi_latent_attention) return w;
  if (mc->q_lora_rank > w) w = mc->q_lora_rank;
  if (mc->kv_lora_rank > w) w = mc->kv_lora_rank;
  return w;
}

/* Host index tables (model/gpt_mla.h), uploaded once. */
static int32_t *upload(mt_gpt *m, const int32_t *h, int64_t n) {
  mt_backend *be = m->be;
  int32_t *d = be->ops->alloc(be, (size_t)n * sizeof(int32_t), MT_MEM_WORKSPACE);
  be->ops->memcpy_h2d(be, d, h, (size_t)n * sizeof(int32_t));
  return d;
}

static void build_tables(mt_gpt *m, mt_gpt_mla *x) {
  const int64_t rows = m->rows, np = m->np, u = x->u;
  const int64_t dn = x->dn, dr = x->dr, dv = x->dv, hq = x->hq, sw = x->slot;
  /* element offsets of the staging regions (W) and of dR' inside G */
  const int64_t oQ = 0, oKV = x->off_kv, oKPE = x->off_kpe, oR = x->off_r, oG = x->off_gr;
  /* R' [rows, np, 3, dr] <- W: q_pe of head n, the shared k_pe, (unused) */
  int32_t *t = mt_xcalloc((size_t)x->n_r, sizeof(int32_t));
  int32_t *td = mt_xcalloc((size_t)x->n_r, sizeof(int32_t));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t n = 0; n < np; n++)
      for (int64_t c = 0; c < dr; c += u) {
        const int64_t i = ((r * np + n) * 3 * dr + c) / u;
        t[i] = (int32_t)((oQ + (r * np + n) * hq + dn + c) / u);
        t[i + dr / u] = (int32_t)((oKPE + r * dr + c) / u);
        t[i + 2 * dr / u] = 0;
        /* backward: dR' <- dP's q_pe and k_pe slots of head n */
        const int64_t p = (r * np + n) * sw;
        td[i] = (int32_t)((p + dn + c) / u);
        td[i + dr / u] = (int32_t)((p + hq + dn + c) / u);
        td[i + 2 * dr / u] = 0;
      }
  x->idx_r = upload(m, t, x->n_r);
  x->idx_dr = upload(m, td, x->n_r);
  free(t);
  free(td);
  /* P [rows, np, (q_nope, q_pe, k_nope, k_pe, v)] <- W (rotated parts from R') */
  t = mt_xcalloc((size_t)x->n_p, sizeof(int32_t));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t n = 0; n < np; n++) {
      const int64_t p = (r * np + n) * sw, q = oQ + (r * np + n) * hq;
      const int64_t kv = oKV + (r * np + n) * (dn + dv), rr = oR + (r * np + n) * 3 * dr;
      for (int64_t c = 0; c < dn; c += u) t[(p + c) / u] = (int32_t)((q + c) / u);
      for (int64_t c = 0; c < dr; c += u) t[(p + dn + c) / u] = (int32_t)((rr + c) / u);
      for (int64_t c = 0; c < dn; c += u) t[(p + hq + c) / u] = (int32_t)((kv + c) / u);
      for (int64_t c = 0; c < dr; c += u)
        t[(p + hq + dn + c) / u] = (int32_t)((rr + dr + c) / u);
      for (int64_t c = 0; c < dv; c += u)
        t[(p + 2 * hq + c) / u] = (int32_t)((kv + dn + c) / u);
    }
  x->idx_p = upload(m, t, x->n_p);
  free(t);
  /* backward: [dQ | dKV] <- G (dP, and dR' for the rotated q part) */
  t = mt_xcalloc((size_t)x->n_w, sizeof(int32_t));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t n = 0; n < np; n++) {
      const int64_t p = (r * np + n) * sw, q = oQ + (r * np + n) * hq;
      const int64_t kv = oKV + (r * np + n) * (dn + dv), rr = oG + (r * np + n) * 3 * dr;
      for (int64_t c = 0; c < dn; c += u) t[(q + c) / u] = (int32_t)((p + c) / u);
      for (int64_t c = 0; c < dr; c += u) t[(q + dn + c) / u] = (int32_t)((rr + c) / u);
      for (int64_t c = 0; c < dn; c += u) t[(kv + c) / u] = (int32_t)((p + hq + c) / u);
      for (int64_t c = 0; c < dv; c += u) t[(kv + dn + c) / u] = (int32_t)((p + 2 * hq + c) / u);
    }
  x->idx_dw = upload(m, t, x->n_w);
  free(t);
  /* backward: dk_pe [rows, dr] = sum over the heads of dR' k_pe (head order) */
  const int64_t nk = rows * dr / u;
  t = mt_xcalloc((size_t)(nk * np), sizeof(int32_t));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < dr; c += u)
      for (int64_t n = 0; n < np; n++)
        t[((r * dr + c) / u) * np + n] = (int32_t)((oG + (r * np + n) * 3 * dr + dr + c) / u);
  x->slot_kpe = upload(m, t, nk * np);
  free(t);
}

static void *wsp(mt_gpt *m, int64_t n) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(m->be->dtype), MT_MEM_WORKSPACE);
}

void mt_gpt_mla_create(mt_gpt *m) {
  const mt_model_config *mc = &m->cfg.model;
  if (!mc->multi_latent_attention) return;
  mt_gpt_mla *x = mt_xcalloc(1, sizeof *x);
  m->mla = x;
  x->yarn = mc->rope_type[0] ? mc->rope_type[0] == 'y' : 1; /* null: MLA's default, YaRN */
  x->qr = mc->q_lora_rank;
  x->kr = mc->kv_lora_rank;
  x->dn = mc->qk_head_dim;
  x->dr = mc->qk_pos_emb_head_dim;
  x->dv = mc->v_head_dim;
  x->hq = x->dn + x->dr;
  x->slot = 2 * x->hq + x->dv;
  x->u = mt_gcd64(mt_gcd64(x->dn, x->dr), x->dv);
  const int64_t rows = m->rows, np = m->np;
  x->off_kv = rows * np * x->hq;
  x->off_kpe = x->off_kv + rows * np * (x->dn + x->dv);
  x->off_r = x->off_kpe + rows * x->dr;
  x->off_gr = rows * m->qkvl;
  x->n_r = rows * np * 3 * x->dr / x->u;
  x->n_p = rows * m->qkvl / x->u;
  x->n_w = x->off_kpe / x->u;
  x->stage = wsp(m, x->off_r + rows * np * 3 * x->dr);
  x->dkpe = wsp(m, rows * x->dr);
  x->kpe_l = wsp(m, m->rows_l * x->dr);
  x->d_kvcn = wsp(m, m->rows_l * x->kr);
  x->d_kvc = wsp(m, m->rows_l * x->kr);
  if (x->qr > 0) {
    x->d_qcn = wsp(m, m->rows_l * x->qr);
    x->d_qc = wsp(m, m->rows_l * x->qr);
  }
  if (m->cfg.fp8) {
    x->f8_kv = wsp(m, m->rows_l * (x->kr + x->dr));
    x->f8_dx = wsp(m, m->rows_l * m->cfg.model.hidden_size);
  }
  build_tables(m, x);
  /* Megatron: the softmax scale mscale(s, mscale_all_dim)² / √hq with s =
   * rotary_scaling_factor (whatever rope_type); YaRN's cos/sin factor
   * mscale(s, mscale) / mscale(s, mscale_all_dim) */
  const double s = mc->rotary_scaling_factor, ma = mt_yarn_mscale(s, mc->mscale_all_dim);
  x->softmax_scale = (float)(ma * ma / sqrt((double)x->hq));
  x->attn_factor = x->yarn ? (float)(mt_yarn_mscale(s, mc->mscale) / ma) : 1.0f;
}

void mt_gpt_mla_destroy(mt_gpt *m) {
  mt_gpt_mla *x = m->mla;
  if (!x) return;
  mt_backend *be = m->be;
  void *p[] = {x->stage, x->dkpe,   x->kpe_l,  x->d_kvcn, x->d_kvc,   x->d_qcn,
               x->d_qc,  x->idx_r, x->idx_dr, x->idx_p,  x->idx_dw, x->slot_kpe,
               x->f8_kv, x->f8_dx};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  free(x);
  m->mla = NULL;
}

static void *act(mt_gpt *m, int64_t n, mt_dtype t) {
  return m->be->ops->alloc(m->be, (size_t)n * mt_dtype_size(t), MT_MEM_ACT);
}

void mt_gpt_mla_alloc_acts(mt_gpt *m, mt_layer_acts *a) {
  const mt_model_config *mc = &m->cfg.model;
  if (!mc->multi_latent_attention) return;
  const mt_dtype T = m->be->dtype;
  const int norm = mc->qk_layernorm, mean = norm && !m->rmsnorm;
  const int64_t rl = m->rows_l;
  if (mc->q_lora_rank > 0) {
    a->q_c = act(m, rl * mc->q_lora_rank, T);
    a->q_cn = norm ? act(m, rl * mc->q_lora_rank, T) : a->q_c;
    a->q_mean = mean ? act(m, rl, MT_F32) : NULL;
    a->q_rstd = norm ? act(m, rl, MT_F32) : NULL;
  }
  a->kv_c = act(m, rl * mc->kv_lora_rank, T);
  a->kv_cn = norm ? act(m, rl * mc->kv_lora_rank, T) : a->kv_c;
  a->kv_mean = mean ? act(m, rl, MT_F32) : NULL;
  a->kv_rstd = norm ? act(m, rl, MT_F32) : NULL;
}

void mt_gpt_mla_free_acts(mt_gpt *m, mt_layer_acts *a) {
  mt_backend *be = m->be;
  if (a->q_cn != a->q_c) be->ops->free(be, a->q_cn);
  if (a->kv_cn != a->kv_c) be->ops->free(be, a->kv_cn);
  void *p[] = {a->q_c, a->q_mean, a->q_rstd, a->kv_c, a->kv_mean, a->kv_rstd};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
}

void mt_gpt_mla_attn_desc(const mt_gpt *m, mt_attn_desc *d) {
  d->hn = m->mla->hq;
  d->hv = m->mla->dv;
  d->ng = m->np;
  d->scale = m->mla->softmax_scale;
}
