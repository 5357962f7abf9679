/* model/moe_token_dispatcher.c — permutation, counts exchange, token
 * all-to-all and un-permutation of an MoE layer (see
 * moe_token_dispatcher.h). */
#include "model/moe_token_dispatcher.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_rowbuf.h"

struct mt_moe_dispatcher {
  mt_backend *be;
  mt_moe_dispatcher_config c;
  int E_loc;
  int64_t s_max, r_max;      /* rows sent / received at most: n_loc·k, ep·n_loc·k */
  mt_moe_rowbuf *recv;       /* receive-side buffers: [C, h] each, C = the high-water mark
                                of the rows received (E·C fixed when padding) */
  /* scratch (MT_MEM_WORKSPACE) */
  void *x_send, *y_recv;     /* [s_max, h], [C, h] */
  void *d_yback, *d_yrecv;   /* [s_max, h], [C, h] */
  void *dx_recv, *dx_send;   /* [C, h], [s_max, h] */
  float *dgate_dev;          /* [n_loc, k] fp32 */
};

static void *ws(mt_backend *be, int64_t n, mt_dtype t, mt_mem_cat cat) {
  return be->ops->alloc(be, (size_t)(n > 0 ? n : 1) * mt_dtype_size(t), cat);
}

mt_moe_dispatcher *mt_moe_dispatcher_create(mt_backend *be, const mt_moe_dispatcher_config *c) {
  MT_ASSERT(c->ep_size >= 1 && c->E % c->ep_size == 0);
  mt_moe_dispatcher *d = mt_xcalloc(1, sizeof *d);
  d->be = be;
  d->c = *c;
  d->E_loc = c->E / c->ep_size;
  if (c->pad_capacity > 0) { /* static splits: C rows per (source rank, expert) */
    d->s_max = c->pad_capacity * c->E;
    d->r_max = d->s_max;
  } else {
    d->s_max = c->n_loc * c->k;
    d->r_max = d->s_max * c->ep_size;
  }
  const mt_dtype T = be->dtype;
  const mt_mem_cat W = MT_MEM_WORKSPACE;
  /* padding: static splits, E·C rows always; dropless: grown to the rows
   * the counts exchange announces (mt_moe_rowbuf) */
  d->recv = mt_moe_rowbuf_create(be, c->pad_capacity > 0 ? d->r_max : 0, d->r_max);
  d->x_send = ws(be, d->s_max * c->h, T, W);
  mt_moe_rowbuf_add(d->recv, &d->y_recv, c->h, T, W, NULL);
  d->d_yback = ws(be, d->s_max * c->h, T, W);
  mt_moe_rowbuf_add(d->recv, &d->d_yrecv, c->h, T, W, NULL);
  mt_moe_rowbuf_add(d->recv, &d->dx_recv, c->h, T, W, NULL);
  d->dx_send = ws(be, d->s_max * c->h, T, W);
  d->dgate_dev = ws(be, c->n_loc * c->k, MT_F32, W);
  return d;
}

void mt_moe_dispatcher_destroy(mt_moe_dispatcher *d) {
  if (!d) return;
  mt_backend *be = d->be;
  void *p[] = {d->x_send, d->d_yback, d->dx_send, d->dgate_dev};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  mt_moe_rowbuf_remove(d->recv, &d->y_recv);
  mt_moe_rowbuf_remove(d->recv, &d->d_yrecv);
  mt_moe_rowbuf_remove(d->recv, &d->dx_recv);
  mt_moe_rowbuf_destroy(d->recv);
  free(d);
}

int64_t mt_moe_dispatcher_recv_capacity(const mt_moe_dispatcher *d) { return d->r_max; }

int64_t mt_moe_dispatcher_recv_rows(const mt_moe_dispatcher *d) {
  return mt_moe_rowbuf_rows(d->recv);
}

void mt_moe_dispatch_state_init(mt_moe_dispatcher *d, mt_moe_dispatch_state *s) {
  const mt_moe_dispatcher_config *c = &d->c;
  mt_backend *be = d->be;
  memset(s, 0, sizeof *s);
  s->slot_h = mt_xmalloc(sizeof(int32_t) * (size_t)(c->n_loc * c->k));
  s->send_idx_h = mt_xmalloc(sizeof(int32_t) * (size_t)(c->n_loc * c->k + 1));
  s->cnt_send = mt_xcalloc((size_t)c->E, sizeof(int64_t));
  s->cnt_real = mt_xcalloc((size_t)c->E, sizeof(int64_t));
  s->cnt_recv = mt_xcalloc((size_t)c->E, sizeof(int64_t));
  s->sc = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  s->sd = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  s->rc = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  s->rd = mt_xcalloc((size_t)c->ep_size, sizeof(int64_t));
  s->slot = ws(be, c->n_loc * c->k, MT_I32, MT_MEM_ACT);
  s->send_idx = ws(be, c->n_loc * c->k, MT_I32, MT_MEM_ACT);
  s->gate = ws(be, c->n_loc * c->k, MT_F32, MT_MEM_ACT);
  mt_moe_rowbuf_add(d->recv, &s->x_recv, c->h, be->dtype, MT_MEM_ACT, &s->R);
  s->y_back = ws(be, d->s_max * c->h, be->dtype, MT_MEM_ACT);
}

