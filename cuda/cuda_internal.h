/* cuda/cuda_internal.h — private declarations of the CUDA backend.
 *
 * Every op of core/backend.h is implemented for device memory:
 *   cuda_backend.c   creation, destruction, the counting
 *                    allocator, memory ops, reductions' host side, op table;
 *   cuda_gemm.c      GEMMs through cuBLAS (cublasGemmStridedBatchedEx);
 *   cuda_gemm_grouped.c  the grouped GEMM (cublasGemmGroupedBatchedEx);
 *   cuda_attention.c the UNFUSED attention (not in the op table: the GPU
 *                    reference of the fused op), cuBLAS products around the
 *                    causal softmax kernels of cuda_attn.cu;
 *   cuda_elem.cu     elementwise kernels, init/fill/cast, dropout, AdamW,
 *                    MoE permutations, deterministic reductions;
 *   cuda_nn.cu       LayerNorm, GELU, bias gradient, embeddings,
 *                    cross-entropy pieces;
 *   cuda_attn.cu     causal softmax forward/backward with dropout;
 *   cuda_flash_attn.cu  fused (flash) attention ops, with the kernels of
 *                    cuda_flash_mma.cu (bf16 tensor cores) and
 *                    cuda_flash_simt.cu (fp32 FFMA); cuda_flash.cuh;
 *   cuda_llama.cu    RMSNorm, SwiGLU, rotary embedding, qk_layernorm (the
 *                    op-table entries themselves);
 *   cuda_device.c    GPU selection (shared with the NCCL engine);
 *   cuda_check.h     MT_CUDA_CHECK / MT_CUBLAS_CHECK.
 *
 * Storage dtype T (be->dtype) is MT_F32 or MT_BF16; kernels are templated on
 * it and always compute in fp32 (reductions of sums/sumsq in double). bf16
 * conversion is round-to-nearest-even, bitwise equal to cpu/.
 *
 * Streams: one blocking stream per backend (created with default flags, so
 * work that NCCL enqueues on the legacy default stream is ordered with it).
 * Ops enqueue and return; memcpy_d2h, sum_f32 and sumsq_f32 synchronise.
 *
 * Determinism: no floating-point atomics anywhere; every reduction has a
 * fixed shape (independent of the GPU model), so runs are bitwise
 * reproducible on the same GPU type and library versions.
 *
 * The kernel launchers below are plain C functions (extern "C") taking the
 * stream; they are asynchronous and check the launch with cudaGetLastError.
 */
#ifndef MT_CUDA_INTERNAL_H
#define MT_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"
#include "core/scalar_math.h"
#include "core/util.h"
#include "cuda/cuda_check.h"

/* Slots of the pinned ring the sample ids are uploaded from (cuda_upload_ids). */
#define CUDA_IDS_RING 64

/* Allocation record of the pointer -> (size, category) map. */
typedef struct {
  void *ptr; /* NULL = empty slot; CUDA_TOMB = deleted */
  size_t bytes;
  int cat;
} cuda_alloc_rec;

/* Backend-private state (be->impl). */
typedef struct {
  int device;               /* CUDA ordinal in use                         */
  cudaStream_t stream;      /* the backend's stream (blocking)             */
  void *cublas;             /* cublasHandle_t                              */
  int tf32;                 /* env MEGATRAIN_CUDA_TF32=1: fp32 GEMMs in TF32 */
  int flash_simt;           /* env MEGATRAIN_CUDA_FLASH_SIMT=1: bf16 fused
                               attention on the FFMA kernels (diagnosis)   */
  void *pool;               /* cudaMemPool_t of the stream-ordered caching
                               allocator (NULL: no pool support, cudaMalloc) */
  cuda_alloc_rec *recs;     /* open-addressing map of live allocations     */
  size_t rec_cap, rec_used; /* capacity (power of 2), slots used incl tombs */
  size_t rec_live;          /* live entries (capacity follows these only)  */
  void *ws;                 /* op workspace (MT_MEM_WORKSPACE), grows only */
  size_t ws_bytes;
  int64_t *ids_dev;         /* device copy of desc sample_ids [ids_cap]    */
  int ids_cap;
  int64_t *ids_pin;         /* pinned ring: CUDA_IDS_RING slots of ids_cap */
  cudaEvent_t ids_ev[CUDA_IDS_RING]; /* recorded after each slot's copy     */
  int ids_next;             /* next ring slot                              */
  double *red_dev;          /* reduction partials + result (device)        */
  double *red_host;         /* pinned result                               */
} cuda_impl;

static inline cuda_impl *cuda_impl_of(mt_backend *be) { return (cuda_impl *)be->impl; }

/* Workspace of at least `bytes` (256-byte aligned), reused across calls;
 * growing it frees the old one (stream-ordered: queued users on the backend
 * stream run before the block is reused). Contents undefined. */
