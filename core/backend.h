/* core/backend.h — the backend op table and allocator: the only way model/
 * and trainer/ touch tensor memory or do math.
 *
 * Conventions (all ops):
 *  - Pointers are DEVICE pointers of the backend (host memory on cpu/).
 *  - "T" = the backend's storage dtype `be->dtype` for parameters, activations
 *    and activation gradients (fp32 on cpu/, bf16 on cuda/ with --bf16).
 *    Parameter gradients, optimizer state, LayerNorm statistics and all loss
 *    pieces are fp32 ("float *"). Accumulation is always fp32.
 *  - Matrices are row-major. Activations use Megatron's [s, b, h] order
 *    (sequence outermost) so a sequence-parallel shard is contiguous; a
 *    "row" is one token, rows = s * b.
 *  - Ops documented as "accumulate" add into their output (gradient
 *    accumulation across micro-batches); all others overwrite.
 *  - Ops are asynchronous with respect to the host where the backend allows
 *    (cuda/ streams); anything returning a value to the host synchronises.
 * Every op of this table is implemented by every backend; tests/unit
 * checks that no entry is NULL.
 */
#ifndef MT_CORE_BACKEND_H
#define MT_CORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "rng.h"

/* Allocator categories (the startup summary and tests read these). */
typedef enum {
  MT_MEM_PARAM = 0,   /* parameters (and fp32 master copies)          */
  MT_MEM_GRAD,        /* parameter gradients                           */
  MT_MEM_OPTIM,       /* optimizer state (Adam m, v)                   */
  MT_MEM_ACT,         /* activations saved for backward + live temps   */
  MT_MEM_COMM,        /* communication buffers                         */
  MT_MEM_WORKSPACE,   /* scratch owned by ops / model                  */
  MT_MEM_NCAT
} mt_mem_cat;

const char *mt_mem_cat_name(mt_mem_cat c);

typedef struct {
  size_t live[MT_MEM_NCAT]; /* bytes currently allocated per category */
  size_t peak[MT_MEM_NCAT]; /* high-water mark per category            */
  size_t live_total, peak_total;
  int64_t n_allocs, n_frees;
  size_t op_scratch;        /* bytes of the backend's own op scratch (one
                               buffer that only grows, counted under
                               MT_MEM_WORKSPACE): the memory tests subtract it
                               from the workspace peak, the rest being the
                               model's buffers */
} mt_mem_stats;

typedef struct mt_backend mt_backend;

/* GEMM descriptor, row-major, strided-batched:
 *   C[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i] (+ bias broadcast over rows)
 * for i in [0, batch); op(X) = X^T when trans_x. op(A) is [m, k], op(B) is
 * [k, n], C is [m, n]. A[i] = a + i * stride_a elements, etc. `bias` ([n],
 * dtype T) is added after the product (NULL for none). Dtypes: a_type and
 * b_type are T; c_type is T or MT_F32 (weight gradients accumulate in fp32). */
typedef struct {
  int trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
  const void *a; int64_t lda, stride_a;
  const void *b; int64_t ldb, stride_b;
  void *c; int64_t ldc, stride_c;
  mt_dtype a_type, b_type, c_type;
  const void *bias;
  int batch; /* >= 1 */
} mt_gemm_desc;

/* Grouped GEMM (Megatron-core's GroupedMLP, Transformer Engine's
 * GroupedLinear: the local experts' fc1 or fc2 over all their row blocks as
 * one op), row-major:
 *   for g in [0, groups):  C_g = alpha * op(A_g) @ op(B_g) + beta * C_g
 *                                (+ bias_g broadcast over rows)
 * op(A_g) [m[g], k[g]], op(B_g) [k[g], n[g]], C_g [m[g], n[g]]; transposes,
 * alpha, beta, leading dimensions and dtypes are shared by every group and
 * mean what they mean in mt_gemm_desc. m, n, k and the pointer arrays a, b,
 * c, bias are HOST arrays of `groups` entries (the pointers in them are
 * device pointers); any m[g], n[g] may be 0 (the group does nothing) and
 * k[g] 0 gives C_g = beta C_g (+ bias_g). bias (or an entry) NULL: none.
 * Several groups may name the SAME C pointer (a weight gradient accumulated
 * from several blocks of one expert, beta 1): those run in group order;
 * otherwise the C regions must not overlap.
 * The result equals calling gemm once per group (batch 1) in group order; on
 * cpu/ in fp32 it is bitwise equal to that loop (each group is cut into the
 * same tiles and each tile is the same kernel call; one parallel region runs
 * the (group, tile) pairs). */
