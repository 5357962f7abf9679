/* model/moe_router_select.c — the two per-token steps shared by the router
 * (moe_router.c) and its losses and backward (moe_router_loss.c): top-k
 * selection and the gate weights of the chosen experts. Kept in their own
 * file so neither of those files calls the other back. */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "model/moe_router_internal.h"

/* Indices of the k largest v[i] (ties: lowest index) among allowed[i] != 0
 * (allowed NULL: all), written to ex[0..k) in decreasing order; used[n] is
 * scratch. k <= number of allowed entries (asserted). */
void mt_moe_topk(const double *v, const uint8_t *allowed, int n, int k, int *ex, uint8_t *used) {
  memset(used, 0, (size_t)n);
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (!used[i] && (!allowed || allowed[i]) && (best < 0 || v[i] > v[best])) best = i;
    MT_ASSERT(best >= 0);
    ex[j] = best;
    used[best] = 1;
  }
}

/* Gate weights w[0..k) of the chosen experts ex[0..k) before
 * topk_scaling_factor: sigmoid scores normalised over the k (k > 1),
 * pre-softmax probabilities as they are, or a softmax over the k chosen
 * logits (Megatron's default order, topk-then-softmax); fp64. */
void mt_moe_gate_weights(const mt_moe_route_opts *o, const float *l, const double *s,
                         const int *ex, double *w) {
  const int k = o->k;
  if (o->score_sigmoid) {
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += s[ex[j]];
    for (int j = 0; j < k; j++) w[j] = k > 1 ? s[ex[j]] / (sum + MT_MOE_SIGMOID_EPS) : s[ex[j]];
  } else if (o->pre_softmax) {
    for (int j = 0; j < k; j++) w[j] = s[ex[j]];
  } else { /* softmax over the chosen logits */
    double m2 = l[ex[0]], s2 = 0.0;
    for (int j = 1; j < k; j++) m2 = l[ex[j]] > m2 ? l[ex[j]] : m2;
    for (int j = 0; j < k; j++) s2 += exp((double)l[ex[j]] - m2);
    for (int j = 0; j < k; j++) w[j] = exp((double)l[ex[j]] - m2) / s2;
  }
}
