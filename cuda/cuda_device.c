/* cuda/cuda_device.c — see cuda_device.h. */
#include "cuda/cuda_device.h"

#include <stdio.h>

#include <cuda_runtime.h>

static int select_fail(cudaError_t e, const char *what, char *err, size_t errlen) {
  snprintf(err, errlen, "%s failed with %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  return -1;
}

int mt_cuda_select_device(int local_rank, char *err, size_t errlen) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess) return select_fail(e, "cudaGetDeviceCount", err, errlen);
  if (ndev < 1) {
    snprintf(err, errlen, "cudaGetDeviceCount found 0 devices (check CUDA_VISIBLE_DEVICES)");
    return -1;
  }
  int dev = (local_rank > 0 ? local_rank : 0) % ndev;
  if ((e = cudaSetDevice(dev)) != cudaSuccess) return select_fail(e, "cudaSetDevice", err, errlen);
  return dev;
}
