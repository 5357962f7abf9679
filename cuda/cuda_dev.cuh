/* cuda/cuda_dev.cuh — device helpers shared by the .cu files: storage types
 * (fp32 and bf16 held as raw 16 bits), conversions bitwise equal to cpu/
 * (bf16 round-to-nearest-even, NaN kept quiet), warp/block reductions, and
 * the dispatch macro from mt_dtype to a kernel template argument. */
#ifndef MT_CUDA_DEV_CUH
#define MT_CUDA_DEV_CUH

#include <stdint.h>

#include "cuda_internal.h"

/* Every kernel launch: MT_LAUNCH(kernel, grid, block, smem, stream)(args...)
 * is kernel<<<grid, block, smem, stream>>>(args...) under nvcc. A kernel
 * name whose template arguments hold a comma goes in parentheses:
 * MT_LAUNCH((k_cast<bf16, float>), ...). The host emulation of the CUDA
 * backend (make CUDA_EMU=1: tests/cuda_emu/, docs/cuda.md "Emulation")
 * defines both macros in its stand-in cuda_runtime.h first: there a launch
 * runs the kernel's blocks one after another, each block's threads as
 * fibers. Dynamic shared memory: MT_DYN_SMEM(type, name). */
#ifndef MT_LAUNCH
#define MT_LAUNCH(kernel, grid, block, smem, stream) \
  kernel<<<(grid), (block), (smem), (stream)>>>
#endif
#ifndef MT_DYN_SMEM
#define MT_DYN_SMEM(type, name) extern __shared__ type name[]
#endif

/* bf16 storage element (raw bits; cuBLAS sees the same bytes as CUDA_R_16BF). */
struct bf16 {
  uint16_t x;
};

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16 v) { return __uint_as_float((uint32_t)v.x << 16); }

