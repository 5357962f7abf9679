/* cuda/cuda_fp8_gemm.c — the FP8 GEMM op (core/backend.h mt_fp8_gemm_desc)
 * through cuBLASLt's FP8 matmul (issue 32): the per-tensor recipes'
 * (tensorwise, delayed) forward, dgrad and wgrad GEMMs of model/fp8_linear.c
 * on the FP8 tensor cores.
 *
 * cuBLASLt's FP8 rules (cuBLAS documentation, cublasLtMatmul, "FP8"): A and
 * B of CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 (not both e5m2), compute
 * CUBLAS_COMPUTE_32F with an fp32 scale type, C and D bf16 or fp32 here, the
 * "TN" layout — A transposed, B not, i.e. both operands contiguous along
 * the contraction k — and, for the tensor-core kernels, 16-byte aligned
 * leading dimensions; per-tensor dequantization scales through
 * CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER (device fp32 scalars):
 *   D = alpha · scale_A · scale_B · op(A) op(B) + beta C (+ bias).
 * Row-major onto column-major as in cuda_gemm.c: D^T[n, m] = op(B)^T op(A)^T,
 * so cuBLASLt's A is our B and its B our A. Its A must be transposed: our B
 * stored [n, k] (trans_b, the forward's W); otherwise (dgrad's W [k, n],
 * wgrad's dy) a transposed copy [n, k] of the codes is made first. Its B
 * must not be: our A stored [m, k] (the forward's x, dgrad's dy); otherwise
 * (wgrad's x [k, m]) a transposed copy. Transformer Engine makes the same
 * copies on Hopper (its "columnwise" FP8 data: W for dgrad, dy and x for
 * wgrad), fused into the quantization; here they are one pass over the
 * 1-byte codes (cuda_fp8.cu k_fp8_transpose) into stream-ordered workspace.
 * FAST_ACCUM is off in all three GEMMs (fp32 accumulation throughout; TE
 * turns it on for the forward, docs/fp8.md "Where megatrain differs").
 * Everything else — m, n or k not a multiple of 16, a device below compute
 * capability 8.9, no cuBLASLt algorithm — returns -1 with nothing enqueued
 * and the caller takes the dequantize path (model/fp8_linear.c).
 */
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "core/fp8.h"
#include "cuda/cublas_api.h"
#include "cuda_internal.h"

int cuda_fp8_gemm_probe(cuda_impl *im) {
  const char *env = getenv("MEGATRAIN_CUDA_FP8_GEMM");
  if (env && !strcmp(env, "0")) return -1;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, im->device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, im->device) !=
          cudaSuccess) {
    (void)cudaGetLastError(); /* not a launch error: the dequantize path runs */
    return -1;
  }
  return major * 10 + minor >= 89 ? 0 : -1;
}

