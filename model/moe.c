/* model/moe.c — mixture-of-experts block: router, token dispatcher with
 * all-to-all over the EP group, experts, combine (see moe.h). */
#include "model/moe.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/gpt_internal.h" /* mt_linear_fwd / mt_linear_bwd */

struct mt_moe {
  mt_backend *be;
  mt_moe_config c;
  int E_loc;
  int64_t s_max, r_max;      /* rows sent / received at most: n_loc·k, ep·n_loc·k */
  mt_moe_stats st;
  /* scratch (MT_MEM_WORKSPACE) */
  float *logits_loc, *logits_full;   /* [n_loc, E], [n_full, E] fp32 */
  void *x_send, *y_recv;             /* [s_max, h], [r_max, h] */
  void *d_yback, *d_yrecv, *d_f;     /* [s_max, h], [r_max, h], [r_max, F] */
  void *dx_recv, *dx_send;           /* [r_max, h], [s_max, h] */
  float *dgate_dev, *dlogits_dev;    /* [n_loc, k], [n_loc, E] fp32 */
  void *dlogits_t;                   /* [n_loc, E] T (== dlogits_dev when T is fp32) */
  float *h_logits, *h_dgate, *h_dlogits;
};

struct mt_moe_acts {
  mt_moe_routing r;
  int32_t *slot_h, *send_idx_h;      /* [n_loc·k], [s_max] host */
  int64_t *cnt_send, *cnt_recv;      /* [E], [ep · E_loc] */
  int64_t *sc, *sd, *rc, *rd;        /* [ep] rows per peer and displacements */
  int64_t S, R;
  /* device (MT_MEM_ACT) */
  int32_t *slot, *send_idx;
  float *gate;                       /* [n_loc·k] */
  void *x_recv, *fc1, *gelu, *y_back; /* [r_max, h], [r_max, F] x2, [s_max, h] */
};

static void *ws(mt_backend *be, int64_t n, mt_dtype t, mt_mem_cat cat) {
  return be->ops->alloc(be, (size_t)(n > 0 ? n : 1) * mt_dtype_size(t), cat);
}

mt_moe *mt_moe_create(mt_backend *be, const mt_moe_config *c) {
  MT_ASSERT(c->E >= 1 && c->k >= 1 && c->k <= c->E);
  MT_ASSERT(c->ep_size >= 1 && c->E % c->ep_size == 0);
  mt_moe *m = mt_xcalloc(1, sizeof *m);
  m->be = be;
  m->c = *c;
  m->c.route.E = c->E;
  m->c.route.k = c->k;
  m->E_loc = c->E / c->ep_size;
  m->s_max = c->n_loc * c->k;
  m->r_max = m->s_max * c->ep_size;
  const mt_dtype T = be->dtype;
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  m->logits_loc = ws(be, c->n_loc * c->E, MT_F32, W);
  m->logits_full = c->tp ? ws(be, c->n_full * c->E, MT_F32, W) : NULL;
  m->x_send = ws(be, m->s_max * c->h, T, W);
  m->y_recv = ws(be, m->r_max * c->h, T, W);
  m->d_yback = ws(be, m->s_max * c->h, T, W);
  m->d_yrecv = ws(be, m->r_max * c->h, T, W);
  m->d_f = ws(be, m->r_max * c->F, T, W);
  m->dx_recv = ws(be, m->r_max * c->h, T, W);
  m->dx_send = ws(be, m->s_max * c->h, T, W);
  m->dgate_dev = ws(be, c->n_loc * c->k, MT_F32, W);
  m->dlogits_dev = ws(be, c->n_loc * c->E, MT_F32, W);
  m->dlogits_t = T == MT_F32 ? (void *)m->dlogits_dev : ws(be, c->n_loc * c->E, T, W);
  m->h_logits = mt_xmalloc(sizeof(float) * (size_t)(c->n_full * c->E));
  m->h_dgate = mt_xmalloc(sizeof(float) * (size_t)(c->n_loc * c->k));
  m->h_dlogits = mt_xmalloc(sizeof(float) * (size_t)(c->n_loc * c->E));
  int L = c->n_moe_layers > 0 ? c->n_moe_layers : 1;
  m->st.n_layers = L;
  m->st.E = c->E;
  m->st.routed = mt_xcalloc((size_t)L * c->E, sizeof(int64_t));
  m->st.dropped = mt_xcalloc((size_t)L, sizeof(int64_t));
  m->st.slots = mt_xcalloc((size_t)L, sizeof(int64_t));
  m->st.lb = mt_xcalloc((size_t)L, sizeof(double));
  m->st.z = mt_xcalloc((size_t)L, sizeof(double));
  m->st.n_mb = mt_xcalloc((size_t)L, sizeof(int64_t));
  return m;
}