void *cuda_workspace(mt_backend *be, size_t bytes);
/* Device copy of a host array of b sample ids: copied into the next slot
 * of a pinned ring, then uploaded asynchronously (stream-ordered) into a
 * reused device buffer; a ring slot is rewritten only after its previous
 * upload ran (its event). The host array may be reused as soon as this
 * returns. */
const int64_t *cuda_upload_ids(mt_backend *be, const int64_t *ids_host, int b);

/* ---- ops implemented in C files ---- */
void cuda_gemm(mt_backend *be, const mt_gemm_desc *d);
/* Grouped GEMM (cuda_gemm_grouped.c: cublasGemmGroupedBatchedEx). */
void cuda_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d);
/* The UNFUSED attention (cuda_attention.c: [b, np, s, s] probabilities):
 * not in the op table since issue 15; kept as the GPU reference of the fused
 * op for tests/tools/cuda_parity.c and bench/bench_flash_gpu.c, which call
 * it directly (nvcc objects are built only into the library). Semantics of
 * the former op-table entries: ctx and the pre-dropout softmax probs from
 * qkv; dqkv (overwrite) from dctx and those probs. */
void cuda_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, void *probs,
                   const void *qkv);
void cuda_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, const void *dctx,
                   const void *qkv, const void *probs);
/* Fused attention (cuda_flash_attn.cu), the op-table entries; semantics in
 * core/backend.h (flash_attn_fwd, attn_merge, flash_attn_bwd). */
void cuda_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *qkv, const void *kv);
void cuda_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                     const void *ctx_b, const float *lse_b);
void cuda_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                         const void *dctx, const void *ctx, const float *lse, const void *qkv,
                         const void *kv);
/* Llama-style block ops (cuda_llama.cu), the op-table entries. */
void cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                      int64_t rows, int64_t h, float eps);
void cuda_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                      const void *w, const float *rstd, int64_t rows, int64_t h);
void cuda_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
void cuda_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in, int64_t rows,
                     int64_t f);
void cuda_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv);
void cuda_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv);
void cuda_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                     float *rstd, const void *in, const void *wq, const void *bq, const void *wk,
                     const void *bk);
void cuda_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                     float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                     const void *wk, const float *mean, const float *rstd);
/* cuBLAS handle setup/teardown (cuda_gemm.c); returns 0 or -1 with err. */
int cuda_blas_create(cuda_impl *im, char *err, size_t errlen);
void cuda_blas_destroy(cuda_impl *im);

/* ---- kernel launchers (cuda_elem.cu) ---- */
void cudak_init_normal(cudaStream_t st, mt_dtype t, void *dst, int64_t rows, int64_t cols,
                       int64_t ld_global, int64_t row_offset, int64_t col_offset,
                       mt_rng_key_t key, float std);
void cudak_fill(cudaStream_t st, mt_dtype t, void *dst, float value, int64_t n);
void cudak_cast(cudaStream_t st, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
                int64_t n);
void cudak_add(cudaStream_t st, mt_dtype t, void *out, const void *a, const void *b, int64_t n);
void cudak_axpy(cudaStream_t st, float *y, float alpha, const float *x, int64_t n);
void cudak_scale(cudaStream_t st, float *x, float alpha, int64_t n);
/* Deterministic double reduction of x (squares when `squares`): two kernels
 * with CUDA_RED_BLOCKS partials in red_dev[0..), result in
 * red_dev[CUDA_RED_BLOCKS], or added to *acc (device) when acc is non-NULL. */
#define CUDA_RED_BLOCKS 256
void cudak_reduce(cudaStream_t st, const float *x, int64_t n, int squares, double *red_dev,
                  double *acc);
void cudak_adamw(cudaStream_t st, mt_dtype t, mt_adamw_coef c, float *master, float *m, float *v,
                 const float *grad, void *param_lowp, int64_t n);
/* Dropout (sample_ids already on the device). */
void cudak_dropout_add(cudaStream_t st, mt_dtype t, const mt_dropout_desc *d,
                       const int64_t *ids_dev, void *out, const void *x, const void *residual);
void cudak_dropout_bwd(cudaStream_t st, mt_dtype t, const mt_dropout_desc *d,
                       const int64_t *ids_dev, void *dx, const void *dout);
void cudak_moe_gather_rows(cudaStream_t st, mt_dtype t, void *dst, const void *src,
                           const int32_t *idx, int64_t n, int64_t h);
void cudak_moe_combine_fwd(cudaStream_t st, mt_dtype t, void *y, const void *src,
                           const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h);
void cudak_moe_combine_bwd(cudaStream_t st, mt_dtype t, void *dsrc, float *dw, const void *dy,
                           const void *src, const int32_t *slot, const float *w, int64_t n_tok,
                           int k, int64_t h);
