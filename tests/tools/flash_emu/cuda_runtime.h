/* tests/tools/flash_emu/cuda_runtime.h — a host stand-in for the CUDA
 * runtime header, just enough to compile the fused-attention kernels
 * (cuda/cuda_flash_*.cu) with g++ and run them on emulated warps
 * (tests/tools/flash_emu.cpp). It is found before the real header through
 * -Itests/tools/flash_emu. NOT a CUDA implementation: one block at a time,
 * its threads as cooperative fibers (ucontext), __syncthreads and the warp
 * collectives (shuffles, mma.sync) as barriers over the block / the warp.
 * Shared memory: function-level statics (shared by the block's fibers;
 * blocks run one after another) and one dynamic buffer. */
#ifndef FA_EMU_CUDA_RUNTIME_H
#define FA_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>


typedef void *cudaStream_t;
typedef void *cudaEvent_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline const char *cudaGetErrorName(cudaError_t) { return "cudaSuccess"; }
static inline const char *cudaGetErrorString(cudaError_t) { return "no error"; }
cudaError_t cudaFuncSetAttribute(const void *fn, int attr, int value);

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 {
  uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  uint4 r = {a, b, c, d};
  return r;
}

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

/* Emulated execution state (flash_emu.cpp). */
const dim3 &fa_emu_thread_idx(void);
const dim3 &fa_emu_block_idx(void);
const dim3 &fa_emu_grid_dim(void);
const dim3 &fa_emu_block_dim(void);
#define threadIdx (fa_emu_thread_idx())
#define blockIdx (fa_emu_block_idx())
#define gridDim (fa_emu_grid_dim())
#define blockDim (fa_emu_block_dim())

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
float fa_emu_shfl(float v, int src_lane);
void fa_emu_mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
void *fa_emu_dyn_smem(void);
static inline float __shfl_xor_sync(unsigned, float v, int o) {
  return fa_emu_shfl(v, (int)(threadIdx.x & 31) ^ o);
}
static inline float __shfl_sync(unsigned, float v, int src) { return fa_emu_shfl(v, src); }
static inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float __uint_as_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
void __trap(void);
using std::max;
using std::min;

#define MT_DYN_SMEM(type, name) type *name = (type *)fa_emu_dyn_smem()
#define MT_EMU_MMA16816(c, a, b0, b1) fa_emu_mma16816(c, a, b0, b1)

/* Launch: every block of the grid, one after another. */
template <typename... P, typename... A>
void fa_emu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, A... args);
template <typename... P> struct fa_emu_launcher {
  void (*k)(P...);
  dim3 grid, block;
  size_t smem;
  template <typename... A> void operator()(A... args) const {
    fa_emu_launch(k, grid, block, smem, args...);
  }
};
template <typename... P>
fa_emu_launcher<P...> fa_emu_launcher_of(void (*k)(P...), dim3 g, dim3 b, size_t s) {
  return fa_emu_launcher<P...>{k, g, b, s};
}
#define MT_LAUNCH(kernel, grid, threads, smem, st) \
  ((void)(st), fa_emu_launcher_of(kernel, dim3(grid), dim3(threads), (size_t)(smem)))

#endif
