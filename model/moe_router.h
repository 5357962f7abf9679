/* model/moe_router.h — routing decisions of a mixture-of-experts layer on the
 * host: score function, (group-limited, bias-shifted) top-k, gate weights,
 * capacity and token dropping, the balance losses and the z-loss, and their
 * gradients (Shazeer et al. 2017; GShard, Lepikhin et al. 2020 §2.2; Switch
 * Transformer, Fedus et al. 2021 §2.2; ST-MoE, Zoph et al. 2022 §3 / router
 * z-loss; DeepSeek-V2, arXiv:2405.04434 §2.1.2-2.1.3 (device-limited routing,
 * per-sequence balance loss); DeepSeek-V3, arXiv:2412.19437 §2.1.2 (sigmoid
 * scores, auxiliary-loss-free bias, node-limited routing); Wang et al. 2024,
 * arXiv:2408.15664 (loss-free balancing); Qiu et al. 2025, arXiv:2501.11873
 * (global-batch balance loss); Megatron-core moe/router.py TopKRouter and
 * moe_utils.py topk_routing_with_score_function, group_limited_topk,
 * compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func,
 * z_loss_func).
 *
 * Everything here is O(tokens · E) on fp32 logits copied off the device and
 * computed in double; one function decides, so a device version can replace
 * it. The decisions depend only on the logits of the N tokens of one
 * micro-batch (in [s, b] order), the expert bias and the previous global
 * batch's token counts, never on how the tokens are spread over ranks.
 *
 * Order of operations (documented contract; docs/moe.md "Router options"):
 *  0. logits l [N, E] fp32; round_bf16: each rounded to bf16 first
 *     (moe_router_dtype null in a bf16 run: Megatron routes in the input
 *     dtype); every later step reads the rounded values, in double;
 *  1. scores s[t, e] over ALL experts: softmax(l[t, :]) or, with
 *     score_sigmoid, sigmoid(l[t, e]) (stored in r->probs);
 *  2. selection values v[t, e]: the logit l (softmax), the softmax score s
 *     (softmax with pre_softmax) or the sigmoid score s (sigmoid); plus
 *     expert_bias[e] when given (selection only: the bias never enters a
 *     gate weight or a loss);
 *  3. group-limited routing (num_groups G > 0): experts in G equal
 *     consecutive groups; group score = sum of the top (k / group_topk)
 *     values v in the group; the group_topk best groups stay (equal scores:
 *     lower group first), the other experts are excluded;
 *  4. top-k experts per token by v among those left (equal values: lower
 *     expert index first); slot j = rank in that order;
 *  5. gate weights from the UNBIASED scores: softmax: softmax over the k
 *     chosen logits (k = 1 gives 1); pre_softmax: s[t, e_j] (not
 *     renormalised); sigmoid: s_j / (Σ_chosen s + 1e-20) when k > 1, s_j
 *     when k = 1 (Megatron); then × topk_scaling_factor when > 0;
 *  6. capacity (capacity_factor > 0): C = ceil(N·k/E · capacity_factor);
 *     an expert routed more than C slots keeps C of them: the highest final
 *     gate first (policy "probs"; equal gates: earlier token) or the earliest
 *     tokens (policy "position"). Dropless (capacity_factor <= 0) keeps
 *     every slot;
 *  7. balance loss (lb_type), from the routing probabilities q BEFORE any
 *     dropping: q = s (softmax) or s / (Σ_e s + 1e-20) (sigmoid), and the
 *     plain top-k of q (no bias, no group limit) as the routing map m
 *     (Megatron's compute_routing_scores_for_aux_loss); with
 *     P_e = Σ_t q[t, e] / N and c_e = Σ_t m[t, e]:
 *       aux_loss:        LB = E/(k·N) · Σ_e c_e · P_e        (1 at balance)
 *       seq_aux_loss:    the same per sample (token t is sample t % seq_b,
 *                        S = N / seq_b tokens each), averaged over samples;
 *       global_aux_loss: LB = E · Σ_e f_e · P_e with f_e = the previous
 *                        global batch's tokens per expert, normalised to sum
 *                        1 (c_e / (N·k) when none is given: the first step);
 *       none:            LB = 0;
 *     z-loss Z = mean_t logsumexp(l[t, :])². Both before their coefficients.
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
  int round_bf16;         /* round the logits to bf16 before routing (moe_router_dtype
                             null in a bf16 run; 0 on the CPU: fp32 only) */
} mt_moe_route_opts;

