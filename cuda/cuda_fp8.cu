/* cuda/cuda_fp8.cu — the FP8 quantization ops of the CUDA backend: per-block
 * amax, quantize and dequantize (specs: core/backend.h mt_fp8_desc;
 * reference semantics: cpu/cpu_fp8.c). The format and scale rules are
 * core/fp8.h's MT_HD functions, the same definitions cpu/ compiles, so codes
 * and scales are bitwise cpu/'s.
 * amax: one thread block per scale block, a fixed-tree fmaxf reduction (NaN
 * skipped); quantize / dequantize: one thread per element, the block's scale
 * recomputed from its amax in every thread (a few flops); transpose of
 * fp8 codes (cuBLASLt's TN rule, cuda_fp8_gemm.c). */
#include "core/fp8.h"
#include "cuda_dev.cuh"

#define TPB 256

struct fp8_geom {
  int64_t rows, cols, bh, bw, nbc;
};

static fp8_geom geom_of(const mt_fp8_desc *d) {
  fp8_geom g;
  g.rows = d->rows, g.cols = d->cols;
  mt_fp8_block_dims(d, &g.bh, &g.bw);
  g.nbc = (d->cols + g.bw - 1) / g.bw;
  return g;
}

template <typename T> __global__ void k_fp8_amax(fp8_geom g, float *amax, const T *x) {
  __shared__ float sh[32];
  const int64_t blk = blockIdx.x, br = blk / g.nbc, bc = blk - br * g.nbc;
  const int64_t r0 = br * g.bh, c0 = bc * g.bw;
  const int64_t h = (r0 + g.bh < g.rows ? g.bh : g.rows - r0);
  const int64_t w = (c0 + g.bw < g.cols ? g.bw : g.cols - c0);
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < h * w; i += blockDim.x) {
    const int64_t r = r0 + i / w, c = c0 + i % w;
    m = fmaxf(m, fabsf(to_f(x[r * g.cols + c])));
  }
  m = block_max(m, sh);
  if (threadIdx.x == 0) amax[blk] = m;
}

__device__ __forceinline__ float blk_scale(int blocking, int pow2, float eps, float amax,
                                           float fmax, float *sinv) {
  if (blocking == MT_FP8_MX32 || blocking == MT_FP8_MX32_COL) {
    const uint8_t e = mt_fp8_e8m0_from_f32(amax * (1.0f / fmax));
    *sinv = mt_fp8_e8m0_to_f32(e);
    return mt_fp8_e8m0_rcp(e);
  }
  const float s = mt_fp8_scale_current(amax, fmax, pow2, eps);
  *sinv = 1.0f / s;
  return s;
}

template <typename T>
__global__ void k_fp8_quantize(fp8_geom g, int fmt, int blocking, int pow2, float eps,
                               uint8_t *q, float *scale_inv, const T *x, const float *amax,
                               const float *scale) {
  const float fmax = mt_fp8_max((mt_fp8_format)fmt);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.rows * g.cols;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / g.cols, c = i - r * g.cols;
    const int64_t b = (r / g.bh) * g.nbc + c / g.bw;
    float s, sinv;
    if (scale) s = *scale, sinv = 1.0f / *scale;
    else s = blk_scale(blocking, pow2, eps, amax[b], fmax, &sinv);
    if (r % g.bh == 0 && c % g.bw == 0) scale_inv[b] = sinv;
    q[i] = mt_fp8_encode(to_f(x[i]) * s, (mt_fp8_format)fmt);
  }
}

template <typename T>
__global__ void k_fp8_dequantize(fp8_geom g, int fmt, T *y, const uint8_t *q,
                                 const float *scale_inv) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.rows * g.cols;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / g.cols, c = i - r * g.cols;
    const float si = scale_inv[(r / g.bh) * g.nbc + c / g.bw];
    y[i] = from_f<T>(mt_fp8_decode(q[i], (mt_fp8_format)fmt) * si);
  }
}

