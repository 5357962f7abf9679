/* cuda/cuda_elem.cu — elementwise kernels of the CUDA backend: init_normal,
 * fill, cast, add/axpy/scale, deterministic double reductions, AdamW,
 * hidden-state dropout (fused residual add) and its backward, GEMM bias
 * rows, and the MoE token permutations. Every op mirrors cpu/ (same
 * formulas, same fp32 evaluation order per element); RNG draws come from the
 * header-only Philox of core/rng.h, so dropout masks are bitwise equal. */
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

extern "C" void cudak_init_normal(cudaStream_t st, mt_dtype t, void *dst, int64_t rows,
                                  int64_t cols, int64_t ld_global, int64_t row_offset,
                                  int64_t col_offset, mt_rng_key_t key, float std) {
  if (rows <= 0 || cols <= 0) return;
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

extern "C" void cudak_fill(cudaStream_t st, mt_dtype t, void *dst, float value, int64_t n) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_fill<T>, grid_for(n, TPB), TPB, 0, st)((T *)dst, value, n)));
  MT_CUDA_LAUNCHED();
}

template <typename D, typename S> __global__ void k_cast(D *dst, const S *src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = from_f<D>(to_f(src[i]));
}

extern "C" void cudak_cast(cudaStream_t st, void *dst, mt_dtype dst_t, const void *src,
                           mt_dtype src_t, int64_t n) {
  if (n <= 0) return;
  if (dst_t == MT_BF16 && src_t == MT_F32)
    MT_LAUNCH((k_cast<bf16, float>), grid_for(n, TPB), TPB, 0, st)(
        (bf16 *)dst, (const float *)src, n);
  else if (dst_t == MT_F32 && src_t == MT_BF16)
    MT_LAUNCH((k_cast<float, bf16>), grid_for(n, TPB), TPB, 0, st)(
        (float *)dst, (const bf16 *)src, n);
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

extern "C" void cudak_add(cudaStream_t st, mt_dtype t, void *out, const void *a, const void *b,
                          int64_t n) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_add<T>, grid_for(n, TPB), TPB, 0, st)((T *)out, (const T *)a,
                                                                    (const T *)b, n)));
  MT_CUDA_LAUNCHED();
}

__global__ void k_axpy(float *y, float alpha, const float *x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] += alpha * x[i];
}

extern "C" void cudak_axpy(cudaStream_t st, float *y, float alpha, const float *x, int64_t n) {
  if (n <= 0) return;
  MT_LAUNCH(k_axpy, grid_for(n, TPB), TPB, 0, st)(y, alpha, x, n);
  MT_CUDA_LAUNCHED();
}

__global__ void k_scale(float *x, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    x[i] *= alpha;
}

extern "C" void cudak_scale(cudaStream_t st, float *x, float alpha, int64_t n) {
  if (n <= 0) return;
  MT_LAUNCH(k_scale, grid_for(n, TPB), TPB, 0, st)(x, alpha, n);
  MT_CUDA_LAUNCHED();
}

/* ---- reductions: fixed grid of CUDA_RED_BLOCKS blocks x TPB threads, each
 * thread a strided double sum, then fixed shared-memory trees ---- */

__device__ double block_sum_double(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  return sh[0];
}

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

extern "C" void cudak_reduce(cudaStream_t st, const float *x, int64_t n, int squares,
                             double *red_dev, double *acc) {
  MT_LAUNCH(k_reduce_part, CUDA_RED_BLOCKS, TPB, 0, st)(x, n, squares, red_dev);
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_reduce_final, 1, TPB, 0, st)(red_dev, acc);
  MT_CUDA_LAUNCHED();
}

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

extern "C" void cudak_adamw(cudaStream_t st, mt_dtype t, mt_adamw_coef c, float *master,
                            float *m, float *v, const float *grad, void *param_lowp, int64_t n) {
  if (n <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_adamw<T>, grid_for(n, TPB), TPB, 0, st)(c, master, m, v, grad,
                                                                      (T *)param_lowp, n)));
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

extern "C" void cudak_dropout_add(cudaStream_t st, mt_dtype t, const mt_dropout_desc *d,
                                  const int64_t *ids_dev, void *out, const void *x,
                                  const void *residual) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  if (n <= 0) return;
  drop_args a = drop_args_of(d);
  const int64_t *ids = d->p > 0.0f ? ids_dev : NULL;
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

extern "C" void cudak_dropout_bwd(cudaStream_t st, mt_dtype t, const mt_dropout_desc *d,
                                  const int64_t *ids_dev, void *dx, const void *dout) {
  const int64_t n = (int64_t)d->s * d->b * d->h;
  if (n <= 0) return;
  drop_args a = drop_args_of(d);
  const int64_t work = (int64_t)d->s * d->b * ((d->h + 3) / 4 + 1);
  MT_DISPATCH(t, (MT_LAUNCH(k_dropout_bwd<T>, grid_for(work, TPB), TPB, 0, st)(
                     a, ids_dev, (T *)dx, (const T *)dout, n)));
  MT_CUDA_LAUNCHED();
}

/* ---- GEMM bias rows ---- */

