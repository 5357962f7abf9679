/* cuda/cuda_elementwise.cu — the elementwise ops of the CUDA backend,
 * op-table entries included: init_normal, fill, cast, add / axpy / scale,
 * and the hidden-state dropout (fused residual add) and its backward (specs:
 * core/backend.h; reference semantics: cpu/cpu_elementwise.c). Every op
 * mirrors cpu/ (same formulas, same fp32 evaluation order per element); RNG
 * draws come from the header-only Philox of core/rng.h, four mask values per
 * Philox call (cuda_philox4.cuh), so init values and dropout masks are
 * bitwise cpu/'s. */
#include "cuda_dev.cuh"
#include "cuda_philox4.cuh"

#define TPB 256

/* ---- init / fill / cast ---- */

template <typename T>
__global__ void k_init_normal(T *dst, int64_t rows, int64_t cols, int64_t ld_global,
                              int64_t row_offset, int64_t col_offset, mt_rng_key_t key,
                              float std) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / cols, c = i - r * cols;
    uint64_t ctr = (uint64_t)(row_offset + r) * (uint64_t)ld_global + (uint64_t)(col_offset + c);
    dst[i] = from_f<T>(std * mt_rng_normal(key, ctr));
  }
}

extern "C" void cuda_init_normal(mt_backend *be, void *dst, int64_t rows, int64_t cols,
                                 int64_t ld_global, int64_t row_offset, int64_t col_offset,
                                 mt_rng_key_t key, float std) {
  if (rows <= 0 || cols <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_init_normal<T>, grid_for(rows * cols, TPB), TPB, 0, st)(
                     (T *)dst, rows, cols, ld_global, row_offset, col_offset, key, std)));
  MT_CUDA_LAUNCHED();
}

template <typename T> __global__ void k_fill(T *dst, float value, int64_t n) {
  const T v = from_f<T>(value);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = v;
}

extern "C" void cuda_fill(mt_backend *be, void *dst, mt_dtype t, float value, int64_t n) {
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_fill<T>, grid_for(n, TPB), TPB, 0, st)((T *)dst, value, n)));
  MT_CUDA_LAUNCHED();
}

template <typename D, typename S> __global__ void k_cast(D *dst, const S *src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = from_f<D>(to_f(src[i]));
}

extern "C" void cuda_cast(mt_backend *be, void *dst, mt_dtype dst_t, const void *src,
                          mt_dtype src_t, int64_t n) {
  if (dst_t == src_t) {
    cuda_memcpy_d2d(be, dst, src, (size_t)n * mt_dtype_size(dst_t));
    return;
  }
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  if (dst_t == MT_BF16 && src_t == MT_F32)
    MT_LAUNCH((k_cast<bf16, float>), grid_for(n, TPB), TPB, 0, st)
    ((bf16 *)dst, (const float *)src, n);
  else if (dst_t == MT_F32 && src_t == MT_BF16)
    MT_LAUNCH((k_cast<float, bf16>), grid_for(n, TPB), TPB, 0, st)
    ((float *)dst, (const bf16 *)src, n);
  else
    mt_fatal("cuda cast: unsupported %s -> %s", mt_dtype_name(src_t), mt_dtype_name(dst_t));
  MT_CUDA_LAUNCHED();
}

/* ---- elementwise arithmetic ---- */

template <typename T> __global__ void k_add(T *out, const T *a, const T *b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

extern "C" void cuda_add(mt_backend *be, void *out, const void *a, const void *b, int64_t n) {
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(t, (MT_LAUNCH(k_add<T>, grid_for(n, TPB), TPB, 0, st)((T *)out, (const T *)a,
                                                             (const T *)b, n)));
  MT_CUDA_LAUNCHED();
}

__global__ void k_axpy(float *y, float alpha, const float *x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] += alpha * x[i];
}

