/* cuda/cuda_norm.cu — the normalisations of the CUDA backend, forward and
 * backward, op-table entries included: LayerNorm (Ba et al. 2016), RMSNorm
 * (Zhang & Sennrich 2019) and qk_layernorm (per-head LayerNorm or RMSNorm of
 * the q and k heads of the GQA qkv layout, mt_qknorm_desc). Specs:
 * core/backend.h; reference semantics: cpu/cpu_norm.c.
 *
 * One warp per row (or head) for the statistics, the output and the input
 * gradient; fp32 statistics, LayerNorm's variance in two passes. Each
 * lane sums the elements j = lane, lane + 32, ... of the row in order, then
 * warp_sum's butterfly: that order is the kernels' definition.
 *
 * LayerNorm and RMSNorm forward and input gradient (issue 32): rows whose
 * width is a multiple of 16 bytes with 16-byte aligned operands run the
 * "vec" kernels: the warp copies its row (and dout's) from global memory
 * ONCE with 16-byte loads into shared memory, sums from there in the order
 * above (so the statistics and outputs are bitwise those of the strided
 * kernels), and writes the outputs with 16-byte loads of w, b, din and
 * 16-byte stores. Up to NORM_ROWS_PER_BLOCK rows per block, as many as fit
 * NORM_SMEM_MAX bytes of staged rows (h up to 24576 bf16 / 12288 fp32 in
 * the forward, half that in the backward); other shapes run the strided
 * kernels (2-byte or 4-byte loads, the row read once per pass).
 *
 * Determinism without float atomics: the weight/bias gradients are the
 * chunked column reduction (cuda_col_reduce.cuh: per-chunk partials over
 * MT_COL_CHUNK consecutive rows, summed in row order as cpu/ does, in each
 * family's partial kernel; then cuda_col_reduce sums the chunks in order per
 * column).
 */
#include "cuda_col_reduce.cuh"

#define ROWS_PER_BLOCK 4 /* warp-per-row kernels: 4 warps per block */

static unsigned warps_grid(int64_t nwarps) {
  return grid_x_checked((nwarps + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "a warp-per-row kernel");
}

/* ---- the vec kernels' launch shape ---- */

#define NORM_ROWS_PER_BLOCK 4
#define NORM_SMEM_MAX (48 << 10) /* no opt-in attribute needed */

/* Rows per block of a vec kernel staging `bufs` rows of h elements of
 * dtype t per row, or 0 (the strided kernels then) when h is not a multiple
 * of 16 bytes, an operand is not 16-byte aligned or one row's buffers pass
 * NORM_SMEM_MAX. */
static int vec_rows(mt_dtype t, int64_t h, int bufs, const void *const *ptrs, int nptr) {
  const int64_t es = (int64_t)mt_dtype_size(t), row = (int64_t)bufs * h * es;
  if ((h * es) % 16 != 0 || row > NORM_SMEM_MAX) return 0;
  for (int k = 0; k < nptr; k++)
    if (ptrs[k] && (uintptr_t)ptrs[k] % 16 != 0) return 0;
  const int64_t r = NORM_SMEM_MAX / row;
  return r < NORM_ROWS_PER_BLOCK ? (int)r : NORM_ROWS_PER_BLOCK;
}

static unsigned vec_grid(int64_t rows, int rpb) {
  return grid_x_checked((rows + rpb - 1) / rpb, "a norm kernel");
}

/* ---- LayerNorm (Ba et al. 2016), fp32 statistics, two-pass variance ---- */

template <typename T>
__global__ void k_ln_fwd(T *out, float *mean, float *rstd, const T *in, const T *w, const T *b,
                         int64_t rows, int64_t h, float eps) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h;
  T *y = out + r * h;
  float s = 0.0f;
  for (int64_t j = lane; j < h; j += 32) s += to_f(x[j]);
  const float mu = warp_sum(s) / (float)h;
  float v = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float t = to_f(x[j]) - mu;
    v += t * t;
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) / (float)h + eps);
  for (int64_t j = lane; j < h; j += 32)
    y[j] = from_f<T>((to_f(x[j]) - mu) * rs * to_f(w[j]) + to_f(b[j]));
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

