/* cuda/cuda_optimizer.cu — the optimizer ops of the CUDA backend, op-table
 * entries included: the AdamW update (mt_adamw_update of core/scalar_math.h,
 * shared with cpu/cpu_optimizer.c; step constants from mt_adamw_coef_make,
 * as cpu/) and the reductions of the gradient norm (sum, sum of squares,
 * sum of squares accumulated on the device). Reductions: a fixed grid of
 * CUDA_RED_BLOCKS blocks, each thread a strided double sum, then fixed
 * shared-memory trees: deterministic, no atomics; sum_f32 and sumsq_f32
 * synchronise to return the value (the backend's pinned red_host). */
#include "cuda_dev.cuh"

#define TPB 256

/* ---- AdamW: mt_adamw_update (core/scalar_math.h), shared with cpu/ ---- */

template <typename T>
__global__ void k_adamw(mt_adamw_coef c, float *master, float *m, float *v, const float *grad,
                        T *param_lowp, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float w = mt_adamw_update(c, grad[i], &m[i], &v[i], master[i]);
    master[i] = w;
    if (param_lowp) param_lowp[i] = from_f<T>(w);
  }
}

/* Step constants (bias corrections in double, rounded to float) from
 * mt_adamw_coef_make, exactly as cpu_adamw. */
extern "C" void cuda_adamw(mt_backend *be, const mt_adamw_hparams *hp, float *master, float *m,
                           float *v, const float *grad, void *param_lowp, int64_t n) {
  MT_ASSERT(hp->step >= 1);
  const mt_adamw_coef c = mt_adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                             hp->weight_decay, hp->grad_scale, hp->step);
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_adamw<T>, grid_for(n, TPB), TPB, 0, st)(c, master, m, v, grad,
                                                               (T *)param_lowp, n)));
  MT_CUDA_LAUNCHED();
}

/* ---- reductions: fixed grid of CUDA_RED_BLOCKS blocks x TPB threads, each
 * thread a strided double sum, then fixed shared-memory trees ---- */

__global__ void k_reduce_part(const float *x, int64_t n, int squares, double *part) {
  __shared__ double sh[TPB];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)TPB + threadIdx.x; i < n; i += (int64_t)gridDim.x * TPB) {
    double v = (double)x[i];
    acc += squares ? v * v : v;
  }
  double s = block_sum_double(acc, sh);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* The final tree; the result goes to part[CUDA_RED_BLOCKS], or is added to
 * *acc (one thread, so deterministic) when acc is non-NULL. */
__global__ void k_reduce_final(double *part, double *out_acc) {
  __shared__ double sh[TPB];
  double acc = 0.0;
  for (int i = threadIdx.x; i < CUDA_RED_BLOCKS; i += TPB) acc += part[i];
  double s = block_sum_double(acc, sh);
  if (threadIdx.x == 0) {
    if (out_acc)
      *out_acc += s;
    else
      part[CUDA_RED_BLOCKS] = s;
  }
}

/* The two kernels: CUDA_RED_BLOCKS partials in red_dev[0..), the result in
 * red_dev[CUDA_RED_BLOCKS], or added to *acc (device) when acc is non-NULL. */
static void reduce_launch(cudaStream_t st, const float *x, int64_t n, int squares,
                          double *red_dev, double *acc) {
  MT_LAUNCH(k_reduce_part, CUDA_RED_BLOCKS, TPB, 0, st)(x, n, squares, red_dev);
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_reduce_final, 1, TPB, 0, st)(red_dev, acc);
  MT_CUDA_LAUNCHED();
}

static double cuda_reduce(mt_backend *be, const float *x, int64_t n, int squares) {
  cuda_impl *im = cuda_impl_of(be);
  if (n <= 0) return 0.0;
  reduce_launch(im->stream, x, n, squares, im->red_dev, NULL);
  MT_CUDA_CHECK(cudaMemcpyAsync(im->red_host, im->red_dev + CUDA_RED_BLOCKS, sizeof(double),
                                cudaMemcpyDeviceToHost, im->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(im->stream));
  return im->red_host[0];
}

extern "C" double cuda_sumsq_f32(mt_backend *be, const float *x, int64_t n) {
  return cuda_reduce(be, x, n, 1);
}

extern "C" double cuda_sum_f32(mt_backend *be, const float *x, int64_t n) {
  return cuda_reduce(be, x, n, 0);
}

/* The same two kernels as sumsq_f32 (so the same double), the final one
 * adding to *acc on the stream: no host round trip. n = 0 adds 0.0, as the
 * cpu backend does (x + 0.0 == x bitwise except -0.0, which acc never is). */
extern "C" void cuda_sumsq_acc_f32(mt_backend *be, double *acc, const float *x, int64_t n) {
  if (n <= 0) return;
  cuda_impl *im = cuda_impl_of(be);
  reduce_launch(im->stream, x, n, 1, im->red_dev, acc);
}