typedef struct {
  int trans_a, trans_b;
  float alpha, beta;
  int64_t lda, ldb, ldc;
  mt_dtype a_type, b_type, c_type;
  int groups;                       /* >= 0 */
  const int *m, *n, *k;             /* [groups] host */
  const void *const *a, *const *b;  /* [groups] host arrays of device pointers */
  void *const *c;
  const void *const *bias;          /* [groups] or NULL */
} mt_gemm_grouped_desc;

/* Group g of d as a plain gemm (batch 1): what "once per group" calls. */
mt_gemm_desc mt_gemm_grouped_member(const mt_gemm_grouped_desc *d, int g);
/* The order groups naming the same C run in: stage[g] (host, [groups]) =
 * the number of earlier groups with the same C; groups of one stage write
 * distinct C's, stages run one after the other. Returns the stage count. */
int mt_gemm_grouped_stages(const mt_gemm_grouped_desc *d, int *stage);

/* FP8 quantization of a row-major matrix x [rows, cols] (T), Transformer
 * Engine's recipes (core/fp8.h has the format and scale rules). The scales
 * cover blocks of the matrix:
 *   MT_FP8_TENSOR        one block, the whole tensor (Float8CurrentScaling
 *                        and DelayedScaling);
 *   MT_FP8_BLOCK_1X128   1 row x 128 columns (Float8BlockScaling's
 *                        activations and gradients; DeepSeek-V3 §3.3);
 *   MT_FP8_BLOCK_128X128 128 x 128 (Float8BlockScaling's weights);
 *   MT_FP8_MX32          1 row x 32 columns with e8m0 scales (MXFP8);
 *   MT_FP8_BLOCK_128X1, MT_FP8_MX32_COL: the same along columns (the
 *                        columnwise copies of TE's backward GEMMs).
 * Edge blocks are partial. Scales are stored [ceil(rows/bh), ceil(cols/bw)]
 * row-major, fp32 (mxfp8: the e8m0 value 2^(e-127), exact in fp32), so
 * n_scales = mt_fp8_n_scales(d). pow2 and eps are the current-scaling rule's
 * power-of-2 and amax-epsilon parameters (QParams). */
typedef enum {
  MT_FP8_TENSOR = 0,
  MT_FP8_BLOCK_1X128,
  MT_FP8_BLOCK_128X128,
  MT_FP8_MX32,
  MT_FP8_BLOCK_128X1,       /* 128 rows x 1 column: the 1x128 tiles of a
                               transposed operand (wgrad's contraction over
                               tokens) */
  MT_FP8_MX32_COL           /* 32 rows x 1 column, e8m0 (MXFP8 columnwise) */
} mt_fp8_blocking;

typedef struct {
  int fmt;                  /* mt_fp8_format (core/fp8.h): 0 e4m3, 1 e5m2 */
  mt_fp8_blocking blocking;
  int64_t rows, cols;
  int pow2;                 /* current scaling: scales rounded down to 2^k */
  float eps;                /* current scaling: amax floor (0 = none) */
  int out_f32;              /* fp8_dequantize writes fp32 instead of T */
} mt_fp8_desc;

/* One GEMM on FP8 operands with one scale each (the per-tensor recipes:
 * tensorwise, delayed), row-major as mt_gemm_desc:
 *   C[m, n] = alpha · (a_sinv · b_sinv) · op(A) op(B) (+ beta C) (+ bias)
 * A, B: fp8 codes (uint8) of formats a_fmt, b_fmt (mt_fp8_format) stored
 * row-major with leading dimensions lda, ldb (op(A) is [m, k], op(B) [k, n]);
 * a_sinv, b_sinv: device fp32 scalars, the dequantization scales
 * (fp8_quantize's scale_inv); fp32 accumulation; C of c_type (T, or fp32);
 * bias [n] (T) only with beta 0 and c_type T, NULL for none. */
typedef struct {
  int trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
  const uint8_t *a; int64_t lda; int a_fmt; const float *a_sinv;
  const uint8_t *b; int64_t ldb; int b_fmt; const float *b_sinv;
  void *c; int64_t ldc; mt_dtype c_type;
  const void *bias;
} mt_fp8_gemm_desc;

