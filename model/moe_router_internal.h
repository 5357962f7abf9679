/* model/moe_router_internal.h — helpers shared by moe_router.c (decisions)
 * and moe_router_loss.c (balance losses, backward); not part of the model's
 * interface. Host, double precision, no state. */
#ifndef MT_MODEL_MOE_ROUTER_INTERNAL_H
#define MT_MODEL_MOE_ROUTER_INTERNAL_H

#include <stdint.h>

#include "model/moe_router.h"

/* Megatron's epsilon in the sigmoid normalisations (s / (Σ s + 1e-20)). */
#define MT_MOE_SIGMOID_EPS 1e-20

/* 1 / (1 + exp(-x)) without overflow. */
double mt_moe_sigmoid(double x);

/* The k largest v[i] (i < n; allowed[i] != 0, or allowed NULL = all) into
 * ex[0..k) in decreasing order; equal values: lower index first. used:
 * scratch [n]. k must not exceed the allowed count. */
void mt_moe_topk(const double *v, const uint8_t *allowed, int n, int k, int *ex, uint8_t *used);

/* Step 5 of moe_router.h before the scaling factor: gate weights w[0..k)
 * of the chosen experts ex of one token from its logits l [E] and scores
 * s [E]. */
void mt_moe_gate_weights(const mt_moe_route_opts *o, const float *l, const double *s,
                         const int *ex, double *w);

/* Step 7 of moe_router.h: the balance losses' routing map and counts
 * (r->aux_routed), r->lb_loss and the coefficients r->lb_coef / lb_rows
 * used by the backward. Needs r->logits, r->probs, r->expert of the n tokens
 * (biased: the routing used an expert bias). */
void mt_moe_balance_loss(const mt_moe_route_opts *o, int biased, const int64_t *global_tpe,
                         int64_t n, mt_moe_routing *r);

#endif
