/* model/gpt_infer_mla.c — see gpt_infer_mla.h. Head packing (elements, R =
 * max_len rows, np local heads, dn/dr/dv the nope/rotated/value widths, hq =
 * dn + dr, kr = kv_lora_rank), one staging buffer S:
 *   Q   [R, np, hq]       linear_q_proj or linear_q_up_proj output
 *   KPE [R, dr]           k_pe of the new rows (before RoPE)
 *   RT  [R, np + 2, dr]   q_pe of each head, k_pe, an unused slot: one query
 *                         group of np query heads, one key and one value head
 *                         for the backend's rope op
 *   KVN [R, kr]           kv_layernorm(kv_c) of the new rows
 *   C   [R, kr + dr]      a copy of the cache (positions 0 .. L - 1)
 *   KVU [R, np, dn + dv]  linear_kv_up_proj of the cached latents
 * and the fused attention's operands, gathered from S in units of
 * u = gcd(dn, dr, dv, kr) channels through index tables built once (row
 * major, so the first rows' entries are a prefix of the table):
 *   P   [rows, np, 2·hq + dv]  q = [q_nope, q_pe] (the k and v slots unused)
 *   KVB [L, np, hq + dv]       k = [k_nope, k_pe], v (mt_attn_desc kv block). */
#include "model/gpt_infer_mla.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/rope_freq.h"
#include "core/util.h"
#include "model/gpt_internal.h"
#include "model/gpt_mla.h"
#include "model/linear.h"

struct mt_infer_mla {
  mt_gpt *m;
  int max_len;
  int64_t kr, qr, dn, dr, dv, hq, np, u;
  int64_t oKPE, oRT, oKVN, oC, oKVU; /* element offsets in S */
  size_t es;
  void *S, *P, *KVB;
  void *q_c, *q_cn, *kv_c;         /* [R, qr], [R, qr], [R, kr] */
  float *mean, *rstd;              /* [R] */
  void **cache;                    /* [local layers] x [R, kr + dr] */
  int32_t *t_rt, *t_cache, *t_q, *t_kv; /* gather tables (device) */
  /* weight absorption (mt_infer_mla_absorb; NULL without) */
  void *PA, *KVA, *CA;             /* [R, (np + 1)(kr + dr) + kr], [R, kr + dr + kr],
                                      [R, np, kr] */
  int32_t *t_pa, *t_kva;           /* gather tables: PA from S, KVA from a cache */
};

static void *dalloc(mt_gpt *m, int64_t n, size_t es, mt_mem_cat cat) {
  return m->be->ops->alloc(m->be, (size_t)n * es, cat);
}

static int32_t *upload(mt_gpt *m, const int32_t *h, int64_t n) {
  int32_t *d = dalloc(m, n, sizeof(int32_t), MT_MEM_WORKSPACE);
  m->be->ops->memcpy_h2d(m->be, d, h, (size_t)n * sizeof(int32_t));
  return d;
}

/* Index of the unit holding element e of S. */
static int32_t U(const mt_infer_mla *x, int64_t e) { return (int32_t)(e / x->u); }

