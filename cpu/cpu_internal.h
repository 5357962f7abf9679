/* cpu/cpu_internal.h — private declarations of the CPU backend
 * (OpenBLAS sgemm + OpenMP). Every op here implements the entry of the same
 * name in core/backend.h (see the doc comments there for the spec): cpu_<op>
 * for fp32 storage, cpu_bf16_<op> for bf16 storage (widen, the fp32 op,
 * round once: cpu_bf16.h); this header adds the backend-private state and
 * shared helpers. One kernel family per file, the same families and names as
 * cuda/ (cpu_<family>.c <-> cuda_<family>.cu):
 *   cpu_backend.c        set-up, creation, destruction, the two op tables
 *   cpu_memory.c         the counting allocator, the op scratch, memory ops
 *   cpu_gemm.c, cpu_gemm_grouped.c, cpu_gemm_bias.c   GEMM, grouped GEMM,
 *                        bias gradient
 *   cpu_norm.c           LayerNorm, RMSNorm, qk-norm
 *   cpu_col_reduce.c     the chunked column reduction of the norms' weight
 *                        gradients (MT_COL_CHUNK rows, chunks summed in order)
 *   cpu_activation.c     GELU, SwiGLU
 *   cpu_rope.c           rotary embedding
 *   cpu_embedding.c      token and position embeddings
 *   cpu_cross_entropy.c  the vocab-parallel cross-entropy pieces
 *   cpu_flash_attn.c, cpu_flash_attn_bwd.c, cpu_flash_kernel.c, cpu_flash.h
 *                        fused attention (forward and merge, backward, tile
 *                        GEMM, shared geometry)
 *   cpu_elementwise.c    init, fill, cast, add, axpy, scale, hidden dropout
 *   cpu_optimizer.c      AdamW, sum / sum of squares
 *   cpu_moe.c            MoE token permutations
 *
 * Determinism: every op uses static OpenMP schedules (GEMM: slabs fixed by
 * the shape) and fixed-order reductions (chunk partials summed in chunk
 * order), so results are bitwise identical run to run and independent of the
 * thread count (tests/unit/op_cases.h: the DET rows).
 */
#ifndef MT_CPU_INTERNAL_H
#define MT_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "core/backend.h"
#include "core/scalar_math.h"

/* Backend-private state (be->impl). */
typedef struct {
  int num_threads;   /* OpenMP threads used by parallel regions (>= 1)   */
  int gemm_omp;      /* 1: split GEMMs over OpenMP threads, OpenBLAS at 1
                      * thread (default); 0: OpenBLAS threads (env
                      * MEGATRAIN_CPU_GEMM=blas)                         */
  int64_t par_min;   /* see CPU_PAR_MIN_DEFAULT                         */
  int gemm_slabs;    /* slabs a large GEMM is cut into, independent of
                      * the thread count (dynamic schedule; env
                      * MEGATRAIN_CPU_GEMM_SLABS, default 16)            */
  int flash_blas;    /* fused attention tile products through OpenBLAS
                      * (env MEGATRAIN_CPU_FLASH_GEMM=blas); default 0:
                      * cpu_fa_gemm                                     */
  void *ws;          /* op workspace (attention, layernorm partials);   */
  size_t ws_bytes;   /*   allocated under MT_MEM_WORKSPACE, grows only  */
  void *bws;         /* bf16 storage: the fp32 copies of an op's T      */
  size_t bws_bytes;  /*   operands (cpu_bf16.h); same accounting        */
} cpu_impl;

static inline cpu_impl *cpu_impl_of(mt_backend *be) { return (cpu_impl *)be->impl; }

/* Element count from which elementwise ops use OpenMP threads. */
static inline int64_t cpu_par_min(mt_backend *be) { return cpu_impl_of(be)->par_min; }

/* Memory (cpu_memory.c): the counting allocator and the memory ops of the
 * op tables (core/backend.h specs). */
