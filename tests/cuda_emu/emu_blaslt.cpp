/* tests/cuda_emu/emu_blaslt.cpp — the stand-in cuBLASLt (issue 32):
 * handle, matmul descriptor, matrix layouts with strided batches,
 * preference, a one-algorithm heuristic and cublasLtMatmul, run by
 * emu_blas.h's BlasOp from the documented definition
 * D = alpha scale_A scale_B op(A) op(B) + beta C (+ bias[row] with
 * CUBLASLT_EPILOGUE_BIAS), on a device of compute capability 9.0.
 * FP8 (A / B of CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2) with the rules cuBLASLt
 * documents for Hopper: compute CUBLAS_COMPUTE_32F, A and B not both e5m2,
 * A transposed and B not ("TN"), C = D of bf16 or fp32 (a bias only with
 * D bf16, of D's type), m, n, k and the leading dimensions multiples of 16
 * (the emulation holds the 16-byte alignment of the tensor-core kernels as
 * a rule); scale_A / scale_B through the A / B scale pointers (FP8 only:
 * CUBLAS_STATUS_INVALID_VALUE otherwise); C / D scale and amax pointers are
 * not emulated (CUBLAS_STATUS_NOT_SUPPORTED). Each violation: the status
 * and a line on stderr. The sum: the codes' exact values (emu_blas.h
 * fp8_value) in eight interleaved fp32 partial sums over k combined in a
 * fixed tree, as every product of BlasOp, then scaled once by
 * alpha · (scale_A · scale_B); FAST_ACCUM is accepted and the
 * accumulation stays fp32 (Hopper's reduced-precision fast accumulation is
 * not modelled).
 */
#include <stdio.h>
#include <string.h>

#include <set>

#include "cublasLt.h"
#include "emu_blas.h"

using namespace emu;

struct cublasLtContext { int live; };
struct cublasLtMatmulDescEmu {
  cublasComputeType_t ct;
  cublasOperation_t ta, tb;
  cublasLtEpilogue_t epi;
  const void *bias;
  cudaDataType_t biast;
  bool biast_set;
  const void *scale[2]; /* A, B scale pointers (FP8) */
  int8_t fast_accum;
};
struct cublasLtMatrixLayoutEmu { cudaDataType_t t; uint64_t rows, cols; int64_t ld; int32_t batch; int64_t stride; };
struct cublasLtMatmulPreferenceEmu { uint64_t workspace; };

static std::set<cublasLtContext *> lt_handles;

/* one attribute of `size` bytes from buf into *dst, cuBLASLt's size check */
template <typename T>
static cublasStatus_t lt_attr(const char *api, T *dst, const void *buf, size_t size) {
  if (!buf || size != sizeof(T))
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "attribute of %zu bytes, expected %zu", size,
               sizeof(T));
  memcpy(dst, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

/* cuBLASLt's FP8 rules on Hopper (the file's head). */
static cublasStatus_t fp8_rules(const char *api, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t dd) {
  if (!is_fp8(a->t) || !is_fp8(b->t))
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "A %s with B %s (FP8 needs both FP8)",
               tname(a->t), tname(b->t));
  if (a->t == CUDA_R_8F_E5M2 && b->t == CUDA_R_8F_E5M2)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "A and B both CUDA_R_8F_E5M2");
  if (d->ct != CUBLAS_COMPUTE_32F)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "FP8 with compute type %d (expected "
               "CUBLAS_COMPUTE_32F)", (int)d->ct);
  if (d->ta != CUBLAS_OP_T || d->tb != CUBLAS_OP_N)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "FP8 needs A transposed and B not (\"TN\"), "
               "got transa %d, transb %d", (int)d->ta, (int)d->tb);
  if (dd->t != CUDA_R_16BF && dd->t != CUDA_R_32F)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "FP8 with D %s (emulated: bf16, fp32)",
               tname(dd->t));
  if (d->epi == CUBLASLT_EPILOGUE_BIAS && dd->t != CUDA_R_16BF)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "FP8 bias epilogue with D %s (emulated: bf16)",
               tname(dd->t));
  const uint64_t m = a->cols, k = a->rows, n = b->cols;
  if (m % 16 || n % 16 || k % 16 || a->ld % 16 || b->ld % 16 || dd->ld % 16)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED,
               "FP8 with m %llu, n %llu, k %llu, lda %lld, ldb %lld, ldd %lld: not all multiples "
               "of 16", (unsigned long long)m, (unsigned long long)n, (unsigned long long)k,
               (long long)a->ld, (long long)b->ld, (long long)dd->ld);
  return CUBLAS_STATUS_SUCCESS;
}

