/* model/fp8_linear.h — the linear layer's three GEMMs on FP8 operands
 * (Megatron with Transformer Engine: --fp8-format / --fp8-recipe; docs/fp8.md):
 *   forward  y[M, out]  = Q(x)[M, in] · Q(W)[out, in]^T        (+ bias)
 *   dgrad    dx[M, in]  = Q(dy)[M, out] · Q(W)[out, in]
 *   wgrad    dW[out,in] += Q(dy)^T · Q(x)  (fp32; plain T operands when
 *            fp8_wgrad is off)
 * Q quantizes with the recipe's blocks and scales (core/backend.h
 * mt_fp8_desc; e4m3, and e5m2 for dy with the hybrid format). The GEMM runs
 * on the dequantized operands (decode(q) · scale_inv, in fp32) with fp32
 * accumulation and rounds the result once to T: the FP8 tensor-core GEMM
 * up to the order of the scale multiplications (exact with power-of-2
 * scales: blockwise, mxfp8); for the per-tensor recipes on a backend with
 * an FP8 GEMM (the backend's fp8_gemm: cuBLASLt on cuda) that GEMM runs on
 * the codes instead, and the dequantize path is its fallback. Blocks by
 * recipe:
 *   tensorwise, delayed: one scale per tensor;
 *   blockwise: x and dy in 1×128 tiles along the contraction (fprop, dgrad:
 *     rows; wgrad: 128×1 along the tokens), W in 128×128 blocks, power-of-2
 *     scales (TE's Float8BlockScaling);
 *   mxfp8: 32-element blocks along the contraction, e8m0 scales.
 * Delayed scaling keeps an amax history and a scale per (key, role), the
 * key naming the linear (mt_fp8_linear_select):
 * the scale in use comes from the history before this use; this use's amax
 * then enters the history (most recent first) and the next scale is
 * computed (TE's DelayedScaling, one update per use = per micro-batch;
 * a recomputed forward reuses its original's scales and updates nothing,
 * mt_fp8_linear_set_pass).
 * Communication: with one scale per tensor (tensorwise, delayed) every
 * amax is all-reduced (max) over the tensor-parallel and the
 * context-parallel group given at creation (blocking, host buffers: the cpu
 * backend), so a tp / sp / cp layout quantizes every tensor as one process
 * would, and, for the delayed recipe only, over the data-parallel group of
 * mt_fp8_linear_set_dp (TE's amax reduction group dp x cp x tp; Megatron's
 * tp_only_amax_red leaves it out), so every replica keeps the same
 * history; block scales are local (identical to one process where shard
 * widths are multiples of the block).
 * Errors: mt_fatal on an allocation failure. */
#ifndef MT_MODEL_FP8_LINEAR_H
#define MT_MODEL_FP8_LINEAR_H

#include <stdint.h>

#include "core/backend.h"
#include "parallel/comm.h"

typedef enum {
  MT_FP8_RECIPE_TENSORWISE = 0,
  MT_FP8_RECIPE_DELAYED,
  MT_FP8_RECIPE_BLOCKWISE,
  MT_FP8_RECIPE_MXFP8
} mt_fp8_recipe;

typedef struct {
  int hybrid;               /* 1: gradients e5m2 */
  mt_fp8_recipe recipe;
  int wgrad;                /* weight-gradient GEMM in FP8 */
  int margin, history_len;  /* delayed */
  int algo_max;             /* delayed: 1 "max", 0 "most_recent" */
} mt_fp8_options;

typedef struct mt_fp8_linear mt_fp8_linear;

/* What the forwards that follow are (delayed scaling; the other recipes
 * keep no state): TRAIN (the default) records each use's amax and queues
 * its x / w scales for the backward, which takes them oldest first (so
 * under pipelining each micro-batch's backward reuses its own forward's
 * scales, as TE saves its quantized tensors); RECOMPUTE replays the oldest
 * queued forward's scales and records nothing (activation recomputation:
 * one history update per use, results bitwise those without recompute);
 * EVAL records the amax and queues nothing (no backward follows). */