static void build_tables(mt_infer_mla *x) {
  const int64_t R = x->max_len, np = x->np, u = x->u, dn = x->dn, dr = x->dr, dv = x->dv;
  const int64_t hq = x->hq, kr = x->kr;
  /* RT <- Q's q_pe, KPE */
  const int64_t n_rt = R * (np + 2) * dr / u;
  int32_t *t = mt_xcalloc((size_t)n_rt, sizeof(int32_t));
  for (int64_t r = 0; r < R; r++)
    for (int64_t n = 0; n < np + 1; n++)
      for (int64_t c = 0; c < dr; c += u)
        t[((r * (np + 2) + n) * dr + c) / u] =
            n < np ? U(x, (r * np + n) * hq + dn + c) : U(x, x->oKPE + r * dr + c);
  x->t_rt = upload(x->m, t, n_rt);
  free(t);
  /* cache row [kv latent, rotated k_pe] <- KVN, RT's key slot */
  const int64_t n_c = R * (kr + dr) / u;
  t = mt_xcalloc((size_t)n_c, sizeof(int32_t));
  for (int64_t r = 0; r < R; r++) {
    for (int64_t c = 0; c < kr; c += u) t[(r * (kr + dr) + c) / u] = U(x, x->oKVN + r * kr + c);
    for (int64_t c = 0; c < dr; c += u)
      t[(r * (kr + dr) + kr + c) / u] = U(x, x->oRT + (r * (np + 2) + np) * dr + c);
  }
  x->t_cache = upload(x->m, t, n_c);
  free(t);
  /* P <- Q's q_nope, RT's rotated q_pe (k and v slots: unit 0, unread) */
  const int64_t sw = 2 * hq + dv, n_q = R * np * sw / u;
  t = mt_xcalloc((size_t)n_q, sizeof(int32_t));
  for (int64_t r = 0; r < R; r++)
    for (int64_t n = 0; n < np; n++) {
      const int64_t p = (r * np + n) * sw;
      for (int64_t c = 0; c < dn; c += u) t[(p + c) / u] = U(x, (r * np + n) * hq + c);
      for (int64_t c = 0; c < dr; c += u)
        t[(p + dn + c) / u] = U(x, x->oRT + (r * (np + 2) + n) * dr + c);
    }
  x->t_q = upload(x->m, t, n_q);
  free(t);
  /* KVB <- KVU's k_nope and v, C's rotated k_pe */
  const int64_t kw = hq + dv, n_kv = R * np * kw / u;
  t = mt_xcalloc((size_t)n_kv, sizeof(int32_t));
  for (int64_t j = 0; j < R; j++)
    for (int64_t n = 0; n < np; n++) {
      const int64_t p = (j * np + n) * kw, kv = x->oKVU + (j * np + n) * (dn + dv);
      for (int64_t c = 0; c < dn; c += u) t[(p + c) / u] = U(x, kv + c);
      for (int64_t c = 0; c < dr; c += u) t[(p + dn + c) / u] = U(x, x->oC + j * (kr + dr) + kr + c);
      for (int64_t c = 0; c < dv; c += u) t[(p + hq + c) / u] = U(x, kv + dn + c);
    }
  x->t_kv = upload(x->m, t, n_kv);
  free(t);
}

mt_infer_mla *mt_infer_mla_create(mt_gpt *m, int max_len) {
  const mt_model_config *mc = &m->cfg.model;
  mt_infer_mla *x = mt_xcalloc(1, sizeof *x);
  x->m = m;
  x->max_len = max_len;
  x->kr = mc->kv_lora_rank;
  x->qr = mc->q_lora_rank;
  x->dn = mc->qk_head_dim;
  x->dr = mc->qk_pos_emb_head_dim;
  x->dv = mc->v_head_dim;
  x->hq = x->dn + x->dr;
  x->np = m->np;
  x->u = mt_gcd64(mt_gcd64(x->dn, x->dr), mt_gcd64(x->dv, x->kr));
  x->es = mt_dtype_size(m->be->dtype);
  const int64_t R = max_len, np = x->np;
  x->oKPE = R * np * x->hq;
  x->oRT = x->oKPE + R * x->dr;
  x->oKVN = x->oRT + R * (np + 2) * x->dr;
  x->oC = x->oKVN + R * x->kr;
  x->oKVU = x->oC + R * (x->kr + x->dr);
  const int64_t nS = x->oKVU + R * np * (x->dn + x->dv);
  MT_ASSERT(nS / x->u < INT32_MAX);
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  x->S = dalloc(m, nS, x->es, W);
  x->P = dalloc(m, R * np * (2 * x->hq + x->dv), x->es, W);
  x->KVB = dalloc(m, R * np * (x->hq + x->dv), x->es, W);
  if (x->qr > 0) {
    x->q_c = dalloc(m, R * x->qr, x->es, W);
    x->q_cn = dalloc(m, R * x->qr, x->es, W);
  }
  x->kv_c = dalloc(m, R * x->kr, x->es, W);
  x->mean = dalloc(m, R, sizeof(float), W);
  x->rstd = dalloc(m, R, sizeof(float), W);
  x->cache = mt_xcalloc((size_t)m->n_local_layers, sizeof(void *));
  for (int l = 0; l < m->n_local_layers; l++)
    x->cache[l] = dalloc(m, R * (x->kr + x->dr), x->es, MT_MEM_ACT);
  build_tables(x);
  return x;
}

