/* model/moe_token_dispatcher.h — the all-to-all token dispatcher of an
 * expert-parallel MoE layer (Megatron-core's MoEAlltoAllTokenDispatcher:
 * token_dispatch / token_combine; GShard, Lepikhin et al. 2020,
 * arXiv:2006.16668 §2.2-3.1; Switch, Fedus et al. 2021, arXiv:2101.03961
 * §2.2).
 *
 * Forward (mt_moe_token_dispatch): permutation of this rank's kept token
 * slots into send order (by destination expert, then token, then slot), the
 * counts exchange (one all-to-all of E int64 counts, so every receiver knows
 * its splits before tokens move), the row gather into send order and the
 * all-to-allv of the token rows over the EP group. The experts then read
 * x_recv [R, h], rows grouped by (source peer, local expert) with cnt_recv
 * rows per block, and write their outputs to mt_moe_dispatch_expert_out.
 * mt_moe_token_combine moves the outputs back (all-to-allv) and
 * un-permutes them: out[i] = Σ_j gate[i, j] · y[slot (i, j)] over kept slots.
 * Backward runs the same two exchanges in reverse.
 *
 * Shapes: n_loc token rows of this rank starting at t0 of the micro-batch's
 * tokens ([s, b] order), k slots per token, E experts over ep ranks (E/ep
 * consecutive local experts each), h hidden size. Token rows T (backend
 * storage dtype), gate weights and their gradients fp32, counts int64.
 * Communication: over the EP group (NULL when ep == 1: no collective, the
 * permuted rows go straight to the experts). Errors: more rows than the
 * worst case (n_loc·k sent, ep·n_loc·k received) abort the job.
 *
 * Receive buffers sized by the routing (Megatron's dispatcher allocates
 * what the all-to-all's output_splits announce, through PyTorch's caching
 * allocator): the buffers whose rows are the rows this rank RECEIVES —
 * each layer set's x_recv and the scratch y_recv, d_yrecv, dx_recv — are
 * one grow-only group (model/moe_rowbuf.h) of C rows, C = the high-water
 * mark of R over every layer and micro-batch so far. R is known after the
 * counts all-to-all and before the token all-to-allv, which is where the
 * group grows (every buffer of the group at once, live rows kept), so a
 * step whose routing sends every token of the EP group here (R = ep·n_loc·k,
 * the dropless worst case) still runs: it grows the buffers to that. The
 * send side (n_loc·k rows at most) stays fixed. mt_moe_dispatcher_recv_rows
 * reports C (the run logs it; the planner predicts the allocator's bytes
 * from it exactly). Results do not depend on C.
 *
 * Padding to capacity (pad_capacity = C > 0; Megatron's
 * moe_pad_expert_input_to_capacity, token_dispatcher.py drop-and-pad): the
 * send order gives expert e the rows [e·C, (e+1)·C): its kept slots (by
 * token, then slot), then zero rows. Every rank sends C rows to every expert
 * and receives C rows per (peer, local expert) block, E·C rows each way;
 * the counts all-to-all is skipped (static splits). Padding rows are zeros
 * going in, their outputs are never combined and their output gradients are
 * zero, so they change no gradient; the routing (and its balance losses)
 * never sees them.
 */
#ifndef MT_MODEL_MOE_TOKEN_DISPATCHER_H
#define MT_MODEL_MOE_TOKEN_DISPATCHER_H

#include <stdint.h>

#include "core/backend.h"
#include "model/moe_router.h"
#include "parallel/comm.h"

typedef struct {
  int E, k, h;
  int64_t n_loc, t0;          /* token rows of this rank, offset in the micro-batch */
  mt_group *ep;               /* NULL when ep == 1 */
  int ep_size;
  int64_t pad_capacity;       /* moe_pad_expert_input_to_capacity: every rank sends
                                 exactly C rows to every expert (kept rows, then zero
                                 rows), so the splits are static; 0 = exact counts */
} mt_moe_dispatcher_config;

/* What one layer's dispatch keeps for its combine and backward. Host arrays
 * describe the exchange; device arrays (MT_MEM_ACT) hold the permutation,
 * the gates and the rows the experts read and return. */