void mt_moe_dispatch_state_free(mt_moe_dispatcher *d, mt_moe_dispatch_state *s) {
  mt_backend *be = d->be;
  void *p[] = {s->slot, s->send_idx, s->gate, s->y_back};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) be->ops->free(be, p[i]);
  mt_moe_rowbuf_remove(d->recv, &s->x_recv);
  free(s->slot_h);
  free(s->send_idx_h);
  free(s->cnt_send);
  free(s->cnt_real);
  free(s->cnt_recv);
  free(s->sc);
  free(s->sd);
  free(s->rc);
  free(s->rd);
  memset(s, 0, sizeof *s);
}

/* Local send order: kept slots of this rank's tokens sorted by destination
 * expert, then token, then slot; counts per expert and per EP peer, then the
 * counts all-to-all (every receiver learns its splits before the tokens
 * move, so skewed routing cannot desynchronise the group). */
static void plan_dispatch(mt_moe_dispatcher *d, mt_moe_dispatch_state *a, const mt_moe_routing *r) {
  const mt_moe_dispatcher_config *c = &d->c;
  const int E = c->E, k = c->k, P = c->ep_size, El = d->E_loc;
  memset(a->cnt_send, 0, sizeof(int64_t) * (size_t)E);
  for (int64_t i = 0; i < c->n_loc * k; i++)
    if (r->kept[c->t0 * k + i]) a->cnt_send[r->expert[c->t0 * k + i]]++;
  /* pos: next compact row of expert e (send_idx, the gather order); pad:
   * next padded row (slot: expert e's rows start at e·C) */
  int64_t *pos = mt_xmalloc(sizeof(int64_t) * 2 * (size_t)E), *pad = pos + E;
  const int64_t C = c->pad_capacity;
  int64_t acc = 0;
  for (int e = 0; e < E; e++) {
    MT_ASSERT(C <= 0 || a->cnt_send[e] <= C);
    a->cnt_real[e] = a->cnt_send[e];
    pos[e] = acc;
    pad[e] = C > 0 ? e * C : acc;
    acc += a->cnt_send[e];
  }
  a->S_real = acc;
  a->S = C > 0 ? C * E : acc;
  for (int64_t i = 0; i < c->n_loc; i++)
    for (int j = 0; j < k; j++) {
      int64_t g = (c->t0 + i) * k + j;
      if (!r->kept[g]) {
        a->slot_h[i * k + j] = -1;
        continue;
      }
      const int e = r->expert[g];
      a->slot_h[i * k + j] = (int32_t)pad[e]++;
      a->send_idx_h[pos[e]++] = (int32_t)i;
    }
  free(pos);
  if (C > 0) { /* static splits: no counts exchange (Megatron's drop-and-pad) */
    for (int e = 0; e < E; e++) a->cnt_send[e] = a->cnt_recv[e] = C;
  } else if (c->ep) {
    mt_alltoall(c->ep, a->cnt_send, a->cnt_recv, El, MT_I64);
  } else {
    memcpy(a->cnt_recv, a->cnt_send, sizeof(int64_t) * (size_t)E);
  }
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
  MT_ASSERT(a->S <= d->s_max && ro <= d->r_max);
  /* the receive buffers hold the rows announced (grown before the rows
   * move; this set's previous rows are kept until R changes below) */
  mt_moe_rowbuf_reserve(d->recv, ro);
  a->R = ro;
}

static void scale_rows(int64_t *dst, const int64_t *src, int n, int64_t h) {
  for (int i = 0; i < n; i++) dst[i] = src[i] * h;
}

/* all-to-allv of rows [*, h] (T): rows per peer sc/sd -> rc/rd, with ov run
 * while it travels (no EP group: ov only). */
static void a2a_rows(mt_moe_dispatcher *d, const void *send, const int64_t *sc, const int64_t *sd,
                     void *recv, const int64_t *rc, const int64_t *rd, const mt_moe_overlap *ov) {
  mt_request *q = NULL;
  if (d->c.ep) {
    const int P = d->c.ep_size;
    int64_t buf[4 * 64];
    int64_t *tmp = P <= 64 ? buf : mt_xmalloc(sizeof(int64_t) * 4 * (size_t)P);
    scale_rows(tmp, sc, P, d->c.h);
    scale_rows(tmp + P, sd, P, d->c.h);
    scale_rows(tmp + 2 * P, rc, P, d->c.h);
    scale_rows(tmp + 3 * P, rd, P, d->c.h);
    /* with work to hide behind, started (the counts are copied at start;
     * the bits of mt_alltoallv); else the blocking call, as always */
    if (ov && ov->fn)
      q = mt_ialltoallv(d->c.ep, send, tmp, tmp + P, recv, tmp + 2 * P, tmp + 3 * P,
                        d->be->dtype);
    else
      mt_alltoallv(d->c.ep, send, tmp, tmp + P, recv, tmp + 2 * P, tmp + 3 * P, d->be->dtype);
    if (tmp != buf) free(tmp);
  }
  if (ov && ov->fn) ov->fn(ov->ctx);
  mt_wait(q);
}