void mt_infer_mla_destroy(mt_infer_mla *x) {
  if (!x) return;
  mt_backend *be = x->m->be;
  void *p[] = {x->S,      x->P,     x->KVB, x->q_c, x->q_cn, x->kv_c, x->mean, x->rstd,
               x->t_rt,   x->t_cache, x->t_q, x->t_kv, x->PA,   x->KVA,  x->CA,
               x->t_pa,   x->t_kva};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  for (int l = 0; l < x->m->n_local_layers; l++) be->ops->free(be, x->cache[l]);
  free(x->cache);
  free(x);
}

/* out [rows, n] = the latent norm w (RMSNorm or LayerNorm) of in; identity
 * (a copy) without qk_layernorm. */
static void latent_norm(mt_infer_mla *x, void *out, const void *in, const mt_wb *w, int64_t rows,
                        int64_t n) {
  mt_gpt *m = x->m;
  mt_backend *be = m->be;
  const float eps = m->cfg.model.norm_epsilon;
  if (!m->cfg.model.qk_layernorm)
    be->ops->memcpy_d2d(be, out, in, (size_t)(rows * n) * x->es);
  else if (m->rmsnorm)
    be->ops->rmsnorm_fwd(be, out, x->rstd, in, w->weight, rows, n, eps);
  else
    be->ops->layernorm_fwd(be, out, x->mean, x->rstd, in, w->weight, w->bias, rows, n, eps);
}

/* RoPE (YaRN with rope_type yarn) on RT's rows [rows, np + 2, dr] at global
 * positions pos0 ..: pairs (2i, 2i + 1), as model/gpt_mla.c. */
static void rope(mt_infer_mla *x, int64_t rows, int64_t pos0) {
  mt_gpt *m = x->m;
  const mt_model_config *mc = &m->cfg.model;
  const mt_gpt_mla *ml = m->mla;
  mt_rope_desc d = {0};
  d.s = (int)rows;
  d.b = 1;
  d.np = (int)x->np;
  d.ng = 1;
  d.hn = (int)x->dr;
  d.rot_dim = (int)x->dr;
  d.interleaved = 1;
  d.base = mc->rotary_base;
  if (ml->yarn) {
    d.scaling = MT_ROPE_YARN;
    d.factor = mc->rotary_scaling_factor;
    d.original_max = mc->original_max_position_embeddings;
    d.beta_fast = mc->beta_fast;
    d.beta_slow = mc->beta_slow;
    d.attn_factor = ml->attn_factor;
  }
  d.s_offset = (int)pos0;
  m->be->ops->rope_fwd(m->be, &d, (char *)x->S + (size_t)x->oRT * x->es);
}

/* The fused attention's descriptor of `rows` new queries at pos0 .. over
 * positions 0 .. pos0 + rows - 1 (MLA's widths and softmax scale). */
static mt_attn_desc desc(const mt_infer_mla *x, int64_t rows, int64_t pos0) {
  static const int64_t sample0 = 0;
  const mt_gpt_config *c = &x->m->cfg;
  mt_attn_desc d = {0};
  d.s = (int)rows;
  d.b = 1;
  d.np = (int)x->np;
  d.head_offset = c->tp_rank * (int)x->np;
  d.n_heads_total = c->model.num_attention_heads;
  d.sample_ids = &sample0;
  mt_gpt_mla_attn_desc(x->m, &d); /* hn = hq, hv = dv, ng = np, the softmax scale */
  d.sq = (int)rows;
  d.sk = (int)(pos0 + rows);
  d.q_pos[0] = (int)pos0;
  d.k_pos[0] = 0;
  return d;
}

