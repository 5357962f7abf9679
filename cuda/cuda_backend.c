/* cuda/cuda_backend.c — the CUDA backend: creation (on the GPU chosen by
 * cuda_device.c), destruction and the op table (the ops by family:
 * cuda/cuda_internal.h; the allocator, the op scratch and the memory ops:
 * cuda_memory.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_device.h"
#include "cuda_internal.h"

/* The op table: one entry per slot of core/backend.h, in its order, each
 * the function cuda_<op> of its family's file (cuda_internal.h), as
 * cpu/cpu_backend.c registers cpu_<op>. One table for both storage dtypes:
 * the kernels dispatch on be->dtype. */
static const mt_backend_ops cuda_ops = {
    /* memory (cuda_memory.c) */
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_d2d = cuda_memcpy_d2d,
    .memset0 = cuda_memset0,
    .synchronize = cuda_synchronize,
    /* elementwise (cuda_elementwise.cu) */
    .init_normal = cuda_init_normal,
    .fill = cuda_fill,
    .cast = cuda_cast,
    /* GEMM (cuda_gemm.c, cuda_gemm_grouped.c, cuda_gemm_bias.cu) */
    .gemm = cuda_gemm,
    .gemm_grouped = cuda_gemm_grouped,
    .bias_grad = cuda_bias_grad,
    .fp8_amax = cuda_fp8_amax,
    .fp8_quantize = cuda_fp8_quantize,
    .fp8_dequantize = cuda_fp8_dequantize,
    .fp8_gemm = cuda_fp8_gemm,
    /* norms (cuda_norm.cu), activations (cuda_activation.cu), RoPE (cuda_rope.cu) */
    .layernorm_fwd = cuda_layernorm_fwd,
    .layernorm_bwd = cuda_layernorm_bwd,
    .rmsnorm_fwd = cuda_rmsnorm_fwd,
    .rmsnorm_bwd = cuda_rmsnorm_bwd,
    .swiglu_fwd = cuda_swiglu_fwd,
    .swiglu_bwd = cuda_swiglu_bwd,
    .rope_fwd = cuda_rope_fwd,
    .rope_bwd = cuda_rope_bwd,
    .qknorm_fwd = cuda_qknorm_fwd,
    .qknorm_bwd = cuda_qknorm_bwd,
    .gelu_fwd = cuda_gelu_fwd,
    .gelu_bwd = cuda_gelu_bwd,
    /* fused attention (cuda_flash_attn.cu) */
    .flash_attn_fwd = cuda_flash_attn_fwd,
    .attn_merge = cuda_attn_merge,
    .flash_attn_bwd = cuda_flash_attn_bwd,
    /* dropout (cuda_elementwise.cu) */
    .dropout_add_fwd = cuda_dropout_add_fwd,
    .dropout_bwd = cuda_dropout_bwd,
    /* embeddings (cuda_embedding.cu) */
    .embedding_fwd = cuda_embedding_fwd,
    .embedding_bwd = cuda_embedding_bwd,
    .pos_embedding_fwd = cuda_pos_embedding_fwd,
    .pos_embedding_bwd = cuda_pos_embedding_bwd,
    /* cross-entropy (cuda_cross_entropy.cu) */
    .xent_max = cuda_xent_max,
    .xent_stats = cuda_xent_stats,
    .xent_loss = cuda_xent_loss,
    .xent_bwd = cuda_xent_bwd,
    /* elementwise (cuda_elementwise.cu), reductions (cuda_optimizer.cu) */
    .add = cuda_add,
    .axpy_f32 = cuda_axpy_f32,
    .scale_f32 = cuda_scale_f32,
    .sumsq_f32 = cuda_sumsq_f32,
    .sum_f32 = cuda_sum_f32,
    .sumsq_acc_f32 = cuda_sumsq_acc_f32,
    /* MoE (cuda_moe.cu) */
    .moe_gather_rows = cuda_moe_gather_rows,
    .moe_combine_fwd = cuda_moe_combine_fwd,
    .moe_combine_bwd = cuda_moe_combine_bwd,
    /* optimizer (cuda_optimizer.cu) */
    .adamw = cuda_adamw,
};