typedef enum { MT_FP8_PASS_TRAIN = 0, MT_FP8_PASS_RECOMPUTE, MT_FP8_PASS_EVAL } mt_fp8_pass;
void mt_fp8_linear_set_pass(mt_fp8_linear *f, mt_fp8_pass pass); /* f may be NULL */

/* Parse Megatron's names ("e4m3"|"hybrid", recipe, algo) into *o; 0, or -1
 * for a name outside the choices. */
int mt_fp8_options_parse(mt_fp8_options *o, const char *format, const char *recipe,
                         const char *algo, int wgrad, int margin, int history_len);

/* tp, cp: the amax reduction groups (NULL: size 1). */
mt_fp8_linear *mt_fp8_linear_create(mt_backend *be, const mt_fp8_options *o, mt_group *tp,
                                    mt_group *cp);
void mt_fp8_linear_destroy(mt_fp8_linear *f);

/* dp: the data-parallel amax reduction group of the delayed recipe (NULL:
 * none; docs/fp8.md "Amax reductions"). */
void mt_fp8_linear_set_dp(mt_fp8_linear *f, mt_group *dp);
/* The rows n of this rank's next call summed over that data-parallel group
 * (delayed recipe with one set; else n itself). A caller that skips a call
 * without rows (an expert no token chose) asks first: a rank whose total
 * is not 0 must still make the call (with M = 0), which takes part in the
 * amax reductions, so every replica records the same history. Collective
 * over the group. */
int64_t mt_fp8_linear_group_rows(mt_fp8_linear *f, int64_t n);

/* Key (>= 0) of the delayed-scaling state the next forward or backward call
 * uses (consumed by that call). With the delayed recipe every call needs
 * one (mt_fatal otherwise); the other recipes keep no state and ignore it.
 * The model passes its global identity (layer, linear, expert; model/gpt.h
 * mt_gpt_fp8_key) so the state survives re-pointed weights (ZeRO-3
 * gathers), any layout, and can be named in checkpoints. */
void mt_fp8_linear_select(mt_fp8_linear *f, int key);
/* The delayed-scaling state of key and role (0 input, 1 weight, 2
 * grad_output), created empty (scale 1, history zeros, as TE) if new:
 * host fp32 [mt_fp8_linear_meta_len] = [scale the next use takes,
 * amax history most recent first]; read and written in place by
 * checkpoints. */
float *mt_fp8_linear_meta(mt_fp8_linear *f, int key, int role);
int64_t mt_fp8_linear_meta_len(const mt_fp8_linear *f);

/* y[M, out] (T, overwrite) = Q(x) Q(w)^T (+ bias[out], T, may be NULL). */
void mt_fp8_linear_fwd(mt_fp8_linear *f, void *y, const void *x, const void *w, const void *bias,
                       int64_t M, int64_t out, int64_t in);
/* dW[out, in] += Q(dy)^T Q(x) (fp32); db[out] += colsum(dy) (db may be
 * NULL); dx[M, in] (T, overwrite; may be NULL) = Q(dy) Q(w). */
void mt_fp8_linear_bwd(mt_fp8_linear *f, void *dx, float *dw, float *db, const void *dy,
                       const void *x, const void *w, int64_t M, int64_t out, int64_t in);

/* fp8_param_gather (optimizer/fp8_param_gather.h, docs/fp8.md "FP8
 * parameter gather"): weights the distributed optimizer has already
 * quantized. Entry i says that the weight whose T storage starts at w has
 * the e4m3 codes q [out, in] (device) with scale_inv (host; one value for
 * the tensorwise recipe, [⌈out/128⌉, ⌈in/128⌉] row-major for blockwise's
 * 128×128 blocks); the forward and dgrad of that weight then decode those
 * codes instead of quantizing w (tensorwise and blockwise, whose forward
 * and dgrad quantize W alike: the codes are exactly what the recipe would
 * make of w, see the optimizer). The table is borrowed (NULL / n 0: none)
 * and read at every call. */
typedef struct {
  const void *w;
  const uint8_t *q;
  const float *scale_inv;
} mt_fp8_wcode;
void mt_fp8_linear_set_weight_codes(mt_fp8_linear *f, const mt_fp8_wcode *tab, int n);

#endif
