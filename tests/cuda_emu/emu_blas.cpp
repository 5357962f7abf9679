/* tests/cuda_emu/emu_blas.cpp — the stand-in cuBLAS: handle, stream, math
 * mode, cublasGemmEx, cublasGemmStridedBatchedEx and
 * cublasGemmGroupedBatchedEx, and cuBLASLt's cublasLtMatmul with the bias
 * epilogue (D = alpha op(A) op(B) + beta C + bias[row], one rounding;
 * issue 32; its descriptors at the end of the file), written from the documented column-major
 * definition C = alpha op(A) op(B) + beta C (element (i, j) of a matrix X
 * with leading dimension ldX at X[i + j ldX]; op(X) = X or X^T), with the
 * requested types: A and B bf16 or fp32, C bf16 or fp32, fp32 compute
 * (CUBLAS_COMPUTE_32F_FAST_TF32 rounds fp32 inputs to TF32 first); C is read
 * only when beta != 0 and rounded once (bf16: round-to-nearest-even).
 * Arguments are checked as cuBLAS checks them, with its status codes: a
 * NULL or destroyed handle CUBLAS_STATUS_NOT_INITIALIZED; negative sizes, a
 * bad transpose, lda < max(1, rows of A as stored), ldb and ldc likewise,
 * NULL alpha/beta, a negative batch or group size
 * CUBLAS_STATUS_INVALID_VALUE; a type combination cuBLAS has no kernel for
 * CUBLAS_STATUS_NOT_SUPPORTED (each with a line on stderr saying which
 * check). The product runs when the handle's stream reaches it; every
 * operand must then lie inside one live device allocation (a fault naming
 * the operand otherwise, as the GPU would fault), and C may not overlap A
 * or B. Summation: per output element, eight interleaved fp32 partial sums
 * over k combined in a fixed tree: deterministic, not cuBLAS's order. */
#include <stdio.h>
#include <string.h>

#include <memory>
#include <set>

#include "cublas_v2.h"
#include "emu.h"
#include "emu_blas.h"

struct cublasContext {
  cudaStream_t stream;
  int math;
};

namespace emu {
static std::set<cublasContext *> handles;

cublasStatus_t bad(const char *api, cublasStatus_t st, const char *fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  note("%s returns %s: %s", api, cublasGetStatusName(st), b);
  return st;
}

cublasStatus_t check_dims(const char *api, int ta, int tb, int m, int n, int k, int lda,
                          int ldb, int ldc) {
  if (ta < 0 || ta > 2 || tb < 0 || tb > 2)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "transpose %d / %d is not CUBLAS_OP_N/T/C", ta, tb);
  if (m < 0 || n < 0 || k < 0)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "m %d, n %d, k %d: negative", m, n, k);
  const int ra = ta == CUBLAS_OP_N ? m : k, rb = tb == CUBLAS_OP_N ? k : n;
  if (lda < (ra > 1 ? ra : 1))
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "lda %d < max(1, %d) (A is %s)", lda, ra,
               ta == CUBLAS_OP_N ? "m x k" : "k x m, transposed");
  if (ldb < (rb > 1 ? rb : 1))
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "ldb %d < max(1, %d) (B is %s)", ldb, rb,
               tb == CUBLAS_OP_N ? "k x n" : "n x k, transposed");
  if (ldc < (m > 1 ? m : 1))
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "ldc %d < max(1, m = %d)", ldc, m);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_types(const char *api, cudaDataType_t a, cudaDataType_t b,
                           cudaDataType_t c, cublasComputeType_t ct, bool grouped) {
  bool ok = false;
  if (ct == CUBLAS_COMPUTE_32F || ct == CUBLAS_COMPUTE_32F_PEDANTIC)
    ok = (a == CUDA_R_32F && b == CUDA_R_32F && c == CUDA_R_32F) ||
         (a == CUDA_R_16BF && b == CUDA_R_16BF && (c == CUDA_R_16BF || (!grouped && c == CUDA_R_32F)));
  else if (ct == CUBLAS_COMPUTE_32F_FAST_TF32)
    ok = a == CUDA_R_32F && b == CUDA_R_32F && c == CUDA_R_32F;
  if (!ok)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED,
               "no kernel for A %s, B %s, C %s with compute type %d%s", tname(a), tname(b),
               tname(c), (int)ct, grouped ? " (grouped GEMM: A, B and C of one type)" : "");
  return CUBLAS_STATUS_SUCCESS;
}

static cublasContext *handle_ok(cublasHandle_t h) {
  return h && handles.count(h) ? h : nullptr;
}

} /* namespace emu */

using namespace emu;

extern "C" {

const char *cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
#define N(x) \
  case x: return #x;
    N(CUBLAS_STATUS_SUCCESS) N(CUBLAS_STATUS_NOT_INITIALIZED) N(CUBLAS_STATUS_ALLOC_FAILED)
    N(CUBLAS_STATUS_INVALID_VALUE) N(CUBLAS_STATUS_ARCH_MISMATCH) N(CUBLAS_STATUS_MAPPING_ERROR)
    N(CUBLAS_STATUS_EXECUTION_FAILED) N(CUBLAS_STATUS_INTERNAL_ERROR)
    N(CUBLAS_STATUS_NOT_SUPPORTED)
#undef N
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "an internal operation failed";
  }
}

