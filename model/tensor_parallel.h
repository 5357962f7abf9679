/* model/tensor_parallel.h — Megatron's tensor-parallel layers
 * (tensor_parallel/layers.py, cross_entropy.py; Shoeybi et al. 2019 §3,
 * sequence parallelism: Korthikanti et al. 2022 §4.2.2) on the backend op
 * table and the TP/SP regions of parallel/mappings.h.
 *
 * Shapes: s = full sequence, sl = s / tp with sequence parallelism (sp) and
 * s without; b = micro-batch; activations are [s, b, ·] with the sequence
 * outermost. "rows" below = s·b (full) or sl·b (shard). Weights are
 * [out, in] (PyTorch/Megatron), T = backend storage dtype, weight and bias
 * gradients fp32 and accumulated. All collectives run over ctx->tp.
 */
#ifndef MT_MODEL_TENSOR_PARALLEL_H
#define MT_MODEL_TENSOR_PARALLEL_H

#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm.h"

typedef struct {
  mt_backend *be;
  mt_group *tp;      /* NULL when tp == 1 */
  int tp_size, tp_rank;
  int sp;            /* sequence parallel (only meaningful when tp > 1) */
  int64_t s, b;      /* full sequence length, micro-batch size */
  void *gather_ws;   /* [s, b, max(h, ...)] T: SP all-gather target / partial sums */
  void *grad_ws;     /* [s, b, max width] T: full-size gradient workspace */
  struct mt_fp8_linear *fp8; /* FP8 linear layers (model/fp8_linear.h); NULL = off */
  int fp8_on;        /* the caller's layer runs its linears in FP8 (fp8 set) */
} mt_tp_ctx;

/* Rows of this rank's sequence shard: s·b / tp with sp, else s·b. */
int64_t mt_tp_local_rows(const mt_tp_ctx *c);

/* ColumnParallelLinear forward: Y[s, b, out_l] = X W^T + bias, W [out_l, in]
 * (this rank's output features), bias [out_l] or NULL. x is the layer input
 * [sl, b, in]; with sp it is all-gathered (gather_from_sp) into gather_ws,
 * else it enters through copy_to_tp (identity). Returns the full input used
 * (x or gather_ws). */
const void *mt_column_parallel_linear_fwd(mt_tp_ctx *c, void *y, const void *x, const void *w,
                                          const void *bias, int64_t out_l, int64_t in);

/* ColumnParallelLinear backward: dW += dY^T X (X re-gathered from the saved
 * shard x under sp), db += colsum(dY), dx [sl, b, in] = reduce over TP of
 * dY W (all-reduce: copy_to_tp backward; reduce-scatter under sp). dx may be
 * NULL (no input gradient). */
void mt_column_parallel_linear_bwd(mt_tp_ctx *c, void *dx, float *dw, float *db, const void *dy,
                                   const void *x, const void *w, int64_t out_l, int64_t in);

/* RowParallelLinear forward: Y [sl, b, out] = reduce over TP of X_l W_l^T,
 * plus bias once (tp rank 0 adds it to its partial sum), X_l [s, b, in_l]
 * (this rank's input features), W_l [out, in_l]. The reduction is an
 * all-reduce (reduce_from_tp), or a reduce-scatter to the sequence shard under
 * sp (reduce_scatter_to_sp). */
void mt_row_parallel_linear_fwd(mt_tp_ctx *c, void *y, const void *x, const void *w,
                                const void *bias, int64_t out, int64_t in_l);

/* RowParallelLinear backward: dY [sl, b, out] is all-gathered under sp; then
 * dW_l += dY^T X_l, db += colsum(dY) (full rows, identical on all TP ranks),
 * dx [s, b, in_l] = dY W_l. */
void mt_row_parallel_linear_bwd(mt_tp_ctx *c, void *dx, float *dw, float *db, const void *dy,
                                const void *x, const void *w, int64_t out, int64_t in_l);

/* VocabParallelEmbedding forward: out [sl, b, h] = reduce over TP of the
 * lookup of tokens [s*b] (full sequence, [s, b] order) in this rank's
 * vocabulary slice w [v_end - v_start, h] (ids outside the slice give 0).
 * The reduction is an all-reduce, or a reduce-scatter to the sequence shard
 * under sp. */
void mt_vocab_parallel_embedding_fwd(mt_tp_ctx *c, void *out, const int32_t *tokens,
                                     const void *w, int64_t v_start, int64_t v_end, int64_t h);
/* Backward: dout [sl, b, h] (all-gathered under sp), dw += rows of in-range tokens. */
void mt_vocab_parallel_embedding_bwd(mt_tp_ctx *c, float *dw, const int32_t *tokens,
                                     const void *dout, int64_t v_start, int64_t v_end, int64_t h);

/* Vocab-parallel cross-entropy (Megatron cross_entropy.py): logits
 * [s·b, vl] of this rank's vocabulary slice starting at v_start, with `valid`
 * real columns. row_max is reduced with MAX over TP, then sumexp and the
 * target logit ([2, s·b] in `stats`: sumexp then target logit) with SUM;
 * loss [s·b] per token (nats), times loss_mask [s·b] fp32 (device; NULL =
 * all 1: Megatron's loss_mask, 0 = a token without loss or gradient). Full
 * logits are never gathered. Returns the sum of token losses (identical on
 * all TP ranks). */
double mt_vocab_parallel_cross_entropy_fwd(mt_tp_ctx *c, float *loss, float *row_max,
                                           float *stats, const void *logits,
                                           const int32_t *targets, int64_t vl, int64_t valid,
                                           int64_t v_start, const float *loss_mask);
/* Backward, local: logits <- scale · loss_mask · (softmax − onehot) in place. */
void mt_vocab_parallel_cross_entropy_bwd(mt_tp_ctx *c, void *logits, const float *row_max,
                                         const float *stats, const int32_t *targets, int64_t vl,
                                         int64_t valid, int64_t v_start, float scale,
                                         const float *loss_mask);

#endif
