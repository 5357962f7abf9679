/* model/moe_router.h — routing decisions of a mixture-of-experts layer on the
 * host: softmax, top-k, capacity and token dropping, auxiliary losses and
 * their gradients (Shazeer et al. 2017; GShard, Lepikhin et al. 2020 §2.2;
 * Switch Transformer, Fedus et al. 2021 §2.2 / load-balancing loss;
 * ST-MoE, Zoph et al. 2022 §3 / router z-loss; Megatron-core's
 * moe/router.py and moe_utils.py).
 *
 * Everything here is O(tokens · E) on fp32 logits copied off the device and
 * computed in double; one function decides, so a device version can replace
 * it. The decisions depend only on the logits of the N tokens of one
 * micro-batch (in [s, b] order), never on how they are spread over ranks.
 *
 * Order of operations (documented contract):
 *  1. probs p[t, e] = softmax over ALL experts of logits[t, :] (used by the
 *     load-balancing loss and, with pre_softmax, as routing weights);
 *  2. top-k experts per token by logit (equal logits: lower expert index
 *     first), slot j = rank in that order;
 *  3. gate weights: pre_softmax: w[t, j] = p[t, e_j] (not renormalised);
 *     otherwise w[t, ·] = softmax over the k chosen logits (so Σ_j w = 1;
 *     k = 1 gives w = 1);
 *  4. capacity (capacity_factor > 0): C = ceil(N·k/E · capacity_factor);
 *     an expert routed more than C slots keeps C of them: the highest gate
 *     weight first (policy "probs"; equal weights: earlier token) or the
 *     earliest tokens (policy "position"). Dropless (capacity_factor <= 0)
 *     keeps every slot.
 *  5. load-balancing loss LB = E · Σ_e f_e · P_e with f_e = routed slots of e
 *     / (N·k) (before dropping) and P_e = mean_t p[t, e]; 1 at perfect
 *     balance. z-loss Z = mean_t logsumexp(logits[t, :])². Both before their
 *     coefficients.
 */
#ifndef MT_MODEL_MOE_ROUTER_H
#define MT_MODEL_MOE_ROUTER_H

#include <stdint.h>

/* moe_router_load_balancing_type */
enum { MT_MOE_LB_AUX = 0, MT_MOE_LB_SEQ_AUX, MT_MOE_LB_GLOBAL_AUX, MT_MOE_LB_NONE };
/* moe_router_dtype: null (the training dtype), "fp32", "fp64" */
enum { MT_MOE_ROUTER_DTYPE_NONE = 0, MT_MOE_ROUTER_DTYPE_FP32, MT_MOE_ROUTER_DTYPE_FP64 };

typedef struct {
  int E, k;               /* experts, router top-k */
  float capacity_factor;  /* <= 0: dropless */
  int drop_position;      /* 1: policy "position", 0: "probs" */
  int pre_softmax;        /* moe_router_pre_softmax */
  int score_sigmoid;      /* moe_router_score_function "sigmoid" (0: softmax) */
  float topk_scaling_factor; /* moe_router_topk_scaling_factor; 0 = none */
  int num_groups, group_topk; /* group-limited routing; 0 = off */
  int lb_type;            /* MT_MOE_LB_* */
  int seq_b;              /* micro-batch size b: token t belongs to sample t % b
                             (seq_aux_loss); 0 = 1 */
  int pad_to_capacity;    /* moe_pad_expert_input_to_capacity */
} mt_moe_route_opts;

typedef struct {
  int64_t n, cap_n;       /* tokens routed, tokens the arrays hold */
  int E, k;
  int64_t capacity;       /* -1: dropless */
  int *expert;            /* [n·k] chosen expert of slot (t, j) */
  float *gate;            /* [n·k] routing weight */
  uint8_t *kept;          /* [n·k] 1 = kept, 0 = dropped */
  double *probs;          /* [n·E] softmax over all experts */
  double *lse;            /* [n] logsumexp of the logits */
  int64_t *routed;        /* [E] slots routed to e (before dropping) */
  int64_t *kept_count;    /* [E] slots kept by e (= min(routed, capacity)) */
  int64_t dropped;        /* slots dropped */
  double lb_loss, z_loss; /* before coefficients */
} mt_moe_routing;

/* Allocate arrays for up to n_max tokens (host). */
void mt_moe_routing_init(mt_moe_routing *r, int64_t n_max, int E, int k);
void mt_moe_routing_free(mt_moe_routing *r);

/* Route n tokens with logits [n, E] (fp32, row-major, token order [s, b]).
 * Fills every field of r (n <= r->cap_n). Pure: equal inputs give equal
 * outputs. */
void mt_moe_route(const mt_moe_route_opts *o, const float *logits, int64_t n, mt_moe_routing *r);

/* Capacity for n tokens: ceil(n·k/E · capacity_factor), or -1 dropless. */
int64_t mt_moe_capacity(const mt_moe_route_opts *o, int64_t n);

/* Gradient of the router logits of tokens [t0, t0 + n_loc):
 *   dlogits[i, e] = d/dlogits[t0+i, e] of ( Σ_{t,j} dgate[t,j]·w[t,j]
 *                   + lb_scale · LB + z_scale · Z )
 * dgate [n_loc·k] is the gradient of the gate weights of those tokens (0 for
 * dropped slots); lb_scale / z_scale are coefficient × loss scale. Writes
 * dlogits [n_loc, E] (fp32, overwrite). */
void mt_moe_route_backward(const mt_moe_route_opts *o, const mt_moe_routing *r, int64_t t0,
                           int64_t n_loc, const float *dgate, double lb_scale, double z_scale,
                           float *dlogits);

#endif
