/* cuda/cuda_internal.h — private declarations of the CUDA backend.
 *
 * Every op of core/backend.h is implemented for device memory, one kernel
 * family per file with the same families and names as cpu/
 * (cuda_<family>.cu <-> cpu/cpu_<family>.c); each family's file holds its
 * kernels and its op-table entries (cuda_<op>, declared below):
 *   cuda_backend.c       creation, destruction, the op table;
 *   cuda_memory.c        the counting allocator, the op scratch, memory ops;
 *   cuda_gemm.c, cuda_gemm_grouped.c, cuda_gemm_bias.cu   GEMM through
 *                        cuBLAS, the grouped GEMM, GEMM bias rows and the
 *                        bias gradient;
 *   cuda_norm.cu         LayerNorm, RMSNorm, qk-norm;
 *   cuda_col_reduce.cu, cuda_col_reduce.cuh   the chunked column reduction
 *                        (bias and norm weight gradients);
 *   cuda_activation.cu   GELU, SwiGLU;
 *   cuda_rope.cu         rotary embedding;
 *   cuda_embedding.cu    token and position embeddings;
 *   cuda_cross_entropy.cu  the cross-entropy pieces;
 *   cuda_flash_attn.cu   fused (flash) attention ops, with the kernels of
 *                        cuda_flash_mma.cu (bf16 tensor cores) and
 *                        cuda_flash_simt.cu (fp32 FFMA); cuda_flash.cuh;
 *   cuda_elementwise.cu  init/fill/cast, add/axpy/scale, hidden dropout;
 *   cuda_optimizer.cu    AdamW, deterministic sum / sum of squares;
 *   cuda_moe.cu          MoE token permutations;
 *   cuda_dev.cuh, cuda_philox4.cuh  device helpers (bf16, reductions,
 *                        dispatch, grid limits; four dropout masks per
 *                        Philox call);
 *   cuda_device.c        GPU selection (shared with the NCCL engine);
 *   cuda_check.h         MT_CUDA_CHECK / MT_CUBLAS_CHECK.
 * The unfused attention (the GPU reference of the fused op) is test code:
 * tests/tools/cuda_ref/.
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
 * The functions below are plain C (extern "C" in the .cu files);
 * kernel launches are asynchronous and checked with cudaGetLastError
 * (MT_CUDA_LAUNCHED).
 */
#ifndef MT_CUDA_INTERNAL_H
#define MT_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"
#include "core/rope_freq.h"
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
  struct mt_cublas_api *blas; /* cuBLAS, loaded at run time (cublas_api.h) */
  void *cublaslt;           /* cublasLtHandle_t (GEMM epilogues, issue 32) */
  void *lt_workspace;       /* cuBLASLt's workspace, CUDA_LT_WORKSPACE bytes */
  int tf32;                 /* env MEGATRAIN_CUDA_TF32=1: fp32 GEMMs in TF32 */
  int fp8_gemm;             /* FP8 GEMMs on cuBLASLt: compute capability
                               >= 8.9, unless env MEGATRAIN_CUDA_FP8_GEMM=0
                               (cuda_fp8_gemm.c)                           */
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
  void *rope_tab;           /* RoPE cos/sin table {cos, sin} [rope_pos,
                               rope_half] fp32 (cuda_rope.cu; workspace)   */
  int64_t rope_pos, rope_half; /* positions covered, pairs per position    */
  mt_rope_freq rope_freq;   /* the table's frequencies ...                 */
  double rope_mscale;       /* ... and cos/sin factor                      */
} cuda_impl;

static inline cuda_impl *cuda_impl_of(mt_backend *be) { return (cuda_impl *)be->impl; }

/* Memory (cuda_memory.c): the counting allocator, the memory ops of the
 * op table (core/backend.h specs), the caching pool of device `dev` (a
 * cudaMemPool_t, NULL without pool support) and the release of the op
 * scratch below (destruction). */
void *cuda_alloc(mt_backend *be, size_t bytes, mt_mem_cat cat);
void cuda_free(mt_backend *be, void *p);
void cuda_memcpy_h2d(mt_backend *be, void *dst, const void *src, size_t bytes);
void cuda_memcpy_d2h(mt_backend *be, void *dst, const void *src, size_t bytes);
void cuda_memset0(mt_backend *be, void *dst, size_t bytes);
void cuda_synchronize(mt_backend *be);
void *cuda_pool_create(int dev);
void cuda_scratch_free(mt_backend *be); /* also the RoPE table (cuda_rope.cu) */

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

/* Device-to-device copy of the table (memcpy_d2d, stream-ordered; also
 * used by cast and dropout_bwd for their identity cases). */
