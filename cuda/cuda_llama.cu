/* cuda/cuda_llama.cu — the Llama-style block's ops on the GPU: RMSNorm,
 * SwiGLU, rotary embedding and qk normalisation (specs: core/backend.h;
 * reference semantics: cpu/cpu_rmsnorm_swiglu.c, cpu_rope.c, cpu_qknorm.c).
 * The op-table entries are defined here (extern "C", taking the backend),
 * the kernels are private.
 *
 * Determinism without float atomics (as cuda_nn.cu): RMSNorm's dw and the qk
 * norms' weight/bias gradients are per-chunk partials over CUDA_LN_CHUNK
 * consecutive rows (summed in the cpu/ order), then the chunks are summed in
 * order per column. RoPE computes its angles in double precision on the
 * device (pos * base^(-2i/rot_dim), then sin/cos rounded to float), like
 * cpu/'s host table.
 */
#include "cuda_dev.cuh"

#define TPB 256
#define ROWS_PER_BLOCK 4 /* warp-per-row kernels: 4 warps per block */

static unsigned warps_grid(int64_t nwarps) {
  return grid_x_checked((nwarps + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, "a warp-per-row kernel");
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

/* part[c][j] = sum over the rows of chunk c (in order) of dout * xhat. */
template <typename T>
__global__ void k_rms_bwd_part(float *part, const T *dout, const T *in, const float *rstd,
                               int64_t rows, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  for (int64_t c = blockIdx.y; c < nch; c += gridDim.y) {
    const int64_t r0 = c * CUDA_LN_CHUNK;
    const int64_t r1 = r0 + CUDA_LN_CHUNK < rows ? r0 + CUDA_LN_CHUNK : rows;
    float pw = 0.0f;
    for (int64_t r = r0; r < r1; r++)
      pw += to_f(dout[r * h + j]) * (to_f(in[r * h + j]) * rstd[r]);
    part[c * h + j] = pw;
  }
}

__global__ void k_rms_bwd_reduce(float *dw, const float *part, int64_t nch, int64_t h) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= h) return;
  mt_rmsnorm_dw_reduce(dw, part, nch, h, j);
}

