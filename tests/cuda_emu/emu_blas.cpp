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

#include "cublasLt.h"
#include "cublas_v2.h"
#include "emu.h"

struct cublasContext {
  cudaStream_t stream;
  int math;
};

namespace emu {

static std::set<cublasContext *> handles;

static size_t tsize(cudaDataType_t t) { return t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : 4; }
static const char *tname(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
  }
  return "?";
}

static inline float ld_elem(const char *p, cudaDataType_t t, size_t i) {
  if (t == CUDA_R_32F) return ((const float *)p)[i];
  uint16_t b = ((const uint16_t *)p)[i];
  return __builtin_bit_cast(float, (uint32_t)b << 16);
}
static inline uint16_t to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float to_tf32(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7F800000u) == 0x7F800000u) return f;
  u += 0xFFFu + ((u >> 13) & 1u);
  return __builtin_bit_cast(float, u & ~0x1FFFu);
}

/* One problem: C[m x n] = alpha op(A) op(B) + beta C, column-major. */
struct Gemm {
  int ta, tb, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const char *A, *B;
  char *C;
};

struct BlasOp : Op {
  const char *api;
  cudaDataType_t at, bt, ct;
  bool tf32;
  std::vector<Gemm> g;
  const void *const *ptr_arrays[3] = {nullptr, nullptr, nullptr}; /* grouped: read at run */
  std::vector<int> group_of;
  const char *bias = nullptr; /* cuBLASLt's bias epilogue: bias[i] added to row i */
  cudaDataType_t biast = CUDA_R_32F;
  std::string name() const override {
    char b[160];
    snprintf(b, sizeof b, "%s (%zu product%s, %s x %s -> %s)", api, g.size(),
             g.size() == 1 ? "" : "s", tname(at), tname(bt), tname(ct));
    return b;
  }
  Access operand(const char *which, const char *p, int rows, int cols, int ld, size_t es,
                 bool write, size_t i) {
    size_t bytes = rows && cols ? ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * es : 0;
    std::string why;
    Alloc *a = bytes ? device_range(p, bytes, &why) : nullptr;
    if (bytes && !a)
      fault("%s, product %zu: %s (%d x %d, ld %d, %zu bytes at %p): %s", name().c_str(), i,
            which, rows, cols, ld, bytes, (const void *)p, why.c_str());
    return Access{a, a ? (uint64_t)(p - a->base) : 0, a ? (uint64_t)(p - a->base + bytes) : 0,
                  write};
  }
  bool start() override {
    if (ptr_arrays[0]) { /* grouped: the device pointer arrays, in stream order */
      for (size_t i = 0; i < g.size(); i++) {
        g[i].A = (const char *)ptr_arrays[0][i];
        g[i].B = (const char *)ptr_arrays[1][i];
        g[i].C = (char *)ptr_arrays[2][i];
      }
    }
    std::vector<Access> acc;
    for (int q = 0; ptr_arrays[0] && q < 3; q++) {
      const size_t pb = g.size() * sizeof(void *);
      std::string why;
      Alloc *a = device_range(ptr_arrays[q], pb, &why);
      if (!a) fault("%s: pointer array %c: %s", name().c_str(), "ABC"[q], why.c_str());
      const uint64_t lo = (uint64_t)((const char *)ptr_arrays[q] - a->base);
      acc.push_back(Access{a, lo, lo + pb, false});
    }
    for (size_t i = 0; i < g.size(); i++) {
      const Gemm &p = g[i];
      if (!p.m || !p.n) continue;
      Access a = operand("A", p.A, p.ta ? p.k : p.m, p.ta ? p.m : p.k, p.lda, tsize(at), false, i);
      Access b = operand("B", p.B, p.tb ? p.n : p.k, p.tb ? p.k : p.n, p.ldb, tsize(bt), false, i);
      Access c = operand("C", p.C, p.m, p.n, p.ldc, tsize(ct), true, i);
      for (const Access *x : {&a, &b})
        if (x->a && x->a == c.a && x->lo < c.hi && c.lo < x->hi)
          fault("%s, product %zu: C overlaps %s (cuBLAS needs a separate output)",
                name().c_str(), i, x == &a ? "A" : "B");
      if (a.a) acc.push_back(a);
      if (b.a) acc.push_back(b);
      if (bias) acc.push_back(operand("bias", bias, p.m, 1, p.m, tsize(biast), false, i));
      acc.push_back(c);
      if (p.beta != 0.0f) acc.push_back(Access{c.a, c.lo, c.hi, false});
    }
    check_and_record(this, acc.data(), (int)acc.size());
    for (const Gemm &p : g) run(p);
    profile_add(api, now() - t_start);
    return true;
  }
  void run(const Gemm &p) {
    if (!p.m || !p.n) return;
    const int m = p.m, n = p.n, k = p.k;
    std::unique_ptr<float[]> Ap(new float[(size_t)m * k + 1]), Bp(new float[(size_t)n * k + 1]);
    for (int i = 0; i < m; i++)
      for (int l = 0; l < k; l++) {
        float v = ld_elem(p.A, at, p.ta ? (size_t)l + (size_t)i * p.lda : (size_t)i + (size_t)l * p.lda);
        Ap[(size_t)i * k + l] = tf32 ? to_tf32(v) : v;
      }
    for (int j = 0; j < n; j++)
      for (int l = 0; l < k; l++) {
        float v = ld_elem(p.B, bt, p.tb ? (size_t)j + (size_t)l * p.ldb : (size_t)l + (size_t)j * p.ldb);
        Bp[(size_t)j * k + l] = tf32 ? to_tf32(v) : v;
      }
    const int IB = 64;
    for (int i0 = 0; i0 < m; i0 += IB) {
      const int i1 = i0 + IB < m ? i0 + IB : m;
      for (int j = 0; j < n; j++) {
        const float *b = &Bp[(size_t)j * k];
        for (int i = i0; i < i1; i++) {
          const float *a = &Ap[(size_t)i * k];
          float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int l = 0;
          for (; l + 8 <= k; l += 8)
            for (int q = 0; q < 8; q++) s[q] += a[l + q] * b[l + q];
          for (int q = 0; l < k; l++, q++) s[q] += a[l] * b[l];
          const float acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
          const size_t ci = (size_t)i + (size_t)j * p.ldc;
          float c = p.alpha * acc;
          if (p.beta != 0.0f) c += p.beta * ld_elem(p.C, ct, ci);
          if (bias) c += ld_elem(bias, biast, (size_t)i);
          if (ct == CUDA_R_32F) ((float *)p.C)[ci] = c;
          else ((uint16_t *)p.C)[ci] = to_bf16(c);
        }
      }
    }
  }
};