__device__ __forceinline__ uint16_t f2bf_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float v) {
  bf16 r;
  r.x = f2bf_bits(v);
  return r;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* 16-byte vectors of storage type T (16-byte loads and stores of rows:
 * cuda_norm.cu): v16<T>::N elements per uint4, widened to / rounded from
 * fp32 as to_f / from_f do. */
template <typename T> struct v16 {
  static constexpr int N = 16 / (int)sizeof(T); /* elements per 16 bytes */
};
/* f[0..N) = the N elements of u, in memory order. */
__device__ __forceinline__ void v16_unpack(float *f, const uint4 &u, float) {
  f[0] = __uint_as_float(u.x), f[1] = __uint_as_float(u.y);
  f[2] = __uint_as_float(u.z), f[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void v16_unpack(float *f, const uint4 &u, bf16) {
  const uint32_t a[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    f[2 * k] = __uint_as_float(a[k] << 16);
    f[2 * k + 1] = __uint_as_float(a[k] & 0xFFFF0000u);
  }
}
template <typename T> __device__ __forceinline__ void v16_load(float *f, const uint4 *p) {
  v16_unpack(f, *p, T());
}
/* *p = the N elements f[0..N) stored as T (bf16: round to nearest even). */
__device__ __forceinline__ void v16_pack(uint4 *p, const float *f, float) {
  *p = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                  __float_as_uint(f[3]));
}
__device__ __forceinline__ void v16_pack(uint4 *p, const float *f, bf16) {
  uint32_t a[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    a[k] = (uint32_t)f2bf_bits(f[2 * k]) | ((uint32_t)f2bf_bits(f[2 * k + 1]) << 16);
  *p = make_uint4(a[0], a[1], a[2], a[3]);
}
template <typename T> __device__ __forceinline__ void v16_store(uint4 *p, const float *f) {
  v16_pack(p, f, T());
}

/* The calling warp copies row `src` (nv 16-byte vectors) into shared `dst`
 * with 16-byte loads, then __syncwarp. */
__device__ __forceinline__ void stage_row(uint4 *dst, const void *src, int64_t nv, int lane) {
  const uint4 *s = (const uint4 *)src;
  for (int64_t k = lane; k < nv; k += 32) dst[k] = s[k];
  __syncwarp();
}

/* Block-wide sum / max (blockDim.x a multiple of 32, <= 1024); every thread
 * gets the result. `sh` is __shared__ float[32]. Fixed tree: deterministic. */
__device__ __forceinline__ float block_sum(float v, float *sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads(); /* sh may be in use by a previous call */
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float *sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : -INFINITY;
  return warp_max(v);
}

/* Block-wide double sum over blockDim.x (a power of two) threads, the
 * result in sh[0] (returned to every thread); `sh` is __shared__
 * double[blockDim.x]. Fixed tree: deterministic. */
__device__ __forceinline__ double block_sum_double(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  return sh[0];
}

/* Grid for n elements at `threads` per block (grid-stride loops cover the rest). */
static inline unsigned grid_for(int64_t n, int threads) {
  int64_t g = (n + threads - 1) / threads;
  if (g < 1) g = 1;
  if (g > 65535LL * 32) g = 65535LL * 32;
  return (unsigned)g;
}

/* Grid limits: gridDim.x up to 2^31 - 1, gridDim.y and .z up to 65535.
 * Kernels with a y (or z) index loop over it with stride gridDim.y, so any
 * count fits; x grids of one block per row are checked. */
#define CUDA_GRID_YZ_MAX 65535
static inline unsigned grid_y_for(int64_t n) {
  return (unsigned)(n < 1 ? 1 : n < CUDA_GRID_YZ_MAX ? n : CUDA_GRID_YZ_MAX);
}
static inline unsigned grid_x_checked(int64_t g, const char *kernel) {
  if (g < 1 || g > 0x7FFFFFFFLL)
    mt_fatal("cuda: %s needs a grid of %lld blocks (1 to 2^31-1 supported)", kernel, (long long)g);
  return (unsigned)g;
}

/* A 2-D grid of x blocks by y tiles whose kernel does not loop over y (the
 * fused attention: y = query or key tiles of one sequence, so y > 65535
 * means a sequence of millions of tokens): fatal naming the kernel. */
static inline dim3 grid_2d_checked(int64_t x, int64_t y, const char *kernel) {
  if (y < 1 || y > CUDA_GRID_YZ_MAX)
    mt_fatal("cuda: %s needs %lld sequence tiles in gridDim.y (at most %d)", kernel,
             (long long)y, CUDA_GRID_YZ_MAX);
  return dim3(grid_x_checked(x, kernel), (unsigned)y);
}

/* The chunked column reduction (cuda_col_reduce.cuh / .cu: LayerNorm,
 * RMSNorm, qk-norm dw, db and bias_grad): one thread per column, so small
 * blocks give large h enough blocks: the chunk partial kernels use
 * CUDA_COL_TPB threads per block over (column blocks x row chunks), the
 * final in-order sums over chunks CUDA_COL_RED_TPB (h/32 blocks: 128 for
 * h = 4096); at most CUDA_COL_MAX_OUT outputs per reduction. */
#define CUDA_COL_TPB 64
#define CUDA_COL_RED_TPB 32
#define CUDA_COL_MAX_OUT 4
static inline unsigned col_blocks(int64_t cols, int threads) {
  return grid_x_checked((cols + threads - 1) / threads, "a column reduction");
}

/* Run `call` with T = float or bf16 according to mt_dtype `t`. */
#define MT_DISPATCH(t, call)                                                            \
  do {                                                                                  \
    if ((t) == MT_BF16) {                                                               \
      typedef bf16 T;                                                                   \
      call;                                                                             \
    } else if ((t) == MT_F32) {                                                         \
      typedef float T;                                                                  \
      call;                                                                             \
    } else {                                                                            \
      mt_fatal("cuda: unsupported storage dtype %s", mt_dtype_name(t));                 \
    }                                                                                   \
  } while (0)

#endif
