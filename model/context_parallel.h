/* model/context_parallel.h — context parallelism (CP) inside the model
 * (Megatron-core's context_parallel_size with cp_comm_type "p2p":
 * TEDotProductAttention -> AttnFuncWithCPAndKVP2P; docs/context_parallel.md).
 *
 * Token layout (Megatron's load balancing for causal attention): each
 * sequence of s tokens is cut into 2·cp chunks of c = s / (2 cp) tokens; CP
 * rank r holds chunks r and 2cp−1−r, locally in that order, so its
 * activations are [2c, b, h] (Megatron's [s, b, h] order with s = 2c). Local
 * row i (0 <= i < 2c) is the token at GLOBAL position
 *   i < c:  r·c + i,      else:  (2cp−1−r)·c + (i − c).
 * Every op that depends on a position (learned position embedding, RoPE,
 * hidden/embedding dropout counters, the attention mask and its dropout
 * counters) is given global positions, so masks and values are those of one
 * process. With sequence parallelism TP rank t of a CP rank holds local rows
 * [t·sl, (t+1)·sl), sl = 2c / tp; such a shard may straddle the two chunks,
 * so position-dependent ops run per run of consecutive global positions
 * (mt_cp_runs). cp = 1 is the identity layout (local row i = position i).
 *
 * Attention over the ring of the CP group (mt_cp_attn_fwd / _bwd): K/V blocks
 * [2c, b, ng, 2, hn] travel from rank r to r+1; step i (0..cp−1) computes the
 * local queries against the block of rank (r − i) mod cp with the fused op
 * (core/backend.h flash_attn_fwd, kv != NULL) and merges the partial result
 * into the running (ctx, lse) (attn_merge). The send of the current block
 * and the receive of the next are posted BEFORE the block is computed, so the
 * transfer overlaps the computation. Causality with the two-chunk layout
 * leaves per step 2c² visible (query, key) pairs on every rank (+ the c of
 * the diagonal at step 0), so the ranks stay balanced:
 *   step 0 (own block):  chunk r vs chunk r (diagonal), chunk 2cp−1−r vs both
 *   step i <= r:         both local chunks vs the block's first chunk
 *   step i >  r:         local chunk 2cp−1−r vs the whole block
 * The other (query chunk, key chunk) pairs are entirely in the future and
 * are skipped (not computed, not masked). The backward re-circulates the
 * K/V blocks and sends the dK/dV block (accumulated by every rank it
 * visits) one step behind it, so that it returns to its owner after cp
 * transfers; dQ accumulates locally.
 *
 * Communication per layer and micro-batch over the CP group, per rank, in
 * elements of T, with KV = 2c·b·ng·2·hn (one K/V block):
 *   forward  (cp−1)·KV           (K/V ring)
 *   backward (cp−1)·KV + cp·KV   (K/V ring again, dK/dV ring back to owners)
 * counted under MT_COLL_SENDRECV of the group (mt_isend).
 */
#ifndef MT_MODEL_CONTEXT_PARALLEL_H
#define MT_MODEL_CONTEXT_PARALLEL_H

#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm.h"

/* One CP rank's share of a sequence. */
typedef struct {
  int cp, rank;     /* context_parallel_size, this rank in the CP group */
  int64_t s;        /* full sequence length (seq_length) */
  int64_t c;        /* chunk length s / (2 cp) (cp > 1), s / 2 otherwise (unused) */
} mt_cp_layout;

/* Layout of CP rank `rank` of `cp` for sequences of s tokens; s must be a
 * multiple of 2·cp when cp > 1 (fatal otherwise; the config check names the
 * key first). */
mt_cp_layout mt_cp_layout_make(int64_t s, int cp, int rank);
/* Local sequence length: s / cp. */
int64_t mt_cp_local_len(const mt_cp_layout *L);
/* Global position of local row i (0 <= i < s / cp). */
int64_t mt_cp_global_pos(const mt_cp_layout *L, int64_t i);

/* A run of local rows [row, row + n) at consecutive global positions
 * [pos, pos + n). */
typedef struct {
  int64_t row, pos, n;
} mt_cp_run;
/* Split local rows [row0, row0 + n) into runs of consecutive global
 * positions, in local order; returns their number (1 or 2). */
int mt_cp_runs(const mt_cp_layout *L, int64_t row0, int64_t n, mt_cp_run runs[2]);

/* The blocks ring step i (0 <= i < cp) computes on this rank: n (the return
 * value, 1 or 2) pairs of local query chunk h[k] (0: chunk rank, 1: chunk
 * 2cp−1−rank) against the K/V block of rank (rank − i) mod cp, both of its
 * chunks (full[k] = 1) or its first only (full[k] = 0). */
int mt_cp_ring_step(const mt_cp_layout *L, int i, int h[2], int full[2]);

/* Ring-attention state of one model: communication and work buffers, shared
 * by all layers (MT_MEM_WORKSPACE; sizes in mt_cp_attn_workspace_bytes). */
typedef struct mt_cp_attn mt_cp_attn;

/* b: micro-batch; np, ng, hn: this TP rank's query heads, query groups and
 * q/k head dimension; hv: the value head width (multi-latent attention's
 * v_head_dim; hn otherwise): qkv, K/V blocks and ctx are then laid out as
 * mt_attn_desc.hv says (core/backend.h). cp_group: the CP group (L->cp
 * ranks, group rank = L->rank); communicated over by fwd/bwd. Requires
 * L->cp > 1. */
mt_cp_attn *mt_cp_attn_create(mt_backend *be, mt_group *cp_group, const mt_cp_layout *L, int b,
                              int np, int ng, int hn, int hv);
void mt_cp_attn_destroy(mt_cp_attn *a); /* NULL is a no-op */

/* Forward over the ring (shapes below for hv = hn; mt_attn_desc.hv for
 * others). qkv [2c, b, ng, np/ng + 2, hn] (T): this rank's
 * tokens after linear_qkv (and q/k norm, RoPE). base: the layer's attention
 * descriptor (b, np, ng, hn, head offset and total, scale, dropout, key,
 * sample ids; its block fields are filled here). Writes ctx [2c, b, np, hn]
 * (T) and lse (fp32, saved for the backward) as two [b, np, c] halves, one
 * per local chunk. Collective over the CP group. */
void mt_cp_attn_fwd(mt_cp_attn *a, const mt_attn_desc *base, void *ctx, float *lse,
                    const void *qkv);
/* Backward: dqkv [2c, b, ng, np/ng + 2, hn] (T, OVERWRITTEN: dQ of the local
 * queries, dK/dV of the local keys summed over every rank's queries) from
 * dctx [2c, b, np, hn] and the saved ctx, lse, qkv. Collective over the CP
 * group. */
void mt_cp_attn_bwd(mt_cp_attn *a, const mt_attn_desc *base, void *dqkv, const void *dctx,
                    const void *ctx, const float *lse, const void *qkv);

#endif
