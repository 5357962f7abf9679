/* model/moe_router_loss.c — the balance losses of the router (aux_loss,
 * seq_aux_loss, global_aux_loss, none) and the router backward (see
 * moe_router.h step 7 and mt_moe_route_backward). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_router.h"
#include "model/moe_router_internal.h"

/* Every balance loss is linear in the routing probabilities q:
 *   LB = Σ_t Σ_e coef[t % rows, e] · q[t, e]
 * with (c = counts of the routing map m, N tokens, k slots each):
 *   aux_loss:        rows 1,  coef_e = E·c_e / (k·N²)
 *   seq_aux_loss:    rows b,  coef_{s,e} = E·c_{s,e} / (b·k·S²), S = N / b
 *                    (c_{s,e}: slots of sample s routed to e)
 *   global_aux_loss: rows 1,  coef_e = E·f_e / N
 *   none:            coef = 0.
 * The coefficients are constants of the backward (the routing map is). */
void mt_moe_balance_loss(const mt_moe_route_opts *o, int biased, const int64_t *global_tpe,
                         int64_t n, mt_moe_routing *r) {
  const int E = o->E, k = o->k;
  const int rows = o->lb_type == MT_MOE_LB_SEQ_AUX && o->seq_b > 1 ? o->seq_b : 1;
  MT_ASSERT(n % rows == 0);
  r->lb_coef = mt_xrealloc(r->lb_coef, sizeof(double) * (size_t)rows * (size_t)E);
  r->lb_rows = rows;
  memset(r->lb_coef, 0, sizeof(double) * (size_t)rows * (size_t)E);
  memset(r->aux_routed, 0, sizeof(int64_t) * (size_t)E);
  r->lb_loss = 0.0;
  /* the routing map: the plain top-k by logit (softmax and sigmoid increase
   * with the logit, so it is the top-k of q), = the routing when there is no
   * bias and no group limit */
  const int separate = biased || o->num_groups > 0;
  double *cnt = r->lb_coef; /* counts first, coefficients below */
  double *qsum = mt_xcalloc((size_t)rows * (size_t)E, sizeof(double));
  double *v = mt_xmalloc(sizeof(double) * (size_t)E);
  uint8_t *used = mt_xmalloc((size_t)E);
  int *aux_ex = mt_xmalloc(sizeof(int) * (size_t)k);
  for (int64_t t = 0; t < n; t++) {
    const int64_t row = t % rows;
    const int *ex = r->expert + t * k;
    if (separate) {
      for (int e = 0; e < E; e++) v[e] = (double)r->logits[t * E + e];
      mt_moe_topk(v, NULL, E, k, aux_ex, used);
      ex = aux_ex;
    }
    for (int j = 0; j < k; j++) {
      r->aux_routed[ex[j]]++;
      cnt[row * E + ex[j]] += 1.0;
    }
    const double *s = r->probs + t * E;
    double den = 1.0;
    if (o->score_sigmoid) {
      double sum = 0.0;
      for (int e = 0; e < E; e++) sum += s[e];
      den = sum + MT_MOE_SIGMOID_EPS;
    }
    for (int e = 0; e < E; e++) qsum[row * E + e] += o->score_sigmoid ? s[e] / den : s[e];
  }
  if (n > 0 && o->lb_type != MT_MOE_LB_NONE) {
    const double N = (double)n;
    if (o->lb_type == MT_MOE_LB_GLOBAL_AUX) {
      double tot = 0.0;
      for (int e = 0; e < E && global_tpe; e++) tot += (double)global_tpe[e];
      for (int e = 0; e < E; e++) {
        double f = tot > 0 ? (double)global_tpe[e] / tot : cnt[e] / (N * k);
        cnt[e] = E * f / N;
      }
    } else { /* aux_loss (rows 1) or seq_aux_loss */
      const double S = N / rows;
      for (int64_t i = 0; i < (int64_t)rows * E; i++) cnt[i] = E * cnt[i] / (rows * k * S * S);
    }
    double lb = 0.0;
    for (int64_t i = 0; i < (int64_t)rows * E; i++) lb += cnt[i] * qsum[i];
    r->lb_loss = lb;
  } else {
    memset(r->lb_coef, 0, sizeof(double) * (size_t)rows * (size_t)E);
  }
  free(qsum);
  free(v);
  free(used);
  free(aux_ex);
}