void mt_moe_destroy(mt_moe *m) {
  if (!m) return;
  mt_backend *be = m->be;
  void *d[] = {m->logits_loc, m->logits_full, m->x_send,  m->y_recv,    m->d_yback,
               m->d_yrecv,    m->d_f,         m->dx_recv, m->dx_send,   m->dgate_dev,
               m->dlogits_dev};
  for (size_t i = 0; i < sizeof d / sizeof *d; i++) be->ops->free(be, d[i]);
  if (m->dlogits_t != (void *)m->dlogits_dev) be->ops->free(be, m->dlogits_t);
  free(m->h_logits);
  free(m->h_dgate);
  free(m->h_dlogits);
  free(m->st.routed);
  free(m->st.dropped);
  free(m->st.slots);
  free(m->st.lb);
  free(m->st.z);
  free(m->st.n_mb);
  free(m);
}

const mt_moe_config *mt_moe_get_config(const mt_moe *m) { return &m->c; }
mt_moe_stats *mt_moe_get_stats(mt_moe *m) { return &m->st; }

void mt_moe_stats_reset(mt_moe *m) {
  mt_moe_stats *s = &m->st;
  memset(s->routed, 0, sizeof(int64_t) * (size_t)s->n_layers * s->E);
  memset(s->dropped, 0, sizeof(int64_t) * (size_t)s->n_layers);
  memset(s->slots, 0, sizeof(int64_t) * (size_t)s->n_layers);
  memset(s->lb, 0, sizeof(double) * (size_t)s->n_layers);
  memset(s->z, 0, sizeof(double) * (size_t)s->n_layers);
  memset(s->n_mb, 0, sizeof(int64_t) * (size_t)s->n_layers);
}

mt_moe_acts *mt_moe_acts_create(mt_moe *m) {
  const mt_moe_config *c = &m->c;
  mt_backend *be = m->be;
  const mt_dtype T = be->dtype;
  mt_moe_acts *a = mt_xcalloc(1, sizeof *a);
  mt_moe_routing_init(&a->r, c->n_full, c->E, c->k);
  a->slot_h = mt_xmalloc(sizeof(int32_t) * (size_t)(c->n_loc * c->k));
  a->send_idx_h = mt_xmalloc(sizeof(int32_t) * (size_t)(m->s_max + 1));
  a->cnt_send = mt_xcalloc((size_t)c->E, sizeof(int64_t));
  a->cnt_recv = mt_xcalloc((size_t)c->E, sizeof(int64_t));
  a->sc = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  a->sd = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  a->rc = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  a->rd = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  a->slot = ws(be, c->n_loc * c->k, MT_I32, MT_MEM_ACT);
  a->send_idx = ws(be, m->s_max, MT_I32, MT_MEM_ACT);
  a->gate = ws(be, c->n_loc * c->k, MT_F32, MT_MEM_ACT);
  a->x_recv = ws(be, m->r_max * c->h, T, MT_MEM_ACT);
  a->fc1 = ws(be, m->r_max * c->F, T, MT_MEM_ACT);
  a->gelu = ws(be, m->r_max * c->F, T, MT_MEM_ACT);
  a->y_back = ws(be, m->s_max * c->h, T, MT_MEM_ACT);
  return a;
}