/* Zero the padding rows [e·C + cnt_real[e], (e + 1)·C) of a padded [E·C, h]
 * send-order buffer. */
static void zero_padding(mt_moe_dispatcher *d, const mt_moe_dispatch_state *a, void *buf) {
  const int64_t C = d->c.pad_capacity, rb = d->c.h * (int64_t)mt_dtype_size(d->be->dtype);
  for (int e = 0; e < d->c.E; e++)
    if (a->cnt_real[e] < C)
      d->be->ops->memset0(d->be, (char *)buf + (e * C + a->cnt_real[e]) * rb,
                          (size_t)((C - a->cnt_real[e]) * rb));
}

/* Padded gather: expert e's kept rows to [e·C, e·C + cnt_real[e]), zeros
 * after them up to (e + 1)·C. */
static void gather_padded(mt_moe_dispatcher *d, const mt_moe_dispatch_state *a, void *xs,
                          const void *x) {
  const int64_t C = d->c.pad_capacity, rb = d->c.h * (int64_t)mt_dtype_size(d->be->dtype);
  int64_t off = 0;
  for (int e = 0; e < d->c.E; e++) {
    if (a->cnt_real[e])
      d->be->ops->moe_gather_rows(d->be, (char *)xs + e * C * rb, x, a->send_idx + off,
                                  a->cnt_real[e], d->c.h);
    off += a->cnt_real[e];
  }
  zero_padding(d, a, xs);
}

void mt_moe_token_dispatch(mt_moe_dispatcher *d, mt_moe_dispatch_state *a,
                           const mt_moe_routing *r, const void *x, const mt_moe_overlap *ov) {
  mt_backend *be = d->be;
  const mt_moe_dispatcher_config *c = &d->c;
  const int k = c->k;
  plan_dispatch(d, a, r);
  be->ops->memcpy_h2d(be, a->slot, a->slot_h, sizeof(int32_t) * (size_t)(c->n_loc * k));
  be->ops->memcpy_h2d(be, a->send_idx, a->send_idx_h, sizeof(int32_t) * (size_t)a->S_real);
  be->ops->memcpy_h2d(be, a->gate, r->gate + c->t0 * k, sizeof(float) * (size_t)(c->n_loc * k));
  /* permute and dispatch */
  void *xs = c->ep ? d->x_send : a->x_recv;
  if (c->pad_capacity > 0)
    gather_padded(d, a, xs, x);
  else if (a->S)
    be->ops->moe_gather_rows(be, xs, x, a->send_idx, a->S, c->h);
  a2a_rows(d, d->x_send, a->sc, a->sd, a->x_recv, a->rc, a->rd, ov);
}

void *mt_moe_dispatch_expert_out(mt_moe_dispatcher *d, mt_moe_dispatch_state *a) {
  return d->c.ep ? d->y_recv : a->y_back;
}

void mt_moe_token_combine(mt_moe_dispatcher *d, mt_moe_dispatch_state *a, void *out,
                          const mt_moe_overlap *ov) {
  const mt_moe_dispatcher_config *c = &d->c;
  a2a_rows(d, d->y_recv, a->rc, a->rd, a->y_back, a->sc, a->sd, ov);
  /* unpermute and combine with the gate weights */
  d->be->ops->moe_combine_fwd(d->be, out, a->y_back, a->slot, a->gate, c->n_loc, c->k, c->h);
}

const void *mt_moe_token_combine_bwd(mt_moe_dispatcher *d, mt_moe_dispatch_state *a,
                                     const void *dy, const float **dgate,
                                     const mt_moe_overlap *ov) {
  const mt_moe_dispatcher_config *c = &d->c;
  /* combine: gradients of the returned expert rows and of the gate weights
   * (padding rows get zero gradients: they reach the experts' backward) */
  if (c->pad_capacity > 0) zero_padding(d, a, d->d_yback);
  d->be->ops->moe_combine_bwd(d->be, d->d_yback, d->dgate_dev, dy, a->y_back, a->slot, a->gate,
                              c->n_loc, c->k, c->h);
  *dgate = d->dgate_dev;
  a2a_rows(d, d->d_yback, a->sc, a->sd, d->d_yrecv, a->rc, a->rd, ov);
  return c->ep ? d->d_yrecv : d->d_yback;
}

void *mt_moe_dispatch_expert_dgrad(mt_moe_dispatcher *d, mt_moe_dispatch_state *a) {
  (void)a;
  return d->c.ep ? d->dx_recv : d->dx_send;
}

void mt_moe_token_dispatch_bwd(mt_moe_dispatcher *d, mt_moe_dispatch_state *a, void *dx) {
  const mt_moe_dispatcher_config *c = &d->c;
  a2a_rows(d, d->dx_recv, a->rc, a->rd, d->dx_send, a->sc, a->sd, NULL);
  /* un-permute: each token sums the gradients of its kept slots */
  d->be->ops->moe_combine_fwd(d->be, dx, d->dx_send, a->slot, NULL, c->n_loc, c->k, c->h);
}