void cuda_memcpy_d2d(mt_backend *be, void *dst, const void *src, size_t bytes);

/* The chunked column reduction (cuda_col_reduce.cu; core/scalar_math.h
 * MT_COL_CHUNK; the partial kernels' half is cuda_col_reduce.cuh): the op
 * workspace for the partials of k outputs over `cols` columns of `rows` rows
 * (*nch = the chunk count; each chunk holds k blocks of cols floats), and the
 * in-order sum over the chunks: out[t][j] += sum_c part[(c k + t) cols + j]
 * (one kernel, asynchronous on st; out[t] NULL: skipped; k <= 4). */
float *cuda_col_part(mt_backend *be, int64_t rows, int k, int64_t cols, int64_t *nch);
void cuda_col_reduce(cudaStream_t st, float *const *out, int k, const float *part, int64_t nch,
                     int64_t cols);

/* C[b][r, :] += bias (or = bias when fill) for rows r < m of each of
 * `batch` matrices (stride elements apart, leading dimension ldc); c_t is T
 * or F32, bias T (cuda_gemm_bias.cu; the bias of cuda_gemm.c and
 * cuda_gemm_grouped.c). Asynchronous on st. */
void cudak_bias_rows(cudaStream_t st, mt_dtype c_t, mt_dtype bias_t, void *c, const void *bias,
                     int64_t m, int64_t n, int64_t ldc, int64_t stride, int batch, int fill);

/* c (bf16) = round(tmp + beta c + bias) for rows r < m of each of `batch`
 * matrices (c: leading dimension ldc, stride elements apart; tmp: fp32
 * [batch, m, n] contiguous; bias [n] of type bias_t): the one rounding of a
 * bf16 GEMM with a bias and beta != 0 (cuda_gemm.c; cuda_gemm_bias.cu).
 * Asynchronous on st. */
void cudak_bias_axpby_bf16(cudaStream_t st, void *c, const float *tmp, float beta,
                           const void *bias, mt_dtype bias_t, int64_t m, int64_t n, int64_t ldc,
                           int64_t stride, int batch);

/* cuBLAS handle setup/teardown (cuda_gemm.c); returns 0 or -1 with err. */
int cuda_blas_create(cuda_impl *im, char *err, size_t errlen);
void cuda_blas_destroy(cuda_impl *im);

/* Partials of the deterministic double reductions (cuda_optimizer.cu):
 * red_dev holds CUDA_RED_BLOCKS partials, then the result. */
#define CUDA_RED_BLOCKS 256
/* cuBLASLt's workspace (cuda_gemm.c), NVIDIA's recommendation for Hopper */
#define CUDA_LT_WORKSPACE (32 << 20)

/* ---- the ops, by family (specs: core/backend.h; each is the op-table
 * entry of the same name, asynchronous on the backend stream unless the
 * spec returns a value) ---- */

/* GEMM (cuda_gemm.c: cuBLAS cublasGemmStridedBatchedEx; cuda_gemm_grouped.c:
 * cublasGemmGroupedBatchedEx; cuda_gemm_bias.cu: bias gradient) */
void cuda_gemm(mt_backend *be, const mt_gemm_desc *d);
void cuda_gemm_grouped(mt_backend *be, const mt_gemm_grouped_desc *d);
void cuda_bias_grad(mt_backend *be, float *db, const void *dout, int64_t rows, int64_t n);
/* FP8 quantization (cuda_fp8.cu) */
void cuda_fp8_amax(mt_backend *be, const mt_fp8_desc *d, float *amax, const void *x);
void cuda_fp8_quantize(mt_backend *be, const mt_fp8_desc *d, uint8_t *q, float *scale_inv,
                       const void *x, const float *amax, const float *scale);
void cuda_fp8_dequantize(mt_backend *be, const mt_fp8_desc *d, void *y, const uint8_t *q,
                         const float *scale_inv);
/* FP8 GEMM (cuda_fp8_gemm.c: cuBLASLt's FP8 matmul) */
int cuda_fp8_gemm(mt_backend *be, const mt_fp8_gemm_desc *d);
/* dst[cols, rows] (ld rows) = src[rows, cols]^T (ld lds): fp8 codes (the
 * transposed copies of cuBLASLt's TN rule; cuda_fp8.cu) */
void cudak_fp8_transpose(cudaStream_t st, uint8_t *dst, const uint8_t *src, int64_t rows,
                         int64_t cols, int64_t lds);
/* 0 when the device runs cuBLASLt's FP8 matmul (compute capability >= 8.9)
 * and env MEGATRAIN_CUDA_FP8_GEMM is not "0" (cuda_fp8_gemm.c) */
int cuda_fp8_gemm_probe(cuda_impl *im);

