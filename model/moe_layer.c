/* model/moe_layer.c — the MoE layer: router logits, routing, token
 * dispatch, local experts, combine, statistics (see moe_layer.h). */
#include "model/moe_layer.h"

#include <stdlib.h>
#include <string.h>

#include "core/failpoint.h"
#include "core/util.h"
#include "model/linear.h"
#include "model/moe_etp.h"
#include "model/moe_experts.h"
#include "model/moe_token_dispatcher.h"
#include "model/moe_layer_internal.h"

struct mt_moe {
  mt_backend *be;
  mt_moe_config c;
  int E_loc;
  mt_moe_stats st;
  mt_moe_dispatcher *disp;
  mt_moe_experts *experts;
  mt_moe_etp *etp;                   /* NULL when etp == 1 */
  /* router scratch (MT_MEM_WORKSPACE) */
  float *logits_loc, *logits_full;   /* [n_loc, E], [n_full, E] fp32 */
  float *logits_tp;                  /* [tp·n_loc, E] fp32: the TP gather before the CP one */
  float *dlogits_dev;                /* [n_loc, E] fp32 */
  void *dlogits_t;                   /* [n_loc, E] T (== dlogits_dev when T is fp32) */
  float *h_logits, *h_dgate, *h_dlogits;
  int skew;                          /* failpoint moe_route_skew: route every token to experts
                                        0 .. k-1 (the buffers' worst case; tests only) */
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
  m->c.route.round_bf16 = c->router_dtype == MT_MOE_ROUTER_DTYPE_NONE && be->dtype == MT_BF16;
  m->E_loc = c->E / c->ep_size;
  m->skew = mt_failpoint_get("moe_route_skew", NULL) >= 0;
  const mt_dtype T = be->dtype;
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  m->logits_loc = ws(be, c->n_loc * c->E, MT_F32, W);
  m->logits_full = c->tp || c->cp ? ws(be, c->n_full * c->E, MT_F32, W) : NULL;
  m->logits_tp = c->tp && c->cp ? ws(be, c->n_loc * mt_group_size(c->tp) * c->E, MT_F32, W) : NULL;
  mt_moe_dispatcher_config dc = {.E = c->E, .k = c->k, .h = c->h, .n_loc = c->n_loc,
                                 .t0 = c->t0, .ep = c->ep, .ep_size = c->ep_size};
  if (c->route.pad_to_capacity) dc.pad_capacity = mt_moe_capacity(&m->c.route, c->n_full);
  m->disp = mt_moe_dispatcher_create(be, &dc);
  const int64_t r_max = mt_moe_dispatcher_recv_capacity(m->disp);
  mt_moe_experts_config xc = {.E_loc = m->E_loc, .ep_size = c->ep_size, .h = c->h, .F = c->F,
                              .swiglu = c->swiglu, .r_max = r_max, .grouped = c->grouped_gemm};
  const int n_etp = c->etp ? mt_group_size(c->etp) : 1;
  if (c->etp) { /* the experts see etp·ep blocks of rows and F/etp columns */
    MT_ASSERT(c->F % n_etp == 0);
    xc.ep_size *= n_etp;
    xc.F /= n_etp;
    xc.r_max = n_etp * r_max;
  }
  /* padded: the rows are static (E·C per rank, etp of them gathered);
   * dropless: the row buffers start empty and grow to the rows received */
  xc.rows0 = c->route.pad_to_capacity ? xc.r_max : 0;
  m->experts = mt_moe_experts_create(be, &xc);
  if (c->etp) {
    mt_moe_etp_config tc = {.etp = c->etp, .n_blocks = c->E, .h = c->h, .r_max = r_max,
                            .rows = mt_moe_experts_rowbuf(m->experts)};
    m->etp = mt_moe_etp_create(be, &tc);
    MT_ASSERT(mt_moe_etp_rows_capacity(m->etp) == xc.r_max);
  }
  m->dlogits_dev = ws(be, c->n_loc * c->E, MT_F32, W);
  m->dlogits_t = T == MT_F32 ? (void *)m->dlogits_dev : ws(be, c->n_loc * c->E, T, W);
  m->h_logits = mt_xmalloc(sizeof(float) * (size_t)(c->n_full * c->E));
  m->h_dgate = mt_xmalloc(sizeof(float) * (size_t)(c->n_loc * c->k));
  m->h_dlogits = mt_xmalloc(sizeof(float) * (size_t)(c->n_loc * c->E));
  int L = c->n_moe_layers > 0 ? c->n_moe_layers : 1;
  m->st.n_layers = L;
  m->st.E = c->E;
  m->st.routed = mt_xcalloc((size_t)L * c->E, sizeof(int64_t));
  m->st.kept = mt_xcalloc((size_t)L * c->E, sizeof(int64_t));
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
  mt_moe_etp_destroy(m->etp); /* its buffers are in the experts' row group */
  mt_moe_experts_destroy(m->experts);
  mt_moe_dispatcher_destroy(m->disp);
  void *d[] = {m->logits_loc, m->logits_full, m->logits_tp, m->dlogits_dev};
  for (size_t i = 0; i < sizeof d / sizeof *d; i++) be->ops->free(be, d[i]);
  if (m->dlogits_t != (void *)m->dlogits_dev) be->ops->free(be, m->dlogits_t);
  free(m->h_logits);
  free(m->h_dgate);
  free(m->h_dlogits);
  free(m->st.routed);
  free(m->st.kept);
  free(m->st.dropped);
  free(m->st.slots);
  free(m->st.lb);
  free(m->st.z);
  free(m->st.n_mb);
  free(m);
}