void *cpu_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat);
void cpu_free(mt_backend *be, void *p);
void cpu_memcpy(mt_backend *be, void *dst, const void *src, size_t bytes);
void cpu_memset0(mt_backend *be, void *dst, size_t bytes);
void cpu_synchronize(mt_backend *be);

/* Workspace of at least `bytes` (64-byte aligned), owned by the backend and
 * reused across calls; contents undefined; valid until the next call
 * (cpu_memory.c). */
void *cpu_workspace(mt_backend *be, size_t bytes);

/* Second workspace, for the bf16 ops (cpu_bf16.h): fp32 copies of the T
 * operands of one op, which then runs the fp32 op (whose own workspace is
 * cpu_workspace). Same contract as cpu_workspace; be->mem.op_scratch counts
 * both buffers. */
void *cpu_bf16_scratch(mt_backend *be, size_t bytes);

/* Default element count below which elementwise ops stay serial. A
 * [256, 768] tensor (the 124M micro-batch) is below: such an op takes ~50 us
 * on one core, and a parallel region costs a whole scheduler tick (~4 ms)
 * whenever another process preempts one of our threads on a shared machine.
 * Env MEGATRAIN_CPU_PAR_MIN overrides it (the unit tests use 1 to exercise the
 * parallel paths on small shapes). */
#define CPU_PAR_MIN_DEFAULT (1 << 18)

/* ---- shared helpers ---- */

/* exp: mt_fast_expf (core/scalar_math.h), branch-free and vectorisable. */

/* out[j] = mt_rng_uniform(key, start + j) for j in [0, n), computing one
 * Philox block per 4 consecutive counters (bitwise equal to rng.h)
 * (cpu_elementwise.c; the hidden and the attention dropout). */
void cpu_rng_uniform_range(mt_rng_key_t key, uint64_t start, int64_t n, float *out);

/* The chunked column reduction (cpu_col_reduce.c; core/scalar_math.h
 * MT_COL_CHUNK). fn(ctx, r0, r1, part) adds the partial column sums of rows
 * [r0, r1) (one chunk) into part: k blocks of `cols` floats, zeroed before
 * the call (it may also write per-row outputs of those rows); the chunks run
 * over the OpenMP threads when `par`, each on its own block, then
 * out[t][j] += the chunks' block t summed in chunk order (mt_col_chunks_reduce;
 * out[t] NULL: skipped). Bitwise independent of the thread count. The
 * partials live in the op workspace (cpu_workspace). */
typedef void (*cpu_chunk_fn)(const void *ctx, int64_t r0, int64_t r1, float *part);
void cpu_col_chunks(mt_backend *be, int par, int64_t rows, int64_t cols, int k, float *const *out,
                    cpu_chunk_fn fn, const void *ctx);

/* Fused-attention tile GEMM (cpu_flash_kernel.c): C[m x n] = beta C +
 * alpha A B with A(i, k) = A[i rsa + k csa] (row-major A or A^T), B [k x n]
 * and C [m x n] row-major with leading dimensions ldb, ldc; beta 0 ignores
 * C's contents. Register-blocked, no packing. `tri` skips the zero half of a
 * diagonal (causal) tile, where row i of C is query i and key i (or key i
 * and query i) of the same positions:
 *   FA_TRI_KLOW:  A(i, k) = 0 for k > i (products over keys <= the query);
 *   FA_TRI_KHIGH: A(i, k) = 0 for k < i (products over queries >= the key);
 *   FA_TRI_NLOW:  only the columns j <= i of C are needed; those right of
 *     each 6-row strip's last 16-column block are set to beta C (0). */
enum { FA_TRI_NONE = 0, FA_TRI_KLOW = 1, FA_TRI_KHIGH = 2, FA_TRI_NLOW = 3 };
void cpu_fa_gemm(int m, int n, int k, float alpha, const float *A, int64_t rsa, int64_t csa,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int tri);
/* dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols. */
void cpu_fa_transpose(int rows, int cols, const float *src, int64_t lds, float *dst, int64_t ldd);