/* C[b][r, :] += bias for rows r < m of each of `batch` matrices (stride
 * elements apart, leading dimension ldc); c_t is T or F32, bias T. */
void cudak_bias_rows(cudaStream_t st, mt_dtype c_t, mt_dtype bias_t, void *c, const void *bias,
                     int64_t m, int64_t n, int64_t ldc, int64_t stride, int batch, int fill);

/* c (bf16) = round(tmp + beta c + bias) for rows r < m of each of `batch`
 * matrices (c: leading dimension ldc, stride elements apart; tmp: fp32
 * [batch, m, n] contiguous; bias [n] of type bias_t): the one rounding of a
 * bf16 GEMM with a bias and beta != 0 (cuda_gemm.c). */
void cudak_bias_axpby_bf16(cudaStream_t st, void *c, const float *tmp, float beta,
                           const void *bias, mt_dtype bias_t, int64_t m, int64_t n, int64_t ldc,
                           int64_t stride, int batch);

/* ---- kernel launchers (cuda_nn.cu) ---- */
/* part: workspace of 2 * ceil(rows / CUDA_LN_CHUNK) * h floats. */
#define CUDA_LN_CHUNK 32
void cudak_layernorm_fwd(cudaStream_t st, mt_dtype t, void *out, float *mean, float *rstd,
                         const void *in, const void *w, const void *b, int64_t rows, int64_t h,
                         float eps);
void cudak_layernorm_bwd(cudaStream_t st, mt_dtype t, void *din, float *dw, float *db,
                         const void *dout, const void *in, const void *w, const float *mean,
                         const float *rstd, int64_t rows, int64_t h, float *part);
void cudak_gelu_fwd(cudaStream_t st, mt_dtype t, void *out, const void *in, int64_t n);
void cudak_gelu_bwd(cudaStream_t st, mt_dtype t, void *din, const void *in, const void *dout,
                    int64_t n);
/* part: workspace of ceil(rows / CUDA_LN_CHUNK) * n floats. */
void cudak_bias_grad(cudaStream_t st, mt_dtype t, float *db, const void *dout, int64_t rows,
                     int64_t n, float *part);
void cudak_embedding_fwd(cudaStream_t st, mt_dtype t, void *out, const int32_t *tokens,
                         int64_t n, const void *w, int64_t v_start, int64_t v_end, int64_t h);
void cudak_embedding_bwd(cudaStream_t st, mt_dtype t, float *dw, const int32_t *tokens,
                         int64_t n, const void *dout, int64_t v_start, int64_t v_end, int64_t h);
void cudak_pos_embedding_fwd(cudaStream_t st, mt_dtype t, void *x, const void *wpe, int64_t s,
                             int64_t b, int64_t h, int64_t s_offset);
void cudak_pos_embedding_bwd(cudaStream_t st, mt_dtype t, float *dwpe, const void *dout,
                             int64_t s, int64_t b, int64_t h, int64_t s_offset);
void cudak_xent_max(cudaStream_t st, mt_dtype t, float *row_max, const void *logits, int64_t n,
                    int64_t vl, int64_t valid);
void cudak_xent_stats(cudaStream_t st, mt_dtype t, float *sumexp, float *tgt_logit,
                      const void *logits, const float *row_max, const int32_t *targets,
                      int64_t n, int64_t vl, int64_t valid, int64_t v_start);
void cudak_xent_loss(cudaStream_t st, float *loss, const float *row_max, const float *sumexp,
                     const float *tgt_logit, int64_t n);
void cudak_xent_bwd(cudaStream_t st, mt_dtype t, void *logits, const float *row_max,
                    const float *sumexp, const int32_t *targets, int64_t n, int64_t vl,
                    int64_t valid, int64_t v_start, float scale);

/* ---- kernel launchers (cuda_attn.cu) ----
 * Scores/probabilities are [pairs = b*np, s, s] (row q, column k). */
/* In place on probs (T) holding scale*QK^T: causal softmax per row (fp32
 * math), zeros above the diagonal. With p > 0 also writes pd = P * keep /
 * (1-p) (T, same layout) from the RNG counters of mt_attn_desc. */
void cudak_attn_softmax_fwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                            const int64_t *ids_dev, void *probs, void *pd);
/* pd = P * keep / (1-p) (T) from saved probs. */
void cudak_attn_dropout_probs(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                              const int64_t *ids_dev, const void *probs, void *pd);
/* ds (T) = scale * P * (dP' - rowsum(dP' * P)) causal, dP' = dP (fp32) * keep / (1-p). */
void cudak_attn_softmax_bwd(cudaStream_t st, mt_dtype t, const mt_attn_desc *d,
                            const int64_t *ids_dev, const void *probs, const float *dp,
                            void *ds);

#ifdef __cplusplus
}
#endif

#endif