/* Rows and columns of one scale block of d (the whole tensor for
 * MT_FP8_TENSOR), and the number of scales. */
void mt_fp8_block_dims(const mt_fp8_desc *d, int64_t *bh, int64_t *bw);
int64_t mt_fp8_n_scales(const mt_fp8_desc *d);

/* Causal self-attention core (Megatron's "core attention"), with grouped-query
 * attention (Ainslie et al. 2023, GQA; MQA when ng = 1; plain multi-head when
 * ng = np):
 *   per micro-batch row bi and local head n (query group g = n / (np/ng)):
 *   P = softmax(scale * Q_n K_g^T + causal mask), ctx_n = dropout(P) V_g.
 * qkv is [s, b, ng, np/ng + 2, hn]: per query group its np/ng query heads,
 * then its key head, then its value head (Megatron-core's fused layout; with
 * ng = np this is [s, b, np, 3, hn]), so the column-parallel split of
 * linear_qkv by groups is contiguous. ctx is [s, b, np, hn].
 * Attention-probability dropout of element (bi, n, q, k) uses counter
 *   ((sample_ids[bi] * n_heads_total + head_offset + n) * s + q) * s + k
 * with `key`, so masks are independent of tp (global head) and of dp or
 * micro-batching (global sample id). */
typedef struct {
  int s, b, np, hn;
  int ng;                     /* local query groups; divides np (0 is read as np) */
  /* Value head width (multi-latent attention: v_head_dim next to the q/k
   * width hn = qk_head_dim + qk_pos_emb_head_dim); 0 is read as hn. With
   * hv != hn a query group's slot of qkv is its np/ng query heads and its
   * key head of hn channels, then its value head of hv channels
   * ([s, b, ng, (np/ng + 1)·hn + hv]); a kv block is [sk, b, ng, hn + hv];
   * ctx and dctx are [s, b, np, hv]. Both backends take it (cuda: on its
   * FFMA kernels). */
  int hv;
  int head_offset, n_heads_total;
  float scale;
  float dropout_p;            /* 0 = off */
  mt_rng_key_t key;
  const int64_t *sample_ids;  /* [b], host memory */
  /* Blocks of a longer sequence (fused attention, context parallelism); all
   * zero = the plain causal case over the s rows at positions 0..s-1.
   *   sq, sk: query rows and key rows of this call (0: s each).
   *   s_full: sequence length keying the dropout counters (0: s); the
   *     counter above then reads ((sample * n_heads_total + head) * s_full
   *     + qpos) * s_full + kpos with GLOBAL positions.
   *   Query row i sits at global position qpos(i) = q_pos[0] + i for
   *   i < q_split, q_pos[1] + (i - q_split) otherwise (q_split 0: one range
   *   from q_pos[0]); key rows likewise with k_pos / k_split (Megatron's CP
   *   load balancing gives each rank two chunks). Key j is visible to query
   *   i iff kpos(j) <= qpos(i) (causal). */
  int sq, sk, s_full;
  int q_pos[2], q_split;
  int k_pos[2], k_split;
  /* Document masking (Megatron's reset_attention_mask): NULL = off; else
   * doc_start [b, s_full] int32 in backend memory (s_full: s when 0), the
   * global position of the first token of the document holding position p
   * of micro-batch row bi at doc_start[bi * s_full + p]. Key j is then
   * visible to query i iff doc_start[qpos(i)] <= kpos(j) <= qpos(i): the
   * explicit mask of Megatron's _get_ltor_masks_and_position_ids, without an
   * s x s tensor. Only the positions of this call's query rows are read. */
  const int32_t *doc_start;
} mt_attn_desc;

/* Rotary position embedding (Su et al. 2021, RoFormer; Megatron-core's
 * rotary_pos_embedding.py) on the query and key heads of a qkv tensor laid
 * out as in mt_attn_desc ([s, b, ng, np/ng + 2, hn]; value heads untouched).
 * The first rot_dim channels of every q/k head are rotated (rot_dim even,
 * = hn * rotary_percent), the rest pass through. Token si has the global
 * position pos = s_offset + si; pair i (0 <= i < rot_dim/2) turns by
 *   theta_i = pos * base^(-2i / rot_dim)
 *   (x_a, x_b) -> (x_a cos theta_i - x_b sin theta_i, x_b cos theta_i + x_a sin theta_i)
 * with a = i, b = i + rot_dim/2 (rotate-half: Megatron's default and Hugging
 * Face's) or a = 2i, b = 2i + 1 (interleaved); with a frequency scaling
 * (`scaling` below) base^(-2i / rot_dim) becomes core/rope_freq.h's inv_i and
 * cos/sin are multiplied by attn_factor. cos/sin are computed in double
 * precision on the host side of cpu/; a backend may use fp32 angles (its
 * tolerance is in the op-case table). */