static cublasStatus_t bad(const char *api, cublasStatus_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cublasStatus_t bad(const char *api, cublasStatus_t st, const char *fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  note("%s returns %s: %s", api, cublasGetStatusName(st), b);
  return st;
}

/* The checks of one problem, in cuBLAS's order. */
static cublasStatus_t check_dims(const char *api, int ta, int tb, int m, int n, int k, int lda,
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

static cublasStatus_t check_types(const char *api, cudaDataType_t a, cudaDataType_t b,
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

/* ---- cuBLASLt (issue 32): the bias epilogue of cuda/cuda_gemm.c ---- */

struct cublasLtContext { int live; };
struct cublasLtMatmulDescEmu {
  cublasComputeType_t ct;
  cublasOperation_t ta, tb;
  cublasLtEpilogue_t epi;
  const void *bias;
  cudaDataType_t biast;
  bool biast_set;
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
  if (a->t != b->t || c->t != dd->t)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "A/B or C/D of different types");
  if (c->rows != dd->rows || c->cols != dd->cols || c->ld != dd->ld)
    return bad(api, CUBLAS_STATUS_NOT_SUPPORTED, "C and D layouts differ (not emulated)");
  cublasStatus_t st = check_types(api, a->t, b->t, dd->t, d->ct, false);
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
                                 CUDA_R_32F, false};
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
