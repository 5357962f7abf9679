/* cpu/cpu_internal.h — private declarations of the CPU backend
 * (OpenBLAS sgemm + OpenMP). Every op here implements the entry of the same
 * name in core/backend.h (see the doc comments there for the spec); this
 * header only adds the backend-private state and shared math helpers.
 *
 * Determinism: every op uses static OpenMP schedules and fixed-order
 * reductions, so results are bitwise identical run to run for the same
 * thread count (most ops are even independent of the thread count; the
 * exceptions are layernorm_bwd's dw/db, which reduce per-thread partials in
 * thread order, and sgemm inside OpenBLAS).
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
  size_t bws_bytes;  /*   operands (cpu_bf16.c); same accounting        */
} cpu_impl;

static inline cpu_impl *cpu_impl_of(mt_backend *be) { return (cpu_impl *)be->impl; }

/* Element count from which elementwise ops use OpenMP threads. */
static inline int64_t cpu_par_min(mt_backend *be) { return cpu_impl_of(be)->par_min; }

/* Workspace of at least `bytes` (64-byte aligned), owned by the backend and
 * reused across calls; contents undefined; valid until the next call. */
void *cpu_workspace(mt_backend *be, size_t bytes);

/* Second workspace, for the bf16 table (cpu_bf16.c): fp32 copies of the T
 * operands of one op, which then runs the fp32 op (whose own workspace is
 * cpu_workspace). Same contract as cpu_workspace; be->mem.op_scratch counts
 * both buffers. */
void *cpu_bf16_scratch(mt_backend *be, size_t bytes);

/* Memory ops of the table (cpu_backend.c), shared by the bf16 table. */
void *cpu_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat);
void cpu_free(mt_backend *be, void *p);
void cpu_memcpy(mt_backend *be, void *dst, const void *src, size_t bytes);
void cpu_memset0(mt_backend *be, void *dst, size_t bytes);
void cpu_synchronize(mt_backend *be);

/* The op table of bf16 storage (cpu_bf16.c). */
extern const mt_backend_ops cpu_bf16_ops;

/* Default element count below which elementwise ops stay serial. A
 * [256, 768] tensor (the 124M micro-batch) is below: such an op takes ~50 us
 * on one core, and a parallel region costs a whole scheduler tick (~4 ms)
 * whenever another process preempts one of our threads on a shared machine.
 * Env MEGATRAIN_CPU_PAR_MIN overrides it (the unit tests use 1 to exercise the
 * parallel paths on small shapes). */
#define CPU_PAR_MIN_DEFAULT (1 << 18)

/* ---- math helpers (vectorisable; same results on every call) ---- */

/* exp: mt_fast_expf (core/scalar_math.h), branch-free and vectorisable. */

/* out[j] = mt_rng_uniform(key, start + j) for j in [0, n), computing one
 * Philox block per 4 consecutive counters (bitwise equal to rng.h). */
void cpu_rng_uniform_range(mt_rng_key_t key, uint64_t start, int64_t n, float *out);

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

/* ---- ops (cpu_backend.c: memory; the rest by file name) ---- */
void cpu_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols, int64_t ld_global,
                     int64_t row_offset, int64_t col_offset, mt_rng_key_t key, float std);
void cpu_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n);
void cpu_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
              int64_t n);

void cpu_gemm(mt_backend *be, const mt_gemm_desc *d);
void cpu_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d);
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
void cpu_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n);

void cpu_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                       const void *w, const void *b, int64_t rows, int64_t h, float eps);
void cpu_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                       const void *in, const void *w, const float *mean, const float *rstd,
                       int64_t rows, int64_t h);
void cpu_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                     int64_t rows, int64_t h, float eps);
void cpu_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                     const void *w, const float *rstd, int64_t rows, int64_t h);
void cpu_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
void cpu_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in, int64_t rows,
                    int64_t f);
void cpu_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv);
void cpu_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv);
void cpu_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean, float *rstd,
                    const void *in, const void *wq, const void *bq, const void *wk,
                    const void *bk);
void cpu_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                    float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                    const void *wk, const float *mean, const float *rstd);
void cpu_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n);
void cpu_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n);

void cpu_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                        const void *qkv, const void *kv);
void cpu_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                    const void *ctx_b, const float *lse_b);
void cpu_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                        const void *dctx, const void *ctx, const float *lse, const void *qkv,
                        const void *kv);

void cpu_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                         const void *residual);
void cpu_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout);

void cpu_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                       const void *w, int64_t v_start, int64_t v_end, int64_t h);
void cpu_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                       const void *dout, int64_t v_start, int64_t v_end, int64_t h);
void cpu_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset);
void cpu_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s, int64_t b,
                           int64_t h, int64_t s_offset);

void cpu_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n, int64_t vl,
                  int64_t valid);
void cpu_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                    const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                    int64_t valid, int64_t v_start);
void cpu_xent_loss(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                   const float *tgt_logit, int64_t n);
void cpu_xent_bwd(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                  const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                  float scale);

void cpu_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n);
void cpu_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n);
void cpu_scale_f32(mt_backend *be, float *x, float alpha, int64_t n);
double cpu_sumsq_f32(mt_backend *be, const float *x, int64_t n);
double cpu_sum_f32(mt_backend *be, const float *x, int64_t n);
void cpu_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n);
void cpu_moe_gather_rows(mt_backend *be, void *dst, const void *src, const int32_t *idx, int64_t n,
                         int64_t h);
void cpu_moe_combine_fwd(mt_backend *be, void *y, const void *src, const int32_t *slot,
                         const float *w, int64_t n_tok, int k, int64_t h);
void cpu_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy, const void *src,
                         const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h);
void cpu_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
               const float *grad, void *param_lowp, int64_t n);

#endif
