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
 * operands are fp32), inputs bf16 or fp32, output T or fp32. The descriptor's
 * bias, with beta == 0 and C of the bias's type, is cuBLASLt's bias epilogue
 * (one cublasLtMatmul: C = round(A B + bias), rounded once as cpu/ does, no
 * pass over C before the product; issue 32); where cuBLASLt has no algorithm
 * for the problem, it is pre-filled into C (then beta = 1); with beta != 0 a
 * kernel adds it after the product.
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
  cublasLtHandle_t lt;
  s = b->LtCreate(&lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errlen, "no usable CUDA device: cublasLtCreate failed with %s",
             b->GetStatusString(s));
    return -1;
  }
  im->cublaslt = lt;
  /* cuBLASLt's workspace: where the device has no 32 MiB to spare (a small
   * emulated device), the epilogue GEMMs run without one */
  if (cudaMalloc(&im->lt_workspace, CUDA_LT_WORKSPACE) != cudaSuccess) {
    (void)cudaGetLastError(); /* the failed allocation is not a launch error */
    im->lt_workspace = NULL;
  }
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
  if (im->cublaslt) im->blas->LtDestroy((cublasLtHandle_t)im->cublaslt);
  im->cublaslt = NULL;
  if (im->lt_workspace) cudaFree(im->lt_workspace);
  im->lt_workspace = NULL;
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

/* C = alpha op(A) op(B) + bias (beta 0) as one cublasLtMatmul with the bias
 * epilogue, C of the bias's type (a_type); the same column-major swap as
 * cublasGemmStridedBatchedEx below: D^T[n, m] = op(B)^T op(A)^T + bias[n]
 * broadcast over the m columns (cuBLASLt's bias is per row of D). Returns 0
 * when enqueued, -1 (nothing enqueued) when cuBLASLt has no algorithm for it
 * or refuses a descriptor: the caller falls back to the pre-filled bias. */
static int gemm_lt_bias(cuda_impl *im, const mt_gemm_desc *d, cublasComputeType_t ct) {
  const mt_cublas_api *b = im->blas;
  const cudaDataType_t at = blas_type(d->a_type), ctp = blas_type(d->c_type);
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  int rc = -1;
  const cublasOperation_t tb = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t ta = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  const void *bias = d->bias;
  const int32_t batch = d->batch;
  const int64_t sa = d->stride_a, sb = d->stride_b, sc = d->stride_c;
  const uint64_t ws = im->lt_workspace ? CUDA_LT_WORKSPACE : 0;
  /* cuBLASLt's "A" is our B (n x k as op(B)^T), its "B" our A */
  const uint64_t ra = d->trans_b ? (uint64_t)d->k : (uint64_t)d->n;
  const uint64_t ca = d->trans_b ? (uint64_t)d->n : (uint64_t)d->k;
  const uint64_t rb = d->trans_a ? (uint64_t)d->m : (uint64_t)d->k;
  const uint64_t cb = d->trans_a ? (uint64_t)d->k : (uint64_t)d->m;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  if (b->LtMatmulDescCreate(&op, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return -1;
  if (b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tb, sizeof tb) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof ta) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))
    goto out;
  if (b->LtMatrixLayoutCreate(&la, at, ra, ca, d->ldb) ||
      b->LtMatrixLayoutCreate(&lb, at, rb, cb, d->lda) ||
      b->LtMatrixLayoutCreate(&lc, ctp, (uint64_t)d->n, (uint64_t)d->m, d->ldc))
    goto out;
  if (batch > 1 &&
      (b->LtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) ||
       b->LtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb) ||
       b->LtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) ||
       b->LtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa) ||
       b->LtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) ||
       b->LtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc)))
    goto out;
  if (b->LtMatmulPreferenceCreate(&pref) ||
      b->LtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                        sizeof ws))
    goto out;
  if (b->LtMatmulAlgoGetHeuristic((cublasLtHandle_t)im->cublaslt, op, la, lb, lc, lc, pref, 1,
                                  &heur, &found) != CUBLAS_STATUS_SUCCESS ||
      found < 1)
    goto out;
  {
    const float alpha = d->alpha, beta = 0.0f;
    MT_CUBLAS_CHECK(b, b->LtMatmul((cublasLtHandle_t)im->cublaslt, op, &alpha, d->b, la, d->a, lb,
                                   &beta, d->c, lc, d->c, lc, &heur.algo, im->lt_workspace,
                                   (size_t)ws, im->stream));
  }
  rc = 0;
out:
  if (pref) b->LtMatmulPreferenceDestroy(pref);
  if (lc) b->LtMatrixLayoutDestroy(lc);
  if (lb) b->LtMatrixLayoutDestroy(lb);
  if (la) b->LtMatrixLayoutDestroy(la);
  b->LtMatmulDescDestroy(op);
  return rc;
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
  const int all_f32 = d->a_type == MT_F32 && d->c_type == MT_F32;
  const cublasComputeType_t ct =
      all_f32 && im->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (d->bias && d->beta == 0.0f && d->c_type == d->a_type && gemm_lt_bias(im, d, ct) == 0)
    return;
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