extern "C" void cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *in,
                                 const void *w, int64_t rows, int64_t h, float eps) {
  if (rows <= 0 || h <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rms_fwd<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                             (T *)out, rstd, (const T *)in, (const T *)w, rows, h, eps)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_rmsnorm_bwd(mt_backend *be, void *din, float *dw, const void *dout,
                                 const void *in, const void *w, const float *rstd, int64_t rows,
                                 int64_t h) {
  if (rows <= 0 || h <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const int64_t nch = (rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  float *part = (float *)cuda_workspace(be, (size_t)(nch * h) * sizeof(float));
  MT_DISPATCH(be->dtype,
              (MT_LAUNCH(k_rms_bwd_dx<T>, warps_grid(rows), 32 * ROWS_PER_BLOCK, 0, st)(
                  (T *)din, (const T *)dout, (const T *)in, (const T *)w, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(
      be->dtype,
      (MT_LAUNCH(k_rms_bwd_part<T>, dim3(col_blocks(h, CUDA_COL_TPB), grid_y_for(nch)),
                 CUDA_COL_TPB, 0, st)(part, (const T *)dout, (const T *)in, rstd, rows, h)));
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_rms_bwd_reduce, col_blocks(h, CUDA_COL_RED_TPB), CUDA_COL_RED_TPB, 0, st)(
      dw, part, nch, h);
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

/* ---- rotary embedding (Su et al. 2021) ---- */

struct rope_args {
  int64_t b, ng, npg, hn, half, s_offset;
  int interleaved;
  double base, rot_dim;
  float sign;
};

/* One thread per (si, bi, g, slot <= npg, i < half): rotate the pair of
 * channels (a, b) of that q/k head by sign * theta. */
template <typename T> __global__ void k_rope(rope_args a, T *x, int64_t n) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t % a.half, hs = t / a.half; /* hs = (u, slot), slot <= npg */
    const int64_t slot = hs % (a.npg + 1), u = hs / (a.npg + 1);
    const int64_t si = u / (a.b * a.ng);
    const double th = (double)(a.s_offset + si) * pow(a.base, -2.0 * (double)i / a.rot_dim);
    double sd, cd;
    sincos(th, &sd, &cd);
    const float c = (float)cd, s = a.sign * (float)sd;
    T *h = x + (u * (a.npg + 2) + slot) * a.hn;
    const int64_t ia = a.interleaved ? 2 * i : i, ib = a.interleaved ? 2 * i + 1 : i + a.half;
    const float va = to_f(h[ia]), vb = to_f(h[ib]);
    h[ia] = from_f<T>(va * c - vb * s);
    h[ib] = from_f<T>(vb * c + va * s);
  }
}

static void rope_launch(mt_backend *be, const mt_rope_desc *d, void *x, float sign) {
  const int ng = d->ng > 0 ? d->ng : d->np;
  MT_ASSERT(d->np % ng == 0 && d->rot_dim % 2 == 0 && d->rot_dim >= 0 && d->rot_dim <= d->hn);
  rope_args a;
  a.b = d->b;
  a.ng = ng;
  a.npg = d->np / ng;
  a.hn = d->hn;
  a.half = d->rot_dim / 2;
  a.s_offset = d->s_offset;
  a.interleaved = d->interleaved;
  a.base = (double)d->base;
  a.rot_dim = (double)d->rot_dim;
  a.sign = sign;
  const int64_t n = (int64_t)d->s * d->b * ng * (a.npg + 1) * a.half;
  if (n <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_rope<T>, grid_for(n, TPB), TPB, 0, st)(a, (T *)x, n)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_rope_fwd(mt_backend *be, const mt_rope_desc *d, void *qkv) {
  rope_launch(be, d, qkv, 1.0f);
}

extern "C" void cuda_rope_bwd(mt_backend *be, const mt_rope_desc *d, void *dqkv) {
  rope_launch(be, d, dqkv, -1.0f);
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

/* part[c][t][j], t = {dwq, dbq, dwk, dbk}: sums over the rows of chunk c,
 * then groups, then the q slots (t < 2) or the k slot, in that order. */
template <typename T>
__global__ void k_qkn_bwd_part(qkn_args a, float *part, const T *dout, const T *in,
                               const float *mean, const float *rstd) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int t = (int)blockIdx.z;
  if (j >= a.hn) return;
  const int64_t nch = (a.rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  const int64_t s0 = t < 2 ? 0 : a.npg, s1 = t < 2 ? a.npg : a.npg + 1;
  for (int64_t c = blockIdx.y; c < nch; c += gridDim.y) {
    const int64_t r0 = c * CUDA_LN_CHUNK;
    const int64_t r1 = r0 + CUDA_LN_CHUNK < a.rows ? r0 + CUDA_LN_CHUNK : a.rows;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; r++)
      for (int64_t g = 0; g < a.ng; g++)
        for (int64_t slot = s0; slot < s1; slot++) {
          const int64_t u = r * a.ng + g, o = (u * (a.npg + 2) + slot) * a.hn + j;
          const float gv = to_f(dout[o]);
          if (t & 1) {
            acc += gv;
          } else {
            const int64_t st = u * (a.npg + 1) + slot;
            acc += gv * ((to_f(in[o]) - (a.rms ? 0.0f : mean[st])) * rstd[st]);
          }
        }
    part[(c * 4 + t) * a.hn + j] = acc;
  }
}

__global__ void k_qkn_bwd_reduce(float *dwq, float *dbq, float *dwk, float *dbk, const float *part,
                                 int64_t nch, int64_t hn, int rms) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= hn) return;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t c = 0; c < nch; c++)
    for (int t = 0; t < 4; t++) acc[t] += part[(c * 4 + t) * hn + j];
  dwq[j] += acc[0];
  dwk[j] += acc[2];
  if (!rms) {
    dbq[j] += acc[1];
    dbk[j] += acc[3];
  }
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
                             a, (T *)out, mean, rstd, (const T *)in, (const T *)wq, (const T *)bq,
                             (const T *)wk, (const T *)bk)));
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
  const int64_t nch = (a.rows + CUDA_LN_CHUNK - 1) / CUDA_LN_CHUNK;
  float *part = (float *)cuda_workspace(be, (size_t)(nch * 4 * a.hn) * sizeof(float));
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_qkn_bwd_dx<T>, warps_grid(heads), 32 * ROWS_PER_BLOCK, 0, st)(
                             a, (T *)din, (const T *)dout, (const T *)in, (const T *)wq,
                             (const T *)wk, mean, rstd)));
  MT_CUDA_LAUNCHED();
  MT_DISPATCH(
      be->dtype,
      (MT_LAUNCH(k_qkn_bwd_part<T>, dim3(col_blocks(a.hn, CUDA_COL_TPB), grid_y_for(nch), 4),
                 CUDA_COL_TPB, 0, st)(a, part, (const T *)dout, (const T *)in, mean, rstd)));
  MT_CUDA_LAUNCHED();
  MT_LAUNCH(k_qkn_bwd_reduce, col_blocks(a.hn, CUDA_COL_RED_TPB), CUDA_COL_RED_TPB, 0, st)(
      dwq, dbq, dwk, dbk, part, nch, a.hn, a.rms);
  MT_CUDA_LAUNCHED();
}