void mt_moe_route_backward(const mt_moe_route_opts *o, const mt_moe_routing *r, int64_t t0,
                           int64_t n_loc, const float *dgate, double lb_scale, double z_scale,
                           float *dlogits) {
  const int E = o->E, k = o->k;
  const double n = (double)r->n;
  const double c = o->topk_scaling_factor > 0.0f ? (double)o->topk_scaling_factor : 1.0;
  const int lb_on = o->lb_type != MT_MOE_LB_NONE && lb_scale != 0.0;
  double *ds = mt_xmalloc(sizeof(double) * (size_t)E);
  double *dl = mt_xmalloc(sizeof(double) * (size_t)E);
  double *du = mt_xmalloc(sizeof(double) * (size_t)k);
  double *u = mt_xmalloc(sizeof(double) * (size_t)k);
  MT_ASSERT(t0 >= 0 && t0 + n_loc <= r->n);
  for (int64_t i = 0; i < n_loc; i++) {
    const int64_t t = t0 + i;
    const float *l = r->logits + t * E;
    const double *s = r->probs + t * E;
    const int *ex = r->expert + t * k;
    for (int j = 0; j < k; j++) du[j] = (double)dgate[i * k + j] * c;
    /* balance loss: dLB/dq = coef; q = s (softmax) or s / (Σ s + eps) */
    memset(ds, 0, sizeof(double) * (size_t)E);
    if (lb_on) {
      const double *coef = r->lb_coef + (t % r->lb_rows) * E;
      if (o->score_sigmoid) {
        double sum = 0.0, dot = 0.0;
        for (int e = 0; e < E; e++) sum += s[e];
        const double den = sum + MT_MOE_SIGMOID_EPS;
        for (int e = 0; e < E; e++) dot += coef[e] * s[e] / den;
        for (int e = 0; e < E; e++) ds[e] = lb_scale * (coef[e] - dot) / den;
      } else {
        for (int e = 0; e < E; e++) ds[e] = lb_scale * coef[e];
      }
    }
    /* gate weights through their normalisation to the scores */
    if (o->score_sigmoid) {
      if (k > 1) {
        double sk = 0.0, dot = 0.0;
        for (int j = 0; j < k; j++) sk += s[ex[j]];
        const double den = sk + MT_MOE_SIGMOID_EPS;
        for (int j = 0; j < k; j++) dot += du[j] * s[ex[j]] / den;
        for (int j = 0; j < k; j++) ds[ex[j]] += (du[j] - dot) / den;
      } else {
        ds[ex[0]] += du[0];
      }
    } else if (o->pre_softmax) {
      for (int j = 0; j < k; j++) ds[ex[j]] += du[j];
    }
    /* scores to logits */
    if (o->score_sigmoid) {
      for (int e = 0; e < E; e++) dl[e] = ds[e] * s[e] * (1.0 - s[e]);
    } else {
      double dot = 0.0;
      for (int e = 0; e < E; e++) dot += s[e] * ds[e];
      for (int e = 0; e < E; e++) dl[e] = s[e] * (ds[e] - dot);
    }
    if (!o->score_sigmoid && !o->pre_softmax) { /* softmax over the chosen logits */
      mt_moe_gate_weights(o, l, s, ex, u);
      double d2 = 0.0;
      for (int j = 0; j < k; j++) d2 += u[j] * du[j];
      for (int j = 0; j < k; j++) dl[ex[j]] += u[j] * (du[j] - d2);
    }
    /* z-loss: d/dl (lse²)/n = 2 lse softmax(l) / n */
    if (z_scale != 0.0)
      for (int e = 0; e < E; e++) {
        const double p = o->score_sigmoid ? exp((double)l[e] - r->lse[t]) : s[e];
        dl[e] += z_scale * 2.0 * r->lse[t] * p / n;
      }
    for (int e = 0; e < E; e++) dlogits[i * E + e] = (float)dl[e];
  }
  free(ds);
  free(dl);
  free(du);
  free(u);
}
