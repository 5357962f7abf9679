/* model/moe_router.c — host routing decisions (see moe_router.h). */
#include "model/moe_router.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void mt_moe_routing_init(mt_moe_routing *r, int64_t n_max, int E, int k) {
  memset(r, 0, sizeof *r);
  r->cap_n = n_max;
  r->E = E;
  r->k = k;
  size_t nk = (size_t)(n_max * k);
  r->expert = mt_xcalloc(nk ? nk : 1, sizeof(int));
  r->gate = mt_xcalloc(nk ? nk : 1, sizeof(float));
  r->kept = mt_xcalloc(nk ? nk : 1, 1);
  r->probs = mt_xcalloc((size_t)(n_max * E) + 1, sizeof(double));
  r->lse = mt_xcalloc((size_t)n_max + 1, sizeof(double));
  r->routed = mt_xcalloc((size_t)E, sizeof(int64_t));
  r->kept_count = mt_xcalloc((size_t)E, sizeof(int64_t));
}

void mt_moe_routing_free(mt_moe_routing *r) {
  free(r->expert);
  free(r->gate);
  free(r->kept);
  free(r->probs);
  free(r->lse);
  free(r->routed);
  free(r->kept_count);
  memset(r, 0, sizeof *r);
}

int64_t mt_moe_capacity(const mt_moe_route_opts *o, int64_t n) {
  if (!(o->capacity_factor > 0.0f)) return -1;
  double c = ceil((double)n * o->k / o->E * (double)o->capacity_factor - 1e-9);
  return (int64_t)c;
}

/* Candidate of an over-full expert: sort key. */
typedef struct {
  float gate;
  int64_t t;
  int64_t slot;
} cand;

static int by_gate(const void *a_, const void *b_) {
  const cand *a = a_, *b = b_;
  if (a->gate != b->gate) return a->gate > b->gate ? -1 : 1;
  return a->t < b->t ? -1 : a->t > b->t;
}

void mt_moe_route(const mt_moe_route_opts *o, const float *logits, int64_t n, mt_moe_routing *r) {
  const int E = o->E, k = o->k;
  MT_ASSERT(n <= r->cap_n && E == r->E && k == r->k && k >= 1 && k <= E);
  r->n = n;
  memset(r->routed, 0, (size_t)E * sizeof(int64_t));
  memset(r->kept_count, 0, (size_t)E * sizeof(int64_t));
  double zsum = 0.0;
  double *psum = mt_xcalloc((size_t)E, sizeof(double));
  for (int64_t t = 0; t < n; t++) {
    const float *l = logits + t * E;
    double mx = l[0];
    for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
    double s = 0.0;
    for (int e = 0; e < E; e++) s += exp((double)l[e] - mx);
    double lse = mx + log(s);
    r->lse[t] = lse;
    zsum += lse * lse;
    double *p = r->probs + t * E;
    for (int e = 0; e < E; e++) {
      p[e] = exp((double)l[e] - lse);
      psum[e] += p[e];
    }
    /* top-k by logit, ties to the lower index */
    int *ex = r->expert + t * k;
    for (int j = 0; j < k; j++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        int used = 0;
        for (int q = 0; q < j; q++) used |= ex[q] == e;
        if (!used && (best < 0 || l[e] > l[best])) best = e;
      }
      ex[j] = best;
      r->routed[best]++;
    }
    float *w = r->gate + t * k;
    if (o->pre_softmax) {
      for (int j = 0; j < k; j++) w[j] = (float)p[ex[j]];
    } else {
      double m2 = l[ex[0]], s2 = 0.0; /* ex[0] holds the largest logit */
      for (int j = 0; j < k; j++) s2 += exp((double)l[ex[j]] - m2);
      for (int j = 0; j < k; j++) w[j] = (float)(exp((double)l[ex[j]] - m2) / s2);
    }
    memset(r->kept + t * k, 1, (size_t)k);
  }
  r->capacity = mt_moe_capacity(o, n);
  r->dropped = 0;
  if (r->capacity >= 0) {
    cand *c = mt_xmalloc(sizeof(cand) * (size_t)(n > 0 ? n : 1));
    for (int e = 0; e < E; e++) {
      if (r->routed[e] <= r->capacity) continue;
      int64_t nc = 0;
      for (int64_t t = 0; t < n; t++)
        for (int j = 0; j < k; j++)
          if (r->expert[t * k + j] == e) c[nc++] = (cand){r->gate[t * k + j], t, t * k + j};
      if (!o->drop_position) qsort(c, (size_t)nc, sizeof(cand), by_gate); /* else: token order */
      for (int64_t i = r->capacity; i < nc; i++) r->kept[c[i].slot] = 0;
      r->dropped += nc - r->capacity;
    }
    free(c);
  }
  for (int64_t i = 0; i < n * k; i++)
    if (r->kept[i]) r->kept_count[r->expert[i]]++;
  double lb = 0.0;
  for (int e = 0; e < E; e++)
    lb += ((double)r->routed[e] / ((double)n * k)) * (psum[e] / (double)n);
  r->lb_loss = n > 0 ? E * lb : 0.0;
  r->z_loss = n > 0 ? zsum / (double)n : 0.0;
  free(psum);
}

void mt_moe_route_backward(const mt_moe_route_opts *o, const mt_moe_routing *r, int64_t t0,
                           int64_t n_loc, const float *dgate, double lb_scale, double z_scale,
                           float *dlogits) {
  const int E = o->E, k = o->k;
  const double n = (double)r->n;
  double *dp = mt_xmalloc(sizeof(double) * (size_t)E);
  for (int64_t i = 0; i < n_loc; i++) {
    const int64_t t = t0 + i;
    const double *p = r->probs + t * E;
    const int *ex = r->expert + t * k;
    const float *w = r->gate + t * k;
    const float *dw = dgate + i * k;
    double *dl = mt_xmalloc(sizeof(double) * (size_t)E);
    /* load-balancing term through p: dLB/dp[t,e] = E f_e / n */
    for (int e = 0; e < E; e++)
      dp[e] = lb_scale * E * ((double)r->routed[e] / (n * k)) / n;
    if (o->pre_softmax)
      for (int j = 0; j < k; j++) dp[ex[j]] += dw[j];
    double dot = 0.0;
    for (int e = 0; e < E; e++) dot += p[e] * dp[e];
    for (int e = 0; e < E; e++) dl[e] = p[e] * (dp[e] - dot);
    if (!o->pre_softmax) { /* softmax over the chosen logits */
      double d2 = 0.0;
      for (int j = 0; j < k; j++) d2 += (double)w[j] * dw[j];
      for (int j = 0; j < k; j++) dl[ex[j]] += (double)w[j] * ((double)dw[j] - d2);
    }
    /* z-loss: d/dl (lse²)/n = 2 lse p / n */
    for (int e = 0; e < E; e++) dl[e] += z_scale * 2.0 * r->lse[t] * p[e] / n;
    for (int e = 0; e < E; e++) dlogits[i * E + e] = (float)dl[e];
    free(dl);
  }
  free(dp);
}