void mt_infer_mla_absorb(mt_infer_mla *x) {
  if (x->PA) return;
  mt_gpt *m = x->m;
  const int64_t R = x->max_len, np = x->np, kr = x->kr, dr = x->dr, u = x->u, a = kr + dr;
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  x->PA = dalloc(m, R * ((np + 1) * a + kr), x->es, W);
  x->KVA = dalloc(m, R * (a + kr), x->es, W);
  x->CA = dalloc(m, R * np * kr, x->es, W);
  /* PA <- per head [q_lat (written by absorbed()'s GEMM afterwards: unit 0
   * here), RT's rotated q_pe] (k and v slots: unit 0, unread) */
  const int64_t sw = (np + 1) * a + kr, n_pa = R * sw / u;
  int32_t *t = mt_xcalloc((size_t)n_pa, sizeof(int32_t));
  for (int64_t r = 0; r < R; r++)
    for (int64_t n = 0; n < np; n++) {
      const int64_t p = r * sw + n * a;
      for (int64_t c = 0; c < dr; c += u)
        t[(p + kr + c) / u] = U(x, x->oRT + (r * (np + 2) + n) * dr + c);
    }
  x->t_pa = upload(m, t, n_pa);
  free(t);
  /* KVA <- the cache row [latent, k_pe] as the key, its latent as the value */
  const int64_t n_kva = R * (a + kr) / u;
  t = mt_xcalloc((size_t)n_kva, sizeof(int32_t));
  for (int64_t j = 0; j < R; j++) {
    for (int64_t c = 0; c < a; c += u) t[(j * (a + kr) + c) / u] = U(x, j * a + c);
    for (int64_t c = 0; c < kr; c += u) t[(j * (a + kr) + a + c) / u] = U(x, j * a + c);
  }
  x->t_kva = upload(m, t, n_kva);
  free(t);
}

/* The absorbed tail (DeepSeek-V2 §2.1.2): per local head n, q_lat = q_nope
 * W_UK[n] [rows, kr] (W_UK[n] = linear_kv_up_proj's key rows of head n,
 * [dn, kr]); one-group attention (MQA) of [q_lat, q_pe] over the cached
 * [latent, k_pe] with the latent as the value (hn = kr + dr, hv = kr, the
 * MLA softmax scale): CA [rows, np, kr]; ctx[:, n] = CA[:, n] W_UV[n]^T
 * (W_UV[n] = head n's value rows, [dv, kr]). The same products as the
 * up-projected path in another order. */
static void absorbed(mt_infer_mla *x, const mt_attention_tensors *w, const void *cache, void *ctx,
                     float *lse, int64_t rows, int64_t pos0) {
  mt_backend *be = x->m->be;
  const int64_t np = x->np, kr = x->kr, dr = x->dr, dn = x->dn, dv = x->dv, hq = x->hq;
  const int64_t L = pos0 + rows, u = x->u, a = kr + dr;
  const size_t es = x->es;
  const char *wu = w->linear_kv_up_proj.weight;
  char *S = x->S;
  const int64_t sw = (np + 1) * a + kr;
  be->ops->moe_gather_rows(be, x->PA, S, x->t_pa, rows * sw / u, u); /* q_pe */
  for (int64_t n = 0; n < np; n++) /* q_lat into head n's first kr channels */
    mt_linear_gemm(be, 0, 0, rows, kr, dn, S + (size_t)(n * hq) * es, np * hq,
                   wu + (size_t)(n * (dn + dv) * kr) * es, kr, 0.0f,
                   (char *)x->PA + (size_t)(n * a) * es, sw, be->dtype, NULL);
  be->ops->moe_gather_rows(be, x->KVA, cache, x->t_kva, L * (a + kr) / u, u);
  mt_attn_desc d = desc(x, rows, pos0);
  d.hn = (int)a;
  d.hv = (int)kr;
  d.ng = 1;
  be->ops->flash_attn_fwd(be, &d, x->CA, lse, x->PA, x->KVA);
  for (int64_t n = 0; n < np; n++)
    mt_linear_gemm(be, 0, 1, rows, dv, kr, (char *)x->CA + (size_t)(n * kr) * es, np * kr,
                   wu + (size_t)((n * (dn + dv) + dn) * kr) * es, kr, 0.0f,
                   (char *)ctx + (size_t)(n * dv) * es, np * dv, be->dtype, NULL);
}

