/* cuda/cuda_moe.cu — the token permutation ops of the mixture-of-experts
 * layer on the CUDA backend, op-table entries included: row gather
 * (permute), weighted combine (unpermute) and its backward (specs:
 * core/backend.h; reference semantics: cpu/cpu_moe.c). Every output element
 * has one writer and a fixed summation order; the weight gradients are
 * double dot products through a fixed block tree (block_sum_double,
 * cuda_dev.cuh). The experts' grouped GEMM is cuda_gemm_grouped.c. */
#include "cuda_dev.cuh"

#define TPB 256

/* ---- MoE permutations ---- */

template <typename T>
__global__ void k_gather_rows(T *dst, const T *src, const int32_t *idx, int64_t n, int64_t h) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / h, c = i - r * h;
    dst[i] = src[(int64_t)idx[r] * h + c];
  }
}

extern "C" void cuda_moe_gather_rows(mt_backend *be, void *dst, const void *src,
                                     const int32_t *idx, int64_t n, int64_t h) {
  if (n <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_gather_rows<T>, grid_for(n * h, TPB), TPB, 0, st)(
                     (T *)dst, (const T *)src, idx, n, h)));
  MT_CUDA_LAUNCHED();
}

template <typename T>
__global__ void k_combine_fwd(T *y, const T *src, const int32_t *slot, const float *w,
                              int64_t n_tok, int k, int64_t h) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_tok * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t t = i / h, c = i - t * h;
    float acc = 0.0f;
    for (int j = 0; j < k; j++) {
      int32_t r = slot[t * k + j];
      if (r < 0) continue;
      float a = w ? w[t * k + j] : 1.0f;
      acc += a * to_f(src[(int64_t)r * h + c]);
    }
    y[i] = from_f<T>(acc);
  }
}

extern "C" void cuda_moe_combine_fwd(mt_backend *be, void *y, const void *src,
                                     const int32_t *slot, const float *w, int64_t n_tok, int k,
                                     int64_t h) {
  if (n_tok <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_combine_fwd<T>, grid_for(n_tok * h, TPB), TPB, 0, st)(
                     (T *)y, (const T *)src, slot, w, n_tok, k, h)));
  MT_CUDA_LAUNCHED();
}

/* dsrc rows: one element per thread over (t*k+j, c). */
template <typename T>
__global__ void k_combine_bwd_dsrc(T *dsrc, const T *dy, const int32_t *slot, const float *w,
                                   int64_t n_tok, int k, int64_t h) {
  const int64_t total = n_tok * k * h;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t tj = i / h, c = i - tj * h;
    int32_t r = slot[tj];
    if (r < 0) continue;
    dsrc[(int64_t)r * h + c] = from_f<T>(w[tj] * to_f(dy[(tj / k) * h + c]));
  }
}

/* dw: one block per (t, j), double dot product through a fixed tree. */
template <typename T>
__global__ void k_combine_bwd_dw(float *dw, const T *dy, const T *src, const int32_t *slot,
                                 int k, int64_t h) {
  __shared__ double sh[TPB];
  const int64_t tj = blockIdx.x;
  const int32_t r = slot[tj];
  if (r < 0) {
    if (threadIdx.x == 0) dw[tj] = 0.0f;
    return;
  }
  const T *g = dy + (tj / k) * h, *s = src + (int64_t)r * h;
  double acc = 0.0;
  for (int64_t c = threadIdx.x; c < h; c += TPB) acc += (double)to_f(g[c]) * (double)to_f(s[c]);
  double tot = block_sum_double(acc, sh);
  if (threadIdx.x == 0) dw[tj] = (float)tot;
}

extern "C" void cuda_moe_combine_bwd(mt_backend *be, void *dsrc, float *dw, const void *dy,
                                     const void *src, const int32_t *slot, const float *w,
                                     int64_t n_tok, int k, int64_t h) {
  if (n_tok <= 0 || k <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_combine_bwd_dsrc<T>, grid_for(n_tok * k * h, TPB), TPB, 0, st)(
                     (T *)dsrc, (const T *)dy, slot, w, n_tok, k, h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(t, (MT_LAUNCH(k_combine_bwd_dw<T>, grid_x_checked(n_tok * k, "moe_combine_bwd"), TPB,
                            0, st)(dw, (const T *)dy, (const T *)src, slot, k, h)));
  MT_CUDA_LAUNCHED();
}