extern "C" void cuda_fp8_amax(mt_backend *be, const mt_fp8_desc *d, float *amax,
                              const void *x) {
  const int64_t ns = mt_fp8_n_scales(d);
  if (ns <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const fp8_geom g = geom_of(d);
  MT_DISPATCH(be->dtype, (MT_LAUNCH(k_fp8_amax<T>, grid_x_checked(ns, "fp8 amax blocks"), TPB,
                                    0, st)(g, amax, (const T *)x)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_fp8_quantize(mt_backend *be, const mt_fp8_desc *d, uint8_t *q,
                                  float *scale_inv, const void *x, const float *amax,
                                  const float *scale) {
  if (scale && d->blocking != MT_FP8_TENSOR)
    mt_fatal("cuda fp8_quantize: a given scale needs the tensorwise blocking");
  if (d->rows * d->cols <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const fp8_geom g = geom_of(d);
  MT_DISPATCH(be->dtype,
              (MT_LAUNCH(k_fp8_quantize<T>, grid_for(d->rows * d->cols, TPB), TPB, 0, st)(
                  g, d->fmt, (int)d->blocking, d->pow2, d->eps, q, scale_inv, (const T *)x,
                  amax, scale)));
  MT_CUDA_LAUNCHED();
}

extern "C" void cuda_fp8_dequantize(mt_backend *be, const mt_fp8_desc *d, void *y,
                                    const uint8_t *q, const float *scale_inv) {
  if (d->rows * d->cols <= 0) return;
  cudaStream_t st = cuda_impl_of(be)->stream;
  const fp8_geom g = geom_of(d);
  if (d->out_f32)
    MT_LAUNCH(k_fp8_dequantize<float>, grid_for(d->rows * d->cols, TPB), TPB, 0, st)(
        g, d->fmt, (float *)y, q, scale_inv);
  else
    MT_DISPATCH(be->dtype, (MT_LAUNCH(k_fp8_dequantize<T>, grid_for(d->rows * d->cols, TPB), TPB,
                                      0, st)(g, d->fmt, (T *)y, q, scale_inv)));
  MT_CUDA_LAUNCHED();
}

/* fp8 codes transposed through a 32x32 shared tile (coalesced reads along
 * src's rows and writes along dst's rows; +4 bytes of padding per tile row
 * keep the column reads of the tile off one bank). Block 32 x 8 threads,
 * each moving 4 bytes; grid ceil(rows/32) (x: tokens may be many) x
 * ceil(cols/32). */
#define TR_TILE 32
#define TR_ROWS 8
__global__ void k_fp8_transpose(uint8_t *dst, const uint8_t *src, int64_t rows, int64_t cols,
                                int64_t lds) {
  __shared__ uint8_t tile[TR_TILE][TR_TILE + 4];
  const int64_t r0 = (int64_t)blockIdx.x * TR_TILE, c0 = (int64_t)blockIdx.y * TR_TILE;
  for (int i = threadIdx.y; i < TR_TILE; i += TR_ROWS) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * lds + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < TR_TILE; i += TR_ROWS) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x; /* dst row c, column r */
    if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
  }
}

extern "C" void cudak_fp8_transpose(cudaStream_t st, uint8_t *dst, const uint8_t *src,
                                    int64_t rows, int64_t cols, int64_t lds) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t gx = (rows + TR_TILE - 1) / TR_TILE, gy = (cols + TR_TILE - 1) / TR_TILE;
  if (gy > CUDA_GRID_YZ_MAX)
    mt_fatal("cuda: fp8 transpose of %lld columns needs %lld column tiles in gridDim.y (at most "
             "%d)", (long long)cols, (long long)gy, CUDA_GRID_YZ_MAX);
  MT_LAUNCH(k_fp8_transpose, dim3(grid_x_checked(gx, "fp8 transpose"), (unsigned)gy),
            dim3(TR_TILE, TR_ROWS), 0, st)(dst, src, rows, cols, lds);
  MT_CUDA_LAUNCHED();
}
