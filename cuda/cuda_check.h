/* cuda/cuda_check.h — the one family of checks for CUDA runtime and cuBLAS
 * calls, used by cuda/ and by the NCCL engine (parallel/comm_nccl.c; its
 * NCCL calls are checked by MT_NCCL_CHECK in parallel/nccl_api.h).
 * A failed call ends the whole job through mt_fatal (core/util.h) with
 * "[rank N] file:line: <call text> failed: <library message>".
 *
 *   MT_CUDA_CHECK(call)    cudaError_t call; message "NAME (description)"
 *   MT_CUDA_LAUNCHED()     after a kernel launch: cudaGetLastError()
 *   MT_CUBLAS_CHECK(api, call)  cublasStatus_t call; api: the mt_cublas_api that made it
 *                          (include <cublas_v2.h> first)
 * Host code only (C or C++). */
#ifndef MT_CUDA_CHECK_H
#define MT_CUDA_CHECK_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/util.h"
#ifdef __cplusplus
}
#endif

#define MT_CUDA_CHECK(call)                                                              \
  do {                                                                                   \
    cudaError_t mt_ce_ = (call);                                                         \
    if (mt_ce_ != cudaSuccess)                                                           \
      mt_fatal("%s failed: %s (%s)", #call, cudaGetErrorName(mt_ce_),                    \
               cudaGetErrorString(mt_ce_));                                              \
  } while (0)

/* After a kernel launch: report configuration errors at the call site. */
#define MT_CUDA_LAUNCHED() MT_CUDA_CHECK(cudaGetLastError())

#define MT_CUBLAS_CHECK(api, call)                                                       \
  do {                                                                                   \
    cublasStatus_t mt_bs_ = (call);                                                      \
    if (mt_bs_ != CUBLAS_STATUS_SUCCESS)                                                 \
      mt_fatal("%s failed: %s", #call, (api)->GetStatusString(mt_bs_));                  \
  } while (0)

#endif