/* The vec form of k_ln_fwd (bitwise equal): the row staged in shared
 * memory, rows_per_block = blockDim.x / 32 warps, one row each. */
template <typename T>
__global__ void k_ln_fwd_vec(T *out, float *mean, float *rstd, const T *in, const T *w,
                             const T *b, int64_t rows, int64_t h, float eps) {
  MT_DYN_SMEM(uint4, nsm);
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + wid;
  if (r >= rows) return;
  constexpr int N = v16<T>::N;
  const int64_t nv = h / N;
  uint4 *sv = nsm + wid * nv;
  const T *x = (const T *)sv;
  stage_row(sv, in + r * h, nv, lane);
  float s = 0.0f;
  for (int64_t j = lane; j < h; j += 32) s += to_f(x[j]);
  const float mu = warp_sum(s) / (float)h;
  float v = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float t = to_f(x[j]) - mu;
    v += t * t;
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) / (float)h + eps);
  const uint4 *wv = (const uint4 *)w, *bv = (const uint4 *)b;
  uint4 *yv = (uint4 *)(out + r * h);
  for (int64_t k = lane; k < nv; k += 32) {
    float xf[N], wf[N], bf[N], y[N];
    v16_load<T>(xf, sv + k);
    v16_load<T>(wf, wv + k);
    v16_load<T>(bf, bv + k);
#pragma unroll
    for (int e = 0; e < N; e++) y[e] = (xf[e] - mu) * rs * wf[e] + bf[e];
    v16_store<T>(yv + k, y);
  }
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

extern "C" void cuda_layernorm_fwd(mt_backend *be, void *out, float *mean, float *rstd,
                                   const void *in, const void *w, const void *b, int64_t rows,
                                   int64_t h, float eps) {
  if (rows <= 0 || h <= 0) return;
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const void *const ptrs[4] = {out, in, w, b};
  const int rpb = vec_rows(t, h, 1, ptrs, 4);
  const size_t sm = (size_t)rpb * (size_t)h * mt_dtype_size(t);
  if (rpb)
    MT_DISPATCH(t, (MT_LAUNCH(k_ln_fwd_vec<T>, vec_grid(rows, rpb), 32 * rpb, sm, st)(
                       (T *)out, mean, rstd, (const T *)in, (const T *)w, (const T *)b, rows, h,
                       eps)));
  else
    MT_DISPATCH(t, (MT_LAUNCH(k_ln_fwd<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                       (T *)out, mean, rstd, (const T *)in, (const T *)w, (const T *)b, rows, h,
                       eps)));
  MT_CUDA_LAUNCHED();
}

/* din (accumulate), one warp per row. */
template <typename T>
__global__ void k_ln_bwd_dx(T *din, const T *dout, const T *in, const T *w, const float *mean,
                            const float *rstd, int64_t rows, int64_t h) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h, *g = dout + r * h;
  T *dx = din + r * h;
  const float mu = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs, gw = to_f(g[j]) * to_f(w[j]);
    sg += gw;
    sgx += gw * xh;
  }
  const float mg = warp_sum(sg) / (float)h, mgx = warp_sum(sgx) / (float)h;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs;
    dx[j] = from_f<T>(to_f(dx[j]) + rs * (to_f(g[j]) * to_f(w[j]) - mg - xh * mgx));
  }
}

/* The vec form of k_ln_bwd_dx (bitwise equal): the rows of in and dout
 * staged in shared memory. */
