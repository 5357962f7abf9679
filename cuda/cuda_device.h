/* cuda/cuda_device.h — the one GPU-selection point of a process, used by the
 * CUDA backend (cuda_backend.c) and handed to the NCCL engine
 * (parallel/comm_nccl.c), so both bind the same device. Plain C interface (no
 * CUDA types); built only with CUDA (MT_HAVE_CUDA). */
#ifndef MT_CUDA_DEVICE_H
#define MT_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Make GPU (local_rank % visible device count) current for the calling host
 * thread (local_rank < 0 counts as 0). Returns the ordinal, or -1 with the
 * reason in err[errlen] and CUDA's sticky error cleared:
 *   "no CUDA driver is installed (cudaDriverGetVersion reports none; ...)",
 *   "the CUDA driver supports CUDA X.Y but this build's runtime is Z.W (...)",
 *   "cudaGetDeviceCount failed with NAME (description)" (any other failure),
 *   "cudaGetDeviceCount found 0 devices (check CUDA_VISIBLE_DEVICES)",
 *   "cudaSetDevice failed with NAME (description)".
 * Per process, not collective. */
int mt_cuda_select_device(int local_rank, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