mt_moe_stats *mt_moe_get_stats(mt_moe *m) { return &m->st; }

void mt_moe_buffer_rows(const mt_moe *m, int64_t *recv, int64_t *expert, int64_t *worst) {
  *recv = mt_moe_dispatcher_recv_rows(m->disp);
  *expert = mt_moe_rowbuf_rows(mt_moe_experts_rowbuf(m->experts));
  *worst = mt_moe_dispatcher_recv_capacity(m->disp);
}

void mt_moe_stats_reset(mt_moe *m) {
  mt_moe_stats *s = &m->st;
  memset(s->routed, 0, sizeof(int64_t) * (size_t)s->n_layers * s->E);
  memset(s->kept, 0, sizeof(int64_t) * (size_t)s->n_layers * s->E);
  memset(s->dropped, 0, sizeof(int64_t) * (size_t)s->n_layers);
  memset(s->slots, 0, sizeof(int64_t) * (size_t)s->n_layers);
  memset(s->lb, 0, sizeof(double) * (size_t)s->n_layers);
  memset(s->z, 0, sizeof(double) * (size_t)s->n_layers);
  memset(s->n_mb, 0, sizeof(int64_t) * (size_t)s->n_layers);
}

mt_moe_acts *mt_moe_acts_create(mt_moe *m) {
  const mt_moe_config *c = &m->c;
  mt_moe_acts *a = mt_xcalloc(1, sizeof *a);
  mt_moe_routing_init(&a->r, c->n_full, c->E, c->k);
  mt_moe_dispatch_state_init(m->disp, &a->d);
  mt_moe_experts_acts_init(m->experts, &a->e);
  if (m->etp) mt_moe_etp_state_init(m->etp, &a->t);
  return a;
}

void mt_moe_acts_free(mt_moe *m, mt_moe_acts *a) {
  if (!a) return;
  if (m->etp) mt_moe_etp_state_free(m->etp, &a->t);
  mt_moe_experts_acts_free(m->experts, &a->e);
  mt_moe_dispatch_state_free(m->disp, &a->d);
  mt_moe_routing_free(&a->r);
  free(a);
}

static mt_moe_expert_weights expert_weights(const mt_moe_weights *w) {
  mt_moe_expert_weights e = {w->fc1_w, w->fc1_b, w->fc2_w, w->fc2_b, w->fp8,
                             {w->fp8_key[0], w->fp8_key[1]}};
  return e;
}

/* Add this forward's routing statistics under MoE layer `record`. */
static void record_stats(mt_moe *m, const mt_moe_routing *r, int record) {
  const int E = m->c.E;
  mt_moe_stats *s = &m->st;
  for (int e = 0; e < E; e++) s->routed[(int64_t)record * E + e] += r->routed[e];
  for (int e = 0; e < E; e++) s->kept[(int64_t)record * E + e] += r->kept_count[e];
  s->dropped[record] += r->dropped;
  s->slots[record] += m->c.n_full * m->c.k;
  s->lb[record] += r->lb_loss;
  s->z[record] += r->z_loss;
  s->n_mb[record]++;
}