/* The pieces both GEMM ops share (cpu_gemm.c), so that a grouped GEMM cuts
 * every group into exactly the tiles gemm cuts it into: threads a GEMM may
 * use; the slab plan of an [m, n] x k product (returns the slab count, 1 =
 * one single-threaded call over the whole C; *split_n: slabs of columns,
 * else of rows; *per: slab width); slab sl of C (batch 1); the block
 * C[m0:m1, n0:n1] through one single-threaded sgemm (bias pre-filled). */
int cpu_gemm_nthreads(mt_backend *be);
int cpu_gemm_slabs(mt_backend *be, int m, int n, int k, int *split_n, int *per);
void cpu_gemm_slab(const mt_gemm_desc *d, const float *a, const float *b, float *c, int split_n,
                   int per, int sl);
void cpu_gemm_block(const mt_gemm_desc *d, const float *a, const float *b, float *c, int m0,
                    int m1, int n0, int n1);

/* ---- the ops, by family (specs: core/backend.h) ---- */

/* GEMM (cpu_gemm.c, cpu_gemm_grouped.c, cpu_gemm_bias.c) */
void cpu_gemm(mt_backend *be, const mt_gemm_desc *d);
void cpu_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d);
void cpu_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n);
void cpu_bf16_gemm(mt_backend *be, const mt_gemm_desc *d);
void cpu_bf16_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d);
void cpu_bf16_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n);

/* FP8 quantization (cpu_fp8.c; both tables: T through be->dtype) */
void cpu_fp8_amax(mt_backend *be, const mt_fp8_desc *d, float *amax, const void *x);
void cpu_fp8_quantize(mt_backend *be, const mt_fp8_desc *d, uint8_t *q, float *scale_inv,
                      const void *x, const float *amax, const float *scale);
void cpu_fp8_dequantize(mt_backend *be, const mt_fp8_desc *d, void *y, const uint8_t *q,
                        const float *scale_inv);

/* norms (cpu_norm.c) */
void cpu_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                       const void *w, const void *b, int64_t rows, int64_t h, float eps);
void cpu_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                       const void *in, const void *w, const float *mean, const float *rstd,
                       int64_t rows, int64_t h);
void cpu_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                     int64_t rows, int64_t h, float eps);
void cpu_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                     const void *w, const float *rstd, int64_t rows, int64_t h);
void cpu_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean, float *rstd,
                    const void *in, const void *wq, const void *bq, const void *wk,
                    const void *bk);
void cpu_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                    float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                    const void *wk, const float *mean, const float *rstd);
void cpu_bf16_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                            const void *w, const void *b, int64_t rows, int64_t h, float eps);
void cpu_bf16_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                            const void *in, const void *w, const float *mean, const float *rstd,
                            int64_t rows, int64_t h);
void cpu_bf16_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                          int64_t rows, int64_t h, float eps);
void cpu_bf16_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                          const void *w, const float *rstd, int64_t rows, int64_t h);
void cpu_bf16_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                         float *rstd, const void *in, const void *wq, const void *bq,
                         const void *wk, const void *bk);
void cpu_bf16_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq,
                         float *dbq, float *dwk, float *dbk, const void *dout, const void *in,
                         const void *wq, const void *wk, const float *mean, const float *rstd);

/* activations (cpu_activation.c) */
void cpu_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n);
void cpu_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n);
void cpu_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
void cpu_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in, int64_t rows,
                    int64_t f);
void cpu_bf16_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n);
void cpu_bf16_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n);
void cpu_bf16_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
void cpu_bf16_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in,
                         int64_t rows, int64_t f);

/* rotary embedding (cpu_rope.c) */
void cpu_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv);
void cpu_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv);
void cpu_bf16_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv);
void cpu_bf16_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv);

