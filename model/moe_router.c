/* model/moe_router.c — host routing decisions: scores, group-limited and
 * bias-shifted top-k, gate weights, capacity and dropping (see
 * moe_router.h; the balance losses and the backward are in
 * moe_router_loss.c). */
#include "model/moe_router.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/util.h"
#include "model/moe_router_internal.h"

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
  r->logits = mt_xcalloc((size_t)(n_max * E) + 1, sizeof(float));
  r->routed = mt_xcalloc((size_t)E, sizeof(int64_t));
  r->aux_routed = mt_xcalloc((size_t)E, sizeof(int64_t));
  r->kept_count = mt_xcalloc((size_t)E, sizeof(int64_t));
  r->lb_coef = mt_xcalloc((size_t)E, sizeof(double));
  r->lb_rows = 1;
}

void mt_moe_routing_free(mt_moe_routing *r) {
  free(r->expert);
  free(r->gate);
  free(r->kept);
  free(r->probs);
  free(r->lse);
  free(r->logits);
  free(r->routed);
  free(r->aux_routed);
  free(r->kept_count);
  free(r->lb_coef);
  memset(r, 0, sizeof *r);
}

int64_t mt_moe_capacity(const mt_moe_route_opts *o, int64_t n) {
  if (!(o->capacity_factor > 0.0f)) return -1;
  double c = ceil((double)n * o->k / o->E * (double)o->capacity_factor - 1e-9);
  return (int64_t)c;
}

/* fp32 -> bf16 -> fp32, round to nearest even (NaN stays NaN). */
static float round_bf16(float x) { return mt_bf16_to_f32(mt_f32_to_bf16(x)); }

double mt_moe_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}


/* Per-call scratch of mt_moe_route. */
typedef struct {
  double *v, *gscore, *gw;
  uint8_t *allowed, *used;
  int *gidx, *tmp;
} scratch;

/* Steps 2-4 of moe_router.h for one token: selection values, group limit,
 * top-k into ex[0..k). */
static void select_experts(const mt_moe_route_opts *o, const float *l, const double *s,
                           const float *bias, scratch *w, int *ex) {
  const int E = o->E, k = o->k;
  for (int e = 0; e < E; e++) {
    double v = (o->score_sigmoid || o->pre_softmax) ? s[e] : (double)l[e];
    w->v[e] = bias ? v + (double)bias[e] : v;
  }
  const uint8_t *allowed = NULL;
  if (o->num_groups > 0) {
    const int G = o->num_groups, Eg = E / G, m = k / o->group_topk;
    for (int g = 0; g < G; g++) {
      mt_moe_topk(w->v + g * Eg, NULL, Eg, m, w->tmp, w->used);
      double sum = 0.0;
      for (int j = 0; j < m; j++) sum += w->v[g * Eg + w->tmp[j]];
      w->gscore[g] = sum;
    }
    mt_moe_topk(w->gscore, NULL, G, o->group_topk, w->gidx, w->used);
    memset(w->allowed, 0, (size_t)E);
    for (int j = 0; j < o->group_topk; j++) memset(w->allowed + w->gidx[j] * Eg, 1, (size_t)Eg);
    allowed = w->allowed;
  }
  mt_moe_topk(w->v, allowed, E, k, ex, w->used);
}

/* Step 5: final gate weights (× topk_scaling_factor), fp32. */
static void gates(const mt_moe_route_opts *o, const float *l, const double *s, const int *ex,
                  double *w, float *gate) {
  mt_moe_gate_weights(o, l, s, ex, w);
  const double c = o->topk_scaling_factor > 0.0f ? (double)o->topk_scaling_factor : 1.0;
  for (int j = 0; j < o->k; j++) gate[j] = (float)(c == 1.0 ? w[j] : w[j] * c);
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

/* Step 6: capacity and dropping (sees the final gates). */
static void apply_capacity(const mt_moe_route_opts *o, int64_t n, mt_moe_routing *r) {
  const int E = o->E, k = o->k;
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
}

void mt_moe_route(const mt_moe_route_opts *o, const float *logits, const float *expert_bias,
                  const int64_t *global_tokens_per_expert, int64_t n, mt_moe_routing *r) {
  const int E = o->E, k = o->k;
  MT_ASSERT(n <= r->cap_n && E == r->E && k == r->k && k >= 1 && k <= E);
  MT_ASSERT(o->num_groups <= 0 || (E % o->num_groups == 0 && o->group_topk >= 1 &&
                                   o->group_topk <= o->num_groups && k >= o->group_topk &&
                                   k <= o->group_topk * (E / o->num_groups)));
  r->n = n;
  memset(r->routed, 0, (size_t)E * sizeof(int64_t));
  memset(r->kept_count, 0, (size_t)E * sizeof(int64_t));
  const int G = o->num_groups > 0 ? o->num_groups : 1;
  scratch w = {mt_xmalloc(sizeof(double) * (size_t)E), mt_xmalloc(sizeof(double) * (size_t)G),
               mt_xmalloc(sizeof(double) * (size_t)k), mt_xmalloc((size_t)E),
               mt_xmalloc((size_t)E),                  mt_xmalloc(sizeof(int) * (size_t)G),
               mt_xmalloc(sizeof(int) * (size_t)E)};
  double zsum = 0.0;
  for (int64_t t = 0; t < n; t++) {
    float *l = r->logits + t * E;
    for (int e = 0; e < E; e++)
      l[e] = o->round_bf16 ? round_bf16(logits[t * E + e]) : logits[t * E + e];
    double mx = l[0];
    for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
    double sum = 0.0;
    for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
    double lse = mx + log(sum);
    r->lse[t] = lse;
    zsum += lse * lse;
    double *s = r->probs + t * E;
    for (int e = 0; e < E; e++)
      s[e] = o->score_sigmoid ? mt_moe_sigmoid((double)l[e]) : exp((double)l[e] - lse);
    int *ex = r->expert + t * k;
    select_experts(o, l, s, expert_bias, &w, ex);
    for (int j = 0; j < k; j++) r->routed[ex[j]]++;
    gates(o, l, s, ex, w.gw, r->gate + t * k);
    memset(r->kept + t * k, 1, (size_t)k);
  }
  apply_capacity(o, n, r);
  r->z_loss = n > 0 ? zsum / (double)n : 0.0;
  mt_moe_balance_loss(o, expert_bias != NULL, global_tokens_per_expert, n, r);
  free(w.v);
  free(w.gw);
  free(w.gscore);
  free(w.allowed);
  free(w.used);
  free(w.gidx);
  free(w.tmp);
}