/* norms (cuda_norm.cu) */
void cuda_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd, const void *in,
                        const void *w, const void *b, int64_t rows, int64_t h, float eps);
void cuda_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db, const void *dout,
                        const void *in, const void *w, const float *mean, const float *rstd,
                        int64_t rows, int64_t h);
void cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in, const void *w,
                      int64_t rows, int64_t h, float eps);
void cuda_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout, const void *in,
                      const void *w, const float *rstd, int64_t rows, int64_t h);
void cuda_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                     float *rstd, const void *in, const void *wq, const void *bq, const void *wk,
                     const void *bk);
void cuda_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq, float *dbq,
                     float *dwk, float *dbk, const void *dout, const void *in, const void *wq,
                     const void *wk, const float *mean, const float *rstd);

/* activations (cuda_activation.cu) */
void cuda_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n);
void cuda_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout, int64_t n);
void cuda_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows, int64_t f);
void cuda_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in, int64_t rows,
                     int64_t f);

/* rotary embedding (cuda_rope.cu) */
void cuda_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv);
void cuda_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv);

/* embeddings (cuda_embedding.cu) */
void cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *tokens, int64_t n,
                        const void *w, int64_t v_start, int64_t v_end, int64_t h);
void cuda_embedding_bwd(mt_backend *be, float *dw, const int32_t *tokens, int64_t n,
                        const void *dout, int64_t v_start, int64_t v_end, int64_t h);
void cuda_pos_embedding_fwd(mt_backend *be, void *x, const void *wpe, int64_t s, int64_t b,
                            int64_t h, int64_t s_offset);
void cuda_pos_embedding_bwd(mt_backend *be, float *dwpe, const void *dout, int64_t s, int64_t b,
                            int64_t h, int64_t s_offset);

/* cross-entropy (cuda_cross_entropy.cu) */
void cuda_xent_max(mt_backend *be, float *row_max, const void *logits, int64_t n, int64_t vl,
                   int64_t valid);
void cuda_xent_stats(mt_backend *be, float *sumexp, float *tgt_logit, const void *logits,
                     const float *row_max, const int32_t *targets, int64_t n, int64_t vl,
                     int64_t valid, int64_t v_start);
void cuda_xent_loss(mt_backend *be, float *loss, const float *row_max, const float *sumexp,
                    const float *tgt_logit, int64_t n, const float *loss_mask);
void cuda_xent_bwd(mt_backend *be, void *logits, const float *row_max, const float *sumexp,
                   const int32_t *targets, int64_t n, int64_t vl, int64_t valid, int64_t v_start,
                   float scale, const float *loss_mask);

/* fused attention (cuda_flash_attn.cu, with the kernels of cuda_flash_mma.cu
 * and cuda_flash_simt.cu) */
void cuda_flash_attn_fwd(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                         const void *qkv, const void *kv);
void cuda_attn_merge(mt_backend *be, const mt_attn_desc *d, void *ctx, float *lse,
                     const void *ctx_b, const float *lse_b);
void cuda_flash_attn_bwd(mt_backend *be, const mt_attn_desc *d, void *dqkv, void *dkv,
                         const void *dctx, const void *ctx, const float *lse, const void *qkv,
                         const void *kv);

/* elementwise: init, fill, cast, arithmetic, hidden dropout (cuda_elementwise.cu) */
void cuda_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols, int64_t ld_global,
                      int64_t row_offset, int64_t col_offset, mt_rng_key_t key, float std);
void cuda_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n);
void cuda_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src, mt_dtype src_t,
               int64_t n);
void cuda_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n);
void cuda_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n);
void cuda_scale_f32(mt_backend *be, float *x, float alpha, int64_t n);
void cuda_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out, const void *x,
                          const void *residual);
void cuda_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx, const void *dout);

/* optimizer: AdamW and the reductions of the gradient norm (cuda_optimizer.cu) */
void cuda_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m, float *v,
                const float *grad, void *param_lowp, int64_t n);
double cuda_sumsq_f32(mt_backend *be, const float *x, int64_t n);
double cuda_sum_f32(mt_backend *be, const float *x, int64_t n);
void cuda_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n);

/* mixture of experts (cuda_moe.cu) */
void cuda_moe_gather_rows(mt_backend *be, void *dst, const void *src, const int32_t *idx,
                          int64_t n, int64_t h);
void cuda_moe_combine_fwd(mt_backend *be, void *y, const void *src, const int32_t *slot,
                          const float *w, int64_t n_tok, int k, int64_t h);
void cuda_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy, const void *src,
                          const int32_t *slot, const float *w, int64_t n_tok, int k, int64_t h);

#ifdef __cplusplus
}
#endif

#endif