/* embeddings (cpu_embedding.c) */
void cpu_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                       const void *w, int64_t v_start, int64_t v_end, int64_t h);
void cpu_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                       const void *dout, int64_t v_start, int64_t v_end, int64_t h);
void cpu_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset);
void cpu_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset);
void cpu_bf16_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                            const void *w, int64_t v_start, int64_t v_end, int64_t h);
void cpu_bf16_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                            const void *dout, int64_t v_start, int64_t v_end, int64_t h);
void cpu_bf16_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s, int64_t b,
                                int64_t h, int64_t s_offset);
void cpu_bf16_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s,
                                int64_t b, int64_t h, int64_t s_offset);

/* cross-entropy (cpu_cross_entropy.c) */
void cpu_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n, int64_t vl,
                  int64_t valid);
void cpu_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                    const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                    int64_t valid, int64_t v_start);
void cpu_xent_loss(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                   const float *tgt_logit, int64_t n, const float *loss_mask);
void cpu_xent_bwd(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                  const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                  float scale, const float *loss_mask);
void cpu_bf16_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n, int64_t vl,
                       int64_t valid);
void cpu_bf16_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                         const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                         int64_t valid, int64_t v_start);
void cpu_bf16_xent_bwd(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                       const int32_t *targets, int64_t n, int64_t vl, int64_t valid,
                       int64_t v_start, float scale, const float *loss_mask);

/* fused attention (cpu_flash_attn.c: forward, merge and the bf16 entries;
 * cpu_flash_attn_bwd.c: backward) */
void cpu_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                        const void *qkv, const void *kv);
void cpu_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                    const void *ctx_b, const float *lse_b);
void cpu_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                        const void *dctx, const void *ctx, const float *lse, const void *qkv,
                        const void *kv);
void cpu_bf16_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                             const void *qkv, const void *kv);
void cpu_bf16_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *ctx_b, const float *lse_b);
void cpu_bf16_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                             const void *dctx, const void *ctx, const float *lse,
                             const void *qkv, const void *kv);

/* elementwise: init, fill, cast, arithmetic, hidden dropout (cpu_elementwise.c) */
void cpu_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols, int64_t ld_global,
                     int64_t row_offset, int64_t col_offset, mt_rng_key_t key, float std);
void cpu_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n);
void cpu_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
              int64_t n);
void cpu_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n);
void cpu_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n);
void cpu_scale_f32(mt_backend *be, float *x, float alpha, int64_t n);
void cpu_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                         const void *residual);
void cpu_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout);
void cpu_bf16_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols,
                          int64_t ld_global, int64_t row_offset, int64_t col_offset,
                          mt_rng_key_t key, float std);
void cpu_bf16_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n);
void cpu_bf16_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                              const void *residual);
void cpu_bf16_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout);

/* optimizer: AdamW and the reductions of the gradient norm (cpu_optimizer.c) */
void cpu_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
               const float *grad, void *param_lowp, int64_t n);
double cpu_sumsq_f32(mt_backend *be, const float *x, int64_t n);
double cpu_sum_f32(mt_backend *be, const float *x, int64_t n);
void cpu_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n);
void cpu_bf16_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m,
                    float *v, const float *grad, void *param_lowp, int64_t n);

/* mixture of experts (cpu_moe.c) */
void cpu_moe_gather_rows(mt_backend *be, void *dst, const void *src, const int32_t *idx, int64_t n,
                         int64_t h);
void cpu_moe_combine_fwd(mt_backend *be, void *y, const void *src, const int32_t *slot,
                         const float *w, int64_t n_tok, int k, int64_t h);
void cpu_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy, const void *src,
                         const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h);
void cpu_bf16_moe_gather_rows(mt_backend *be, void *dst, const void *src, const int32_t *idx,
                              int64_t n, int64_t h);
void cpu_bf16_moe_combine_fwd(mt_backend *be, void *y, const void *src, const int32_t *slot,
                              const float *w, int64_t n_tok, int k, int64_t h);
void cpu_bf16_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy,
                              const void *src, const int32_t *slot, const float *w,
                              int64_t n_tok, int k, int64_t h);

#endif