extern "C" void cuda_axpy_f32(mt_backend *be, float *y, float alpha, const float *x, int64_t n) {
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_LAUNCH(k_axpy, grid_for(n, TPB), TPB, 0, st)(y, alpha, x, n);
  MT_CUDA_LAUNCHED();
}

__global__ void k_scale(float *x, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    x[i] *= alpha;
}

extern "C" void cuda_scale_f32(mt_backend *be, float *x, float alpha, int64_t n) {
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_LAUNCH(k_scale, grid_for(n, TPB), TPB, 0, st)(x, alpha, n);
  MT_CUDA_LAUNCHED();
}

/* ---- hidden-state dropout: counter of (si, bi, hi) as in mt_dropout_desc ---- */

static drop_args drop_args_of(const mt_dropout_desc *d) {
  drop_args a;
  a.p = d->p;
  a.inv = 1.0f / (1.0f - d->p);
  a.key = d->key;
  a.s = d->s, a.b = d->b, a.h = d->h;
  a.s_offset = d->s_offset, a.s_full = d->s_full;
  a.h_offset = d->h_offset, a.h_full = d->h_full;
  return a;
}

template <typename T>
__global__ void k_dropout_add(drop_args a, const int64_t *ids, T *out, const T *x, const T *res,
                              int64_t n) {
  if (!ids) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
      out[i] = from_f<T>(to_f(res[i]) + to_f(x[i]));
    return;
  }
  const int64_t items = a.s * a.b * drop_groups(a);
  for (int64_t it = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; it < items;
       it += (int64_t)gridDim.x * blockDim.x)
    drop_item(a, ids, it, [&](int64_t i, bool keep) {
      const float xv = to_f(x[i]), rv = to_f(res[i]);
      out[i] = from_f<T>(rv + (keep ? xv * a.inv : 0.0f));
    });
}

extern "C" void cuda_dropout_add_fwd(mt_backend *be, const mt_dropout_desc *d, void *out,
                                     const void *x, const void *residual) {
  const int64_t *ids = d->p > 0.0f ? cuda_upload_ids(be, d->sample_ids, d->b) : NULL;
  const int64_t n = (int64_t)d->s * d->b * d->h;
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  drop_args a = drop_args_of(d);
  const int64_t work = ids ? (int64_t)d->s * d->b * ((d->h + 3) / 4 + 1) : n;
  MT_DISPATCH(t, (MT_LAUNCH(k_dropout_add<T>, grid_for(work, TPB), TPB, 0, st)(
                     a, ids, (T *)out, (const T *)x, (const T *)residual, n)));
  MT_CUDA_LAUNCHED();
}

template <typename T>
__global__ void k_dropout_bwd(drop_args a, const int64_t *ids, T *dx, const T *dout, int64_t n) {
  (void)n;
  const int64_t items = a.s * a.b * drop_groups(a);
  for (int64_t it = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; it < items;
       it += (int64_t)gridDim.x * blockDim.x)
    drop_item(a, ids, it, [&](int64_t i, bool keep) {
      dx[i] = from_f<T>(keep ? to_f(dout[i]) * a.inv : 0.0f);
    });
}

extern "C" void cuda_dropout_bwd(mt_backend *be, const mt_dropout_desc *d, void *dx,
                                 const void *dout) {
  if (d->p <= 0.0f) {
    cuda_memcpy_d2d(be, dx, dout, (size_t)d->s * d->b * d->h * mt_dtype_size(be->dtype));
    return;
  }
  const int64_t *ids_dev = cuda_upload_ids(be, d->sample_ids, d->b);
  const int64_t n = (int64_t)d->s * d->b * d->h;
  if (n <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  drop_args a = drop_args_of(d);
  const int64_t work = (int64_t)d->s * d->b * ((d->h + 3) / 4 + 1);
  MT_DISPATCH(t, (MT_LAUNCH(k_dropout_bwd<T>, grid_for(work, TPB), TPB, 0, st)(a, ids_dev, (T *)dx,
                                                                     (const T *)dout, n)));
  MT_CUDA_LAUNCHED();
}
