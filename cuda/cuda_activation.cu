/* cuda/cuda_activation.cu — the activations of the CUDA backend, forward
 * and backward, op-table entries included: tanh-GELU (Hendrycks & Gimpel
 * 2016) and SwiGLU (Shazeer 2020). The per-element math is written once in
 * core/scalar_math.h (mt_gelu_tanh, mt_gelu_tanh_grad, mt_silu,
 * mt_swiglu_grad), shared with cpu/cpu_activation.c; on the device its exp
 * is CUDA's expf. One thread per element (grid-stride). */
#include "cuda_dev.cuh"

#define TPB 256

/* ---- GELU, tanh form: mt_gelu_tanh / mt_gelu_tanh_grad ---- */

template <typename T> __global__ void k_gelu_fwd(T *out, const T *in, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = from_f<T>(mt_gelu_tanh(to_f(in[i])));
}

template <typename T> __global__ void k_gelu_bwd(T *din, const T *in, const T *dout, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    din[i] = from_f<T>(mt_gelu_tanh_grad(to_f(in[i]), to_f(dout[i])));
}

extern "C" void cuda_gelu_fwd(mt_backend *be, void *out, const void *in, int64_t n) {
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t,
              (MT_LAUNCH(k_gelu_fwd<T>, grid_for(n, TPB), TPB, 0, st)((T *)out, (const T *)in, n)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_bwd(mt_backend *be, void *din, const void *in, const void *dout,
                              int64_t n) {
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_gelu_bwd<T>, grid_for(n, TPB), TPB, 0, st)((T *)din, (const T *)in,
                                                                  (const T *)dout, n)));
  MT_CUDA_LAUNCHED();
}

/* ---- SwiGLU (Shazeer 2020): mt_silu / mt_swiglu_grad (core/scalar_math.h) ---- */

template <typename T> __global__ void k_swiglu_fwd(T *out, const T *in, int64_t rows, int64_t f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * f;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / f, j = i - r * f;
    const T *x = in + r * 2 * f;
    out[i] = from_f<T>(mt_silu(to_f(x[j])) * to_f(x[f + j]));
  }
}

template <typename T>
__global__ void k_swiglu_bwd(T *din, const T *dout, const T *in, int64_t rows, int64_t f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * f;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / f, j = i - r * f;
    const T *x = in + r * 2 * f;
    float dg, du;
    mt_swiglu_grad(to_f(x[j]), to_f(x[f + j]), to_f(dout[i]), &dg, &du);
    din[r * 2 * f + j] = from_f<T>(dg);
    din[r * 2 * f + f + j] = from_f<T>(du);
  }
}

extern "C" void cuda_swiglu_fwd(mt_backend *be, void *out, const void *in, int64_t rows,
                                int64_t f) {
  if (rows <= 0 || f <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_swiglu_fwd<T>, grid_for(rows * f, TPB), TPB, 0, st)(
                             (T *)out, (const T *)in, rows, f)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_swiglu_bwd(mt_backend *be, void *din, const void *dout, const void *in,
                                int64_t rows, int64_t f) {
  if (rows <= 0 || f <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_swiglu_bwd<T>, grid_for(rows * f, TPB), TPB, 0, st)(
                             (T *)din, (const T *)dout, (const T *)in, rows, f)));
  MT_CUDA_LAUNCHED();
}
