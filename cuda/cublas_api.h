/* cuda/cublas_api.h — private to the CUDA backend (the cuda/ sources): cuBLAS loaded
 * at run time.
 *
 * No binary links libcublas: loading cuBLAS and cuBLASLt costs about half a
 * second of CPU per process (their constructors and page faults), which
 * every run, test and tool paid, on the cpu backend too. The cuda backend's
 * initialisation (cuda_blas_create) loads MT_CUBLAS_LIBRARY with dlopen,
 * searched as the loader searches (LD_LIBRARY_PATH, the binary's run path,
 * the ldconfig cache, the default folders), and looks up exactly the
 * functions it calls (MT_CUBLAS_FUNCS) into one table owned by the backend
 * (cuda_impl's `blas`). Every entry has the type of <cublas_v2.h>'s
 * prototype (__typeof__), so calls are checked as direct calls would be.
 * Under the host emulation (make CUDA_EMU=1) the functions are the
 * emulation's, already in the process: looked up there by their plain names.
 * docs/cuda.md, "Libraries". */
#ifndef MT_CUDA_CUBLAS_API_H
#define MT_CUDA_CUBLAS_API_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cublasLt.h>

/* The soname of the toolkit the backend was built with (libcublas.so.13). */
#define MT_CUBLAS_STR_(x) #x
#define MT_CUBLAS_STR(x) MT_CUBLAS_STR_(x)
#ifdef CUBLAS_VER_MAJOR
#define MT_CUBLAS_LIBRARY "libcublas.so." MT_CUBLAS_STR(CUBLAS_VER_MAJOR)
#else
#define MT_CUBLAS_LIBRARY "libcublas.so"
#endif

/* issue 32, GEMM epilogues: cuBLASLt (its own library, of the same toolkit),
 * for the bias epilogue of cuda_gemm.c; X(field, prototype in <cublasLt.h>,
 * exported symbol). */
#ifdef CUBLAS_VER_MAJOR
#define MT_CUBLASLT_LIBRARY "libcublasLt.so." MT_CUBLAS_STR(CUBLAS_VER_MAJOR)
#else
#define MT_CUBLASLT_LIBRARY "libcublasLt.so"
#endif
#define MT_CUBLASLT_FUNCS(X)                                                                \
  X(LtCreate, cublasLtCreate, cublasLtCreate)                                               \
  X(LtDestroy, cublasLtDestroy, cublasLtDestroy)                                            \
  X(LtMatmulDescCreate, cublasLtMatmulDescCreate, cublasLtMatmulDescCreate)                 \
  X(LtMatmulDescDestroy, cublasLtMatmulDescDestroy, cublasLtMatmulDescDestroy)              \
  X(LtMatmulDescSetAttribute, cublasLtMatmulDescSetAttribute, cublasLtMatmulDescSetAttribute) \
  X(LtMatrixLayoutCreate, cublasLtMatrixLayoutCreate, cublasLtMatrixLayoutCreate)           \
  X(LtMatrixLayoutDestroy, cublasLtMatrixLayoutDestroy, cublasLtMatrixLayoutDestroy)        \
  X(LtMatrixLayoutSetAttribute, cublasLtMatrixLayoutSetAttribute,                           \
    cublasLtMatrixLayoutSetAttribute)                                                       \
  X(LtMatmulPreferenceCreate, cublasLtMatmulPreferenceCreate, cublasLtMatmulPreferenceCreate) \
  X(LtMatmulPreferenceDestroy, cublasLtMatmulPreferenceDestroy,                             \
    cublasLtMatmulPreferenceDestroy)                                                        \
  X(LtMatmulPreferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute,                   \
    cublasLtMatmulPreferenceSetAttribute)                                                   \
  X(LtMatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic) \
  X(LtMatmul, cublasLtMatmul, cublasLtMatmul)

/* The functions the backend calls: X(field, prototype in <cublas_v2.h>,
 * exported symbol). */
#define MT_CUBLAS_FUNCS(X)                                                                  \
  X(Create, cublasCreate, cublasCreate_v2)                                                  \
  X(Destroy, cublasDestroy, cublasDestroy_v2)                                               \
  X(SetStream, cublasSetStream, cublasSetStream_v2)                                         \
  X(SetMathMode, cublasSetMathMode, cublasSetMathMode)                                      \
  X(GetStatusString, cublasGetStatusString, cublasGetStatusString)                          \
  X(GemmStridedBatchedEx, cublasGemmStridedBatchedEx, cublasGemmStridedBatchedEx)           \
  X(GemmGroupedBatchedEx, cublasGemmGroupedBatchedEx, cublasGemmGroupedBatchedEx)

typedef struct mt_cublas_api {
  void *lib; /* dlopen handle (NULL under the emulation) */
#define MT_CUBLAS_API_ENTRY_(f, proto, sym) __typeof__(&proto) f;
  MT_CUBLAS_FUNCS(MT_CUBLAS_API_ENTRY_)
  /* issue 32: cuBLASLt (GEMM epilogues) */
  void *lt_lib; /* dlopen handle of MT_CUBLASLT_LIBRARY (NULL under the emulation) */
  MT_CUBLASLT_FUNCS(MT_CUBLAS_API_ENTRY_)
#undef MT_CUBLAS_API_ENTRY_
} mt_cublas_api;

/* Fills *a: 0, or -1 with err naming the library or function missing and
 * what to do (a "no usable CUDA device"-style message for the caller). */
int mt_cublas_api_open(mt_cublas_api *a, char *err, size_t errlen);
/* Closes the library (no-op for a table never opened). */
void mt_cublas_api_close(mt_cublas_api *a);

#endif