const mt_backend_ops *mt_cuda_backend_ops(void) { return &cuda_ops; }

/* ---- creation / destruction ---- */

static void cuda_destroy(mt_backend *be) {
  if (!be) return;
  cuda_impl *im = cuda_impl_of(be);
  if (im) {
    if (im->stream) cudaStreamSynchronize(im->stream);
    cuda_scratch_free(be);
    for (int k = 0; k < CUDA_IDS_RING; k++)
      if (im->ids_ev[k]) cudaEventDestroy(im->ids_ev[k]);
    if (im->stream) cudaStreamSynchronize(im->stream); /* stream-ordered frees done */
    if (im->red_dev) cudaFree(im->red_dev);
    if (im->red_host) cudaFreeHost(im->red_host);
    cuda_blas_destroy(im);
    if (im->stream) cudaStreamDestroy(im->stream);
    /* Blocks still live in the pool (not freed by the caller) go with it. */
    if (im->pool) cudaMemPoolDestroy((cudaMemPool_t)im->pool);
    free(im->recs);
    free(im);
  }
  free(be);
}

/* is_device_ptr (core/backend.h): device or managed memory. */
static int cuda_is_device_ptr(const mt_backend *be, const void *p) {
  (void)be;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the error of an unknown pointer */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Fail creation with a message naming the CUDA error. */
static mt_backend *create_fail(mt_backend *be, cudaError_t e, const char *what, char *err,
                               size_t errlen) {
  snprintf(err, errlen, "no usable CUDA device: %s failed with %s (%s)", what,
           cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  cuda_destroy(be);
  return NULL;
}

mt_backend *mt_cuda_backend_create(const mt_backend_options *opt, char *err, size_t errlen) {
  mt_dtype dt = opt ? opt->dtype : MT_F32;
  if (dt != MT_F32 && dt != MT_BF16) {
    snprintf(err, errlen, "cuda backend supports fp32 or bf16 storage (requested %s)",
             mt_dtype_name(dt));
    return NULL;
  }
  char why[256];
  int dev = mt_cuda_select_device(opt ? opt->local_rank : 0, why, sizeof why);
  if (dev < 0) {
    snprintf(err, errlen, "no usable CUDA device: %s", why);
    return NULL;
  }
  cudaError_t e;
  mt_backend *be = mt_xcalloc(1, sizeof *be);
  cuda_impl *im = mt_xcalloc(1, sizeof *im);
  be->impl = im;
  be->ops = &cuda_ops;
  be->name = "cuda";
  be->dtype = dt;
  be->destroy = cuda_destroy;
  im->device = dev;
  be->is_device_ptr = cuda_is_device_ptr;
  if ((e = cudaStreamCreate(&im->stream)) != cudaSuccess)
    return create_fail(be, e, "cudaStreamCreate", err, errlen);
  be->stream = im->stream;
  im->pool = cuda_pool_create(dev);
  for (int k = 0; k < CUDA_IDS_RING; k++)
    if ((e = cudaEventCreateWithFlags(&im->ids_ev[k], cudaEventDisableTiming)) != cudaSuccess)
      return create_fail(be, e, "cudaEventCreateWithFlags", err, errlen);
  if ((e = cudaMalloc((void **)&im->red_dev, (CUDA_RED_BLOCKS + 1) * sizeof(double))) !=
      cudaSuccess)
    return create_fail(be, e, "cudaMalloc", err, errlen);
  if ((e = cudaMallocHost((void **)&im->red_host, sizeof(double))) != cudaSuccess)
    return create_fail(be, e, "cudaMallocHost", err, errlen);
  const char *tf = getenv("MEGATRAIN_CUDA_TF32");
  im->tf32 = tf && !strcmp(tf, "1");
  const char *fs = getenv("MEGATRAIN_CUDA_FLASH_SIMT");
  im->flash_simt = fs && !strcmp(fs, "1");
  if (cuda_blas_create(im, err, errlen) != 0) {
    cuda_destroy(be);
    return NULL;
  }
  im->fp8_gemm = cuda_fp8_gemm_probe(im) == 0;
  return be;
}