typedef struct {
  int s, b, np, ng, hn;
  int rot_dim;
  int interleaved;
  float base;
  int s_offset;               /* global position of row si = 0 */
  /* frequency scaling (core/rope_freq.h; all 0 = plain RoPE): scaling is
   * MT_ROPE_PLAIN | MT_ROPE_LLAMA3 (factor) | MT_ROPE_YARN (factor,
   * original_max, beta_fast, beta_slow; cos and sin times attn_factor,
   * 0 read as 1). YaRN takes rotate-half pairs only (interleaved 0), as
   * Megatron's YarnRotaryEmbedding. */
  int scaling;
  float factor;
  int original_max;
  float beta_fast, beta_slow;
  float attn_factor;
} mt_rope_desc;

/* Per-head normalisation of queries and keys (Megatron-core's qk_layernorm;
 * Dehghani et al. 2023, "Scaling Vision Transformers to 22B", §3.1) on a qkv
 * tensor [rows, ng, np/ng + 2, hn] laid out as in mt_attn_desc (rows = s·b):
 * every q head is normalised over its hn channels with (wq, bq), every k head
 * with (wk, bk), v heads are copied. LayerNorm (rms = 0) or RMSNorm (rms = 1,
 * biases ignored). Statistics are indexed per (row, group, slot) with slot
 * 0..np/ng-1 the group's q heads and np/ng its k head:
 *   stat[(r * ng + g) * (np/ng + 1) + slot], rows·(np + ng) entries. */
typedef struct {
  int64_t rows;
  int np, ng, hn;
  int rms;
  float eps;
} mt_qknorm_desc;

/* Dropout on a [s, b, h] tensor (local shard). Element (si, bi, hi) uses
 * counter ((sample_ids[bi] * s_full + s_offset + si) * h_full + h_offset + hi)
 * with `key`: keep iff uniform >= p, kept values scaled by 1/(1-p).
 * s_offset/s_full place a sequence-parallel shard in the full sequence,
 * h_offset/h_full a tensor-parallel shard of the hidden dimension. */
typedef struct {
  float p;                    /* 0 = identity */
  mt_rng_key_t key;
  int s, b, h;
  int s_offset, s_full;
  int h_offset, h_full;
  const int64_t *sample_ids;  /* [b], host memory */
} mt_dropout_desc;

/* Decoupled-weight-decay Adam (Loshchilov & Hutter, AdamW), with Megatron's
 * bias correction. For each element: g = grad * grad_scale;
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * master -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * master),
 * mhat = m / (1 - b1^step), vhat = v / (1 - b2^step). */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;      /* >= 1, the update's 1-based count */
  float grad_scale;  /* clipping coefficient (1 = none) */
} mt_adamw_hparams;