/* The checks of cublasLtMatmul and its heuristic; fills op's products when op. */
static cublasStatus_t lt_problem(const char *api, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                 cublasLtMatrixLayout_t dd, BlasOp *op, float alpha, float beta,
                                 const void *A, const void *B, const void *C, void *D) {
  if (!d || !a || !b || !c || !dd) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "a NULL descriptor");
  if (d->epi != CUBLASLT_EPILOGUE_DEFAULT && d->epi != CUBLASLT_EPILOGUE_BIAS)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %d is not emulated", (int)d->epi);
  if (d->epi == CUBLASLT_EPILOGUE_BIAS && op && !d->bias)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "bias epilogue without a bias pointer");
  const bool fp8 = is_fp8(a->t) || is_fp8(b->t);
  if ((a->t != b->t && !fp8) || c->t != dd->t)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "A/B or C/D of different types");
  if (c->rows != dd->rows || c->cols != dd->cols || c->ld != dd->ld)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "C and D layouts differ (not emulated)");
  if ((d->scale[0] || d->scale[1]) && !fp8)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "A/B scale pointers with %s x %s (FP8 only)",
               tname(a->t), tname(b->t));
  cublasStatus_t st = fp8 ? fp8_rules(api, d, a, b, dd)
                          : check_types(api, a->t, b->t, dd->t, d->ct, false);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const cudaDataType_t bt = d->biast_set ? d->biast : dd->t;
  if (d->epi == CUBLASLT_EPILOGUE_BIAS && bt != dd->t)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "bias %s with D %s", tname(bt), tname(dd->t));
  const int ta = d->ta != CUBLAS_OP_N, tb = d->tb != CUBLAS_OP_N;
  const uint64_t m = ta ? a->cols : a->rows, k = ta ? a->rows : a->cols;
  const uint64_t kb = tb ? b->cols : b->rows, n = tb ? b->rows : b->cols;
  if (kb != k || dd->rows != m || dd->cols != n)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE,
               "op(A) %llu x %llu, op(B) %llu x %llu, D %llu x %llu do not chain",
               (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb,
               (unsigned long long)n, (unsigned long long)dd->rows, (unsigned long long)dd->cols);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || a->ld > INT32_MAX ||
      b->ld > INT32_MAX || dd->ld > INT32_MAX)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "sizes beyond int32 (not emulated)");
  if ((st = check_dims(api, d->ta, d->tb, (int)m, (int)n, (int)k, (int)a->ld, (int)b->ld,
                       (int)dd->ld)) != CUBLAS_STATUS_SUCCESS)
    return st;
  if (a->batch != b->batch || a->batch != dd->batch || c->batch != dd->batch)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "batch counts %d, %d, %d, %d differ", a->batch,
               b->batch, c->batch, dd->batch);
  if (!op) return CUBLAS_STATUS_SUCCESS;
  if (C != D && beta != 0.0f)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "C != D with beta != 0 (not emulated)");
  op->at = a->t, op->bt = b->t, op->ct = dd->t;
  op->tf32 = d->ct == CUBLAS_COMPUTE_32F_FAST_TF32;
  op->scale[0] = (const char *)d->scale[0], op->scale[1] = (const char *)d->scale[1];
  if (d->epi == CUBLASLT_EPILOGUE_BIAS) op->bias = (const char *)d->bias, op->biast = bt;
  for (int q = 0; q < dd->batch; q++)
    op->g.push_back(Gemm{ta, tb, (int)m, (int)n, (int)k, (int)a->ld, (int)b->ld, (int)dd->ld, alpha,
                         beta, (const char *)A + (size_t)(q * a->stride) * tsize(a->t),
                         (const char *)B + (size_t)(q * b->stride) * tsize(b->t),
                         (char *)D + (size_t)(q * dd->stride) * tsize(dd->t)});
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtContext *c = new cublasLtContext{1};
  lt_handles.insert(c);
  *h = c;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  if (!h || !lt_handles.count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  lt_handles.erase(h);
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct,
                                        cudaDataType_t scale) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  if (scale != CUDA_R_32F)
    return bad("cublasLtMatmulDescCreate", CUBLAS_STATUS_NOT_SUPPORTED, "scale type %s",
               tname(scale));
  *d = new cublasLtMatmulDescEmu{ct, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr,
                                 CUDA_R_32F, false, {nullptr, nullptr}, 0};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  const char *api = "cublasLtMatmulDescSetAttribute";
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return lt_attr(api, &d->ta, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return lt_attr(api, &d->tb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return lt_attr(api, &d->epi, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return lt_attr(api, &d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      d->biast_set = true;
      return lt_attr(api, &d->biast, buf, size);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return lt_attr(api, &d->scale[0], buf, size);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return lt_attr(api, &d->scale[1], buf, size);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return lt_attr(api, &d->fast_accum, buf, size);
    default: break;
  }
  return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "attribute %d is not emulated", (int)attr);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  if (ld < (int64_t)(rows > 1 ? rows : 1))
    return bad("cublasLtMatrixLayoutCreate", CUBLAS_STATUS_INVALID_VALUE,
               "ld %lld < rows %llu (column-major)", (long long)ld, (unsigned long long)rows);
  *l = new cublasLtMatrixLayoutEmu{t, rows, cols, ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
  const char *api = "cublasLtMatrixLayoutSetAttribute";
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return lt_attr(api, &l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return lt_attr(api, &l->stride, buf, size);
  }
  return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "attribute %d is not emulated", (int)attr);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  *p = new cublasLtMatmulPreferenceEmu{0};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size) {
  const char *api = "cublasLtMatmulPreferenceSetAttribute";
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return lt_attr(api, &p->workspace, buf, size);
  return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "attribute %d is not emulated", (int)attr);
}