template <typename CT, typename BT>
__global__ void k_bias_rows(CT *c, const BT *bias, int64_t m, int64_t n, int64_t ldc,
                            int64_t stride, int batch, int fill) {
  const int64_t per = m * n, total = per * batch;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t bt = i / per, rem = i - bt * per, r = rem / n, col = rem - r * n;
    CT *p = c + bt * stride + r * ldc + col;
    float bv = to_f(bias[col]);
    *p = from_f<CT>(fill ? bv : to_f(*p) + bv);
  }
}

extern "C" void cudak_bias_rows(cudaStream_t st, mt_dtype c_t, mt_dtype bias_t, void *c,
                                const void *bias, int64_t m, int64_t n, int64_t ldc,
                                int64_t stride, int batch, int fill) {
  const int64_t total = m * n * batch;
  if (total <= 0) return;
  const unsigned g = grid_for(total, TPB);
  if (c_t == MT_F32 && bias_t == MT_F32)
    MT_LAUNCH((k_bias_rows<float, float>), g, TPB, 0, st)(
        (float *)c, (const float *)bias, m, n, ldc, stride, batch, fill);
  else if (c_t == MT_BF16 && bias_t == MT_BF16)
    MT_LAUNCH((k_bias_rows<bf16, bf16>), g, TPB, 0, st)(
        (bf16 *)c, (const bf16 *)bias, m, n, ldc, stride, batch, fill);
  else if (c_t == MT_F32 && bias_t == MT_BF16)
    MT_LAUNCH((k_bias_rows<float, bf16>), g, TPB, 0, st)(
        (float *)c, (const bf16 *)bias, m, n, ldc, stride, batch, fill);
  else
    mt_fatal("cuda gemm bias: unsupported C %s with bias %s", mt_dtype_name(c_t),
             mt_dtype_name(bias_t));
  MT_CUDA_LAUNCHED();
}

template <typename BT>
__global__ void k_bias_axpby(bf16 *c, const float *tmp, float beta, const BT *bias, int64_t m,
                             int64_t n, int64_t ldc, int64_t stride, int batch) {
  const int64_t per = m * n, total = per * batch;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t bt = i / per, rem = i - bt * per, r = rem / n, col = rem - r * n;
    bf16 *p = c + bt * stride + r * ldc + col;
    *p = from_f<bf16>(tmp[i] + beta * to_f(*p) + to_f(bias[col]));
  }
}

extern "C" void cudak_bias_axpby_bf16(cudaStream_t st, void *c, const float *tmp, float beta,
                                      const void *bias, mt_dtype bias_t, int64_t m, int64_t n,
                                      int64_t ldc, int64_t stride, int batch) {
  const int64_t total = m * n * batch;
  if (total <= 0) return;
  const unsigned g = grid_for(total, TPB);
  if (bias_t == MT_BF16)
    MT_LAUNCH(k_bias_axpby<bf16>, g, TPB, 0, st)((bf16 *)c, tmp, beta, (const bf16 *)bias, m, n,
                                                ldc, stride, batch);
  else if (bias_t == MT_F32)
    MT_LAUNCH(k_bias_axpby<float>, g, TPB, 0, st)((bf16 *)c, tmp, beta, (const float *)bias, m,
                                                 n, ldc, stride, batch);
  else
    mt_fatal("cuda gemm bias: unsupported bias %s", mt_dtype_name(bias_t));
  MT_CUDA_LAUNCHED();
}

/* ---- MoE permutations ---- */

template <typename T>
__global__ void k_gather_rows(T *dst, const T *src, const int32_t *idx, int64_t n, int64_t h) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * h;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / h, c = i - r * h;
    dst[i] = src[(int64_t)idx[r] * h + c];
  }
}

extern "C" void cudak_moe_gather_rows(cudaStream_t st, mt_dtype t, void *dst, const void *src,
                                      const int32_t *idx, int64_t n, int64_t h) {
  if (n <= 0 || h <= 0) return;
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

extern "C" void cudak_moe_combine_fwd(cudaStream_t st, mt_dtype t, void *y, const void *src,
                                      const int32_t *slot, const float *w, int64_t n_tok, int k,
                                      int64_t h) {
  if (n_tok <= 0 || h <= 0) return;
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

extern "C" void cudak_moe_combine_bwd(cudaStream_t st, mt_dtype t, void *dsrc, float *dw,
                                      const void *dy, const void *src, const int32_t *slot,
                                      const float *w, int64_t n_tok, int k, int64_t h) {
  if (n_tok <= 0 || k <= 0 || h <= 0) return;
  MT_DISPATCH(t, (MT_LAUNCH(k_combine_bwd_dsrc<T>, grid_for(n_tok * k * h, TPB), TPB, 0, st)(
                     (T *)dsrc, (const T *)dy, slot, w, n_tok, k, h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(t, (MT_LAUNCH(k_combine_bwd_dw<T>, grid_x_checked(n_tok * k, "moe_combine_bwd"), TPB,
                            0, st)(dw, (const T *)dy, (const T *)src, slot, k, h)));
  MT_CUDA_LAUNCHED();
}