void mt_infer_mla_attention(mt_infer_mla *x, mt_tp_ctx *tp, int li, const void *ln, void *ctx,
                            float *lse, int64_t rows, int64_t pos0) {
  mt_gpt *m = x->m;
  mt_backend *be = m->be;
  const mt_attention_tensors *w = &m->w.layers[li].self_attention;
  const int64_t h = m->cfg.model.hidden_size, np = x->np, kr = x->kr, dr = x->dr;
  const int64_t L = pos0 + rows, u = x->u;
  char *S = x->S;
  const size_t es = x->es;
  /* Q [rows, np, hq] */
  if (x->qr > 0) {
    mt_linear_fwd(be, x->q_c, ln, w->linear_q_down_proj.weight, NULL, rows, x->qr, h);
    latent_norm(x, x->q_cn, x->q_c, &w->q_layernorm, rows, x->qr);
    mt_column_parallel_linear_fwd(tp, S, x->q_cn, w->linear_q_up_proj.weight, NULL,
                                  np * x->hq, x->qr);
  } else {
    mt_column_parallel_linear_fwd(tp, S, ln, w->linear_q_proj.weight, NULL, np * x->hq, h);
  }
  /* kv_c [rows, kr] and k_pe [rows, dr]: linear_kv_down_proj's two row blocks */
  const char *wd = w->linear_kv_down_proj.weight;
  mt_linear_fwd(be, x->kv_c, ln, wd, NULL, rows, kr, h);
  mt_linear_fwd(be, S + x->oKPE * es, ln, wd + (size_t)(kr * h) * es, NULL, rows, dr, h);
  latent_norm(x, S + x->oKVN * es, x->kv_c, &w->kv_layernorm, rows, kr);
  /* rotate q_pe and k_pe; append [latent, k_pe] to the cache */
  be->ops->moe_gather_rows(be, S + x->oRT * es, S, x->t_rt, rows * (np + 2) * dr / u, u);
  rope(x, rows, pos0);
  char *cache = x->cache[li];
  be->ops->moe_gather_rows(be, cache + (size_t)(pos0 * (kr + dr)) * es, S, x->t_cache,
                           rows * (kr + dr) / u, u);
  if (x->PA) {
    absorbed(x, w, cache, ctx, lse, rows, pos0);
    return;
  }
  /* up-project every cached latent: KVU [L, np, dn + dv] (this rank's heads) */
  be->ops->memcpy_d2d(be, S + x->oC * es, cache, (size_t)(L * (kr + dr)) * es);
  mt_linear_gemm(be, 0, 1, L, np * (x->dn + x->dv), kr, S + x->oC * es, kr + dr,
                 w->linear_kv_up_proj.weight, kr, 0.0f, S + x->oKVU * es, np * (x->dn + x->dv),
                 be->dtype, NULL);
  /* the fused attention's operands and the attention */
  be->ops->moe_gather_rows(be, x->P, S, x->t_q, rows * np * (2 * x->hq + x->dv) / u, u);
  be->ops->moe_gather_rows(be, x->KVB, S, x->t_kv, L * np * (x->hq + x->dv) / u, u);
  mt_attn_desc d = desc(x, rows, pos0);
  be->ops->flash_attn_fwd(be, &d, ctx, lse, x->P, x->KVB);
}