template <typename T>
__global__ void k_ln_bwd_dx_vec(T *din, const T *dout, const T *in, const T *w, const float *mean,
                                const float *rstd, int64_t rows, int64_t h) {
  MT_DYN_SMEM(uint4, nsm);
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + wid;
  if (r >= rows) return;
  constexpr int N = v16<T>::N;
  const int64_t nv = h / N;
  uint4 *sx = nsm + 2 * wid * nv, *sg = sx + nv;
  const T *x = (const T *)sx, *g = (const T *)sg;
  stage_row(sx, in + r * h, nv, lane);
  stage_row(sg, dout + r * h, nv, lane);
  const float mu = mean[r], rs = rstd[r];
  float sgs = 0.0f, sgx = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs, gw = to_f(g[j]) * to_f(w[j]);
    sgs += gw;
    sgx += gw * xh;
  }
  const float mg = warp_sum(sgs) / (float)h, mgx = warp_sum(sgx) / (float)h;
  const uint4 *wv = (const uint4 *)w;
  uint4 *dv = (uint4 *)(din + r * h);
  for (int64_t k = lane; k < nv; k += 32) {
    float xf[N], gf[N], wf[N], d[N];
    v16_load<T>(xf, sx + k);
    v16_load<T>(gf, sg + k);
    v16_load<T>(wf, wv + k);
    v16_load<T>(d, dv + k);
#pragma unroll
    for (int e = 0; e < N; e++) {
      float xh = (xf[e] - mu) * rs;
      d[e] = d[e] + rs * (gf[e] * wf[e] - mg - xh * mgx);
    }
    v16_store<T>(dv + k, d);
  }
}

/* part[c] = {dw partial [h], db partial [h]} over rows of chunk c. */
template <typename T>
__global__ void k_ln_bwd_part(float *part, const T *dout, const T *in, const float *mean,
                              const float *rstd, int64_t rows, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  col_chunk_partials<2>(part, 2 * h, rows, h, j, [&](int64_t r, float *acc) {
    float g = to_f(dout[r * h + j]);
    float xh = (to_f(in[r * h + j]) - mean[r]) * rstd[r];
    acc[0] += g * xh;
    acc[1] += g;
  });
}

