/* model/moe_layer.h — a mixture-of-experts MLP block with expert parallelism
 * (Megatron-core transformer/moe/moe_layer.py MoELayer: TopKRouter ->
 * MoEAlltoAllTokenDispatcher -> experts; GShard, Lepikhin et al. 2020,
 * arXiv:2006.16668; Switch, Fedus et al. 2021, arXiv:2101.03961). Replaces
 * the dense MLP of an MoE layer and ties its parts:
 *   router logits (x W_r^T, here) -> routing decisions (model/moe_router.h:
 *   top-k, capacity, dropping, auxiliary losses) -> token dispatch
 *   (model/moe_token_dispatcher.h: permute by destination expert, counts and
 *   token all-to-all over the EP group) -> local experts
 *   (model/moe_experts.h: GELU MLPs, one GEMM per (source rank, expert)
 *   block) -> token combine (all-to-all back, unpermute, weighted sum with
 *   the gate weights).
 *
 * Tokens: this rank holds n_loc rows [t0, t0 + n_loc) of the micro-batch's
 * n_full = s·b tokens ([s, b] order): its sequence-parallel shard, or all of
 * them when tp == 1. The router logits ([n_loc, E], fp32) are all-gathered
 * over the TP group so that the routing and capacity decisions
 * (model/moe_router.h) are taken over the whole micro-batch, identically on
 * every TP rank, whatever tp and ep are. With context parallelism they are
 * then gathered over the CP group too (Megatron reduces the router's token
 * counts over the tensor x context group likewise), so routing, capacity and
 * the auxiliary losses still see the whole micro-batch; its tokens are then
 * ordered by CP rank (each rank's two sequence chunks), which only matters
 * to moe_token_drop_policy "position" (which tokens of an over-full expert
 * are dropped first). Dropped slots contribute zero (the
 * token keeps only its residual).
 *
 * Experts: E experts, ep ranks each holding E/ep consecutive ones; with
 * expert_tensor_parallel_size etp > 1 each expert is split over the etp
 * group (model/moe_etp.h; fc1 rows / fc2 columns: F_loc = F/etp), else whole.
 * Expert weights: fc1 [g·F_loc, h] + bias [g·F_loc], fc2 [h, F_loc] + bias
 * [h] (T; no biases with etp > 1), gradients fp32.
 *
 * Communication per MoE layer and micro-batch, over the EP group: forward
 * one all-to-all of E int64 counts and two all-to-allv of token rows
 * (dispatch, combine), backward two all-to-allv (combine, dispatch), each
 * moving (routed rows) · h elements; over TP under SP one all-gather of the
 * [n_loc, E] fp32 logits forward; with etp > 1 over the ETP group the
 * counts all-gather and two all-gatherv + two reduce-scatterv of the
 * experts' rows (model/moe_etp.h). With moe_pad_expert_input_to_capacity
 * (route.pad_to_capacity) no counts all-to-all over EP, and every
 * all-to-allv moves E·C rows per rank (C = mt_moe_capacity of the
 * micro-batch).
 */
#ifndef MT_MODEL_MOE_LAYER_H
#define MT_MODEL_MOE_LAYER_H

#include <stdint.h>

#include "core/backend.h"
#include "model/moe_router.h"
#include "model/moe_token_dispatcher.h"
#include "parallel/comm.h"

typedef struct {
  int E, k, h, F;
  int swiglu;                 /* experts are SwiGLU MLPs (fc1 [2F, h]: gate rows, up rows) */
  mt_moe_route_opts route;
  float lb_coeff, z_coeff;    /* moe_aux_loss_coeff, moe_z_loss_coeff */
  int64_t n_loc, n_full, t0;  /* token rows of this rank, of the micro-batch, offset */
  mt_group *tp;               /* logits all-gather; NULL when tp == 1 or no SP */
  mt_group *cp;               /* context parallelism: second logits all-gather, after
                                 tp's (n_full = the micro-batch's tokens on all CP
                                 ranks, in (cp rank, tp rank, row) order); NULL when
                                 cp == 1 */
  mt_group *ep;               /* dispatch group; NULL when ep == 1 */
  int ep_size, ep_rank;
  mt_group *etp;              /* expert tensor parallelism (model/moe_etp.h): each expert's
                                 fc1 / fc2 split by F over this group; NULL when etp == 1 */
  int n_moe_layers;           /* global count (statistics) */
  int router_dtype;           /* MT_MOE_ROUTER_DTYPE_*: NONE with a bf16 backend rounds the
                                 logits to bf16 before routing (route.round_bf16) */
  int grouped_gemm;           /* moe_grouped_gemm (model/moe_experts.h) */
} mt_moe_config;

