/* cuda/cuda_device.c — see cuda_device.h. */
#include "cuda/cuda_device.h"

#include <stdio.h>

#include <cuda_runtime.h>

static int select_fail(cudaError_t e, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen, "%s failed with %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  return -1;
}

/* cudaGetDeviceCount failed: say whether the driver is missing or older
 * than this build's runtime (checked with cudaDriverGetVersion, which reports
 * 0 when no CUDA driver is installed), else name the error as it is. */
static int count_fail(cudaError_t e, char *err, size_t errlen) {
  int drv = -1, rt = -1;
  cudaError_t de = cudaDriverGetVersion(&drv);
  cudaError_t re = cudaRuntimeGetVersion(&rt);
  if (de == cudaSuccess && drv == 0) {
    snprintf(err, errlen,
             "no CUDA driver is installed (cudaDriverGetVersion reports none; "
             "cudaGetDeviceCount: %s)",
             cudaGetErrorName(e));
    cudaGetLastError();
    return -1;
  }
  if (de == cudaSuccess && re == cudaSuccess && drv > 0 && drv < rt) {
    snprintf(err, errlen,
             "the CUDA driver supports CUDA %d.%d but this build's runtime is %d.%d "
             "(cudaGetDeviceCount: %s)",
             drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10, cudaGetErrorName(e));
    cudaGetLastError();
    return -1;
  }
  return select_fail(e, "cudaGetDeviceCount", err, errlen);
}

int mt_cuda_select_device(int local_rank, char *err, size_t errlen) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess) return count_fail(e, err, errlen);
  if (ndev < 1) {
    snprintf(err, errlen, "cudaGetDeviceCount found 0 devices (check CUDA_VISIBLE_DEVICES)");
    return -1;
  }
  int dev = (local_rank > 0 ? local_rank : 0) % ndev;
  if ((e = cudaSetDevice(dev)) != cudaSuccess) return select_fail(e, "cudaSetDevice", err, errlen);
  return dev;
}