void mt_moe_acts_free(mt_moe *m, mt_moe_acts *a) {
  if (!a) return;
  mt_backend *be = m->be;
  void *d[] = {a->slot, a->send_idx, a->gate, a->x_recv, a->fc1, a->gelu, a->y_back};
  for (size_t i = 0; i < sizeof d / sizeof *d; i++) be->ops->free(be, d[i]);
  mt_moe_routing_free(&a->r);
  free(a->slot_h);
  free(a->send_idx_h);
  free(a->cnt_send);
  free(a->cnt_recv);
  free(a->sc);
  free(a->sd);
  free(a->rc);
  free(a->rd);
  free(a);
}

const mt_moe_routing *mt_moe_acts_routing(const mt_moe_acts *a) { return &a->r; }

/* Local send order: kept slots of this rank's tokens sorted by destination
 * expert, then token, then slot; counts per expert and per EP peer, then the
 * counts all-to-all (every receiver learns its splits before the tokens
 * move, so skewed routing cannot desynchronise the group). */
static void plan_dispatch(mt_moe *m, mt_moe_acts *a) {
  const mt_moe_config *c = &m->c;
  const int E = c->E, k = c->k, P = c->ep_size, El = m->E_loc;
  const mt_moe_routing *r = &a->r;
  memset(a->cnt_send, 0, sizeof(int64_t) * (size_t)E);
  for (int64_t i = 0; i < c->n_loc * k; i++)
    if (r->kept[c->t0 * k + i]) a->cnt_send[r->expert[c->t0 * k + i]]++;
  int64_t *pos = mt_xmalloc(sizeof(int64_t) * (size_t)E);
  int64_t acc = 0;
  for (int e = 0; e < E; e++) {
    pos[e] = acc;
    acc += a->cnt_send[e];
  }
  a->S = acc;
  for (int64_t i = 0; i < c->n_loc; i++)
    for (int j = 0; j < k; j++) {
      int64_t g = (c->t0 + i) * k + j;
      if (!r->kept[g]) {
        a->slot_h[i * k + j] = -1;
        continue;
      }
      int64_t row = pos[r->expert[g]]++;
      a->slot_h[i * k + j] = (int32_t)row;
      a->send_idx_h[row] = (int32_t)i;
    }
  free(pos);
  if (c->ep) mt_alltoall(c->ep, a->cnt_send, a->cnt_recv, El, MT_I64);
  else memcpy(a->cnt_recv, a->cnt_send, sizeof(int64_t) * (size_t)E);
  int64_t so = 0, ro = 0;
  for (int p = 0; p < P; p++) {
    a->sc[p] = a->rc[p] = 0;
    for (int le = 0; le < El; le++) {
      a->sc[p] += a->cnt_send[p * El + le];
      a->rc[p] += a->cnt_recv[p * El + le];
    }
    a->sd[p] = so;
    a->rd[p] = ro;
    so += a->sc[p];
    ro += a->rc[p];
  }
  a->R = ro;
  MT_ASSERT(a->S <= m->s_max && a->R <= m->r_max);
}

static void scale_rows(int64_t *dst, const int64_t *src, int n, int64_t h) {
  for (int i = 0; i < n; i++) dst[i] = src[i] * h;
}

/* all-to-allv of rows [*, h] (T): rows per peer sc/sd -> rc/rd. */
static void a2a_rows(mt_moe *m, const void *send, const int64_t *sc, const int64_t *sd, void *recv,
                     const int64_t *rc, const int64_t *rd) {
  const int P = m->c.ep_size;
  int64_t buf[4 * 64];
  int64_t *tmp = P <= 64 ? buf : mt_xmalloc(sizeof(int64_t) * 4 * (size_t)P);
  scale_rows(tmp, sc, P, m->c.h);
  scale_rows(tmp + P, sd, P, m->c.h);
  scale_rows(tmp + 2 * P, rc, P, m->c.h);
  scale_rows(tmp + 3 * P, rd, P, m->c.h);
  mt_alltoallv(m->c.ep, send, tmp, tmp + P, recv, tmp + 2 * P, tmp + 3 * P, m->be->dtype);
  if (tmp != buf) free(tmp);
}

