/* model/moe_experts.h — the local experts of an MoE layer: E/ep MLPs
 * (fc1 -> GELU(tanh) -> fc2, or fc1 -> SwiGLU -> fc2) over the rows the token dispatcher delivered
 * (Megatron-core's moe/experts.py SequentialMLP; GShard, Lepikhin et al.
 * 2020, arXiv:2006.16668 §2; Switch, Fedus et al. 2021, arXiv:2101.03961
 * §2). One GEMM per (source peer, local expert) block of rows through
 * model/linear.h, or, with moe_grouped_gemm (Megatron's GroupedMLP), each of
 * fc1, fc2 and their backward GEMMs as ONE grouped GEMM op over all blocks
 * (core/backend.h gemm_grouped; bitwise equal to the loop on cpu in fp32).
 *
 * Shapes: rows x [R, h] grouped by (source peer p, local expert le) in that
 * order, counts[p · E_loc + le] rows per block (the dispatcher's cnt_recv),
 * R = Σ counts <= r_max. The buffers of R rows (the saved fc1 and
 * activation outputs of every layer set, the backward scratch) are one
 * grow-only group (model/moe_rowbuf.h) of C rows, C = the high-water mark
 * of R (grown by the forward before it writes; docs/moe_parallel.md
 * "Buffers sized by the routing"). Expert weights: fc1 [g·F, h] + bias [g·F], fc2
 * [h, F] + bias [h] (g = 2 with SwiGLU: gate rows then up rows; biases NULL
 * without add_bias_linear; T = backend storage dtype); their gradients fp32,
 * accumulated.
 * FP8 (w->fp8 set; Megatron's TEGroupedMLP / SequentialMLP under TE, TE's
 * GroupedLinear: one set of quantizers and scales per GEMM of the group =
 * per expert): each local expert's rows of every source block are gathered
 * in (peer) order into one contiguous [n_e, ·] operand (Megatron's permuted
 * layout) and go through mt_fp8_linear_fwd / _bwd as one linear, so the
 * expert's amax covers all its rows; an expert with no rows runs nothing
 * (docs/fp8.md). The amax reduction groups are the fp8 context's (the ETP
 * group, model/gpt.c).
 * No communication (other than the fp8 context's amax reductions). With expert tensor parallelism (model/moe_etp.h) F is
 * this rank's slice F/etp and the blocks come from every ETP rank (ep_size
 * = etp · ep source blocks); the ETP exchange happens outside.
 */
#ifndef MT_MODEL_MOE_EXPERTS_H
#define MT_MODEL_MOE_EXPERTS_H

#include <stdint.h>

#include "core/backend.h"
#include "model/moe_rowbuf.h"

typedef struct {
  int E_loc, ep_size;         /* local experts, source peers */
  int64_t h, F;               /* hidden size, expert ffn width */
  int swiglu;                 /* SwiGLU experts (fc1 gives gate and up halves) */
  int64_t r_max;              /* rows received at most (the worst case) */
  int64_t rows0;              /* rows the buffers hold from the start: r_max when the rows
                                 are static (padding to capacity), else 0 (grown) */
  int grouped;                /* moe_grouped_gemm: fc1 / fc2 (and each backward GEMM) as
                                 one grouped GEMM op over all blocks (bitwise equal) */
} mt_moe_experts_config;

/* Parameter pointers of the local experts, [E_loc] each. fp8: NULL, or
 * this layer's experts run fc1 and fc2 (forward, dgrad, wgrad) as FP8
 * linears (model/fp8_linear.h), one per local expert over all its rows;
 * local expert le's delayed-scaling state is key fp8_key[0] + le (fc1),
 * fp8_key[1] + le (fc2). */
typedef struct {
  const void **fc1_w, **fc1_b, **fc2_w, **fc2_b;
  struct mt_fp8_linear *fp8;
  int fp8_key[2];
} mt_moe_expert_weights;
typedef struct {
  float **fc1_w, **fc1_b, **fc2_w, **fc2_b;
} mt_moe_expert_grads;

/* What the experts of one layer keep for backward (MT_MEM_ACT). */
typedef struct {
  void *fc1;                  /* [C, g·F] T: fc1 output (activation input) */
  void *act;                  /* [C, F] T: activation output (fc2 input) */
  int64_t rows;               /* rows of the last forward (kept when the buffers grow) */
} mt_moe_experts_acts;

typedef struct mt_moe_experts mt_moe_experts;

/* Experts of one model, with their backward scratch (MT_MEM_WORKSPACE). */
mt_moe_experts *mt_moe_experts_create(mt_backend *be, const mt_moe_experts_config *c);
void mt_moe_experts_destroy(mt_moe_experts *x);
void mt_moe_experts_acts_init(mt_moe_experts *x, mt_moe_experts_acts *a);
void mt_moe_experts_acts_free(mt_moe_experts *x, mt_moe_experts_acts *a);
/* The experts' row group (C = mt_moe_rowbuf_rows): the ETP exchange
 * (model/moe_etp.c) registers its buffers of the gathered rows in it. */
mt_moe_rowbuf *mt_moe_experts_rowbuf(mt_moe_experts *x);

/* Forward: y [R, h] (T, overwrite) = fc2(act(fc1(x))) of each block's
 * expert, x [R, h] (T); saves fc1 and activation outputs in a. */
void mt_moe_experts_forward(mt_moe_experts *x, mt_moe_experts_acts *a,
                            const mt_moe_expert_weights *w, void *y, const void *in,
                            const int64_t *counts, int64_t R);

/* Backward: dx [R, h] (T, overwrite) from dy [R, h] (T) and the forward's
 * input `in` and acts a; expert weight and bias gradients accumulate. */
void mt_moe_experts_backward(mt_moe_experts *x, mt_moe_experts_acts *a,
                             const mt_moe_expert_weights *w, const mt_moe_expert_grads *g,
                             void *dx, const void *dy, const void *in, const int64_t *counts,
                             int64_t R);

#endif