typedef struct {
  /* ---- memory ---- */
  /* Allocate `bytes` of device memory counted under `cat`; contents
   * undefined. Aborts (mt_fatal) when out of memory. */
  void *(*alloc)(mt_backend *be, size_t bytes, mt_mem_cat cat);
  /* Free memory from alloc (NULL is a no-op); counters decrease. */
  void (*free)(mt_backend *be, void *p);
  void (*memcpy_h2d)(mt_backend *be, void *dst, const void *src_host, size_t bytes);
  void (*memcpy_d2h)(mt_backend *be, void *dst_host, const void *src, size_t bytes);
  void (*memcpy_d2d)(mt_backend *be, void *dst, const void *src, size_t bytes);
  void (*memset0)(mt_backend *be, void *dst, size_t bytes);
  /* Wait for all queued work. */
  void (*synchronize)(mt_backend *be);

  /* ---- initialisation ---- */
  /* dst [rows, cols] (T) = std * N(key, (row_offset + r) * ld_global + col_offset + c):
   * a shard of an unsharded tensor with `ld_global` columns. */
  void (*init_normal)(mt_backend *be, void *dst, int64_t rows, int64_t cols, int64_t ld_global,
                      int64_t row_offset, int64_t col_offset, mt_rng_key_t key, float std);
  /* dst[0..n) = value; dtype `t` (T or MT_F32). */
  void (*fill)(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n);
  /* dst = src converted between dtypes (e.g. fp32 master -> bf16 param). */
  void (*cast)(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t, int64_t n);

  /* ---- GEMM ---- */
  void (*gemm)(mt_backend *be, const mt_gemm_desc *d);
  /* Grouped GEMM (mt_gemm_grouped_desc): `groups` independent products. */
  void (*gemm_grouped)(mt_backend *be, const mt_gemm_grouped_desc *d);
  /* db[n] (fp32, accumulate) += sum over rows of dout[rows, n] (T). */
  void (*bias_grad)(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n);

  /* ---- FP8 quantization (mt_fp8_desc; cpu/cpu_fp8.c) ---- */
  /* amax[n_scales] (fp32, overwrite) = max |x| over each scale block of x
   * [rows, cols] (T); NaN elements are skipped (fmaxf), an all-NaN or empty
   * block gives 0. */
  void (*fp8_amax)(mt_backend *be, const mt_fp8_desc *d, float *amax, const void *x);
  /* q[rows, cols] (uint8 fp8 codes, overwrite) = encode(x · scale_b) per
   * block b, and scale_inv[n_scales] (fp32, overwrite) = 1/scale_b
   * (mxfp8: 2^(e-127)). scale NULL: scale_b from amax[b] by the blocking's
   * rule (current scaling with d->pow2 / d->eps; mxfp8 e8m0); scale
   * non-NULL (MT_FP8_TENSOR only: delayed scaling): *scale is used and
   * amax is not read. */
  void (*fp8_quantize)(mt_backend *be, const mt_fp8_desc *d, uint8_t *q, float *scale_inv,
                       const void *x, const float *amax, const float *scale);
  /* y[rows, cols] (T, or fp32 with d->out_f32; overwrite) = decode(q) ·
   * scale_inv_b (fp32 product, rounded once to T). */
  void (*fp8_dequantize)(mt_backend *be, const mt_fp8_desc *d, void *y, const uint8_t *q,
                         const float *scale_inv);
  /* mt_fp8_gemm_desc on the FP8 tensor cores (cuda: cuBLASLt's FP8 matmul
   * on compute capability >= 8.9). Returns 0 when enqueued, -1 when the
   * backend has no FP8 GEMM for the problem (nothing enqueued; the caller
   * dequantizes and runs `gemm`). NULL on backends without one (cpu). */
  int (*fp8_gemm)(mt_backend *be, const mt_fp8_gemm_desc *d);

  /* ---- normalisation / activations ---- */
  /* LayerNorm over the last dim h (Ba et al. 2016): out = (in - mean) * rstd * w + b.
   * in/out [rows, h] (T), w/b [h] (T), mean/rstd [rows] (fp32, saved). */
  void (*layernorm_fwd)(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                        const void *w, const void *b, int64_t rows, int64_t h, float eps);
  /* din (T) ACCUMULATES the input gradient; dw, db (fp32 [h]) accumulate. */
  void (*layernorm_bwd)(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                        const void *in, const void *w, const float *mean, const float *rstd,
                        int64_t rows, int64_t h);
  /* RMSNorm (Zhang & Sennrich 2019) over the last dim h:
   * out = in * rstd * w, rstd = 1 / sqrt(mean_h(in^2) + eps).
   * in/out [rows, h] (T), w [h] (T), rstd [rows] (fp32, saved). */
  void (*rmsnorm_fwd)(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                      int64_t rows, int64_t h, float eps);
  /* din (T) ACCUMULATES the input gradient; dw (fp32 [h]) accumulates. */
  void (*rmsnorm_bwd)(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                      const void *w, const float *rstd, int64_t rows, int64_t h);
  /* SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"): in [rows, 2f]
   * holds per row the gate half [0, f) then the up half [f, 2f);
   * out [rows, f] (T) = silu(gate) * up, silu(x) = x / (1 + exp(-x)). */
  void (*swiglu_fwd)(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
  /* din [rows, 2f] (T, overwrite) = d(gate), d(up) from dout [rows, f] and
   * the saved in. */
  void (*swiglu_bwd)(mt_backend *be, void *din, const void *dout, const void *in, int64_t rows,
                     int64_t f);
  /* Rotary embedding (mt_rope_desc) applied IN PLACE to the q and k heads of
   * qkv [s, b, ng, np/ng + 2, hn] (T). */
  void (*rope_fwd)(mt_backend *be, const mt_rope_desc *d, void *qkv);
  /* Backward: the inverse rotation (angle -theta) applied IN PLACE to the q
   * and k heads of dqkv (same layout); the v heads are untouched. */
  void (*rope_bwd)(mt_backend *be, const mt_rope_desc *d, void *dqkv);
  /* qk_layernorm (mt_qknorm_desc): out [rows, ng*(np/ng+2)*hn] (T, not
   * aliasing in) from in; wq/bq/wk/bk [hn] (T; bq/bk NULL with rms);
   * mean (NULL with rms) and rstd [rows*(np+ng)] fp32, saved for backward. */
  void (*qknorm_fwd)(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                     float *rstd, const void *in, const void *wq, const void *bq, const void *wk,
                     const void *bk);
  /* din (T, OVERWRITE, not aliasing dout; v heads = dout's v heads) from
   * dout and the saved in/mean/rstd; dwq/dbq/dwk/dbk fp32 [hn] ACCUMULATE
   * (dbq/dbk NULL with rms). */
  void (*qknorm_bwd)(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                     float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                     const void *wk, const float *mean, const float *rstd);
  /* GELU, tanh approximation (Hendrycks & Gimpel): out = gelu(in), [n] (T). */
  void (*gelu_fwd)(mt_backend *be, void *out, const void *in, int64_t n);
  /* din = dout * gelu'(in) (overwrite; din may alias dout). */
  void (*gelu_bwd)(mt_backend *be, void *din, const void *in, const void *dout, int64_t n);

  /* ---- attention: fused (the unfused op that kept the [b, np, s, s]
   * probabilities left the table with issue 15; tests/tools/attn_unfused.h
   * keeps the CPU one as the reference) ---- */

  /* ---- fused attention (FlashAttention-2, Dao 2023, arXiv:2307.08691) ----
   * Nothing of size sq x sk is stored: the forward runs over key/value tiles
   * with the online softmax and saves only the log-sum-exp; the backward
   * recomputes each tile's probabilities from Q, K and lse.
   * Q: the query heads of qkv [sq, b, ng, np/ng + 2, hn] (T).
   * K, V: kv == NULL -> the key/value heads of the same qkv (sk = sq, same
   *   positions); kv != NULL -> kv [sk, b, ng, 2, hn] (T; per query group its
   *   K head then its V head: a block received over the context-parallel ring).
   * ctx [sq, b, np, hn] (T, overwrite) = dropout(P) V over the visible keys;
   * lse [b, np, sq] (fp32, overwrite) = log sum_visible exp(scale q.k), the
   *   PRE-dropout softmax normaliser; a row with no visible key gets ctx 0
   *   and lse -INFINITY.
   * Dropout: the mask of element (bi, head, qpos, kpos) is the counter of
   *   mt_attn_desc, regenerated per tile, so it equals the unfused op's. */
  void (*flash_attn_fwd)(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *qkv, const void *kv);
  /* Merge a partial result over another, disjoint set of keys into
   * (ctx, lse) (in/out; ring attention): lse' = log(e^lse + e^lse_b),
   * ctx' = ctx e^(lse - lse') + ctx_b e^(lse_b - lse'); -INFINITY lse on
   * either side is handled (no NaN). Shapes as flash_attn_fwd's outputs
   * (sq, b, np, hn of d). */
  void (*attn_merge)(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                     const void *ctx_b, const float *lse_b);
  /* Backward for the same (query block, key block) pair, given dctx and the
   * FINAL ctx and lse of the query rows (over every key block; D = rowsum(
   * dctx o ctx) is formed inside):
   *   kv == NULL: dqkv [sq, b, ng, np/ng + 2, hn] (T) OVERWRITTEN (q, k and
   *     v heads; shared K/V heads get the sum over their query heads); dkv
   *     unused.
   *   kv != NULL: the q heads of dqkv ACCUMULATE dQ (its k/v heads are not
   *     touched); dkv [sk, b, ng, 2, hn] (T) ACCUMULATES dK, dV. */
  void (*flash_attn_bwd)(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                         const void *dctx, const void *ctx, const float *lse, const void *qkv,
                         const void *kv);

  /* ---- dropout ---- */
  /* out = residual + dropout(x) on [s, b, h] (T); out may alias residual. */
  void (*dropout_add_fwd)(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                          const void *residual);
  /* dx = mask * dout / (1 - p) (overwrite; dx may alias dout). */
  void (*dropout_bwd)(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout);

  /* ---- embeddings ---- */
  /* out[t, :] = w[tokens[t] - v_start, :] when v_start <= tokens[t] < v_end,
   * else 0 (vocab-parallel embedding). tokens [n] int32 (device), w
   * [v_end - v_start, h] (T), out [n, h] (T). */
  void (*embedding_fwd)(mt_backend *be, void *out, const int32_t *tokens, int64_t n, const void *w,
                        int64_t v_start, int64_t v_end, int64_t h);
  /* dw (fp32, accumulate) rows of in-range tokens += dout rows. */
  void (*embedding_bwd)(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                        const void *dout, int64_t v_start, int64_t v_end, int64_t h);
  /* x[si, bi, :] += wpe[s_offset + si, :]; x [s, b, h] (T). */
  void (*pos_embedding_fwd)(mt_backend *be, void *x, const void *wpe, int64_t s, int64_t b,
                            int64_t h, int64_t s_offset);
  /* dwpe[s_offset + si, :] (fp32, accumulate) += sum_bi dout[si, bi, :]. */
  void (*pos_embedding_bwd)(mt_backend *be, float *dwpe, const void *dout, int64_t s, int64_t b,
                            int64_t h, int64_t s_offset);

  /* ---- (vocab-parallel) cross-entropy pieces, Megatron cross_entropy.py ----
   * logits [n, vl] (T) hold this rank's vocabulary slice starting at global
   * id v_start; only the first `valid` columns are real tokens (padding is
   * excluded from the softmax). targets [n] int32 (device), global ids. */
  /* row_max[i] = max_{j<valid} logits[i, j] (fp32). */
  void (*xent_max)(mt_backend *be, float *row_max, const void *logits, int64_t n, int64_t vl,
                   int64_t valid);
  /* sumexp[i] = sum_{j<valid} exp(logits[i,j] - row_max[i]);
   * tgt_logit[i] = logits[i, targets[i] - v_start] if in [0, valid) else 0. */
  void (*xent_stats)(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                     const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                     int64_t valid, int64_t v_start);
  /* loss[i] = w_i (log(sumexp[i]) + row_max[i] - tgt_logit[i]) (fp32, nats)
   * with w_i = loss_mask[i] (Megatron's loss_mask: [n] fp32 device, 1 = keep,
   * 0 = a row whose loss is exactly 0), w_i = 1 when loss_mask is NULL. */
  void (*xent_loss)(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                    const float *tgt_logit, int64_t n, const float *loss_mask);
  /* In place: logits <- scale w_i (softmax - onehot(target)) for j < valid,
   * 0 for padding columns (the gradient of scale * sum_i loss[i]); w_i as
   * in xent_loss (a row with w_i = 0 is all 0). */
  void (*xent_bwd)(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                   const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                   float scale, const float *loss_mask);

  /* ---- elementwise and reductions ---- */
  /* out = a + b, [n] (T); out may alias a or b. */
  void (*add)(mt_backend *be, void *out, const void *a, const void *b, int64_t n);
  /* y += alpha * x (fp32). */
  void (*axpy_f32)(mt_backend *be, float *y, float alpha, const float *x, int64_t n);
  /* x *= alpha (fp32). */
  void (*scale_f32)(mt_backend *be, float *x, float alpha, int64_t n);
  /* Returns sum_i x[i]^2 (fp32 input, double accumulation); synchronises. */
  double (*sumsq_f32)(mt_backend *be, const float *x, int64_t n);
  /* Returns sum_i x[i] (fp32 input, double accumulation); synchronises. */
  double (*sum_f32)(mt_backend *be, const float *x, int64_t n);
  /* *acc += sum_i x[i]^2, x [n] fp32, acc ONE double in backend memory
   * (alloc). The added value is bitwise the double sumsq_f32 returns for the
   * same x, so a sequence of calls equals `s += sumsq_f32(...)` bitwise;
   * asynchronous (read acc with memcpy_d2h), deterministic. n = 0 adds 0. */
  void (*sumsq_acc_f32)(mt_backend *be, double *acc, const float *x, int64_t n);

  /* ---- mixture of experts (model/moe*.c) ---- */
  /* Row gather (token permutation): dst[i, :] = src[idx[i], :] for i < n;
   * src/dst [*, h] (T), idx [n] int32 (device). */
  void (*moe_gather_rows)(mt_backend *be, void *dst, const void *src, const int32_t *idx,
                          int64_t n, int64_t h);
  /* Weighted combine (unpermute): for each token t < n_tok,
   *   y[t, :] = sum_{j<k, slot[t*k+j] >= 0} w[t*k+j] * src[slot[t*k+j], :]
   * (overwrite; y is 0 for a token with no kept slot). w [n_tok*k] fp32, or
   * NULL for weights 1 (the backward of a row gather). slot [n_tok*k] int32
   * (device), -1 = dropped. Sums run over j in order (deterministic). */
  void (*moe_combine_fwd)(mt_backend *be, void *y, const void *src, const int32_t *slot,
                          const float *w, int64_t n_tok, int k, int64_t h);
  /* Backward of moe_combine_fwd with weights: for every kept (t, j) with
   * r = slot[t*k+j]: dsrc[r, :] = w[t*k+j] * dy[t, :] (overwrite; rows not
   * referenced are left untouched), dw[t*k+j] = dot(dy[t, :], src[r, :])
   * (fp32, overwrite; 0 for dropped slots). Each kept r appears once. */
  void (*moe_combine_bwd)(mt_backend *be, void *dsrc, float *dw, const void *dy, const void *src,
                          const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h);

  /* ---- optimizer ---- */
  /* AdamW step on n elements: master (fp32) updated in place, m/v fp32,
   * grad fp32. If param_lowp != NULL it receives master cast to T. */
  void (*adamw)(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
                const float *grad, void *param_lowp, int64_t n);
} mt_backend_ops;

/* Number of function pointers in mt_backend_ops (for completeness tests). */
#define MT_BACKEND_N_OPS (sizeof(mt_backend_ops) / sizeof(void (*)(void)))

struct mt_backend {
  const mt_backend_ops *ops;
  const char *name;  /* "cpu" | "cuda" */
  mt_dtype dtype;    /* storage dtype T */
  mt_mem_stats mem;  /* allocator counters, updated via mt_mem_account */
  void *impl;        /* backend-private state */
  void (*destroy)(mt_backend *be); /* frees impl and the struct */
  /* cuda: the cudaStream_t every op of this backend is queued on (NCCL
   * collectives and the staging engine's copies are ordered on it); NULL on
   * cpu. */
  void *stream;
  /* 1 when the host cannot read p directly (device memory of this backend):
   * collectives and point-to-point on such a buffer go through NCCL or the
   * staging engine (parallel.distributed_backend, parallel/comm_staged.c).
   * cuda: cudaPointerGetAttributes says device or managed memory. cpu: 0,
   * except with the test switch MEGATRAIN_TEST_DEVICE_BUFFERS=1 set when the
   * backend is created: then 1 for every pointer, so that every collective
   * and p2p of the trainer's groups takes the staging path. */
  int (*is_device_ptr)(const mt_backend *be, const void *p);
};

typedef struct {
  const char *device;  /* "cpu" | "cuda" */
  int num_threads;     /* cpu: OpenMP/OpenBLAS threads, applied once by
                        * mt_backends_process_init (0 = library default) */
  int local_rank;      /* cuda: device ordinal selection */
  mt_dtype dtype;      /* requested storage dtype */
} mt_backend_options;

/* Backends are created by name through the registry above core/
 * (backends/registry.h: mt_backend_create); core/ knows no backend.
 * Destroy one (NULL is a no-op): frees its memory and state. */
void mt_backend_destroy(mt_backend *be);

/* Allocator bookkeeping used by backend implementations: add (bytes > 0) or
 * remove (bytes < 0) bytes under a category, updating live and peak. */
void mt_mem_account(mt_mem_stats *st, mt_mem_cat cat, int64_t bytes);
/* Reset peaks to the current live values (e.g. before measuring one step). */
void mt_mem_reset_peak(mt_mem_stats *st);

#endif