void mt_moe_forward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, void *out, const void *x,
                    int record) {
  mt_backend *be = m->be;
  const mt_moe_config *c = &m->c;
  const int E = c->E, k = c->k, El = m->E_loc;
  const int64_t h = c->h, F = c->F;
  const size_t es = mt_dtype_size(be->dtype);
  /* router logits [n_loc, E] = x W_r^T in fp32 */
  mt_gemm_desc d = {0};
  d.trans_b = 1;
  d.m = (int)c->n_loc;
  d.n = E;
  d.k = (int)h;
  d.alpha = 1.0f;
  d.a = x;
  d.lda = h;
  d.b = w->router;
  d.ldb = h;
  d.c = m->logits_loc;
  d.ldc = E;
  d.a_type = d.b_type = be->dtype;
  d.c_type = MT_F32;
  d.batch = 1;
  be->ops->gemm(be, &d);
  const float *lg = m->logits_loc;
  if (c->tp) {
    mt_allgather(c->tp, m->logits_loc, m->logits_full, c->n_loc * E, MT_F32);
    lg = m->logits_full;
  }
  be->ops->memcpy_d2h(be, m->h_logits, lg, sizeof(float) * (size_t)(c->n_full * E));
  mt_moe_route(&c->route, m->h_logits, c->n_full, &a->r);
  plan_dispatch(m, a);
  be->ops->memcpy_h2d(be, a->slot, a->slot_h, sizeof(int32_t) * (size_t)(c->n_loc * k));
  be->ops->memcpy_h2d(be, a->send_idx, a->send_idx_h, sizeof(int32_t) * (size_t)a->S);
  be->ops->memcpy_h2d(be, a->gate, a->r.gate + c->t0 * k, sizeof(float) * (size_t)(c->n_loc * k));
  /* permute and dispatch */
  void *xs = c->ep ? m->x_send : a->x_recv;
  if (a->S) be->ops->moe_gather_rows(be, xs, x, a->send_idx, a->S, h);
  if (c->ep) a2a_rows(m, m->x_send, a->sc, a->sd, a->x_recv, a->rc, a->rd);
  /* experts: one GEMM per (source peer, local expert) block of rows */
  void *yr = c->ep ? m->y_recv : a->y_back;
  int64_t off = 0;
  for (int p = 0; p < c->ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = a->cnt_recv[p * El + le];
      if (n) mt_linear_fwd(be, (char *)a->fc1 + off * F * es, (char *)a->x_recv + off * h * es,
                           w->fc1_w[le], w->fc1_b[le], n, F, h);
      off += n;
    }
  if (a->R) be->ops->gelu_fwd(be, a->gelu, a->fc1, a->R * F);
  off = 0;
  for (int p = 0; p < c->ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = a->cnt_recv[p * El + le];
      if (n) mt_linear_fwd(be, (char *)yr + off * h * es, (char *)a->gelu + off * F * es,
                           w->fc2_w[le], w->fc2_b[le], n, h, F);
      off += n;
    }
  if (c->ep) a2a_rows(m, m->y_recv, a->rc, a->rd, a->y_back, a->sc, a->sd);
  /* unpermute and combine with the gate weights */
  be->ops->moe_combine_fwd(be, out, a->y_back, a->slot, a->gate, c->n_loc, k, h);
  if (record >= 0 && record < m->st.n_layers) {
    mt_moe_stats *s = &m->st;
    for (int e = 0; e < E; e++) s->routed[(int64_t)record * E + e] += a->r.routed[e];
    s->dropped[record] += a->r.dropped;
    s->slots[record] += c->n_full * k;
    s->lb[record] += a->r.lb_loss;
    s->z[record] += a->r.z_loss;
    s->n_mb[record]++;
  }
}