/* One algorithm (the emulation's one summation), no workspace. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t pref,
    int requested, cublasLtMatmulHeuristicResult_t res[], int *count) {
  const char *api = "cublasLtMatmulAlgoGetHeuristic";
  if (!h || !lt_handles.count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!pref || !res || !count || requested < 1)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "NULL preference/results/count or count < 1");
  *count = 0;
  cublasStatus_t st = lt_problem(api, d, a, b, c, dd, nullptr, 1, 0, 0, 0, 0, 0);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  memset(&res[0], 0, sizeof res[0]);
  res[0].state = CUBLAS_STATUS_SUCCESS;
  res[0].wavesCount = 1.0f;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t stream) {
  const char *api = "cublasLtMatmul";
  (void)algo, (void)ws, (void)ws_bytes;
  if (!h || !lt_handles.count(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "alpha or beta is NULL");
  if (!stream_of(stream)) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "invalid stream");
  BlasOp *op = new BlasOp();
  op->api = api;
  cublasStatus_t st = lt_problem(api, d, a, b, c, dd, op, *(const float *)alpha,
                                 *(const float *)beta, A, B, C, D);
  if (st != CUBLAS_STATUS_SUCCESS || op->g.empty() || !op->g[0].m || !op->g[0].n) {
    delete op;
    return st;
  }
  enqueue(stream_of(stream), op);
  return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