typedef struct {
  int64_t n, cap_n;       /* tokens routed, tokens the arrays hold */
  int E, k;
  int64_t capacity;       /* -1: dropless */
  int *expert;            /* [n·k] chosen expert of slot (t, j) */
  float *gate;            /* [n·k] final gate weight (step 5, × scaling factor) */
  uint8_t *kept;          /* [n·k] 1 = kept, 0 = dropped */
  double *probs;          /* [n·E] scores s over all experts (step 1: softmax, or the
                             sigmoid of each logit) */
  double *lse;            /* [n] logsumexp of the logits */
  float *logits;          /* [n·E] the logits routed (after round_bf16) */
  int64_t *routed;        /* [E] slots routed to e (before dropping) */
  int64_t *aux_routed;    /* [E] slots of e in the balance losses' routing map m
                             (= routed without bias and group limit) */
  int64_t *kept_count;    /* [E] slots kept by e (= min(routed, capacity)) */
  int64_t dropped;        /* slots dropped */
  double lb_loss, z_loss; /* before coefficients */
  double *lb_coef;        /* [lb_rows·E] dLB/dq[t, e] of a token of sample (t % lb_rows)
                             (internal; mt_moe_route_backward) */
  int lb_rows;            /* 1, or seq_b for seq_aux_loss */
} mt_moe_routing;

/* Allocate arrays for up to n_max tokens (host). */
void mt_moe_routing_init(mt_moe_routing *r, int64_t n_max, int E, int k);
void mt_moe_routing_free(mt_moe_routing *r);

/* Route n tokens with logits [n, E] (fp32 host, row-major, token order
 * [s, b]; n a multiple of seq_b with seq_aux_loss). expert_bias [E] (fp32
 * host, moe_router_enable_expert_bias) shifts the selection values (step 2)
 * or is NULL. global_tokens_per_expert [E] is the previous global batch's
 * slots per expert, summed over every micro-batch of every rank (the counts
 * the expert-bias update uses; only their ratios matter; global_aux_loss
 * only; NULL or all zero: the first step, this micro-batch's counts are
 * used). Fills every field of r
 * (n <= r->cap_n). Pure: equal inputs give equal outputs. No communication. */
void mt_moe_route(const mt_moe_route_opts *o, const float *logits, const float *expert_bias,
                  const int64_t *global_tokens_per_expert, int64_t n, mt_moe_routing *r);

/* Capacity for n tokens: ceil(n·k/E · capacity_factor), or -1 dropless. */
int64_t mt_moe_capacity(const mt_moe_route_opts *o, int64_t n);

/* Gradient of the router logits of tokens [t0, t0 + n_loc):
 *   dlogits[i, e] = d/dlogits[t0+i, e] of ( Σ_{t,j} dgate[t,j]·w[t,j]
 *                   + lb_scale · LB + z_scale · Z )
 * dgate [n_loc·k] is the gradient of the gate weights of those tokens (0 for
 * dropped slots); lb_scale / z_scale are coefficient × loss scale. The
 * selection (bias, group limit, top-k, the balance losses' routing map and
 * counts) is a constant; the gradient flows through the scores, the gate
 * normalisation and scaling, q, and the logsumexp. Writes dlogits [n_loc, E]
 * (fp32, overwrite; the gradient of the routed, possibly bf16-rounded,
 * logits, passed straight through the rounding). */
void mt_moe_route_backward(const mt_moe_route_opts *o, const mt_moe_routing *r, int64_t t0,
                           int64_t n_loc, const float *dgate, double lb_scale, double z_scale,
                           float *dlogits);

#endif