void mt_moe_backward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, const mt_moe_grads *g,
                     void *dx, const void *dy, const void *x, float aux_scale) {
  mt_backend *be = m->be;
  const mt_moe_config *c = &m->c;
  const int E = c->E, k = c->k, El = m->E_loc;
  const int64_t h = c->h, F = c->F;
  const size_t es = mt_dtype_size(be->dtype);
  /* combine: gradients of the returned expert rows and of the gate weights */
  be->ops->moe_combine_bwd(be, m->d_yback, m->dgate_dev, dy, a->y_back, a->slot, a->gate, c->n_loc,
                           k, h);
  void *dyr = m->d_yback;
  if (c->ep) {
    a2a_rows(m, m->d_yback, a->sc, a->sd, m->d_yrecv, a->rc, a->rd);
    dyr = m->d_yrecv;
  }
  int64_t off = 0;
  for (int p = 0; p < c->ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = a->cnt_recv[p * El + le];
      if (n) mt_linear_bwd(be, (char *)m->d_f + off * F * es, g->fc2_w[le], g->fc2_b[le],
                           (char *)dyr + off * h * es, (char *)a->gelu + off * F * es,
                           w->fc2_w[le], n, h, F);
      off += n;
    }
  if (a->R) be->ops->gelu_bwd(be, m->d_f, a->fc1, m->d_f, a->R * F);
  void *dxr = c->ep ? m->dx_recv : m->dx_send;
  off = 0;
  for (int p = 0; p < c->ep_size; p++)
    for (int le = 0; le < El; le++) {
      int64_t n = a->cnt_recv[p * El + le];
      if (n) mt_linear_bwd(be, (char *)dxr + off * h * es, g->fc1_w[le], g->fc1_b[le],
                           (char *)m->d_f + off * F * es, (char *)a->x_recv + off * h * es,
                           w->fc1_w[le], n, F, h);
      off += n;
    }
  if (c->ep) a2a_rows(m, m->dx_recv, a->rc, a->rd, m->dx_send, a->sc, a->sd);
  /* un-permute: each token sums the gradients of its kept slots */
  be->ops->moe_combine_fwd(be, dx, m->dx_send, a->slot, NULL, c->n_loc, k, h);
  /* router: gate and auxiliary-loss gradients through softmax / top-k */
  be->ops->memcpy_d2h(be, m->h_dgate, m->dgate_dev, sizeof(float) * (size_t)(c->n_loc * k));
  mt_moe_route_backward(&c->route, &a->r, c->t0, c->n_loc, m->h_dgate,
                        (double)c->lb_coeff * aux_scale, (double)c->z_coeff * aux_scale,
                        m->h_dlogits);
  be->ops->memcpy_h2d(be, m->dlogits_dev, m->h_dlogits, sizeof(float) * (size_t)(c->n_loc * E));
  if (m->dlogits_t != (void *)m->dlogits_dev)
    be->ops->cast(be, m->dlogits_t, be->dtype, m->dlogits_dev, MT_F32, c->n_loc * E);
  /* dx += dlogits W_r ; dW_r += dlogits^T x */
  mt_gemm_desc d = {0};
  d.m = (int)c->n_loc;
  d.n = (int)h;
  d.k = E;
  d.alpha = 1.0f;
  d.beta = 1.0f;
  d.a = m->dlogits_t;
  d.lda = E;
  d.b = w->router;
  d.ldb = h;
  d.c = dx;
  d.ldc = h;
  d.a_type = d.b_type = d.c_type = be->dtype;
  d.batch = 1;
  be->ops->gemm(be, &d);
  mt_gemm_desc e = {0};
  e.trans_a = 1;
  e.m = E;
  e.n = (int)h;
  e.k = (int)c->n_loc;
  e.alpha = 1.0f;
  e.beta = 1.0f;
  e.a = m->dlogits_t;
  e.lda = E;
  e.b = x;
  e.ldb = h;
  e.c = g->router;
  e.ldc = h;
  e.a_type = e.b_type = be->dtype;
  e.c_type = MT_F32;
  e.batch = 1;
  be->ops->gemm(be, &e);
}