static cudaDataType_t fp8_type(int fmt) {
  return fmt == MT_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

static cudaDataType_t out_type(mt_dtype t) { return t == MT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* The descriptors of one problem; 0 with *heur filled when cuBLASLt has an
 * algorithm for it. la: cuBLASLt's A (our B as [n, k] rows of k), lb: its B
 * (our A as [m, k]), ld: C = D [n, m] column-major. */
static int describe(cuda_impl *im, const mt_fp8_gemm_desc *d, cublasLtMatmulDesc_t op,
                    cublasLtMatrixLayout_t *la, cublasLtMatrixLayout_t *lb,
                    cublasLtMatrixLayout_t *ld, cublasLtMatmulHeuristicResult_t *heur) {
  const mt_cublas_api *b = im->blas;
  const cublasOperation_t tt = CUBLAS_OP_T, tn = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = d->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const int8_t fast = 0;
  /* cuBLASLt's A is our B: its scale is b_sinv; its B's is a_sinv */
  const float *sa = d->b_sinv, *sb = d->a_sinv;
  const uint64_t ws = im->lt_workspace ? CUDA_LT_WORKSPACE : 0;
  cublasLtMatmulPreference_t pref = NULL;
  int found = 0, rc = -1;
  if (b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tt, sizeof tt) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof tn) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) ||
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi))
    return -1;
  if (d->bias &&
      b->LtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d->bias, sizeof d->bias))
    return -1;
  /* leading dimensions: the stored operand's, or k for a transposed copy */
  const int64_t lda = d->trans_b ? d->ldb : d->k, ldb = d->trans_a ? d->k : d->lda;
  if (b->LtMatrixLayoutCreate(la, fp8_type(d->b_fmt), (uint64_t)d->k, (uint64_t)d->n, lda) ||
      b->LtMatrixLayoutCreate(lb, fp8_type(d->a_fmt), (uint64_t)d->k, (uint64_t)d->m, ldb) ||
      b->LtMatrixLayoutCreate(ld, out_type(d->c_type), (uint64_t)d->n, (uint64_t)d->m, d->ldc))
    return -1;
  if (b->LtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
      b->LtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                        sizeof ws) == CUBLAS_STATUS_SUCCESS &&
      b->LtMatmulAlgoGetHeuristic((cublasLtHandle_t)im->cublaslt, op, *la, *lb, *ld, *ld, pref, 1,
                                  heur, &found) == CUBLAS_STATUS_SUCCESS &&
      found >= 1)
    rc = 0;
  if (pref) b->LtMatmulPreferenceDestroy(pref);
  return rc;
}

int cuda_fp8_gemm(mt_backend *be, const mt_fp8_gemm_desc *d) {
  cuda_impl *im = cuda_impl_of(be);
  MT_ASSERT(d->m >= 0 && d->n >= 0 && d->k >= 0);
  MT_ASSERT(d->c_type == be->dtype || d->c_type == MT_F32);
  MT_ASSERT(!d->bias || (d->beta == 0.0f && d->c_type == be->dtype));
  if (!im->fp8_gemm || d->m % 16 || d->n % 16 || d->k % 16 || d->ldc % 16 ||
      (d->trans_b && d->ldb % 16) || (!d->trans_a && d->lda % 16) ||
      (d->a_fmt == MT_FP8_E5M2 && d->b_fmt == MT_FP8_E5M2) ||
      (d->bias && d->c_type != MT_BF16))
    return -1;
  if (d->m == 0 || d->n == 0) return 0;
  const mt_cublas_api *b = im->blas;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  int rc = -1;
  if (b->LtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
    return -1;
  if (describe(im, d, op, &la, &lb, &ld, &heur) == 0) {
    /* the TN operands: our B as [n, k], our A as [m, k] (copies where stored otherwise) */
    uint8_t *bt = NULL, *at = NULL;
    const uint8_t *pa = d->b, *pb = d->a;
    if (!d->trans_b) { /* B stored [k, n] */
      bt = be->ops->alloc(be, (size_t)d->n * (size_t)d->k, MT_MEM_WORKSPACE);
      cudak_fp8_transpose(im->stream, bt, d->b, d->k, d->n, d->ldb);
      pa = bt;
    }
    if (d->trans_a) { /* A stored [k, m] */
      at = be->ops->alloc(be, (size_t)d->m * (size_t)d->k, MT_MEM_WORKSPACE);
      cudak_fp8_transpose(im->stream, at, d->a, d->k, d->m, d->lda);
      pb = at;
    }
    const float alpha = d->alpha, beta = d->beta;
    MT_CUBLAS_CHECK(b, b->LtMatmul((cublasLtHandle_t)im->cublaslt, op, &alpha, pa, la, pb, lb,
                                   &beta, d->c, ld, d->c, ld, &heur.algo, im->lt_workspace,
                                   im->lt_workspace ? CUDA_LT_WORKSPACE : 0, im->stream));
    be->ops->free(be, at); /* stream-ordered: after the matmul read them */
    be->ops->free(be, bt);
    rc = 0;
  }
  if (ld) b->LtMatrixLayoutDestroy(ld);
  if (lb) b->LtMatrixLayoutDestroy(lb);
  if (la) b->LtMatrixLayoutDestroy(la);
  b->LtMatmulDescDestroy(op);
  return rc;
}