cublasStatus_t cublasCreate(cublasHandle_t *h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  cublasContext *c = new cublasContext{NULL, CUBLAS_DEFAULT_MATH};
  handles.insert(c);
  *h = c;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h) {
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handles.erase(h);
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!stream_of(s)) return bad("cublasSetStream", CUBLAS_STATUS_INVALID_VALUE, "invalid stream");
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s) {
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!s) return CUBLAS_STATUS_INVALID_VALUE;
  *s = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  int base = (int)mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH)
    return bad("cublasSetMathMode", CUBLAS_STATUS_INVALID_VALUE, "mode %d", (int)mode);
  h->math = (int)mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t at, int lda, long long sa, const void *B,
    cudaDataType_t bt, int ldb, long long sb, const void *beta, void *C, cudaDataType_t ct_,
    int ldc, long long sc, int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo) {
  const char *api = "cublasGemmStridedBatchedEx";
  (void)algo;
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasStatus_t st = check_dims(api, ta, tb, m, n, k, lda, ldb, ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (batch < 0) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "batchCount %d", batch);
  if (!alpha || !beta) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "alpha or beta is NULL");
  if ((st = check_types(api, at, bt, ct_, ct, false)) != CUBLAS_STATUS_SUCCESS) return st;
  if (!m || !n || !batch) return CUBLAS_STATUS_SUCCESS;
  BlasOp *op = new BlasOp();
  op->api = api;
  op->at = at, op->bt = bt, op->ct = ct_;
  op->tf32 = ct == CUBLAS_COMPUTE_32F_FAST_TF32;
  const float al = *(const float *)alpha, be = *(const float *)beta;
  for (int b = 0; b < batch; b++)
    op->g.push_back(Gemm{ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, lda, ldb, ldc, al, be,
                         (const char *)A + (size_t)(b * sa) * tsize(at),
                         (const char *)B + (size_t)(b * sb) * tsize(bt),
                         (char *)C + (size_t)(b * sc) * tsize(ct_)});
  enqueue(stream_of(h->stream), op);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct_, int ldc, cublasComputeType_t ct,
                            cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta,
                                    C, ct_, ldc, 0, 1, ct, algo);
}

cublasStatus_t cublasGemmGroupedBatchedEx(
    cublasHandle_t h, const cublasOperation_t ta[], const cublasOperation_t tb[], const int m[],
    const int n[], const int k[], const void *alpha, const void *const Aarray[],
    cudaDataType_t at, const int lda[], const void *const Barray[], cudaDataType_t bt,
    const int ldb[], const void *beta, void *const Carray[], cudaDataType_t ct_,
    const int ldc[], int groups, const int group_size[], cublasComputeType_t ct) {
  const char *api = "cublasGemmGroupedBatchedEx";
  if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (groups < 0) return bad(api, CUBLAS_STATUS_INVALID_VALUE, "group_count %d", groups);
  if (!groups) return CUBLAS_STATUS_SUCCESS;
  if (!ta || !tb || !m || !n || !k || !alpha || !beta || !lda || !ldb || !ldc || !group_size ||
      !Aarray || !Barray || !Carray)
    return bad(api, CUBLAS_STATUS_INVALID_VALUE, "a NULL argument array");
  cublasStatus_t st = check_types(api, at, bt, ct_, ct, true);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  BlasOp *op = new BlasOp();
  op->api = api;
  op->at = at, op->bt = bt, op->ct = ct_;
  op->tf32 = ct == CUBLAS_COMPUTE_32F_FAST_TF32;
  for (int gi = 0; gi < groups; gi++) {
    if (group_size[gi] < 0) {
      delete op;
      return bad(api, CUBLAS_STATUS_INVALID_VALUE, "group_size[%d] = %d", gi, group_size[gi]);
    }
    if ((st = check_dims(api, ta[gi], tb[gi], m[gi], n[gi], k[gi], lda[gi], ldb[gi], ldc[gi])) !=
        CUBLAS_STATUS_SUCCESS) {
      delete op;
      return st;
    }
    for (int q = 0; q < group_size[gi]; q++)
      op->g.push_back(Gemm{ta[gi] != CUBLAS_OP_N, tb[gi] != CUBLAS_OP_N, m[gi], n[gi], k[gi],
                           lda[gi], ldb[gi], ldc[gi], ((const float *)alpha)[gi],
                           ((const float *)beta)[gi], nullptr, nullptr, nullptr});
  }
  /* the pointer arrays are device memory, read when the stream runs it */
  const size_t pb = op->g.size() * sizeof(void *);
  std::string why;
  const void *arr[3] = {Aarray, Barray, Carray};
  for (int i = 0; i < 3; i++)
    if (pb && !device_range(arr[i], pb, &why))
      fault("%s: the %c pointer array (%zu pointers) must be device memory: %s", api, "ABC"[i],
            pb / sizeof(void *), why.c_str());
  op->ptr_arrays[0] = Aarray;
  op->ptr_arrays[1] = Barray;
  op->ptr_arrays[2] = (const void *const *)Carray;
  enqueue(stream_of(h->stream), op);
  return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