void mt_moe_forward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, void *out, const void *x,
                    int record, const mt_moe_overlap ov[2]) {
  mt_backend *be = m->be;
  const mt_moe_config *c = &m->c;
  const int E = c->E;
  const int64_t h = c->h;
  /* router logits [n_loc, E] = x W_r^T in fp32 */
  mt_linear_gemm(be, 0, 1, c->n_loc, E, h, x, h, w->router, h, 0.0f, m->logits_loc, E, MT_F32,
                 NULL);
  const float *lg = m->logits_loc;
  if (c->tp) {
    float *dst = c->cp ? m->logits_tp : m->logits_full;
    mt_allgather(c->tp, m->logits_loc, dst, c->n_loc * E, MT_F32);
    lg = dst;
  }
  if (c->cp) {
    const int64_t n_tp = c->tp ? c->n_loc * mt_group_size(c->tp) : c->n_loc;
    mt_allgather(c->cp, lg, m->logits_full, n_tp * E, MT_F32);
    lg = m->logits_full;
  }
  be->ops->memcpy_d2h(be, m->h_logits, lg, sizeof(float) * (size_t)(c->n_full * E));
  if (m->skew) /* experts 0 .. k-1 win every token's top-k: all rows go to EP rank 0 */
    for (int64_t i = 0; i < c->n_full; i++)
      for (int e = 0; e < c->k; e++) m->h_logits[i * E + e] += 100.0f;
  mt_moe_route(&c->route, m->h_logits, w->expert_bias, w->global_tokens_per_expert, c->n_full,
               &a->r);
  /* permute and dispatch, local experts, return and combine */
  mt_moe_token_dispatch(m->disp, &a->d, &a->r, x, ov ? &ov[0] : NULL);
  mt_moe_expert_weights ew = expert_weights(w);
  mt_moe_etp_experts_forward(m->etp, &a->t, m->experts, &a->e, &ew,
                             mt_moe_dispatch_expert_out(m->disp, &a->d), a->d.x_recv,
                             a->d.cnt_recv, a->d.R);
  mt_moe_token_combine(m->disp, &a->d, out, ov ? &ov[1] : NULL);
  if (record >= 0 && record < m->st.n_layers) record_stats(m, &a->r, record);
}

void mt_moe_backward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, const mt_moe_grads *g,
                     void *dx, const void *dy, const void *x, float aux_scale,
                     const mt_moe_overlap *ov) {
  mt_backend *be = m->be;
  const mt_moe_config *c = &m->c;
  const int E = c->E, k = c->k;
  const int64_t h = c->h;
  /* combine: gradients of the returned expert rows and of the gate weights */
  const float *dgate;
  const void *dyr = mt_moe_token_combine_bwd(m->disp, &a->d, dy, &dgate, ov);
  mt_moe_expert_weights ew = expert_weights(w);
  mt_moe_expert_grads eg = {g->fc1_w, g->fc1_b, g->fc2_w, g->fc2_b};
  mt_moe_etp_experts_backward(m->etp, &a->t, m->experts, &a->e, &ew, &eg,
                              mt_moe_dispatch_expert_dgrad(m->disp, &a->d), dyr, a->d.x_recv,
                              a->d.cnt_recv, a->d.R);
  /* back to the tokens' ranks; each token sums the gradients of its kept slots */
  mt_moe_token_dispatch_bwd(m->disp, &a->d, dx);
  /* router: gate and auxiliary-loss gradients through softmax / top-k */
  be->ops->memcpy_d2h(be, m->h_dgate, dgate, sizeof(float) * (size_t)(c->n_loc * k));
  mt_moe_route_backward(&c->route, &a->r, c->t0, c->n_loc, m->h_dgate,
                        (double)c->lb_coeff * aux_scale, (double)c->z_coeff * aux_scale,
                        m->h_dlogits);
  be->ops->memcpy_h2d(be, m->dlogits_dev, m->h_dlogits, sizeof(float) * (size_t)(c->n_loc * E));
  if (m->dlogits_t != (void *)m->dlogits_dev)
    be->ops->cast(be, m->dlogits_t, be->dtype, m->dlogits_dev, MT_F32, c->n_loc * E);
  /* dx += dlogits W_r ; dW_r += dlogits^T x */
  mt_linear_gemm(be, 0, 0, c->n_loc, h, E, m->dlogits_t, E, w->router, h, 1.0f, dx, h, be->dtype,
                 NULL);
  mt_linear_gemm(be, 1, 0, E, h, c->n_loc, m->dlogits_t, E, x, h, 1.0f, g->router, h, MT_F32,
                 NULL);
}