/* Per-layer parameter pointers: router [E, h]; local expert i of E/ep. */
typedef struct {
  const void *router;
  const void **fc1_w, **fc1_b, **fc2_w, **fc2_b; /* [E/ep] each */
  const float *expert_bias;   /* [E] fp32 host: moe_router_enable_expert_bias (selection only);
                                 NULL when disabled */
  const int64_t *global_tokens_per_expert; /* [E] host: routed slots per expert of the whole
                                 previous global batch (global_aux_loss); NULL on the first
                                 step or when unused (moe_router.h step 7) */
  struct mt_fp8_linear *fp8;  /* NULL, or the experts' GEMMs in FP8 (model/moe_experts.h; the
                                 router stays in T with fp32 logits, as Megatron's) */
  int fp8_key[2];             /* fp8: the delayed-scaling keys of local expert 0's fc1, fc2
                                 (local expert le: + le; model/gpt.h mt_gpt_fp8_expert_key) */
} mt_moe_weights;
typedef struct {
  float *router;
  float **fc1_w, **fc1_b, **fc2_w, **fc2_b;
} mt_moe_grads;

/* Statistics accumulated over training forward passes since the last reset,
 * per MoE layer (global MoE-layer index). */
typedef struct {
  int n_layers, E;
  int64_t *routed;    /* [n_layers · E] routed slots per expert */
  int64_t *kept;      /* [n_layers · E] slots kept per expert (after capacity dropping;
                         the expert-bias update counts these, as Megatron's routing_map) */
  int64_t *dropped;   /* [n_layers] dropped slots */
  int64_t *slots;     /* [n_layers] routed slots (tokens · k) */
  double *lb, *z;     /* [n_layers] sum over micro-batches (before coefficients) */
  int64_t *n_mb;      /* [n_layers] micro-batches */
} mt_moe_stats;

typedef struct mt_moe mt_moe;
typedef struct mt_moe_acts mt_moe_acts;

/* Context of one model: router and send-side scratch sized by n_loc; the
 * receive-side buffers and the experts' rows (scratch and every layer
 * set's saved rows) grow to what the routing sends (model/moe_rowbuf.h). */
mt_moe *mt_moe_create(mt_backend *be, const mt_moe_config *c);
void mt_moe_destroy(mt_moe *m);
mt_moe_stats *mt_moe_get_stats(mt_moe *m);
/* Rows the grown buffers hold now (the high-water marks so far): *recv the
 * rows this rank received from the EP all-to-all (the dispatcher's group),
 * *expert the rows its experts saw (= *recv without ETP; the ETP-gathered
 * rows with it); *worst the dropless worst case ep · n_loc · k (E·C when
 * padding, where both are fixed at it). */
void mt_moe_buffer_rows(const mt_moe *m, int64_t *recv, int64_t *expert, int64_t *worst);
void mt_moe_stats_reset(mt_moe *m);

/* What one layer keeps for backward (MT_MEM_ACT). */
mt_moe_acts *mt_moe_acts_create(mt_moe *m);
void mt_moe_acts_free(mt_moe *m, mt_moe_acts *a);

/* Forward: out [n_loc, h] (T, overwrite) = MoE(x [n_loc, h]). Collective over
 * TP (logits) and EP (dispatch). record >= 0: add this pass's routing
 * statistics under MoE layer `record` (training forward, not recomputation).
 * ov: NULL, or work to run while the token all-to-alls travel
 * (moe_shared_expert_overlap): ov[0] during the dispatch, ov[1] during the
 * combine (model/moe_token_dispatcher.h, mt_moe_overlap). */
void mt_moe_forward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, void *out, const void *x,
                    int record, const mt_moe_overlap ov[2]);

/* Backward: dx [n_loc, h] (T, overwrite) from dy [n_loc, h]; parameter
 * gradients accumulate. aux_scale multiplies the coefficients of the
 * load-balancing and z losses (the micro-batch's share of the objective:
 * loss_scale · s · b). Collective over EP. ov: NULL, or work to run while
 * the output gradients travel to the experts (the combine's backward
 * all-to-all); dy is no longer read once it runs. */
void mt_moe_backward(mt_moe *m, mt_moe_acts *a, const mt_moe_weights *w, const mt_moe_grads *g,
                     void *dx, const void *dy, const void *x, float aux_scale,
                     const mt_moe_overlap *ov);


#endif