extern "C" void cuda_layernorm_bwd(mt_backend *be, void *din, float *dw, float *db,
                                   const void *dout, const void *in, const void *w,
                                   const float *mean, const float *rstd, int64_t rows, int64_t h) {
  if (rows <= 0 || h <= 0) return;
  int64_t nch;
  float *part = cuda_col_part(be, rows, 2, h, &nch);
  const mt_dtype t = be->dtype;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const void *const ptrs[4] = {din, dout, in, w};
  const int rpb = vec_rows(t, h, 2, ptrs, 4);
  const size_t sm = (size_t)rpb * 2 * (size_t)h * mt_dtype_size(t);
  if (rpb)
    MT_DISPATCH(t, (MT_LAUNCH(k_ln_bwd_dx_vec<T>, vec_grid(rows, rpb), 32 * rpb, sm, st)(
                       (T *)din, (const T *)dout, (const T *)in, (const T *)w, mean, rstd, rows,
                       h)));
  else
    MT_DISPATCH(t, (MT_LAUNCH(k_ln_bwd_dx<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                       (T *)din, (const T *)dout, (const T *)in, (const T *)w, mean, rstd, rows,
                       h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(t, (MT_LAUNCH(k_ln_bwd_part<T>, dim3(col_blocks(h, CUDA_COL_TPB), grid_y_for(nch)),
                            CUDA_COL_TPB, 0,
                            st)(part, (const T *)dout, (const T *)in, mean, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  float *const out[2] = {dw, db};
  cuda_col_reduce(st, out, 2, part, nch, h);
}

/* ---- RMSNorm (Zhang & Sennrich 2019) ---- */

template <typename T>
__global__ void k_rms_fwd(T *out, float *rstd, const T *in, const T *w, int64_t rows, int64_t h,
                          float eps) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h;
  T *y = out + r * h;
  float ss = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float v = to_f(x[j]);
    ss += v * v;
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)h + eps);
  for (int64_t j = lane; j < h; j += 32) y[j] = from_f<T>(to_f(x[j]) * rs * to_f(w[j]));
  if (lane == 0) rstd[r] = rs;
}

/* din (accumulate), one warp per row. */
template <typename T>
__global__ void k_rms_bwd_dx(T *din, const T *dout, const T *in, const T *w, const float *rstd,
                             int64_t rows, int64_t h) {
  const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const T *x = in + r * h, *g = dout + r * h;
  T *dx = din + r * h;
  const float rs = rstd[r];
  float sgx = 0.0f;
  for (int64_t j = lane; j < h; j += 32) sgx += to_f(g[j]) * to_f(w[j]) * (to_f(x[j]) * rs);
  const float mgx = warp_sum(sgx) / (float)h;
  for (int64_t j = lane; j < h; j += 32) {
    float xh = to_f(x[j]) * rs;
    dx[j] = from_f<T>(to_f(dx[j]) + rs * (to_f(g[j]) * to_f(w[j]) - xh * mgx));
  }
}

/* The vec form of k_rms_fwd (bitwise equal). */
template <typename T>
__global__ void k_rms_fwd_vec(T *out, float *rstd, const T *in, const T *w, int64_t rows,
                              int64_t h, float eps) {
  MT_DYN_SMEM(uint4, nsm);
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + wid;
  if (r >= rows) return;
  constexpr int N = v16<T>::N;
  const int64_t nv = h / N;
  uint4 *sv = nsm + wid * nv;
  const T *x = (const T *)sv;
  stage_row(sv, in + r * h, nv, lane);
  float ss = 0.0f;
  for (int64_t j = lane; j < h; j += 32) {
    float v = to_f(x[j]);
    ss += v * v;
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)h + eps);
  const uint4 *wv = (const uint4 *)w;
  uint4 *yv = (uint4 *)(out + r * h);
  for (int64_t k = lane; k < nv; k += 32) {
    float xf[N], wf[N], y[N];
    v16_load<T>(xf, sv + k);
    v16_load<T>(wf, wv + k);
#pragma unroll
    for (int e = 0; e < N; e++) y[e] = xf[e] * rs * wf[e];
    v16_store<T>(yv + k, y);
  }
  if (lane == 0) rstd[r] = rs;
}

/* The vec form of k_rms_bwd_dx (bitwise equal). */
template <typename T>
__global__ void k_rms_bwd_dx_vec(T *din, const T *dout, const T *in, const T *w, const float *rstd,
                                 int64_t rows, int64_t h) {
  MT_DYN_SMEM(uint4, nsm);
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + wid;
  if (r >= rows) return;
  constexpr int N = v16<T>::N;
  const int64_t nv = h / N;
  uint4 *sx = nsm + 2 * wid * nv, *sg = sx + nv;
  const T *x = (const T *)sx, *g = (const T *)sg;
  stage_row(sx, in + r * h, nv, lane);
  stage_row(sg, dout + r * h, nv, lane);
  const float rs = rstd[r];
  float sgx = 0.0f;
  for (int64_t j = lane; j < h; j += 32) sgx += to_f(g[j]) * to_f(w[j]) * (to_f(x[j]) * rs);
  const float mgx = warp_sum(sgx) / (float)h;
  const uint4 *wv = (const uint4 *)w;
  uint4 *dv = (uint4 *)(din + r * h);
  for (int64_t k = lane; k < nv; k += 32) {
    float xf[N], gf[N], wf[N], d[N];
    v16_load<T>(xf, sx + k);
    v16_load<T>(gf, sg + k);
    v16_load<T>(wf, wv + k);
    v16_load<T>(d, dv + k);
#pragma unroll
    for (int e = 0; e < N; e++) {
      float xh = xf[e] * rs;
      d[e] = d[e] + rs * (gf[e] * wf[e] - xh * mgx);
    }
    v16_store<T>(dv + k, d);
  }
}

/* part[c][j] = sum over the rows of chunk c (in order) of dout * xhat. */
template <typename T>
__global__ void k_rms_bwd_part(float *part, const T *dout, const T *in, const float *rstd,
                               int64_t rows, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  col_chunk_partials<1>(part, h, rows, h, j, [&](int64_t r, float *acc) {
    acc[0] += to_f(dout[r * h + j]) * (to_f(in[r * h + j]) * rstd[r]);
  });
}

extern "C" void cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in,
                                 const void *w, int64_t rows, int64_t h, float eps) {
  if (rows <= 0 || h <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const void *const ptrs[3] = {out, in, w};
  const int rpb = vec_rows(be->dtype, h, 1, ptrs, 3);
  const size_t sm = (size_t)rpb * (size_t)h * mt_dtype_size(be->dtype);
  if (rpb)
    MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rms_fwd_vec<T>, vec_grid(rows, rpb), 32 * rpb, sm, st)(
                               (T *)out, rstd, (const T *)in, (const T *)w, rows, h, eps)));
  else
    MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rms_fwd<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                               (T *)out, rstd, (const T *)in, (const T *)w, rows, h, eps)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout,
                                 const void *in, const void *w, const float *rstd, int64_t rows,
                                 int64_t h) {
  if (rows <= 0 || h <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  int64_t nch;
  float *part = cuda_col_part(be, rows, 1, h, &nch);
  const void *const ptrs[4] = {din, dout, in, w};
  const int rpb = vec_rows(be->dtype, h, 2, ptrs, 4);
  const size_t sm = (size_t)rpb * 2 * (size_t)h * mt_dtype_size(be->dtype);
  if (rpb)
    MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rms_bwd_dx_vec<T>, vec_grid(rows, rpb), 32 * rpb, sm, st)(
                               (T *)din, (const T *)dout, (const T *)in, (const T *)w, rstd, rows,
                               h)));
  else
    MT_DISPATCH(be->dtype,
                (MT_LAUNCH(k_rms_bwd_dx<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                    (T *)din, (const T *)dout, (const T *)in, (const T *)w, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(
      be->dtype,
      (MT_LAUNCH(k_rms_bwd_part<T>, dim3(col_blocks(h, CUDA_COL_TPB), grid_y_for(nch)),
                 CUDA_COL_TPB, 0, st)(part, (const T *)dout, (const T *)in, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  float *const out[1] = {dw};
  cuda_col_reduce(st, out, 1, part, nch, h);
}

/* ---- qk_layernorm: per-head LayerNorm / RMSNorm of q and k heads ---- */

struct qkn_args {
  int64_t rows, ng, npg, hn;
  int rms;
  float eps;
};

/* One warp per (u = row * ng + g, slot <= npg + 1); slot npg + 1 (v) copies. */
template <typename T>
__global__ void k_qkn_fwd(qkn_args a, T *out, float *mean, float *rstd, const T *in, const T *wq,
                          const T *bq, const T *wk, const T *bk) {
  const int64_t wid = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (wid >= a.rows * a.ng * (a.npg + 2)) return;
  const int64_t slot = wid % (a.npg + 2), u = wid / (a.npg + 2), hn = a.hn;
  const T *x = in + wid * hn;
  T *y = out + wid * hn;
  if (slot == a.npg + 1) {
    for (int64_t j = lane; j < hn; j += 32) y[j] = x[j];
    return;
  }
  const T *w = slot == a.npg ? wk : wq, *b = slot == a.npg ? bk : bq;
  float mu = 0.0f;
  if (!a.rms) {
    float s = 0.0f;
    for (int64_t j = lane; j < hn; j += 32) s += to_f(x[j]);
    mu = warp_sum(s) / (float)hn;
  }
  float v = 0.0f;
  for (int64_t j = lane; j < hn; j += 32) {
    float t = to_f(x[j]) - mu;
    v += t * t;
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) / (float)hn + a.eps);
  for (int64_t j = lane; j < hn; j += 32) {
    float o = (to_f(x[j]) - mu) * rs * to_f(w[j]);
    y[j] = from_f<T>(a.rms ? o : o + to_f(b[j]));
  }
  if (lane == 0) {
    const int64_t st = u * (a.npg + 1) + slot;
    rstd[st] = rs;
    if (!a.rms) mean[st] = mu;
  }
}

/* din (overwrite), one warp per head; v heads copy dout. */
template <typename T>
__global__ void k_qkn_bwd_dx(qkn_args a, T *din, const T *dout, const T *in, const T *wq,
                             const T *wk, const float *mean, const float *rstd) {
  const int64_t wid = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (wid >= a.rows * a.ng * (a.npg + 2)) return;
  const int64_t slot = wid % (a.npg + 2), u = wid / (a.npg + 2), hn = a.hn;
  const T *x = in + wid * hn, *g = dout + wid * hn;
  T *dx = din + wid * hn;
  if (slot == a.npg + 1) {
    for (int64_t j = lane; j < hn; j += 32) dx[j] = g[j];
    return;
  }
  const T *w = slot == a.npg ? wk : wq;
  const int64_t st = u * (a.npg + 1) + slot;
  const float mu = a.rms ? 0.0f : mean[st], rs = rstd[st];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t j = lane; j < hn; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs, gw = to_f(g[j]) * to_f(w[j]);
    sg += gw;
    sgx += gw * xh;
  }
  const float mg = a.rms ? 0.0f : warp_sum(sg) / (float)hn, mgx = warp_sum(sgx) / (float)hn;
  for (int64_t j = lane; j < hn; j += 32) {
    float xh = (to_f(x[j]) - mu) * rs;
    dx[j] = from_f<T>(rs * (to_f(g[j]) * to_f(w[j]) - mg - xh * mgx));
  }
}

/* part[c][t][j], t = {dwq, dbq, dwk, dbk} (t = blockIdx.z): sums over the
 * rows of chunk c, then groups, then the q slots (t < 2) or the k slot, in
 * that order. */
template <typename T>
__global__ void k_qkn_bwd_part(qkn_args a, float *part, const T *dout, const T *in,
                               const float *mean, const float *rstd) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int t = (int)blockIdx.z;
  if (j >= a.hn) return;
  const int64_t s0 = t < 2 ? 0 : a.npg, s1 = t < 2 ? a.npg : a.npg + 1;
  col_chunk_partials<1>(part + t * a.hn, 4 * a.hn, a.rows, a.hn, j, [&](int64_t r, float *acc) {
    for (int64_t g = 0; g < a.ng; g++)
      for (int64_t slot = s0; slot < s1; slot++) {
        const int64_t u = r * a.ng + g, o = (u * (a.npg + 2) + slot) * a.hn + j;
        const float gv = to_f(dout[o]);
        if (t & 1) {
          acc[0] += gv;
        } else {
          const int64_t st = u * (a.npg + 1) + slot;
          acc[0] += gv * ((to_f(in[o]) - (a.rms ? 0.0f : mean[st])) * rstd[st]);
        }
      }
  });
}

static qkn_args qkn_args_of(const mt_qknorm_desc *d) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0);
  qkn_args a;
  a.rows = d->rows;
  a.ng = ng;
  a.npg = d->np / ng;
  a.hn = d->hn;
  a.rms = d->rms;
  a.eps = d->eps;
  return a;
}

