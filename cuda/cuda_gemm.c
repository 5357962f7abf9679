/* cuda/cuda_gemm.c — the GEMM op through cuBLAS.
 *
 * Row-major onto column-major: a row-major [m, n] matrix with leading
 * dimension ld is, in the same memory, the column-major [n, m] matrix with
 * the same ld, i.e. its transpose. So C = op(A) op(B) (row-major) is computed
 * as C^T = op(B)^T op(A)^T (column-major): cuBLAS gets (B, A) swapped,
 * dimensions (n, m, k), and each operand keeps its own transpose flag.
 *
 * Every product is one cublasGemmStridedBatchedEx with fp32 compute
 * (CUBLAS_COMPUTE_32F: no TF32 unless env MEGATRAIN_CUDA_TF32=1 and all
 * operands are fp32), inputs bf16 or fp32, output T or fp32. The descriptor's bias is
 * pre-filled into C when beta == 0 (then beta = 1, so C is rounded once, as
 * cpu/ does), otherwise added by a kernel after the product.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>

#include "cuda/cublas_api.h"
#include "cuda_internal.h"

int cuda_blas_create(cuda_impl *im, char *err, size_t errlen) {
  char why[512];
  im->blas = mt_xcalloc(1, sizeof *im->blas);
  if (mt_cublas_api_open(im->blas, why, sizeof why) != 0) {
    snprintf(err, errlen, "no usable CUDA device: %s", why);
    return -1;
  }
  const mt_cublas_api *b = im->blas;
  cublasHandle_t h;
  cublasStatus_t s = b->Create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errlen, "no usable CUDA device: cublasCreate failed with %s",
             b->GetStatusString(s));
    return -1;
  }
  im->cublas = h;
  s = b->SetStream(h, im->stream);
  /* no reduced-precision (bf16) split-K reductions: accumulation stays fp32 */
  if (s == CUBLAS_STATUS_SUCCESS)
    s = b->SetMathMode(
        h, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errlen, "cuBLAS setup failed: %s", b->GetStatusString(s));
    return -1;
  }
  return 0;
}

void cuda_blas_destroy(cuda_impl *im) {
  if (im->cublas) im->blas->Destroy((cublasHandle_t)im->cublas);
  im->cublas = NULL;
  if (im->blas) mt_cublas_api_close(im->blas);
  free(im->blas);
  im->blas = NULL;
}

static cudaDataType_t blas_type(mt_dtype t) {
  switch (t) {
    case MT_F32: return CUDA_R_32F;
    case MT_BF16: return CUDA_R_16BF;
    default: break;
  }
  mt_fatal("cuda gemm: unsupported dtype %s", mt_dtype_name(t));
}

static int ld_int(int64_t ld) {
  MT_ASSERT(ld >= 1 && ld <= INT_MAX);
  return (int)ld;
}

void cuda_gemm(mt_backend *be, const mt_gemm_desc *d) {
  cuda_impl *im = cuda_impl_of(be);
  MT_ASSERT(d->batch >= 1 && d->m >= 0 && d->n >= 0 && d->k >= 0);
  MT_ASSERT(d->a_type == d->b_type);
  MT_ASSERT(d->c_type == d->a_type || d->c_type == MT_F32);
  if (d->m == 0 || d->n == 0) return;
  if (d->bias && d->beta != 0.0f && d->c_type == MT_BF16) {
    /* bf16 C with a bias and beta != 0: the product in fp32 (a transient
     * buffer, freed in stream order), then one kernel adds beta C and the
     * bias and rounds once, as cpu/ does (a bias kernel after a bf16
     * product rounds twice: found by the emulated op table, tests/cuda_emu/) */
    const int64_t mn = (int64_t)d->m * d->n;
    float *tmp = be->ops->alloc(be, (size_t)(mn * d->batch) * sizeof(float), MT_MEM_WORKSPACE);
    mt_gemm_desc e = *d;
    e.c = tmp;
    e.c_type = MT_F32;
    e.ldc = d->n;
    e.stride_c = mn;
    e.beta = 0.0f;
    e.bias = NULL;
    cuda_gemm(be, &e);
    cudak_bias_axpby_bf16(im->stream, d->c, tmp, d->beta, d->bias, d->a_type, d->m, d->n,
                          d->ldc, d->stride_c, d->batch);
    be->ops->free(be, tmp);
    return;
  }
  float beta = d->beta;
  int bias_after = 0;
  if (d->bias) {
    if (beta == 0.0f) {
      cudak_bias_rows(im->stream, d->c_type, d->a_type, d->c, d->bias, d->m, d->n, d->ldc,
                      d->stride_c, d->batch, 1);
      beta = 1.0f;
    } else {
      bias_after = 1;
    }
  }
  const int all_f32 = d->a_type == MT_F32 && d->c_type == MT_F32;
  const cublasComputeType_t ct =
      all_f32 && im->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = d->alpha;
  /* column-major: C^T[n, m] = op(B)^T[n, k] op(A)^T[k, m] */
  MT_CUBLAS_CHECK(im->blas, im->blas->GemmStridedBatchedEx(
      (cublasHandle_t)im->cublas, d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, d->n, d->m, d->k, &alpha, d->b,
      blas_type(d->b_type), ld_int(d->ldb), (long long)d->stride_b, d->a, blas_type(d->a_type),
      ld_int(d->lda), (long long)d->stride_a, &beta, d->c, blas_type(d->c_type), ld_int(d->ldc),
      (long long)d->stride_c, d->batch, ct, CUBLAS_GEMM_DEFAULT));
  if (bias_after)
    cudak_bias_rows(im->stream, d->c_type, d->a_type, d->c, d->bias, d->m, d->n, d->ldc,
                    d->stride_c, d->batch, 0);
}