typedef struct {
  int32_t *slot_h;            /* [n_loc·k] send row of slot (i, j), -1 when dropped */
  int32_t *send_idx_h;        /* [n_loc·k + 1] token of each send row */
  int64_t *cnt_send;          /* [E] rows sent to each expert (C each when padding) */
  int64_t *cnt_real;          /* [E] kept slots sent to each expert (without padding) */
  int64_t *cnt_recv;          /* [ep · E/ep] rows received from peer p for local expert le */
  int64_t *sc, *sd, *rc, *rd; /* [ep] rows sent / received per peer and displacements */
  int64_t S, R;               /* rows sent, rows received (padding included) */
  int64_t S_real;             /* kept slots sent (rows gathered from x) */
  int32_t *slot, *send_idx;   /* device copies of slot_h, send_idx_h */
  float *gate;                /* [n_loc·k] fp32 gate weights of this rank's tokens */
  void *x_recv;               /* [C, h] T: expert input rows (R used; C = the dispatcher's
                                 receive high-water mark, mt_moe_dispatcher_recv_rows) */
  void *y_back;               /* [n_loc·k, h] T: expert output rows in send order */
} mt_moe_dispatch_state;

/* Work to run while a token all-to-all travels (Megatron's
 * moe_shared_expert_overlap: the shared expert's computation): fn(ctx) is
 * called after the exchange has started and before it is waited for;
 * without an EP group (no exchange) at the same point of the computation.
 * A NULL overlap (or fn) runs nothing. The work must not touch the
 * exchange's buffers (the state's rows, the dispatcher's scratch). */
typedef struct {
  void (*fn)(void *ctx);
  void *ctx;
} mt_moe_overlap;

typedef struct mt_moe_dispatcher mt_moe_dispatcher;

/* Dispatcher of one model: exchange scratch (MT_MEM_WORKSPACE), the send
 * side for n_loc·k rows, the receive side grown to the rows received. */
mt_moe_dispatcher *mt_moe_dispatcher_create(mt_backend *be, const mt_moe_dispatcher_config *c);
void mt_moe_dispatcher_destroy(mt_moe_dispatcher *d);
/* Rows the experts may receive at most: ep · n_loc · k (E·C padded). */
int64_t mt_moe_dispatcher_recv_capacity(const mt_moe_dispatcher *d);
/* Rows the receive buffers hold now: the high-water mark of the rows
 * received so far (0 before the first dispatch; E·C padded). */
int64_t mt_moe_dispatcher_recv_rows(const mt_moe_dispatcher *d);

/* Allocate / free one layer's dispatch state (host + MT_MEM_ACT). */
void mt_moe_dispatch_state_init(mt_moe_dispatcher *d, mt_moe_dispatch_state *s);
void mt_moe_dispatch_state_free(mt_moe_dispatcher *d, mt_moe_dispatch_state *s);

/* Forward dispatch of x [n_loc, h] (T) routed by r (slots of tokens
 * [t0, t0 + n_loc) of the micro-batch): permutation, counts all-to-all,
 * upload of slots and gates, row gather, token all-to-allv (ov runs while
 * it travels). Fills every field of s; s->x_recv [R, h] holds the expert
 * input. Collective over EP. */
void mt_moe_token_dispatch(mt_moe_dispatcher *d, mt_moe_dispatch_state *s,
                           const mt_moe_routing *r, const void *x, const mt_moe_overlap *ov);
/* Device buffer [R, h] (T) the experts write their outputs to. */
void *mt_moe_dispatch_expert_out(mt_moe_dispatcher *d, mt_moe_dispatch_state *s);
/* Forward combine: expert outputs back over EP (all-to-allv; ov runs while
 * it travels), then out [n_loc, h] (T, overwrite) = Σ_j gate[i, j] ·
 * y[slot (i, j)] over kept slots (0 for a token whose slots were all
 * dropped). Collective over EP. */
void mt_moe_token_combine(mt_moe_dispatcher *d, mt_moe_dispatch_state *s, void *out,
                          const mt_moe_overlap *ov);

/* Backward of the combine from dy [n_loc, h] (T): returns the gradient of
 * the expert outputs [R, h] (T, in the dispatcher's scratch) and sets
 * *dgate to the gate gradients [n_loc·k] (fp32, device, 0 for dropped
 * slots). dy is read before the all-to-all starts (ov runs while it
 * travels, and may overwrite dy). Collective over EP. */
const void *mt_moe_token_combine_bwd(mt_moe_dispatcher *d, mt_moe_dispatch_state *s,
                                     const void *dy, const float **dgate,
                                     const mt_moe_overlap *ov);
/* Device buffer [R, h] (T) the experts write their input gradient to. */
void *mt_moe_dispatch_expert_dgrad(mt_moe_dispatcher *d, mt_moe_dispatch_state *s);
/* Backward of the dispatch: input gradients back over EP (all-to-allv), then
 * dx [n_loc, h] (T, overwrite) = Σ_j of the gradients of each token's kept
 * slots. Collective over EP. */
void mt_moe_token_dispatch_bwd(mt_moe_dispatcher *d, mt_moe_dispatch_state *s, void *dx);

#endif