extern "C" void cuda_qknorm_fwd(mt_backend *be, const mt_qknorm_desc *d, void *out, float *mean,
                                float *rstd, const void *in, const void *wq, const void *bq,
                                const void *wk, const void *bk) {
  qkn_args a = qkn_args_of(d);
  const int64_t heads = a.rows * a.ng * (a.npg + 2);
  if (heads <= 0 || a.hn <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_qkn_fwd<T>, warps_grid(heads), 32 * ROWS_PER_BLOCK, 0, st)(
                             a, (T *)out, mean, rstd, (const T *)in, (const T *)wq,
                             (const T *)bq, (const T *)wk, (const T *)bk)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_qknorm_bwd(mt_backend *be, const mt_qknorm_desc *d, void *din, float *dwq,
                                float *dbq, float *dwk, float *dbk, const void *dout,
                                const void *in, const void *wq, const void *wk,
                                const float *mean, const float *rstd) {
  qkn_args a = qkn_args_of(d);
  const int64_t heads = a.rows * a.ng * (a.npg + 2);
  if (heads <= 0 || a.hn <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  int64_t nch;
  float *part = cuda_col_part(be, a.rows, 4, a.hn, &nch);
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_qkn_bwd_dx<T>, warps_grid(heads), 32 * ROWS_PER_BLOCK, 0, st)(
                             a, (T *)din, (const T *)dout, (const T *)in, (const T *)wq,
                             (const T *)wk, mean, rstd)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(
      be->dtype,
      (MT_LAUNCH(k_qkn_bwd_part<T>, dim3(col_blocks(a.hn, CUDA_COL_TPB), grid_y_for(nch), 4),
                 CUDA_COL_TPB, 0, st)(a, part, (const T *)dout, (const T *)in, mean, rstd)));
  MT_CUDA_LAUNCHED();
  float *const out[4] = {dwq, a.rms ? NULL : dbq, dwk, a.rms ? NULL : dbk};
  cuda_col_reduce(st, out, 4, part, nch, a.hn);
}
